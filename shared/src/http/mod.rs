//! The HTTP layer: the route table and one handler per route group, `lambda_http::Request`
//! in, `Response` out. The only layer that knows status codes. The local server and the
//! Lambda functions both call [`handle`] with a request built the way API Gateway's HTTP API
//! (payload v2) builds it.

mod admin;
mod credentials;
mod error;
pub mod gateway;
mod handler;
pub mod lambda;
mod list;
mod lock;
mod manage;
mod number;
pub mod openapi;
mod response;
pub mod routes;
mod runs;
mod state;

use lambda_http::http::header;
use lambda_http::{Body, Request, RequestExt, Response};

pub use error::ErrorCode;
pub use handler::Handler;
pub use routes::{find_route, BodyLimit, Need, Route, RouteMatch, ROUTES};

use crate::domain::Principal;
use crate::service::App;
use credentials::Takes;
use error::{error_body, error_response, HttpError, LogContext};
use handler::{Answer, Call};

/// Answers a request for `route`. Every outcome is a response: refusals are 4xx, transient
/// faults 503, never an `Err`.
pub async fn handle(app: &App, route: &Route, req: Request) -> Response<Body> {
    let mut ctx = LogContext::new(route.method, route.path);
    match dispatch(app, route, req, &mut ctx).await {
        Ok(response) => response,
        Err(err) => error_response(&err, &ctx),
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

/// 413 for a body refused as it arrived (the local server reads bodies before handling).
pub fn too_large(route: &Route, limit: u64) -> Response<Body> {
    error_response(
        &HttpError::TooLarge {
            limit,
            lambda_ceiling: None,
        },
        &LogContext::new(route.method, route.path),
    )
}

/// 503 with Retry-After for a body refused because the server already holds as many
/// request bytes as it allows (the container's cap on saves in flight).
pub fn busy(route: &Route) -> Response<Body> {
    error_response(
        &HttpError::Service(crate::service::Error::Unavailable(
            "the server is holding as many request bytes as it allows at once; retry shortly"
                .into(),
        )),
        &LogContext::new(route.method, route.path),
    )
}

/// 500 for a request that a defect of ours stopped (its handler panicked); the server goes on.
pub fn internal_error(route: &Route) -> Response<Body> {
    error_response(
        &HttpError::Internal,
        &LogContext::new(route.method, route.path),
    )
}

/// 400 for a body that could not be read (a broken chunked encoding, a dropped connection).
pub fn unreadable_body(route: &Route, reason: &str) -> Response<Body> {
    error_response(
        &HttpError::InvalidRequest(format!("the request body could not be read: {reason}")),
        &LogContext::new(route.method, route.path),
    )
}

/// Refuses a body over the route's limit, checks the credentials its handler's variant
/// names, and calls the handler.
async fn dispatch(app: &App, route: &Route, req: Request, ctx: &mut LogContext) -> Answer {
    let limit = route.body_limit(&app.limits);
    if req.body().len() as u64 > limit {
        return Err(HttpError::TooLarge {
            limit,
            lambda_ceiling: app
                .limits
                .lambda_ceiling
                .filter(|_| route.body == BodyLimit::State),
        });
    }
    match route.handler {
        Handler::Open => Ok(openapi::response()),
        Handler::Backend(handler) => {
            let principal = org_principal(app, Takes::Backend, &req, ctx).await?;
            handler.answer(Call { app, req, ctx }, &principal).await
        }
        Handler::Bearer(handler) => {
            let principal = org_principal(app, Takes::Bearer, &req, ctx).await?;
            handler.answer(Call { app, req, ctx }, &principal).await
        }
        Handler::Platform(handler) => {
            credentials::authenticate_platform(app, &req).await?;
            ctx.principal = Some("the platform".into());
            handler.answer(Call { app, req, ctx }).await
        }
    }
}

/// The principal of an org's token, named in the log context with the state the path names.
async fn org_principal(
    app: &App,
    takes: Takes,
    req: &Request,
    ctx: &mut LogContext,
) -> Result<Principal, HttpError> {
    let name = req.path_parameters().first("name").map(str::to_owned);
    ctx.state = name.clone();
    let principal = credentials::authenticate(app, takes, req, name.as_deref()).await?;
    ctx.principal = Some(describe(&principal));
    Ok(principal)
}

fn describe(principal: &Principal) -> String {
    format!(
        "{} in org {} ({})",
        principal.actor.describe(),
        principal.org,
        principal.role.as_str()
    )
}
