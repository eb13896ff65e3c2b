//! `POST /api/oidc/exchange` (a CI job's ID token, as Bearer or `{"token"}`, for a workload
//! session) and `DELETE /api/oidc/session` (the session ends itself and releases its locks).
//! A refusal is logged once, by `error.rs`, with the token's issuer, subject and job as it
//! claims them; the token itself never reaches a log or an answer.

use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Response};
use serde_json::Value;

use super::error::HttpError;
use super::handler::{Answer, Call};
use super::response::json_response;
use crate::crypto::id_token;
use crate::domain::actor::WorkloadJob;
use crate::domain::Principal;
use crate::service::{workload, Error};

/// The ID token: a Bearer `Authorization`, or the body's `token`; not both.
fn id_token(call: &Call<'_>) -> Result<String, HttpError> {
    let bearer = match call.req.headers().get(header::AUTHORIZATION) {
        None => None,
        Some(value) => {
            let value = value.to_str().map_err(|_| {
                HttpError::Service(Error::Unauthenticated(
                    "the Authorization header is not readable text".into(),
                ))
            })?;
            match value.trim().split_once(' ') {
                Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
                    Some(token.trim().to_owned())
                }
                _ => {
                    return Err(HttpError::Service(Error::Unauthenticated(
                        "send the ID token as a Bearer token, or as {\"token\": \"...\"}".into(),
                    )))
                }
            }
        }
    };
    let body = call.req.body();
    let in_body = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(map)) => match map.get("token") {
                Some(Value::String(token)) => Some(token.clone()),
                _ => {
                    return Err(HttpError::InvalidRequest(
                        "the body must be {\"token\": \"<the job's ID token>\"}".into(),
                    ))
                }
            },
            _ => {
                return Err(HttpError::InvalidRequest(
                    "the body must be {\"token\": \"<the job's ID token>\"}".into(),
                ))
            }
        }
    };
    match (bearer, in_body) {
        (Some(_), Some(_)) => Err(HttpError::InvalidRequest(
            "send the ID token once: as a Bearer token or in the body, not both".into(),
        )),
        (Some(token), None) | (None, Some(token)) if !token.is_empty() => Ok(token),
        _ => Err(HttpError::Service(Error::Unauthenticated(
            "no ID token: send the job's OpenID Connect ID token as a Bearer token or as {\"token\"}".into(),
        ))),
    }
}

/// `POST /api/oidc/exchange`: 200 `{"token", "expires_at", "org", "role", "states"}`.
pub async fn exchange(call: Call<'_>) -> Answer {
    let token = id_token(&call)?;
    // Named in the log as the token claims to be, before anything is verified: a refusal's
    // line says which job was refused and why.
    if let Ok(claimed) = id_token::unverified(&token) {
        let job = WorkloadJob::from_claims(&claimed.claims);
        call.ctx.principal = Some(format!("{} (as claimed, unverified)", job.describe()));
    }
    let session = workload::exchange(call.app, &token).await?;
    Ok(json_response(StatusCode::OK, &session))
}

/// `DELETE /api/oidc/session`: 204; the session's token stops working and its locks are
/// released.
pub async fn end_session(call: Call<'_>, principal: &Principal) -> Answer {
    workload::end_session(call.app, principal).await?;
    tracing::info!(org = %principal.org, job = %principal.actor.describe(), "workload session ended");
    Ok(Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(Body::Empty)
        .expect("static headers are valid"))
}
