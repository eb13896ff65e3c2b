//! `GET /api/tf-states?limit=&cursor=`, `GET /api/tf-states/{name}` and
//! `GET .../versions`: what an org has, never any content.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, RequestExt, Response};

use super::error::HttpError;
use super::response::json_response;
use crate::domain::name::StateName;
use crate::domain::Principal;
use crate::service::listing::{self, MAX_PAGE};
use crate::service::App;

const DEFAULT_PAGE: usize = 100;

pub async fn list(
    app: &App,
    principal: &Principal,
    req: &Request,
) -> Result<Response<Body>, HttpError> {
    let query = req.query_string_parameters();
    let limit = match query.first("limit") {
        None => DEFAULT_PAGE,
        Some(raw) => raw
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n))
            .ok_or_else(|| {
                HttpError::InvalidRequest(format!(
                    "limit must be a whole number from 1 to {MAX_PAGE}"
                ))
            })?,
    };
    let page = listing::list(app, principal, limit, query.first("cursor")).await?;
    Ok(json_response(StatusCode::OK, &page))
}

pub async fn show(
    app: &App,
    principal: &Principal,
    name: &StateName,
) -> Result<Response<Body>, HttpError> {
    let view = listing::show(app, principal, name).await?;
    Ok(json_response(StatusCode::OK, &view))
}

pub async fn versions(
    app: &App,
    principal: &Principal,
    name: &StateName,
) -> Result<Response<Body>, HttpError> {
    let versions = listing::versions(app, principal, name).await?;
    Ok(json_response(
        StatusCode::OK,
        &serde_json::json!({ "versions": versions }),
    ))
}
