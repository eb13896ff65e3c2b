//! A route's handler as a value in its row. The variant says which credentials the route
//! takes; the function it holds answers once they check out, given a [`Call`]. Nothing here
//! reads credentials or picks a status: `admission.rs` checks the credentials, the handlers and
//! `error.rs` choose the answer.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use lambda_http::{Body, Request, RequestExt, Response};

use super::error::{HttpError, LogContext};
use crate::domain::name::StateName;
use crate::domain::Principal;
use crate::service::App;

/// What a handler answers: a response, or an error that `error.rs` turns into one.
pub type Answer = Result<Response<Body>, HttpError>;

/// An answer still to come, boxed so that handlers of different routes share one type.
pub type Reply<'a> = Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;

/// What a handler is given: the app, the request (its path parameters set from the route
/// table) and the context its refusals are logged with.
pub struct Call<'a> {
    pub app: &'a App,
    pub req: Request,
    pub ctx: &'a mut LogContext,
}

impl Call<'_> {
    /// A path parameter, `None` when the route's path has none of that name.
    pub fn param(&self, name: &str) -> Option<String> {
        self.req.path_parameters().first(name).map(str::to_owned)
    }

    /// The state the path names.
    ///
    /// # Errors
    /// `InvalidName` (400) for a name outside the naming rule.
    pub fn state(&self) -> Result<StateName, HttpError> {
        Ok(StateName::parse(
            self.param("name").as_deref().unwrap_or_default(),
        )?)
    }
}

/// The handler of a route, by the credentials the route takes.
#[derive(Clone, Copy)]
pub enum Handler {
    /// No credentials: the API description, which `mod.rs` answers with the document
    /// `openapi` builds from the route table (so the table need not name the module that
    /// reads it).
    Open,
    /// A backend route (state, lock): Basic (any username, the token as password) or Bearer,
    /// and a step token of the route's own state.
    Backend(&'static dyn for<'a> OrgHandler<'a>),
    /// Bearer only, with a token of an org; never a step token.
    Bearer(&'static dyn for<'a> OrgHandler<'a>),
    /// The platform's token only: the runs API.
    Platform(&'static dyn for<'a> PlatformHandler<'a>),
    /// A CI job's OpenID Connect ID token, which the handler itself verifies: the exchange
    /// for a workload session. No token of ours.
    IdToken(&'static dyn for<'a> PlatformHandler<'a>),
}

/// The credentials a route takes: its handler's variant without the function it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credentials {
    Open,
    Backend,
    Bearer,
    Platform,
    IdToken,
}

impl Handler {
    pub fn credentials(&self) -> Credentials {
        match self {
            Handler::Open => Credentials::Open,
            Handler::Backend(_) => Credentials::Backend,
            Handler::Bearer(_) => Credentials::Bearer,
            Handler::Platform(_) => Credentials::Platform,
            Handler::IdToken(_) => Credentials::IdToken,
        }
    }

    /// The handler function's path, for logs and test failures.
    pub fn name(&self) -> &'static str {
        match self {
            Handler::Open => "hegemony_state::http::openapi::response",
            Handler::Backend(h) | Handler::Bearer(h) => h.name(),
            Handler::Platform(h) | Handler::IdToken(h) => h.name(),
        }
    }
}

impl fmt::Debug for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}({})", self.credentials(), self.name())
    }
}

/// `async fn(Call<'_>, &Principal) -> Answer`: a route an org's token calls. A trait rather
/// than a fn pointer, so that handlers stay plain `async fn`s: the future each returns
/// borrows its arguments, which a fn pointer type can only name once boxed.
pub trait OrgHandler<'a>: Sync {
    fn answer(&self, call: Call<'a>, principal: &'a Principal) -> Reply<'a>;
    fn name(&self) -> &'static str;
}

impl<'a, F, Fut> OrgHandler<'a> for F
where
    F: Fn(Call<'a>, &'a Principal) -> Fut + Sync,
    Fut: Future<Output = Answer> + Send + 'a,
{
    fn answer(&self, call: Call<'a>, principal: &'a Principal) -> Reply<'a> {
        Box::pin(self(call, principal))
    }

    fn name(&self) -> &'static str {
        std::any::type_name::<F>()
    }
}

/// `async fn(Call<'_>) -> Answer`: a route of the platform's runs API, or one that reads its
/// credentials itself (the workload exchange).
pub trait PlatformHandler<'a>: Sync {
    fn answer(&self, call: Call<'a>) -> Reply<'a>;
    fn name(&self) -> &'static str;
}

impl<'a, F, Fut> PlatformHandler<'a> for F
where
    F: Fn(Call<'a>) -> Fut + Sync,
    Fut: Future<Output = Answer> + Send + 'a,
{
    fn answer(&self, call: Call<'a>) -> Reply<'a> {
        Box::pin(self(call))
    }

    fn name(&self) -> &'static str {
        std::any::type_name::<F>()
    }
}
