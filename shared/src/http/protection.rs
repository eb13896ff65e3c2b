//! `GET /api/org/protected-states`, `GET`/`PUT`/`DELETE /api/org/protected-states/{pattern}`:
//! the org's protected-state rules, the admin role's. A PUT's body is
//! `{"policies": ["<policy name>"]}`, read strictly (an unknown field is refused, so a
//! misspelt one never leaves a state less protected than meant).

use lambda_http::http::StatusCode;
use lambda_http::{Body, Response};
use serde::Deserialize;

use super::error::HttpError;
use super::handler::{Answer, Call};
use super::response::json_response;
use crate::domain::protection::Protection;
use crate::domain::Principal;
use crate::service::protection;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyList {
    policies: Vec<String>,
}

/// The path's pattern. A `*` some clients percent-encode is read as the `*` it stands for;
/// any other `%` is left for the pattern check to refuse, as in a state's name.
fn pattern(call: &Call<'_>) -> String {
    call.param("pattern")
        .unwrap_or_default()
        .replace("%2A", "*")
        .replace("%2a", "*")
}

/// `GET /api/org/protected-states`.
pub async fn list(call: Call<'_>, principal: &Principal) -> Answer {
    let rules = protection::list(call.app, principal).await?;
    Ok(json_response(StatusCode::OK, &rules))
}

/// `GET /api/org/protected-states/{pattern}`.
pub async fn show(call: Call<'_>, principal: &Principal) -> Answer {
    let rule = protection::show(call.app, principal, &pattern(&call)).await?;
    Ok(json_response(StatusCode::OK, &rule))
}

/// `PUT /api/org/protected-states/{pattern}`: sets the rule (201 when new, 200 when it
/// replaced one or was already so).
pub async fn put(call: Call<'_>, principal: &Principal) -> Answer {
    let body: PolicyList = serde_json::from_slice(call.req.body()).map_err(|e| {
        HttpError::InvalidRequest(format!(
            "the body must be {{\"policies\": [\"<trust policy name>\", ...]}}: {e}"
        ))
    })?;
    let (rule, created) =
        protection::put(call.app, principal, &pattern(&call), body.policies).await?;
    log_change(if created { "set" } else { "changed" }, &rule, principal);
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(json_response(status, &rule))
}

/// `DELETE /api/org/protected-states/{pattern}`: 204.
pub async fn delete(call: Call<'_>, principal: &Principal) -> Answer {
    let rule = protection::delete(call.app, principal, &pattern(&call)).await?;
    log_change("removed", &rule, principal);
    Ok(Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(Body::Empty)
        .expect("static headers are valid"))
}

fn log_change(what: &str, rule: &Protection, principal: &Principal) {
    tracing::info!(
        org = %principal.org,
        pattern = %rule.pattern,
        policies = %rule.policies.join(","),
        by = %principal.actor.describe(),
        "protected-state rule {what}"
    );
}
