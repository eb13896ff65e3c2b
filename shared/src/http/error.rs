//! Errors become responses here, and only here: one table declaring each code with its status
//! and the errors that answer with it, one `{"error": {"code", "message"}}` envelope, bodies a person can act on, and one WARNING log line per
//! refusal with its reason, the state, the lock IDs and the principal. The one exception to
//! the envelope is a lock conflict, which answers with the holder's lock document.

use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Response};

use super::response::json_response;
use crate::domain::Refusal;
use crate::service::Error;

/// Declares every error code once: its variant and doc line, the code clients read, its
/// status, and the causes that answer with it: domain refusals (`refused`) and service or
/// HTTP errors (`raised`). The generated matches are exhaustive, so a new refusal or error
/// does not compile until a row names its code.
macro_rules! error_codes {
    ($(
        $(#[$doc:meta])*
        $name:ident = $code:literal, $status:ident
            $(, refused [$($refused:pat),+])?
            $(, raised [$($raised:pat),+])?;
    )+) => {
        /// Every error code the API answers with (documented in docs/errors.md).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ErrorCode {
            $($(#[$doc])* $name,)+
        }

        impl ErrorCode {
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$name),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$name => $code,)+
                }
            }

            pub fn status(self) -> StatusCode {
                match self {
                    $(ErrorCode::$name => StatusCode::$status,)+
                }
            }
        }

        fn refusal_code(r: &Refusal) -> ErrorCode {
            match r {
                $($($($refused => ErrorCode::$name,)+)?)+
            }
        }

        fn code_of(err: &HttpError) -> ErrorCode {
            match err {
                HttpError::Service(Error::Refused(r)) => refusal_code(r),
                $($($($raised => ErrorCode::$name,)+)?)+
            }
        }
    };
}

