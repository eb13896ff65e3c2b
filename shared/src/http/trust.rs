//! `GET`/`POST /api/org/trust-policies`, `GET`/`PUT`/`DELETE /api/org/trust-policies/{name}`:
//! the org's trust policies for OpenID Connect workloads, the admin role's. Bodies are the
//! pinned policy shape, read strictly (an unknown field is refused, so a misspelt condition
//! never silently widens a policy).

use lambda_http::http::StatusCode;
use lambda_http::{Body, Response};
use serde_json::Value;

use super::error::HttpError;
use super::handler::{Answer, Call};
use super::response::json_response;
use crate::domain::trust::TrustPolicy;
use crate::domain::Principal;
use crate::service::trust::{self, PutMode};

/// The policy a body holds; `path_name`, on PUT, stands for a `name` the body leaves out.
fn policy_body(body: &[u8], path_name: Option<&str>) -> Result<TrustPolicy, HttpError> {
    let invalid = |e: serde_json::Error| {
        HttpError::InvalidRequest(format!(
            "the body must be a trust policy {{\"name\", \"issuer\", \"audience\", \"claims\", \"role\", \"states\", \"session_seconds\"}}: {e}"
        ))
    };
    let mut value: Value = serde_json::from_slice(body).map_err(invalid)?;
    if let Value::Object(map) = &mut value {
        if let Some(name) = path_name {
            map.entry("name")
                .or_insert_with(|| Value::String(name.to_owned()));
        }
        // JSON Schema's integer, as the document says: 3600.0 is 3600.
        if let Some(seconds) = map.get_mut("session_seconds") {
            if let Some(whole) = super::number::whole(seconds) {
                *seconds = Value::from(whole);
            }
        }
    }
    serde_json::from_value(value).map_err(invalid)
}

fn name(call: &Call<'_>) -> String {
    call.param("name").unwrap_or_default()
}

/// `GET /api/org/trust-policies`.
pub async fn list(call: Call<'_>, principal: &Principal) -> Answer {
    let policies = trust::list(call.app, principal).await?;
    Ok(json_response(StatusCode::OK, &policies))
}

/// `POST /api/org/trust-policies`: 201 with the policy; 409 for a name in use.
pub async fn create(call: Call<'_>, principal: &Principal) -> Answer {
    let policy = policy_body(call.req.body(), None)?;
    let (policy, _) = trust::put(call.app, principal, policy, PutMode::Create).await?;
    log_change("created", &policy, principal);
    Ok(json_response(StatusCode::CREATED, &policy))
}

/// `GET /api/org/trust-policies/{name}`.
pub async fn show(call: Call<'_>, principal: &Principal) -> Answer {
    let policy = trust::show(call.app, principal, &name(&call)).await?;
    Ok(json_response(StatusCode::OK, &policy))
}

/// `PUT /api/org/trust-policies/{name}`: creates (201) or replaces (200) that policy; the
/// body's name, when given, must be the path's.
pub async fn replace(call: Call<'_>, principal: &Principal) -> Answer {
    let name = name(&call);
    let policy = policy_body(call.req.body(), Some(&name))?;
    if policy.name != name {
        return Err(HttpError::InvalidRequest(format!(
            "the body names policy {:?} and the path {name:?}: they must be the same (a policy is renamed by creating the new one and deleting the old)",
            policy.name
        )));
    }
    let (policy, created) = trust::put(call.app, principal, policy, PutMode::Upsert).await?;
    log_change(
        if created { "created" } else { "changed" },
        &policy,
        principal,
    );
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(json_response(status, &policy))
}

/// `DELETE /api/org/trust-policies/{name}`: 204.
pub async fn delete(call: Call<'_>, principal: &Principal) -> Answer {
    let policy = trust::delete(call.app, principal, &name(&call)).await?;
    log_change("deleted", &policy, principal);
    Ok(Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(Body::Empty)
        .expect("static headers are valid"))
}

fn log_change(what: &str, policy: &TrustPolicy, principal: &Principal) {
    tracing::info!(
        org = %principal.org,
        policy = %policy.name,
        issuer = %policy.issuer,
        audience = %policy.audience,
        by = %principal.actor.describe(),
        "trust policy {what}"
    );
}
