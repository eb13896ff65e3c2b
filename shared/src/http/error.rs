//! Errors become responses here, and only here: one table from error to status and code,
//! `{"error": {"code", "message"}}` bodies a person can act on, and one WARNING log line per
//! refusal with its reason, the state, the lock IDs and the principal. The one exception to
//! the envelope is a lock conflict, which answers with the holder's lock document.

use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Response};

use super::response::json_response;
use super::routes::{Route, RouteMatch};
use crate::domain::Refusal;
use crate::service::Error;

/// Every error code the API answers with (documented in docs/errors.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidName,
    InvalidLock,
    InvalidUnlock,
    NotAState,
    InvalidRequest,
    Unauthenticated,
    Forbidden,
    NotLockHolder,
    NotFound,
    MethodNotAllowed,
    LockIdMismatch,
    LineageMismatch,
    StaleSerial,
    Fork,
    StateExists,
    RollbackEncrypted,
    RunEnded,
    RunOrgMismatch,
    PermissionNotAllocated,
    TooLarge,
    UnsupportedMediaType,
    Locked,
    Unavailable,
    ManagedStateUnavailable,
    WrongKey,
    Damaged,
}

impl ErrorCode {
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::InvalidName,
        ErrorCode::InvalidLock,
        ErrorCode::InvalidUnlock,
        ErrorCode::NotAState,
        ErrorCode::InvalidRequest,
        ErrorCode::Unauthenticated,
        ErrorCode::Forbidden,
        ErrorCode::NotLockHolder,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::LockIdMismatch,
        ErrorCode::LineageMismatch,
        ErrorCode::StaleSerial,
        ErrorCode::Fork,
        ErrorCode::StateExists,
        ErrorCode::RollbackEncrypted,
        ErrorCode::RunEnded,
        ErrorCode::RunOrgMismatch,
        ErrorCode::PermissionNotAllocated,
        ErrorCode::TooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::Locked,
        ErrorCode::Unavailable,
        ErrorCode::ManagedStateUnavailable,
        ErrorCode::WrongKey,
        ErrorCode::Damaged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidName => "invalid_name",
            ErrorCode::InvalidLock => "invalid_lock",
            ErrorCode::InvalidUnlock => "invalid_unlock",
            ErrorCode::NotAState => "not_a_state",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotLockHolder => "not_lock_holder",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::LockIdMismatch => "lock_id_mismatch",
            ErrorCode::LineageMismatch => "lineage_mismatch",
            ErrorCode::StaleSerial => "stale_serial",
            ErrorCode::Fork => "fork",
            ErrorCode::StateExists => "state_exists",
            ErrorCode::RollbackEncrypted => "rollback_encrypted",
            ErrorCode::RunEnded => "run_ended",
            ErrorCode::RunOrgMismatch => "run_org_mismatch",
            ErrorCode::PermissionNotAllocated => "permission_not_allocated",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::Locked => "locked",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::ManagedStateUnavailable => "managed_state_unavailable",
            ErrorCode::WrongKey => "wrong_key",
            ErrorCode::Damaged => "damaged",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::InvalidName
            | ErrorCode::InvalidLock
            | ErrorCode::InvalidUnlock
            | ErrorCode::NotAState
            | ErrorCode::InvalidRequest => StatusCode::BAD_REQUEST,
            ErrorCode::Unauthenticated => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden | ErrorCode::NotLockHolder | ErrorCode::PermissionNotAllocated => {
                StatusCode::FORBIDDEN
            }
            ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::LockIdMismatch
            | ErrorCode::LineageMismatch
            | ErrorCode::StaleSerial
            | ErrorCode::Fork
            | ErrorCode::StateExists
            | ErrorCode::RollbackEncrypted
            | ErrorCode::RunEnded
            | ErrorCode::RunOrgMismatch => StatusCode::CONFLICT,
            ErrorCode::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::Locked => StatusCode::LOCKED,
            ErrorCode::Unavailable | ErrorCode::ManagedStateUnavailable => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ErrorCode::WrongKey | ErrorCode::Damaged => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// An error on its way to becoming a response.
fn too_large_message(limit: u64, lambda_ceiling: Option<u64>) -> String {
    match lambda_ceiling {
        None => format!("the request body is larger than the limit of {limit} bytes"),
        Some(ceiling) => format!(
            "the request body is larger than the limit of {limit} bytes on Lambda, where a request travels inside an API Gateway event of at most {ceiling} bytes with its body escaped; route /api/tf-states to the container front door (hegemony-state serve --store aws) to save states up to 128 MiB"
        ),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(transparent)]
    Service(#[from] Error),
    #[error("{}", too_large_message(*limit, *lambda_ceiling))]
    TooLarge {
        limit: u64,
        /// Set on Lambda for state bodies: the payload ceiling behind the limit.
        lambda_ceiling: Option<u64>,
    },
    #[error("{0}")]
    InvalidRequest(String),
    #[error(
        "unsupported Content-Type {0:?}: send application/json, application/octet-stream or none"
    )]
    UnsupportedMediaType(String),
}

impl From<Refusal> for HttpError {
    fn from(r: Refusal) -> Self {
        HttpError::Service(Error::Refused(r))
    }
}

/// What the log line of a refusal names besides its reason.
#[derive(Debug, Clone)]
pub struct LogContext {
    pub route: String,
    pub state: Option<String>,
    pub principal: Option<String>,
    /// The lock ID the request itself named (`?ID=` or the body's `ID`).
    pub lock_id: Option<String>,
}

impl LogContext {
    pub fn new(route: &Route) -> Self {
        Self {
            route: format!("{} {}", route.method, route.path),
            state: None,
            principal: None,
            lock_id: None,
        }
    }
}