#[rustfmt::skip]
error_codes! {
    /// A state, org or user name outside the naming rule.
    InvalidName = "invalid_name", BAD_REQUEST, refused [Refusal::InvalidName { .. }];
    /// A lock body that is not the lock document the tools send.
    InvalidLock = "invalid_lock", BAD_REQUEST, refused [Refusal::InvalidLock { .. }];
    /// An unlock body that names no lock.
    InvalidUnlock = "invalid_unlock", BAD_REQUEST, refused [Refusal::InvalidUnlock { .. }];
    /// A write whose body is not a Terraform or OpenTofu state.
    NotAState = "not_a_state", BAD_REQUEST, refused [Refusal::NotAState { .. }];
    /// An app state's file name outside its rules.
    InvalidFileName = "invalid_file_name", BAD_REQUEST, refused [Refusal::InvalidFileName { .. }];
    /// An app state's file that must be JSON and is not.
    NotJson = "not_json", BAD_REQUEST, refused [Refusal::NotJson { .. }];
    /// A malformed query parameter, management body or unreadable body.
    InvalidRequest = "invalid_request", BAD_REQUEST,
        refused [Refusal::InvalidRequest { .. }], raised [HttpError::InvalidRequest(_)];
    /// No, unknown, expired or revoked credentials, or Basic where Bearer only is taken.
    Unauthenticated = "unauthenticated", UNAUTHORIZED,
        raised [HttpError::Service(Error::Unauthenticated(_))];
    /// An ID token exchanged for a session already: each opens one session.
    InvalidToken = "invalid_token", UNAUTHORIZED,
        raised [HttpError::Service(Error::InvalidToken(_))];
    /// The token's role or scope does not allow the request.
    Forbidden = "forbidden", FORBIDDEN, refused [Refusal::Forbidden { .. }];
    /// Releasing someone else's lock without `tf_state:manage`.
    NotLockHolder = "not_lock_holder", FORBIDDEN, refused [Refusal::NotYourLock { .. }];
    /// A protected state changed by a caller other than a session of the rule's trust
    /// policies.
    ProtectedState = "protected_state", FORBIDDEN, refused [Refusal::ProtectedState { .. }];
    /// A mint for an org whose allocation would refuse the step.
    PermissionNotAllocated = "permission_not_allocated", FORBIDDEN,
        refused [Refusal::PermissionNotAllocated { .. }];
    /// No such route, or no such state, version or token in the caller's org.
    NotFound = "not_found", NOT_FOUND, refused [Refusal::NotFound { .. }];
    /// The path exists, not for this method.
    MethodNotAllowed = "method_not_allowed", METHOD_NOT_ALLOWED;
    /// A request body that stopped arriving, or trickled (the local server and the container door).
    RequestTimeout = "request_timeout", REQUEST_TIMEOUT,
        raised [HttpError::BodyStalled { .. }, HttpError::BodyTooSlow { .. }];
    /// A lock ID that is not the current lock's.
    LockIdMismatch = "lock_id_mismatch", CONFLICT, refused [Refusal::LockIdMismatch { .. }];
    /// A state of another configuration.
    LineageMismatch = "lineage_mismatch", CONFLICT, refused [Refusal::LineageMismatch { .. }];
    /// A serial older than the stored one.
    StaleSerial = "stale_serial", CONFLICT, refused [Refusal::StaleSerial { .. }];
    /// The stored serial with different content.
    Fork = "fork", CONFLICT, refused [Refusal::Fork { .. }];
    /// An import to a name that already has a version.
    StateExists = "state_exists", CONFLICT, refused [Refusal::StateExists { .. }];
    /// A new trust policy under a name the org already uses.
    PolicyExists = "policy_exists", CONFLICT, refused [Refusal::PolicyExists { .. }];
    /// A new trust policy for an org that holds the most there may be.
    PolicyLimit = "policy_limit", CONFLICT, refused [Refusal::PolicyLimit { .. }];
    /// An ID token that more than one trust policy of its org lets in, with no policy named.
    AmbiguousPolicy = "ambiguous_policy", CONFLICT, refused [Refusal::AmbiguousPolicy { .. }];
    /// A trust policy on an issuer and audience pair that another org's policies use.
    TrustPairTaken = "trust_pair_taken", CONFLICT, refused [Refusal::TrustPairTaken { .. }];
    /// A restore of a deleted state under a name a state has.
    NameTaken = "name_taken", CONFLICT, refused [Refusal::NameTaken { .. }];
    /// A rollback to an OpenTofu-encrypted version.
    RollbackEncrypted = "rollback_encrypted", CONFLICT, refused [Refusal::RollbackEncrypted { .. }];
    /// A comparison of versions with one it cannot read (OpenTofu-encrypted, an old format).
    CannotCompare = "cannot_compare", CONFLICT, refused [Refusal::CannotCompare { .. }];
    /// A state's outputs when its latest version cannot be read (OpenTofu-encrypted, an old
    /// format).
    CannotReadOutputs = "cannot_read_outputs", CONFLICT, refused [Refusal::OutputsUnreadable { .. }];
    /// A rollback of a state whose serial is already the largest number there is.
    SerialExhausted = "serial_exhausted", CONFLICT, refused [Refusal::SerialExhausted { .. }];
    /// Deleting an app state's newest archive.
    NewestArchive = "newest_archive", CONFLICT, refused [Refusal::NewestArchive { .. }];
    /// A mint for a run the platform reported ended.
    RunEnded = "run_ended", CONFLICT, refused [Refusal::RunEnded { .. }];
    /// A mint for a run bound to another org.
    RunOrgMismatch = "run_org_mismatch", CONFLICT, refused [Refusal::RunOrgMismatch { .. }];
    /// A body over its route's limit.
    TooLarge = "too_large", PAYLOAD_TOO_LARGE,
        refused [Refusal::BodyTooLarge { .. }], raised [HttpError::TooLarge { .. }];
    /// An upload past an archive's files or a change's bytes.
    ChangeTooLarge = "change_too_large", PAYLOAD_TOO_LARGE, refused [Refusal::ChangeTooLarge { .. }];
    /// On Lambda, a read whose answer would pass the function's response ceiling.
    TooLargeForFunctions = "too_large_for_functions", PAYLOAD_TOO_LARGE,
        raised [HttpError::TooLargeForFunctions { .. }];
    /// An import of a Content-Type it does not take.
    UnsupportedMediaType = "unsupported_media_type", UNSUPPORTED_MEDIA_TYPE,
        raised [HttpError::UnsupportedMediaType(_)];
    /// Someone else's live lock (answered with the holder's lock document).
    Locked = "locked", LOCKED, refused [Refusal::Locked { .. }];
    /// Someone else holds an app state's lock (the body names the holder).
    AppLocked = "app_locked", LOCKED, refused [Refusal::AppLocked { .. }];
    /// A transient fault; the tools retry.
    Unavailable = "unavailable", SERVICE_UNAVAILABLE,
        raised [HttpError::Service(Error::Unavailable(_)), HttpError::Service(Error::StorageFault(_))];
    /// No key is configured.
    ManagedStateUnavailable = "managed_state_unavailable", SERVICE_UNAVAILABLE,
        raised [HttpError::Service(Error::NoKey)];
    /// A version sealed under another key than the configured one.
    WrongKey = "wrong_key", INTERNAL_SERVER_ERROR, raised [HttpError::Service(Error::WrongKey(_))];
    /// Stored content missing or not authenticating.
    Damaged = "damaged", INTERNAL_SERVER_ERROR, raised [HttpError::Service(Error::Damaged(_))];
    /// A defect of ours stopped one request.
    Internal = "internal", INTERNAL_SERVER_ERROR, raised [HttpError::Internal];
}

