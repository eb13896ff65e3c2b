//! Managing one state: `GET .../versions/{version}/content`, `POST .../import`,
//! `POST .../rollback`, `POST .../force-unlock`, `DELETE /api/tf-states/{name}`.

use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Request, Response};

use super::error::HttpError;
use super::response::{accepts_gzip, content_response, json_response};
use super::state::into_bytes;
use crate::domain::name::StateName;
use crate::domain::Principal;
use crate::service::listing::{HoldView, LockView, VersionView};
use crate::service::{manage, App};

/// A version number from the path: a positive whole number.
pub fn version_number(raw: Option<&str>) -> Result<u64, HttpError> {
    raw.and_then(|v| v.parse::<u64>().ok())
        .filter(|v| *v >= 1)
        .ok_or_else(|| {
            HttpError::InvalidRequest(format!(
                "version must be a positive whole number, not {:?}",
                raw.unwrap_or_default()
            ))
        })
}

pub async fn download(
    app: &App,
    principal: &Principal,
    name: &StateName,
    version: u64,
    req: &Request,
) -> Result<Response<Body>, HttpError> {
    let bytes = manage::download(app, principal, name, version).await?;
    let mut response = content_response(bytes, accepts_gzip(req.headers()));
    if let Ok(value) = format!("attachment; filename=\"{name}-v{version}.tfstate\"").parse() {
        response
            .headers_mut()
            .insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
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

pub async fn import(
    app: &App,
    principal: &Principal,
    name: &StateName,
    req: Request,
) -> Result<Response<Body>, HttpError> {
    check_content_type(&req)?;
    let version = manage::import(app, principal, name, into_bytes(req.into_body())).await?;
    Ok(json_response(
        StatusCode::CREATED,
        &VersionView::from(&version),
    ))
}

pub async fn rollback(
    app: &App,
    principal: &Principal,
    name: &StateName,
    req: &Request,
) -> Result<Response<Body>, HttpError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        version: u64,
    }
    let body: Body = serde_json::from_slice(req.body()).map_err(|e| {
        HttpError::InvalidRequest(format!(
            "the body must be {{\"version\": N}} with N a positive whole number: {e}"
        ))
    })?;
    if body.version == 0 {
        return Err(HttpError::InvalidRequest(
            "version must be 1 or more".into(),
        ));
    }
    let version = manage::rollback(app, principal, name, body.version).await?;
    Ok(json_response(StatusCode::OK, &VersionView::from(&version)))
}

pub async fn force_unlock(
    app: &App,
    principal: &Principal,
    name: &StateName,
) -> Result<Response<Body>, HttpError> {
    let released = manage::force_unlock(app, principal, name).await?;
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
        &serde_json::json!({"released": {
            "lock": released.lock.as_ref().map(|l| LockView::of(l, &url)),
            "hold": released.hold.as_ref().map(|h| HoldView::of(h, &url)),
        }}),
    ))
}

pub async fn delete(
    app: &App,
    principal: &Principal,
    name: &StateName,
) -> Result<Response<Body>, HttpError> {
    manage::delete(app, principal, name).await?;
    tracing::info!(state = %name, by = %principal.actor.describe(), "state deleted");
    Ok(Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(Body::Empty)
        .expect("static headers are valid"))
}
