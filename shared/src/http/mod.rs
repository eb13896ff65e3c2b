//! The HTTP layer: the route table and one handler per route group, `lambda_http::Request`
//! in, `Response` out. The only layer that knows status codes. The local server and the
//! Lambda functions both call [`handle`] with a request built the way API Gateway's HTTP API
//! (payload v2) builds it.

mod admin;
mod credentials;
mod error;
pub mod lambda;
mod list;
mod lock;
mod manage;
pub mod openapi;
mod response;
pub mod routes;
mod runs;
mod state;

use lambda_http::{Body, Request, RequestExt, Response};

pub use error::ErrorCode;
pub use routes::{find_route, BodyLimit, Handler, Need, Route, RouteMatch, ROUTES};

use crate::domain::name::StateName;
use crate::domain::Principal;
use crate::service::App;
use error::{error_response, HttpError, LogContext};

/// Answers a request for `route`. Every outcome is a response: refusals are 4xx, transient
/// faults 503, never an `Err`.
pub async fn handle(app: &App, route: &Route, req: Request) -> Response<Body> {
    let mut ctx = LogContext::new(route);
    match dispatch(app, route, req, &mut ctx).await {
        Ok(response) => response,
        Err(err) => error_response(&err, &ctx),
    }
}

/// Answers a request that matched no route: 404, or 405 naming the allowed methods.
pub fn no_route(matched: &RouteMatch<'_>) -> Response<Body> {
    error::no_route(matched)
}

/// 413 for a body refused as it arrived (the local server reads bodies before handling).
pub fn too_large(route: &Route, limit: u64) -> Response<Body> {
    error_response(
        &HttpError::TooLarge {
            limit,
            lambda_ceiling: None,
        },
        &LogContext::new(route),
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
        &LogContext::new(route),
    )
}

/// 400 for a body that could not be read (a broken chunked encoding, a dropped connection).
pub fn unreadable_body(route: &Route, reason: &str) -> Response<Body> {
    error_response(
        &HttpError::InvalidRequest(format!("the request body could not be read: {reason}")),
        &LogContext::new(route),
    )
}

async fn dispatch(
    app: &App,
    route: &Route,
    req: Request,
    ctx: &mut LogContext,
) -> Result<Response<Body>, HttpError> {
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
    if !route.needs_credentials() {
        return Ok(openapi::response());
    }
    let params = req.path_parameters();
    let name = params.first("name").map(str::to_owned);
    let version = params.first("version").map(str::to_owned);
    if route.is_runs() {
        credentials::authenticate_platform(app, route, &req).await?;
        ctx.principal = Some("the platform".into());
        let run = params.first("run").unwrap_or_default().to_owned();
        let step = params.first("step").unwrap_or_default().to_owned();
        return match route.handler {
            Handler::Mint => runs::mint(app, &run, &req).await,
            Handler::RunEnd => runs::end(app, &run, &req).await,
            _ => runs::gone(app, &run, &step, &req).await,
        };
    }
    ctx.state = name.clone();
    let principal = credentials::authenticate(app, route, &req, name.as_deref()).await?;
    ctx.principal = Some(describe(&principal));
    let state = || -> Result<StateName, HttpError> {
        Ok(StateName::parse(name.as_deref().unwrap_or_default())?)
    };
    let p = &principal;
    match route.handler {
        Handler::StateRead => state::read(app, p, &state()?, &req).await,
        Handler::StateWrite => state::write(app, p, &state()?, req, ctx).await,
        Handler::Lock => lock::lock(app, p, &state()?, &req, ctx).await,
        Handler::Unlock => lock::unlock(app, p, &state()?, &req, ctx).await,
        Handler::List => list::list(app, p, &req).await,
        Handler::Show => list::show(app, p, &state()?).await,
        Handler::Versions => list::versions(app, p, &state()?).await,
        Handler::Download => {
            let version = manage::version_number(version.as_deref())?;
            manage::download(app, p, &state()?, version, &req).await
        }
        Handler::Import => manage::import(app, p, &state()?, req).await,
        Handler::Rollback => manage::rollback(app, p, &state()?, &req).await,
        Handler::ForceUnlock => manage::force_unlock(app, p, &state()?).await,
        Handler::Delete => manage::delete(app, p, &state()?).await,
        Handler::StateAudit => admin::audit(app, p, Some(&state()?), &req).await,
        Handler::OrgAudit => admin::audit(app, p, None, &req).await,
        Handler::Permissions => admin::permissions(app, p).await,
        Handler::SetPermissions => admin::set_permissions(app, p, &req).await,
        Handler::OpenApi => Ok(openapi::response()),
        Handler::Mint | Handler::RunEnd | Handler::StepGone => {
            unreachable!("the runs API is answered above")
        }
    }
}

fn describe(principal: &Principal) -> String {
    format!(
        "{} in org {} ({})",
        principal.actor.describe(),
        principal.org,
        principal.role.as_str()
    )
}
