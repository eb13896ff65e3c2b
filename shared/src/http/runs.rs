//! The platform's runs API: `POST /api/runs/{run}/tf-state-tokens`,
//! `POST /api/runs/{run}/end`, `POST /api/runs/{run}/steps/{step}/gone`.

use lambda_http::http::{header, StatusCode};
use lambda_http::Request;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::error::HttpError;
use super::handler::{Answer, Call};
use super::number::whole;
use super::response::json_response;
use crate::domain::actor::StepKind;
use crate::domain::rfc3339;
use crate::service::runs::{self, MintRequest};
use crate::service::App;

fn invalid(reason: impl Into<String>) -> HttpError {
    HttpError::InvalidRequest(reason.into())
}

fn object(req: &Request, required: bool) -> Result<serde_json::Map<String, Value>, HttpError> {
    let body = req.body();
    if body.iter().all(u8::is_ascii_whitespace) {
        return if required {
            Err(invalid("the body must be a JSON object"))
        } else {
            Ok(Default::default())
        };
    }
    match serde_json::from_slice(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(invalid("the body must be a JSON object")),
        Err(e) => Err(invalid(format!("the body is not JSON: {e}"))),
    }
}

fn string(map: &serde_json::Map<String, Value>, field: &str) -> Result<String, HttpError> {
    map.get(field)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| invalid(format!("\"{field}\" is required, as a string")))
}

fn positive(map: &serde_json::Map<String, Value>, field: &str) -> Result<u64, HttpError> {
    map.get(field)
        .and_then(whole)
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            invalid(format!(
                "\"{field}\" is required, as a positive whole number"
            ))
        })
}

/// The public base of this API, for the backend settings a step gets: the configured one,
/// or else as the caller reached it (API Gateway and proxies say the scheme in
/// `X-Forwarded-Proto`).
fn base_url(app: &App, req: &Request) -> String {
    if let Some(public) = &app.links.public_url {
        return public.clone();
    }
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
    let scheme = header("x-forwarded-proto").unwrap_or("http");
    let host = header(header::HOST.as_str()).unwrap_or("localhost");
    format!("{scheme}://{host}")
}

pub async fn mint(call: Call<'_>) -> Answer {
    let (app, req) = (call.app, &call.req);
    let run = &call.param("run").unwrap_or_default();
    let map = object(req, true)?;
    const FIELDS: [&str; 7] = [
        "org",
        "state",
        "step",
        "attempt",
        "kind",
        "timeout_seconds",
        "hold",
    ];
    if let Some(unknown) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(invalid(format!("unknown field {unknown:?}")));
    }
    let kind = match string(&map, "kind")?.as_str() {
        "plan" => StepKind::Plan,
        "apply" => StepKind::Apply,
        other => return Err(invalid(format!("\"kind\" is plan or apply, not {other:?}"))),
    };
    let attempt = u32::try_from(positive(&map, "attempt")?)
        .map_err(|_| invalid("\"attempt\" is too large"))?;
    let hold = match map.get("hold") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(invalid("\"hold\" must be true or false")),
    };
    let request = MintRequest {
        org: string(&map, "org")?,
        state: string(&map, "state")?,
        step: string(&map, "step")?,
        attempt,
        kind,
        timeout_seconds: positive(&map, "timeout_seconds")?,
        hold,
    };
    let (token, record) = runs::mint(app, run, &request).await?;
    let base = format!("{}/api/tf-states/{}", base_url(app, req), request.state);
    Ok(json_response(
        StatusCode::CREATED,
        &Minted {
            token,
            expires_at: record.expires_at.map(rfc3339),
            backend: BackendSettings {
                address: format!("{base}/state"),
                lock_address: format!("{base}/lock"),
                unlock_address: format!("{base}/lock"),
                lock_method: "POST",
                unlock_method: "DELETE",
                username: format!("run-{run}"),
            },
        },
    ))
}

/// A step token, as the platform hands it to the step's job.
#[derive(Serialize, JsonSchema)]
pub(super) struct Minted {
    /// The secret: shown once, stored only as its hash.
    token: String,
    #[schemars(with = "Option<crate::domain::schema::Rfc3339>")]
    expires_at: Option<String>,
    backend: BackendSettings,
}

/// The http backend's settings for the step's state, ready for `-backend-config`: the token
/// goes as the password.
#[derive(Serialize, JsonSchema)]
struct BackendSettings {
    address: String,
    lock_address: String,
    unlock_address: String,
    lock_method: &'static str,
    unlock_method: &'static str,
    username: String,
}

/// A run's end, as recorded.
#[derive(Serialize, JsonSchema)]
pub(super) struct RunEnded {
    run: String,
    #[schemars(with = "Option<crate::domain::schema::Rfc3339>")]
    ended_at: Option<String>,
    /// The status the platform reported, if any.
    status: Option<String>,
}

/// A step attempt's gone report, as answered.
#[derive(Serialize, JsonSchema)]
pub(super) struct GoneReport {
    /// How many of the attempt's tokens it revoked.
    revoked: usize,
}

pub async fn end(call: Call<'_>) -> Answer {
    let (app, req) = (call.app, &call.req);
    let run = &call.param("run").unwrap_or_default();
    let map = object(req, false)?;
    let status = match map.get("status") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(invalid("\"status\" must be a string")),
    };
    let record = runs::end(app, run, status.as_deref()).await?;
    Ok(json_response(
        StatusCode::OK,
        &RunEnded {
            run: record.run,
            ended_at: record.ended_at.map(rfc3339),
            status: record.status,
        },
    ))
}

pub async fn gone(call: Call<'_>) -> Answer {
    let (app, req) = (call.app, &call.req);
    let run = &call.param("run").unwrap_or_default();
    let step = &call.param("step").unwrap_or_default();
    let map = object(req, true)?;
    let attempt = u32::try_from(positive(&map, "attempt")?)
        .map_err(|_| invalid("\"attempt\" is too large"))?;
    let revoked = runs::gone(app, run, step, attempt).await?;
    Ok(json_response(StatusCode::OK, &GoneReport { revoked }))
}
