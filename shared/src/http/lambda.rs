//! Serving from a Lambda function behind API Gateway's HTTP API (payload v2, `$default`
//! stage). A request reaches the function inside a JSON event of at most 6 MB with its body
//! escaped, and a response leaves the same way (gzip and base64 count), so the largest state
//! a function accepts is clamped under that ceiling: the function then refuses a larger one
//! itself, with a 413 that names the ceiling and the container front door. A version saved
//! through the container door can be larger than a function can return: such a read is
//! sent to the door (`HEGEMONY_CONTAINER_URL`) with a 307, or refused with a 413 naming it.

use std::collections::HashMap;
use std::time::Instant;

use lambda_http::http::{header, HeaderValue, StatusCode};
use lambda_http::{Body, Request, RequestExt, Response};

use super::error::{error_response, HttpError, LogContext};
use super::groups::serves;
use super::measure::measure;
use super::routes::{find_route, Route, RouteMatch};
use crate::service::App;

/// Lambda's limit on a synchronous invocation's request and response payloads.
pub const PAYLOAD_CEILING: u64 = 6_291_456;

/// The largest state a function accepts. Measured (`docs/performance.md`): a Terraform state
/// of this size fits the ceiling as long as JSON escaping grows it by less than 49%, which
/// real states stay well under (typically 5-20%), with room for the event's headers.
pub const MAX_STATE_BYTES: u64 = 4 * 1024 * 1024;

/// Answers a request for one of the Lambda function `function`'s routes. The route and its
/// parameters come from the route table, the same match the local server makes, not from
/// the event's route key; a route of another function (or a local-only one) means a
/// deployment that routes it wrongly, and is logged as such. Each answer is reported to the
/// app's metrics.
pub async fn answer(app: &App, function: &str, req: Request) -> Response<Body> {
    let started = Instant::now();
    let method = req.method().as_str().to_owned();
    let (route, response) = routed(app, function, req).await;
    measure(app, route, &method, &response, started);
    response
}

/// The answer, and the row of the route table it came from when one matched.
async fn routed(
    app: &App,
    function: &str,
    req: Request,
) -> (Option<&'static Route>, Response<Body>) {
    let path = req.uri().path().to_owned();
    let method = req.method().as_str().to_owned();
    let (route, params) = match find_route(&method, &path) {
        RouteMatch::Found { route, params } if serves(route, function) => (route, params),
        RouteMatch::Found { route, .. } => {
            return (None, misrouted(&method, &path, function, route.function))
        }
        other => return (None, super::no_route(&other)),
    };
    let params: HashMap<String, String> = params
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let target = req
        .uri()
        .path_and_query()
        .map_or_else(|| path.clone(), |p| p.as_str().to_owned());
    let req = req.with_path_parameters(params);
    let admitted = match super::admit(app, route, &req).await {
        Ok(admitted) => admitted,
        Err(refused) => return (Some(route), refused),
    };
    // A read too large for a function is refused with the caller's context.
    let ctx = admitted.log_context().clone();
    let response = super::answer(app, admitted, req).await;
    (Some(route), within_ceiling(app, response, &target, &ctx))
}

/// A 404 for a request the API routed to the wrong function, logged as the deployment's fault.
fn misrouted(method: &str, path: &str, function: &str, serves: &str) -> Response<Body> {
    tracing::error!(
        %method,
        path,
        function,
        serves,
        "the API routes this request to the wrong function: check the deployment's routes"
    );
    super::no_route(&RouteMatch::NotFound)
}

/// `response` if the function can return it; otherwise (a version saved through the
/// container door, larger than Lambda returns) a 307 to the same path on the container door
/// when the deployment names one, or a 413 saying where such a version can be read.
fn within_ceiling(
    app: &App,
    response: Response<Body>,
    target: &str,
    ctx: &LogContext,
) -> Response<Body> {
    let Some(ceiling) = app.limits.lambda_ceiling else {
        return response;
    };
    if returned_size(&response) <= ceiling {
        return response;
    }
    let door = app.links.container_url.clone();
    let location = door.as_ref().map(|door| format!("{door}{target}"));
    let mut answer = error_response(&HttpError::TooLargeForFunctions { ceiling, door }, ctx);
    if let Some(location) = location.and_then(|l| HeaderValue::from_str(&l).ok()) {
        // 307, not 302: the method and the request stay as they were.
        *answer.status_mut() = StatusCode::TEMPORARY_REDIRECT;
        answer.headers_mut().insert(header::LOCATION, location);
    }
    answer
}

/// The bytes a response takes in the payload a function returns: its body base64-encoded
/// (binary) or JSON-escaped (text), its headers in both of the payload's header maps, and
/// the payload's own fields.
fn returned_size(response: &Response<Body>) -> u64 {
    let body = match response.body() {
        Body::Empty => 0,
        Body::Text(text) => text
            .chars()
            .map(|c| match c {
                '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
                c if (c as u32) < 0x20 => 6,
                c => c.len_utf8(),
            })
            .sum(),
        // Binary, and any kind a later version adds: base64, the larger encoding.
        other => other.len().div_ceil(3) * 4,
    };
    let headers: usize = response
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 8)
        .sum();
    (body + 2 * headers + PAYLOAD_FIELDS) as u64
}

/// What a returned payload holds besides its body and headers (status, field names, the
/// base64 flag, quotes and braces), rounded up.
const PAYLOAD_FIELDS: usize = 256;

/// Answers a request that API Gateway routed to the `web` function: the pages, or for an
/// unknown API path (the catch-all route takes those too) the JSON 404 or 405 the local
/// server gives. A request for a route of the table here means routes deployed wrongly.
pub fn answer_pages(req: &Request) -> Response<Body> {
    let (method, path) = (req.method().as_str(), req.uri().path());
    match find_route(method, path) {
        RouteMatch::Found { route, .. } => {
            misrouted(method, path, super::pages::FUNCTION, route.function)
        }
        other => super::unrouted(method, path, &other),
    }
}

#[cfg(test)]
mod tests;
