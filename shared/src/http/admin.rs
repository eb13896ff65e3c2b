//! `GET .../audit`, `GET /api/audit`, `GET`/`PUT /api/org/permissions`: the admin role's.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, RequestExt, Response};
use serde_json::Value;

use super::error::HttpError;
use super::handler::{Answer, Call};
use super::response::json_response;
use crate::domain::name::StateName;
use crate::domain::permission::{Allocation, Role};
use crate::domain::Principal;
use crate::ports::AuditQuery;
use crate::service::admin::{self, MAX_AUDIT_PAGE};
use crate::service::App;

const DEFAULT_AUDIT_PAGE: usize = 100;

/// `GET /api/tf-states/{name}/audit`: one state's entries.
pub async fn state_audit(call: Call<'_>, principal: &Principal) -> Answer {
    let name = call.state()?;
    audit(call.app, principal, Some(&name), &call.req).await
}

/// `GET /api/audit`: the whole org's entries, or one state's with `?state=`.
pub async fn org_audit(call: Call<'_>, principal: &Principal) -> Answer {
    audit(call.app, principal, None, &call.req).await
}

async fn audit(
    app: &App,
    principal: &Principal,
    state: Option<&StateName>,
    req: &Request,
) -> Result<Response<Body>, HttpError> {
    let q = req.query_string_parameters();
    let limit = match q.first("limit") {
        None => DEFAULT_AUDIT_PAGE,
        Some(raw) => raw
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_AUDIT_PAGE).contains(n))
            .ok_or_else(|| {
                HttpError::InvalidRequest(format!(
                    "limit must be a whole number from 1 to {MAX_AUDIT_PAGE}"
                ))
            })?,
    };
    let before = match q.first("cursor") {
        None => None,
        Some(raw) => Some(raw.parse::<u64>().map_err(|_| {
            HttpError::InvalidRequest("cursor must be the next_cursor of a previous page".into())
        })?),
    };
    let state = match (state, q.first("state")) {
        (Some(name), _) => Some(name.to_string()),
        (None, Some(raw)) => Some(StateName::parse(raw)?.to_string()),
        (None, None) => None,
    };
    let query = AuditQuery {
        state,
        action: q.first("action").map(str::to_owned),
        before,
        limit,
    };
    let page = admin::audit(app, principal, query).await?;
    Ok(json_response(StatusCode::OK, &page))
}

pub async fn permissions(call: Call<'_>, principal: &Principal) -> Answer {
    let allocation = admin::permissions(call.app, principal).await?;
    Ok(json_response(StatusCode::OK, &allocation))
}

/// Parses `{"tf_state:read": "operator", ...}`: any of the three permissions, each a role or
/// null (disabled); the ones left out keep their allocation.
fn parse_update(body: &[u8]) -> Result<Vec<(&'static str, Option<Role>)>, HttpError> {
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
        let permission = match key.as_str() {
            "tf_state:read" => "tf_state:read",
            "tf_state:write" => "tf_state:write",
            "tf_state:manage" => "tf_state:manage",
            other => {
                return Err(invalid(format!(
                    "unknown permission {other:?}: use tf_state:read, tf_state:write or tf_state:manage"
                )))
            }
        };
        let role = match role {
            Value::Null => None,
            Value::String(r) => Some(
                r.parse::<Role>()
                    .map_err(|e| invalid(format!("{permission}: {e}, or null")))?,
            ),
            _ => {
                return Err(invalid(format!(
                    "{permission}: use viewer, operator, admin or null"
                )))
            }
        };
        changes.push((permission, role));
    }
    Ok(changes)
}

pub async fn set_permissions(call: Call<'_>, principal: &Principal) -> Answer {
    let changes = parse_update(call.req.body())?;
    let allocation = admin::set_permissions(call.app, principal, |mut a: Allocation| {
        for (permission, role) in &changes {
            match *permission {
                "tf_state:read" => a.read = *role,
                "tf_state:write" => a.write = *role,
                _ => a.manage = *role,
            }
        }
        a
    })
    .await?;
    Ok(json_response(StatusCode::OK, &allocation))
}