/// The 413's message: on Lambda for a state, it names the payload ceiling and the way past it.
fn too_large_message(limit: u64, lambda_ceiling: Option<u64>) -> String {
    match lambda_ceiling {
        None => format!("the request body is larger than the limit of {limit} bytes"),
        Some(ceiling) => format!(
            "the request body is larger than the limit of {limit} bytes on Lambda, where a request travels inside an API Gateway event of at most {ceiling} bytes with its body escaped; route /api/tf-states to the container front door (hegemony-state serve --store aws) to save states up to 128 MiB"
        ),
    }
}

/// The answer to a read too large for a function: where to read it instead.
fn too_large_for_functions_message(ceiling: u64, door: Option<&str>) -> String {
    let why = format!("this version is larger than a Lambda function can return (its answer, base64-encoded, would pass the response ceiling of {ceiling} bytes)");
    match door {
        Some(door) => format!("{why}; read it through the container front door at {door}, the same path"),
        None => format!("{why}; serve it through the container front door (hegemony-state serve --store aws) and route /api/tf-states there, or set HEGEMONY_CONTAINER_URL on the functions to send such reads to it"),
    }
}

/// An error on its way to becoming a response.
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
    /// On Lambda: the answer would pass the response ceiling; `door` is the container front
    /// door's base when the deployment has one.
    #[error("{}", too_large_for_functions_message(*ceiling, door.as_deref()))]
    TooLargeForFunctions { ceiling: u64, door: Option<String> },
    #[error("{0}")]
    InvalidRequest(String),
    #[error("no bytes of the request body arrived for {seconds} s; send the request again")]
    BodyStalled { seconds: u64 },
    #[error("the request body arrived at less than {bytes_per_second} bytes per second over {seconds} s; send the request again")]
    BodyTooSlow { bytes_per_second: u64, seconds: u64 },
    #[error(
        "unsupported Content-Type {0:?}: send application/json, application/octet-stream or none"
    )]
    UnsupportedMediaType(String),
    /// A defect of ours stopped the request (a panic): it alone fails, never the server.
    #[error("an internal error stopped this request; the server's log has the details")]
    Internal,
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
    /// The lock ID the request names: a save's `?ID=`, or a lock or unlock body's `ID` once
    /// the body is read (a refusal may name more: the holder's).
    pub lock_id: Option<String>,
    /// A lock or unlock refused before its body was read (the server refuses on the headers
    /// what it need not read): the ID it names is not known, and the line says so.
    pub lock_body_unread: bool,
}

impl LogContext {
    /// The context of a request to the route `method path`.
    pub fn new(method: &str, path: &str) -> Self {
        Self {
            route: format!("{method} {path}"),
            state: None,
            principal: None,
            lock_id: None,
            lock_body_unread: false,
        }
    }
}

/// What an error answer was, kept in its response's extensions so that the request's
/// measures count it by code (and a 503 by cause) without reading the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub code: ErrorCode,
    /// Why a 503 was answered: `storage` (a storage fault), `no_key` (no key configured),
    /// or `transient` (contention, a key service or issuer down, the server busy).
    pub fault: Option<&'static str>,
}

/// The cause a 503 of `err` is counted under.
fn fault_of(err: &HttpError) -> Option<&'static str> {
    match err {
        HttpError::Service(Error::StorageFault(_)) => Some("storage"),
        HttpError::Service(Error::NoKey) => Some("no_key"),
        HttpError::Service(Error::Unavailable(_)) => Some("transient"),
        _ => None,
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
    let lock_ids = if lock_ids.is_empty() && ctx.lock_body_unread {
        "not known: refused before its body was read".to_owned()
    } else {
        format!("{lock_ids:?}")
    };
    let state = ctx.state.as_deref().unwrap_or("-");
    let principal = ctx.principal.as_deref().unwrap_or(match code {
        ErrorCode::Unauthenticated => "none: no valid credentials",
        _ => "not known",
    });
    let storage_fault = matches!(err, HttpError::Service(Error::StorageFault(_)));
    if storage_fault
        || status.is_server_error()
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
            lock_ids = %lock_ids,
            principal,
            "request refused"
        );
    }
    if let HttpError::Service(Error::Refused(Refusal::Locked { document, .. })) = err {
        // The tools read the holder's lock document from a conflict, not an error envelope.
        let mut response = Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::Text(document.clone()))
            .expect("static headers are valid");
        response
            .extensions_mut()
            .insert(Refused { code, fault: None });
        return response;
    }
    let message = match (code, err) {
        // Internal details stay in the log; the body says where to look.
        (ErrorCode::Damaged, _) => {
            "the stored content of this state could not be opened; the server log has the details"
                .to_string()
        }
        _ => err.to_string(),
    };
    let mut response = match err {
        // Octo's client names the holder and since when: the lock goes with the refusal.
        HttpError::Service(Error::Refused(Refusal::AppLocked { lock, .. })) => json_response(
            status,
            &serde_json::json!({"error": {"code": code.as_str(), "message": message, "lock": lock}}),
        ),
        // The job picks one of them by name: the names go with the refusal.
        HttpError::Service(Error::Refused(Refusal::AmbiguousPolicy { policies })) => json_response(
            status,
            &serde_json::json!({"error": {"code": code.as_str(), "message": message, "policies": policies}}),
        ),
        _ => error_body(code, &message),
    };
    response.extensions_mut().insert(Refused {
        code,
        fault: fault_of(err),
    });
    if code == ErrorCode::Unavailable {
        response.headers_mut().insert(
            header::RETRY_AFTER,
            header::HeaderValue::from_static(RETRY_AFTER_SECONDS),
        );
    }
    response
}

