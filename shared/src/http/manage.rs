//! Managing one state: `GET .../versions/{version}/content`,
//! `GET .../versions/{version}/changes?since=`, `POST .../import`, `POST .../rollback`,
//! `POST .../force-unlock`, `DELETE /api/tf-states/{name}`.

use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Request, RequestExt, Response};
use schemars::JsonSchema;
use serde::Serialize;

use super::error::HttpError;
use super::handler::{Answer, Call};
use super::number::whole_u64;
use super::response::json_response;
use super::state::into_bytes;
use crate::domain::Principal;
use crate::service::listing::{HoldView, LockView, VersionView};
use crate::service::{comparison, manage};

/// A version number from the path: a positive whole number.
fn version_number(raw: Option<&str>) -> Result<u64, HttpError> {
    raw.and_then(|v| v.parse::<u64>().ok())
        .filter(|v| *v >= 1)
        .ok_or_else(|| {
            HttpError::InvalidRequest(format!(
                "version must be a positive whole number, not {:?}",
                raw.unwrap_or_default()
            ))
        })
}

/// The version's content as it was written, as an attachment. The version number is checked
/// before the name: a request wrong in both is answered about the number.
pub async fn download(call: Call<'_>, principal: &Principal) -> Answer {
    let version = version_number(call.param("version").as_deref())?;
    let name = call.state()?;
    let content = manage::download(call.app, principal, &name, version).await?;
    let mut response = super::content::answer(content, &call.req)?;
    if let Ok(value) = format!("attachment; filename=\"{name}-v{version}.tfstate\"").parse() {
        response
            .headers_mut()
            .insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

/// What changed between the version and `?since=` (by default the version before it):
/// resources and outputs by name and attribute paths, never a value.
pub async fn compare(call: Call<'_>, principal: &Principal) -> Answer {
    let version = version_number(call.param("version").as_deref())?;
    let since = match call.req.query_string_parameters().first("since") {
        Some(raw) => Some(version_number(Some(raw)).map_err(|_| {
            HttpError::InvalidRequest(format!(
                "since must be a positive whole number, not {raw:?}"
            ))
        })?),
        None => None,
    };
    let name = call.state()?;
    let comparison = comparison::compare(call.app, principal, &name, version, since).await?;
    Ok(json_response(StatusCode::OK, &comparison))
}

/// An import takes `application/json`, `application/octet-stream` or no Content-Type.
fn check_content_type(req: &Request) -> Result<(), HttpError> {
    let Some(value) = req.headers().get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let text = value.to_str().unwrap_or("");
    let essence = text
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "application/json" | "application/octet-stream" | "" => Ok(()),
        _ => Err(HttpError::UnsupportedMediaType(text.to_owned())),
    }
}

pub async fn import(call: Call<'_>, principal: &Principal) -> Answer {
    let name = call.state()?;
    check_content_type(&call.req)?;
    let body = into_bytes(call.req.into_body());
    let version = manage::import(call.app, principal, &name, body).await?;
    let url = |run: &str| call.app.run_url(run);
    Ok(json_response(
        StatusCode::CREATED,
        &VersionView::of(&version, &url),
    ))
}

pub async fn rollback(call: Call<'_>, principal: &Principal) -> Answer {
    let name = call.state()?;
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        #[serde(deserialize_with = "whole_u64")]
        version: u64,
    }
    let body: Body = serde_json::from_slice(call.req.body()).map_err(|e| {
        HttpError::InvalidRequest(format!(
            "the body must be {{\"version\": N}} with N a positive whole number: {e}"
        ))
    })?;
    if body.version == 0 {
        return Err(HttpError::InvalidRequest(
            "version must be 1 or more".into(),
        ));
    }
    let version = manage::rollback(call.app, principal, &name, body.version).await?;
    let url = |run: &str| call.app.run_url(run);
    Ok(json_response(
        StatusCode::OK,
        &VersionView::of(&version, &url),
    ))
}

pub async fn force_unlock(call: Call<'_>, principal: &Principal) -> Answer {
    let (app, name) = (call.app, call.state()?);
    let released = manage::force_unlock(app, principal, &name).await?;
    if released.lock.is_some() || released.hold.is_some() {
        tracing::warn!(
            state = %name,
            lock_id = released.lock.as_ref().map(|l| l.id()),
            hold = released.hold.as_ref().map(|h| h.id()),
            by = %principal.actor.describe(),
            "lock force-unlocked"
        );
    }
    let url = |run: &str| app.run_url(run);
    Ok(json_response(
        StatusCode::OK,
        &ForceUnlockResult {
            released: Released {
                lock: released.lock.as_ref().map(|l| LockView::of(l, &url)),
                hold: released.hold.as_ref().map(|h| HoldView::of(h, &url)),
            },
        },
    ))
}

/// What a force-unlock released.
#[derive(Serialize, JsonSchema)]
pub(super) struct ForceUnlockResult {
    released: Released,
}

/// The lock and the run's hold a force-unlock released; null for what there was not.
#[derive(Serialize, JsonSchema)]
struct Released {
    lock: Option<LockView>,
    hold: Option<HoldView>,
}

pub async fn delete(call: Call<'_>, principal: &Principal) -> Answer {
    let name = call.state()?;
    let kept = manage::delete(call.app, principal, &name).await?;
    let id = kept.as_ref().map(|d| d.id.as_str());
    tracing::info!(state = %name, deleted_id = id, by = %principal.actor.describe(), "state deleted");
    Ok(Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(Body::Empty)
        .expect("static headers are valid"))
}
