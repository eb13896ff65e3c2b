//! Admission: a request's credentials checked from its method, path and headers alone, so
//! that a client that has not authenticated never gets the server to hold, or wait for, a
//! body. The local server admits a request on its headers ([`admit_head`]), then reads the
//! body and hands both to [`answer`]; the Lambda functions get the whole request at once,
//! and [`super::handle`] admits it with its body ([`admit`], which also refuses a body over
//! the route's limit) and answers it. Either way the token is read once, and every refusal's
//! line names the state, the lock IDs and the caller as far as they are known.

use lambda_http::{Body, Request, RequestExt, Response};

use super::credentials::{self, Takes};
use super::error::{error_response, HttpError, LogContext};
use super::handler::{Call, Credentials, Handler, OrgHandler, PlatformHandler};
use super::routes::{BodyLimit, Route};
use crate::domain::actor::SessionGrant;
use crate::domain::{lock, Principal, Refusal};
use crate::service::{self, App};

/// A request whose body limit and credentials checked out: the handler that answers it, who
/// calls, and the context its refusals are logged with. Only [`admit`] and [`admit_head`]
/// make one.
pub struct Admitted {
    caller: Caller,
    ctx: LogContext,
    /// Whether the body is a lock or unlock document, whose `ID` the log context takes.
    lock_body: bool,
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
    /// Fewer than `bytes_per_second` on average arrived over a window of `seconds` (408).
    TooSlow { bytes_per_second: u64, seconds: u64 },
    /// A broken chunked encoding or a dropped connection (400).
    Unreadable(String),
}

/// Admits a request that carries its whole body (on Lambda): checks the credentials the
/// handler's variant names, then refuses a body over the route's limit, so that the
/// refusal's line names who sent it.
///
/// # Errors
/// The refusal's response: 401, 403 or 413, logged at WARNING; 503 when the token cannot be
/// looked up.
pub async fn admit(app: &App, route: &Route, req: &Request) -> Result<Admitted, Response<Body>> {
    let (mut ctx, lock_body) = context(route, req);
    let limit = route.body_limit(&app.limits);
    let over = req.body().len() as u64 > limit;
    if lock_body {
        // A lock body over its limit is not read, not even for its ID.
        ctx.lock_body_unread = over;
        if !over {
            ctx.lock_id = lock::named_id(req.body());
        }
    }
    let caller = match caller(app, route, req, &mut ctx).await {
        Ok(caller) => caller,
        Err(err) => return Err(error_response(&err, &ctx)),
    };
    if over {
        let err = HttpError::TooLarge {
            limit,
            lambda_ceiling: app
                .limits
                .lambda_ceiling
                .filter(|_| route.body == BodyLimit::State),
        };
        return Err(error_response(&err, &ctx));
    }
    Ok(Admitted {
        caller,
        ctx,
        lock_body: false,
    })
}

/// Admits a request on its headers alone (the local server), before a byte of its body is
/// read: checks the credentials the handler's variant names. Its body is read only once this
/// answers `Ok`, and handed to [`answer`].
///
/// # Errors
/// The refusal's response: 401 or 403, logged at WARNING; 503 when the token cannot be
/// looked up.
pub async fn admit_head(
    app: &App,
    route: &Route,
    req: &Request,
) -> Result<Admitted, Response<Body>> {
    let (mut ctx, lock_body) = context(route, req);
    ctx.lock_body_unread = lock_body;
    match caller(app, route, req, &mut ctx).await {
        Ok(caller) => Ok(Admitted {
            caller,
            ctx,
            lock_body,
        }),
        Err(err) => Err(error_response(&err, &ctx)),
    }
}

/// The log context of a request to `route`, with what its path and query name (the state, a
/// save's `?ID=`), and whether its body is a lock or unlock document of the backend.
fn context(route: &Route, req: &Request) -> (LogContext, bool) {
    let mut ctx = LogContext::new(route.method, route.path);
    ctx.state = req.path_parameters().first("name").map(str::to_owned);
    ctx.lock_id = req.query_string_parameters().first("ID").map(str::to_owned);
    let lock_body =
        route.body == BodyLimit::Lock && route.handler.credentials() == Credentials::Backend;
    (ctx, lock_body)
}

/// Answers an admitted request, `req` carrying its whole body. Every outcome is a response.
pub async fn answer(app: &App, admitted: Admitted, req: Request) -> Response<Body> {
    let Admitted {
        caller,
        mut ctx,
        lock_body,
    } = admitted;
    if lock_body {
        ctx.lock_id = lock::named_id(req.body());
        ctx.lock_body_unread = false;
    }
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
    /// The context its refusals are logged with.
    pub(super) fn log_context(&self) -> &LogContext {
        &self.ctx
    }

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
            BodyRefusal::TooSlow {
                bytes_per_second,
                seconds,
            } => HttpError::BodyTooSlow {
                bytes_per_second,
                seconds,
            },
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
    Ok(match route.handler {
        Handler::Open => Caller::Open,
        Handler::Backend(handler) => Caller::Org(
            handler,
            Box::new(org_principal(app, route, Takes::Backend, req, ctx).await?),
        ),
        Handler::Bearer(handler) => Caller::Org(
            handler,
            Box::new(org_principal(app, route, Takes::Bearer, req, ctx).await?),
        ),
        Handler::Platform(handler) => {
            credentials::authenticate_platform(app, req).await?;
            ctx.principal = Some("the platform".into());
            Caller::Platform(handler)
        }
        // The exchange reads and verifies the ID token itself, and names it in the context.
        Handler::IdToken(handler) => Caller::Platform(handler),
    })
}

/// The principal of an org's token, named in the log context.
async fn org_principal(
    app: &App,
    route: &Route,
    takes: Takes,
    req: &Request,
    ctx: &mut LogContext,
) -> Result<Principal, HttpError> {
    let principal = credentials::authenticate(app, takes, req, ctx.state.as_deref()).await?;
    ctx.principal = Some(describe(&principal));
    if let Some(session) = &principal.session {
        session_reaches(session, route, ctx.state.as_deref())?;
    }
    Ok(principal)
}

/// The routes a workload session reaches: those of a state its policy names, who it is, and
/// its own end. Nothing of the org at large (no list of every state, no audit, no apps).
fn session_reaches(
    session: &SessionGrant,
    route: &Route,
    state: Option<&str>,
) -> Result<(), HttpError> {
    let of_state = route.path.starts_with("/api/tf-states/{name}");
    let own = matches!(route.path, "/api/whoami" | "/api/oidc/session");
    match state {
        Some(name) if of_state && session.allows_state(name) => Ok(()),
        None if own => Ok(()),
        Some(name) if of_state => Err(Refusal::Forbidden {
            reason: format!(
                "this workload session (trust policy {}) reaches states {:?} only, not {name}",
                session.policy, session.states
            ),
        }
        .into()),
        _ => Err(Refusal::Forbidden {
            reason: format!(
                "a workload session reaches the states of its trust policy ({}) only, not {} {}",
                session.policy, route.method, route.path
            ),
        }
        .into()),
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