fn refusal_code(r: &Refusal) -> ErrorCode {
    match r {
        Refusal::InvalidName { .. } => ErrorCode::InvalidName,
        Refusal::BodyTooLarge { .. } => ErrorCode::TooLarge,
        Refusal::InvalidLock { .. } => ErrorCode::InvalidLock,
        Refusal::InvalidUnlock { .. } => ErrorCode::InvalidUnlock,
        Refusal::Locked { .. } => ErrorCode::Locked,
        Refusal::LockIdMismatch { .. } => ErrorCode::LockIdMismatch,
        Refusal::NotAState { .. } => ErrorCode::NotAState,
        Refusal::LineageMismatch { .. } => ErrorCode::LineageMismatch,
        Refusal::StaleSerial { .. } => ErrorCode::StaleSerial,
        Refusal::Fork { .. } => ErrorCode::Fork,
        Refusal::Forbidden { .. } => ErrorCode::Forbidden,
        Refusal::NotYourLock { .. } => ErrorCode::NotLockHolder,
        Refusal::NotFound { .. } => ErrorCode::NotFound,
        Refusal::StateExists { .. } => ErrorCode::StateExists,
        Refusal::RollbackEncrypted { .. } => ErrorCode::RollbackEncrypted,
        Refusal::InvalidRequest { .. } => ErrorCode::InvalidRequest,
        Refusal::PermissionNotAllocated { .. } => ErrorCode::PermissionNotAllocated,
        Refusal::RunEnded { .. } => ErrorCode::RunEnded,
        Refusal::RunOrgMismatch { .. } => ErrorCode::RunOrgMismatch,
    }
}

fn code_of(err: &HttpError) -> ErrorCode {
    match err {
        HttpError::TooLarge { .. } => ErrorCode::TooLarge,
        HttpError::InvalidRequest(_) => ErrorCode::InvalidRequest,
        HttpError::UnsupportedMediaType(_) => ErrorCode::UnsupportedMediaType,
        HttpError::Service(e) => match e {
            Error::Refused(r) => refusal_code(r),
            Error::Unauthenticated(_) => ErrorCode::Unauthenticated,
            Error::Unavailable(_) => ErrorCode::Unavailable,
            Error::NoKey => ErrorCode::ManagedStateUnavailable,
            Error::WrongKey(_) => ErrorCode::WrongKey,
            Error::Damaged(_) => ErrorCode::Damaged,
        },
    }
}

/// Seconds a client waits before retrying a transient fault (clients honour it uncapped).
const RETRY_AFTER_SECONDS: &str = "1";

/// The response for `err`, logged once.
pub fn error_response(err: &HttpError, ctx: &LogContext) -> Response<Body> {
    let code = code_of(err);
    let status = code.status();
    let mut lock_ids: Vec<&str> = ctx.lock_id.iter().map(String::as_str).collect();
    if let HttpError::Service(Error::Refused(r)) = err {
        lock_ids.extend(
            r.lock_ids()
                .into_iter()
                .filter(|id| ctx.lock_id.as_deref() != Some(*id)),
        );
    }
    let state = ctx.state.as_deref().unwrap_or("-");
    let principal = ctx.principal.as_deref().unwrap_or("-");
    if status.is_server_error()
        && code != ErrorCode::Unavailable
        && code != ErrorCode::ManagedStateUnavailable
    {
        tracing::error!(code = code.as_str(), reason = %err, route = %ctx.route, state, principal, "request failed");
    } else {
        tracing::warn!(
            code = code.as_str(),
            reason = %err,
            route = %ctx.route,
            state,
            lock_ids = ?lock_ids,
            principal,
            "request refused"
        );
    }
    if let HttpError::Service(Error::Refused(Refusal::Locked { document, .. })) = err {
        // The tools read the holder's lock document from a conflict, not an error envelope.
        return Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::Text(document.clone()))
            .expect("static headers are valid");
    }
    let message = match (code, err) {
        // Internal details stay in the log; the body says where to look.
        (ErrorCode::Damaged, _) => {
            "the stored content of this state could not be opened; the server log has the details"
                .to_string()
        }
        _ => err.to_string(),
    };
    let mut response = json_response(
        status,
        &serde_json::json!({"error": {"code": code.as_str(), "message": message}}),
    );
    if code == ErrorCode::Unavailable {
        response.headers_mut().insert(
            header::RETRY_AFTER,
            header::HeaderValue::from_static(RETRY_AFTER_SECONDS),
        );
    }
    response
}

/// 404 or 405 for a request no route matched.
pub fn no_route(matched: &RouteMatch<'_>) -> Response<Body> {
    let (code, message) = match matched {
        RouteMatch::MethodNotAllowed { allowed } => (
            ErrorCode::MethodNotAllowed,
            format!("this path answers {}", allowed.join(", ")),
        ),
        _ => (ErrorCode::NotFound, "no such route".to_string()),
    };
    let mut response = json_response(
        code.status(),
        &serde_json::json!({"error": {"code": code.as_str(), "message": message}}),
    );
    if let RouteMatch::MethodNotAllowed { allowed } = matched {
        if let Ok(value) = header::HeaderValue::from_str(&allowed.join(", ")) {
            response.headers_mut().insert(header::ALLOW, value);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/errors.md is the fixed list of codes operators and clients rely on.
    #[test]
    fn every_code_is_documented_with_its_status() {
        let doc = include_str!("../../../docs/errors.md");
        for code in ErrorCode::ALL {
            let row = format!("| `{}` | {} |", code.as_str(), code.status().as_u16());
            assert!(doc.contains(&row), "docs/errors.md lacks the row {row}");
        }
    }
}
