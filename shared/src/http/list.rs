//! `GET /api/tf-states?limit=&cursor=`: the caller's org's states, never any content.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, RequestExt, Response};

use super::error::HttpError;
use super::response::json_response;
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