/// The one error envelope, `{"error": {"code", "message"}}`, with the code's status. Nothing
/// is logged here: [`error_response`] logs what it answers, and an expected answer (a state
/// with no version yet) is not a refusal worth a log line.
pub fn error_body(code: ErrorCode, message: &str) -> Response<Body> {
    let mut response = json_response(
        code.status(),
        &serde_json::json!({"error": {"code": code.as_str(), "message": message}}),
    );
    response
        .extensions_mut()
        .insert(Refused { code, fault: None });
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The request's measures count an error answer by its code, and a 503 by its cause,
    /// from what the answer carries.
    #[test]
    fn an_error_answer_carries_its_code_and_a_503_its_cause() {
        let ctx = LogContext::new("POST", "/api/tf-states/{name}/state");
        let carried = |err: HttpError| {
            *error_response(&err, &ctx)
                .extensions()
                .get::<Refused>()
                .unwrap()
        };
        let cases = [
            (
                Error::StorageFault("disk full".into()),
                ErrorCode::Unavailable,
                Some("storage"),
            ),
            (
                Error::Unavailable("contention".into()),
                ErrorCode::Unavailable,
                Some("transient"),
            ),
            (
                Error::NoKey,
                ErrorCode::ManagedStateUnavailable,
                Some("no_key"),
            ),
            (
                Error::Unauthenticated("no".into()),
                ErrorCode::Unauthenticated,
                None,
            ),
        ];
        for (err, code, fault) in cases {
            assert_eq!(carried(HttpError::Service(err)), Refused { code, fault });
        }
        let not_found = error_body(ErrorCode::NotFound, "no such route");
        assert_eq!(
            not_found.extensions().get::<Refused>(),
            Some(&Refused {
                code: ErrorCode::NotFound,
                fault: None
            })
        );
    }

    /// docs/errors.md is the fixed list of codes operators and clients rely on.
    #[test]
    fn every_code_is_documented_with_its_status() {
        let doc = include_str!("../../../docs/errors.md");
        for code in ErrorCode::ALL {
            let row = format!("| `{}` | {} |", code.as_str(), code.status().as_u16());
            assert!(doc.contains(&row), "docs/errors.md lacks the row {row}");
        }
    }

    /// And the other way: the docs promise no code the API never answers with.
    #[test]
    fn every_documented_code_is_answered() {
        let doc = include_str!("../../../docs/errors.md");
        for row in doc.lines().filter(|l| l.starts_with("| `")) {
            let code = row.split('`').nth(1).unwrap_or_default();
            assert!(
                ErrorCode::ALL.iter().any(|c| c.as_str() == code),
                "docs/errors.md documents {code}, which no error answers with"
            );
        }
    }

    /// The level and line `err` is logged with, and its response.
    fn logged(err: &HttpError) -> (String, Response<Body>) {
        #[derive(Clone, Default)]
        struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Lines {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lines = Lines::default();
        let sink = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish();
        let ctx = LogContext::new("POST", "/api/tf-states/{name}/state");
        let response = tracing::subscriber::with_default(subscriber, || error_response(err, &ctx));
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        (text, response)
    }

    /// A full disk or an I/O error is the operator's to see: an ERROR, not the WARNING of a
    /// client's refusal; the client still gets the 503 it retries.
    #[test]
    fn storage_faults_are_errors_and_contention_is_a_warning() {
        let fault = HttpError::Service(Error::from(crate::ports::StoreError::Unavailable(
            "catalog: database or disk is full".into(),
        )));
        let (line, response) = logged(&fault);
        assert!(
            line.contains("ERROR") && line.contains("disk is full"),
            "{line}"
        );
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(response.headers().contains_key(header::RETRY_AFTER));
        let contention = HttpError::Service(Error::from(crate::ports::StoreError::Conflict));
        let (line, response) = logged(&contention);
        assert!(line.contains("WARN") && !line.contains("ERROR"), "{line}");
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
}
