//! The HTTP layer: the route table and one handler per route group, `lambda_http::Request`
//! in, `Response` out. The only layer that knows status codes. The Lambda functions call
//! [`handle`] with a request built the way API Gateway's HTTP API (payload v2) builds it; the
//! local server takes the same two steps apart ([`admit_head`] on the headers, then
//! [`answer`] once the body is read), so a body is read only for a client that may send it.

mod admin;
mod admission;
mod app_changes;
mod app_reads;
pub mod content;
mod credentials;
mod deleted;
mod error;
pub mod gateway;
pub mod groups;
mod handler;
mod identity;
mod inventory;
pub mod lambda;
mod list;
mod lock;
mod manage;
pub mod measure;
mod number;
pub mod openapi;
mod outputs;
pub mod pages;
mod protection;
mod response;
pub mod routes;
mod runs;
mod schemas;
mod state;
mod trust;
mod workload;

use lambda_http::http::header;
use lambda_http::{Body, Request, Response};

pub use admission::{admit, admit_head, answer, Admitted, BodyRefusal};
pub use error::ErrorCode;
pub use handler::{Credentials, Handler};
pub use routes::{find_route, BodyLimit, Need, Route, RouteMatch, ROUTES};

use crate::service::App;
use error::{error_body, error_response, HttpError, LogContext};

/// Answers a request for `route` that carries its whole body. Every outcome is a response:
/// refusals are 4xx, transient faults 503, never an `Err`.
pub async fn handle(app: &App, route: &Route, req: Request) -> Response<Body> {
    match admit(app, route, &req).await {
        Ok(admitted) => answer(app, admitted, req).await,
        Err(refused) => refused,
    }
}

/// Answers a request that matched no route: 404, or 405 naming the allowed methods.
pub fn no_route(matched: &RouteMatch<'_>) -> Response<Body> {
    let (code, message) = match matched {
        RouteMatch::MethodNotAllowed { allowed } => (
            ErrorCode::MethodNotAllowed,
            format!("this path answers {}", allowed.join(", ")),
        ),
        _ => (ErrorCode::NotFound, "no such route".to_string()),
    };
    let mut response = error_body(code, &message);
    if let RouteMatch::MethodNotAllowed { allowed } = matched {
        if let Ok(value) = header::HeaderValue::from_str(&allowed.join(", ")) {
            response.headers_mut().insert(header::ALLOW, value);
        }
    }
    response
}

/// Answers a request that matched no route: a page outside `/api` for `GET` and `HEAD`
/// ([`pages`]), otherwise as [`no_route`] does (an unknown API path stays a JSON 404).
pub fn unrouted(method: &str, path: &str, matched: &RouteMatch<'_>) -> Response<Body> {
    match matched {
        RouteMatch::NotFound if pages::serves(method, path) => pages::answer(path),
        other => no_route(other),
    }
}

/// 500 for a request that a defect of ours stopped (its handler panicked); the server goes on.
pub fn internal_error(route: &Route) -> Response<Body> {
    error_response(
        &HttpError::Internal,
        &LogContext::new(route.method, route.path),
    )
}
