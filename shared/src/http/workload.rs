//! `POST /api/oidc/exchange` (a CI job's ID token, as Bearer or `{"token"}`, and the policy
//! it names, `{"policy"}`, for a workload session) and `DELETE /api/oidc/session` (the session ends itself and releases its locks).
//! A refusal is logged once, by `error.rs`, with the token's issuer, subject and job as it
//! claims them; the token itself never reaches a log or an answer.

use super::credentials::one_authorization;
use super::error::HttpError;
use super::handler::{Answer, Call};
use super::response::json_response;
use crate::crypto::id_token;
use crate::domain::actor::WorkloadJob;
use crate::domain::name::check_name;
use crate::domain::untrusted::shown;
use crate::domain::Principal;
use crate::service::{workload, Error};
use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Response};

/// What the exchange was sent: the ID token (a Bearer `Authorization`, or the body's
/// `token`; not both) and the policy the job names, if any.
struct Exchange {
    token: String,
    policy: Option<String>,
}

/// The body's shape: `{"token"?, "policy"?}`, nothing else.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExchangeBody {
    token: Option<String>,
    policy: Option<String>,
}

fn read(call: &Call<'_>) -> Result<Exchange, HttpError> {
    // Two sets of credentials: a proxy in front may read the other one.
    one_authorization(&call.req)?;
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
    let fields = if body.iter().all(u8::is_ascii_whitespace) {
        ExchangeBody {
            token: None,
            policy: None,
        }
    } else {
        serde_json::from_slice::<ExchangeBody>(body).map_err(|_| {
            HttpError::InvalidRequest(
                "the body must be {\"token\": \"<the job's ID token>\", \"policy\": \"<a trust policy's name>\"} (each optional: the token may come as a Bearer token instead)".into(),
            )
        })?
    };
    if let Some(policy) = &fields.policy {
        check_name("policy", policy).map_err(|r| HttpError::Service(r.into()))?;
    }
    let token = match (bearer, fields.token) {
        (Some(_), Some(_)) => {
            return Err(HttpError::InvalidRequest(
                "send the ID token once: as a Bearer token or in the body, not both".into(),
            ))
        }
        (Some(token), None) | (None, Some(token)) if !token.is_empty() => token,
        _ => {
            return Err(HttpError::Service(Error::Unauthenticated(
                "no ID token: send the job's OpenID Connect ID token as a Bearer token or as {\"token\"}".into(),
            )))
        }
    };
    Ok(Exchange {
        token,
        policy: fields.policy,
    })
}

/// `POST /api/oidc/exchange`: 200 `{"token", "expires_at", "org", "role", "states"}`.
pub async fn exchange(call: Call<'_>) -> Answer {
    let sent = read(&call)?;
    // Named in the log as the token claims to be, before anything is verified: a refusal's
    // line says which job was refused and why, escaped and cut, since nothing of it is
    // verified yet (a newline in a claim must not forge a line).
    if let Ok(claimed) = id_token::unverified(&sent.token) {
        let job = each_shown(WorkloadJob::from_claims(&claimed.claims));
        call.ctx.principal = Some(format!("{} (as claimed, unverified)", job.describe()));
    }
    let session = workload::exchange(call.app, &sent.token, sent.policy.as_deref()).await?;
    Ok(json_response(StatusCode::OK, &session))
}

/// The job as its unverified claims name it, each claim escaped and cut on its own: cutting
/// the whole description would let a padded claim hide the issuer and subject after it.
fn each_shown(job: WorkloadJob) -> WorkloadJob {
    let opt = |v: Option<String>| v.map(|v| shown(&v));
    WorkloadJob {
        issuer: shown(&job.issuer),
        subject: shown(&job.subject),
        repository: opt(job.repository),
        r#ref: opt(job.r#ref),
        run: opt(job.run),
        job: opt(job.job),
        attempt: opt(job.attempt),
        sha: opt(job.sha),
        environment: opt(job.environment),
    }
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
