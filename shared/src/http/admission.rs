//! Admission: a request's body limit and credentials checked from its method, path and
//! headers alone, so that a client that has not authenticated never gets the server to hold,
//! or wait for, a body. The local server admits a request built with an empty body, then
//! reads the body and hands both to [`answer`]; the Lambda functions get the whole request
//! at once and [`super::handle`] takes both steps. Either way the token is read once.

use lambda_http::{Body, Request, RequestExt, Response};

use super::credentials::{self, Takes};
use super::error::{error_response, HttpError, LogContext};
use super::handler::{Call, Handler, OrgHandler, PlatformHandler};
use super::routes::{BodyLimit, Route};
use crate::domain::Principal;
use crate::service::{self, App};

/// A request whose body limit and credentials checked out: the handler that answers it, who
/// calls, and the context its refusals are logged with. Only [`admit`] makes one.
pub struct Admitted {
    caller: Caller,
    ctx: LogContext,
}

/// The route's handler with the caller its variant takes, so [`answer`] cannot pair a
/// handler with credentials of another kind. The principal is boxed to keep the other
/// variants small.
enum Caller {
    /// The API description, which takes no credentials.
    Open,
    Org(&'static dyn for<'a> OrgHandler<'a>, Box<Principal>),
    Platform(&'static dyn for<'a> PlatformHandler<'a>),
}

/// Why the server did not take an admitted request's body: each is answered through the
/// error table, logged with the admitted caller and state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyRefusal {
    /// The body passed the route's limit as it arrived (413).
    TooLarge { limit: u64 },
    /// Taking the body would pass the server's cap on request bytes in flight (503, retried).
    Busy,
    /// No bytes of the body arrived for `seconds` (408).
    Stalled { seconds: u64 },
    /// A broken chunked encoding or a dropped connection (400).
    Unreadable(String),
}

/// Refuses a body over the route's limit (when the request carries its body: on Lambda),
/// then checks the credentials the handler's variant names.
///
/// # Errors
/// The refusal's response: 413, 401 or 403, logged at WARNING; 503 when the token cannot be
/// looked up.
pub async fn admit(app: &App, route: &Route, req: &Request) -> Result<Admitted, Response<Body>> {
    let mut ctx = LogContext::new(route.method, route.path);
    match caller(app, route, req, &mut ctx).await {
        Ok(caller) => Ok(Admitted { caller, ctx }),
        Err(err) => Err(error_response(&err, &ctx)),
    }
}

/// Answers an admitted request, `req` carrying its whole body. Every outcome is a response.
pub async fn answer(app: &App, admitted: Admitted, req: Request) -> Response<Body> {
    let Admitted { caller, mut ctx } = admitted;
    let answered = match caller {
        Caller::Open => Ok(super::openapi::response()),
        Caller::Org(handler, principal) => {
            let call = Call {
                app,
                req,
                ctx: &mut ctx,
            };
            handler.answer(call, &principal).await
        }
        Caller::Platform(handler) => {
            let call = Call {
                app,
                req,
                ctx: &mut ctx,
            };
            handler.answer(call).await
        }
    };
    answered.unwrap_or_else(|err| error_response(&err, &ctx))
}

impl Admitted {
    /// The answer to an admitted request whose body the server did not take.
    pub fn refuse_body(&self, refusal: BodyRefusal) -> Response<Body> {
        let err = match refusal {
            BodyRefusal::TooLarge { limit } => HttpError::TooLarge {
                limit,
                lambda_ceiling: None,
            },
            BodyRefusal::Busy => HttpError::Service(service::Error::Unavailable(
                "the server is holding as many request bytes as it allows at once; retry shortly"
                    .into(),
            )),
            BodyRefusal::Stalled { seconds } => HttpError::BodyStalled { seconds },
            BodyRefusal::Unreadable(reason) => {
                HttpError::InvalidRequest(format!("the request body could not be read: {reason}"))
            }
        };
        error_response(&err, &self.ctx)
    }
}

async fn caller(
    app: &App,
    route: &Route,
    req: &Request,
    ctx: &mut LogContext,
) -> Result<Caller, HttpError> {
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
    Ok(match route.handler {
        Handler::Open => Caller::Open,
        Handler::Backend(handler) => Caller::Org(
            handler,
            Box::new(org_principal(app, Takes::Backend, req, ctx).await?),
        ),
        Handler::Bearer(handler) => Caller::Org(
            handler,
            Box::new(org_principal(app, Takes::Bearer, req, ctx).await?),
        ),
        Handler::Platform(handler) => {
            credentials::authenticate_platform(app, req).await?;
            ctx.principal = Some("the platform".into());
            Caller::Platform(handler)
        }
    })
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
