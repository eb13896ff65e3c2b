//! `GET .../audit`, `GET /api/audit`, `GET /api/keys`, `GET`/`PUT /api/org/permissions`: the
//! admin role's.

use lambda_http::http::StatusCode;
use lambda_http::{Request, RequestExt};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::error::HttpError;
use super::handler::{Answer, Call};
use super::number::page_limit;
use super::response::json_response;
use crate::domain::audit::AuditAction;
use crate::domain::name::StateName;
use crate::domain::permission::{Allocation, Permission, Role};
use crate::domain::Principal;
use crate::ports::AuditQuery;
use crate::service::admin::{self, MAX_AUDIT_PAGE};
use crate::service::app_keys::AppKeys;
use crate::service::keys::StateKeys;

const DEFAULT_AUDIT_PAGE: usize = 100;

/// `GET /api/tf-states/{name}/audit`: the entries of one state, which must exist; a deleted
/// state's entries (its deletion among them) are in the org's log under `?state=`.
pub async fn state_audit(call: Call<'_>, principal: &Principal) -> Answer {
    let name = call.state()?;
    let query = audit_query(Some(&name), &call.req)?;
    let page = admin::state_audit(call.app, principal, &name, query).await?;
    Ok(json_response(StatusCode::OK, &page))
}

/// `GET /api/audit`: the whole org's entries, or one name's with `?state=`.
pub async fn org_audit(call: Call<'_>, principal: &Principal) -> Answer {
    let query = audit_query(None, &call.req)?;
    let page = admin::audit(call.app, principal, query).await?;
    Ok(json_response(StatusCode::OK, &page))
}

/// `GET /api/keys`: how the org's versions and app states' files spread over keys, and
/// which are behind the key in use (what `hegemony-state keys report` shows for one org).
pub async fn keys(call: Call<'_>, principal: &Principal) -> Answer {
    let states = crate::service::keys::report(call.app, principal).await?;
    let apps = crate::service::app_keys::report(call.app, principal).await?;
    Ok(json_response(
        StatusCode::OK,
        &KeyReport {
            org: &principal.org,
            states,
            apps,
        },
    ))
}

/// The org's versions and app files by key.
#[derive(Serialize, JsonSchema)]
pub(super) struct KeyReport<'a> {
    org: &'a str,
    states: Vec<StateKeys>,
    apps: Vec<AppKeys>,
}

fn audit_query(state: Option<&StateName>, req: &Request) -> Result<AuditQuery, HttpError> {
    let q = req.query_string_parameters();
    let limit = page_limit(req, DEFAULT_AUDIT_PAGE, MAX_AUDIT_PAGE)?;
    let before = q.first("cursor").map(cursor).transpose()?;
    let action = match q.first("action") {
        None => None,
        Some(raw) => Some(
            AuditAction::ALL
                .iter()
                .find(|a| a.as_str() == raw)
                .map(|a| a.as_str().to_owned())
                .ok_or_else(|| {
                    let known: Vec<&str> = AuditAction::ALL.iter().map(|a| a.as_str()).collect();
                    HttpError::InvalidRequest(format!(
                        "unknown audit action {raw:?}: use one of {}",
                        known.join(", ")
                    ))
                })?,
        ),
    };
    let state = match (state, q.first("state")) {
        (Some(name), _) => Some(name.to_string()),
        (None, Some(raw)) => Some(StateName::parse(raw)?.to_string()),
        (None, None) => None,
    };
    Ok(AuditQuery {
        state,
        action,
        before,
        limit,
    })
}

/// A page's cursor: the `next_cursor` of the page before, a sequence number in digits. One
/// larger than any number there is reads from the newest entry, as no cursor would.
fn cursor(raw: &str) -> Result<u64, HttpError> {
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HttpError::InvalidRequest(
            "cursor must be the next_cursor of a previous page".into(),
        ));
    }
    Ok(raw.parse::<u64>().unwrap_or(u64::MAX))
}

pub async fn permissions(call: Call<'_>, principal: &Principal) -> Answer {
    let allocation = admin::permissions(call.app, principal).await?;
    Ok(json_response(StatusCode::OK, &allocation))
}

/// Parses `{"tf_state:read": "operator", ...}`: any of the four permissions, each a role or
/// null (disabled); the ones left out keep their allocation.
fn parse_update(body: &[u8]) -> Result<Vec<(Permission, Option<Role>)>, HttpError> {
    let invalid = |why: String| HttpError::InvalidRequest(why);
    let value: Value =
        serde_json::from_slice(body).map_err(|e| invalid(format!("the body is not JSON: {e}")))?;
    let Value::Object(map) = value else {
        return Err(invalid(
            "the body must be a JSON object of permissions".into(),
        ));
    };
    let mut changes = Vec::new();
    for (key, role) in map {
        let Some(permission) = Permission::named(&key) else {
            return Err(invalid(format!(
                "unknown permission {key:?}: use tf_state:read, tf_state:write, tf_state:manage or tf_state:outputs"
            )));
        };
        let name = permission.as_str();
        let role = match role {
            Value::Null => None,
            Value::String(r) => Some(
                r.parse::<Role>()
                    .map_err(|e| invalid(format!("{name}: {e}, or null")))?,
            ),
            _ => {
                return Err(invalid(format!(
                    "{name}: use viewer, operator, admin or null"
                )))
            }
        };
        changes.push((permission, role));
    }
    Ok(changes)
}

pub async fn set_permissions(call: Call<'_>, principal: &Principal) -> Answer {
    let changes = parse_update(call.req.body())?;
    let allocation = admin::set_permissions(call.app, principal, |a: Allocation| {
        changes
            .iter()
            .fold(a, |a, (permission, role)| a.with(*permission, *role))
    })
    .await?;
    Ok(json_response(StatusCode::OK, &allocation))
}
