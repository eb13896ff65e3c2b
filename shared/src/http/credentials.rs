//! Credentials: Basic (any username, the token as password) or Bearer on the backend routes,
//! Bearer only elsewhere, and exactly one `Authorization` header. A token never reaches a log
//! or an error message.

use base64::Engine;
use lambda_http::http::header;
use lambda_http::Request;

use super::error::HttpError;
use crate::domain::{Principal, Refusal};
use crate::service::auth::{self, Caller};
use crate::service::{App, Error};

/// Which credentials a route takes, as the variant of its row's handler says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// A backend route (state, lock): Basic or Bearer, and a step token of its own state.
    Backend,
    /// Every other route: Bearer only.
    Bearer,
}

fn unauthenticated(reason: &str) -> HttpError {
    HttpError::Service(Error::Unauthenticated(reason.to_owned()))
}

fn forbidden(reason: String) -> HttpError {
    Refusal::Forbidden { reason }.into()
}

/// Resolves the request's credentials to a principal of an org, for every route but the
/// runs API.
///
/// # Errors
/// 401 (`Unauthenticated`) for missing, malformed, unknown, expired or revoked credentials,
/// and for Basic credentials on a route that takes Bearer only; 403 for a platform token
/// (the runs API only) and for a step token outside the backend routes of its one state.
pub async fn authenticate(
    app: &App,
    takes: Takes,
    req: &Request,
    state: Option<&str>,
) -> Result<Principal, HttpError> {
    match caller(app, takes, req).await? {
        Caller::Org(principal) => {
            if let Some(grant) = &principal.step {
                if takes != Takes::Backend || state != Some(grant.state.as_str()) {
                    return Err(forbidden(format!(
                        "a step token may only use the backend routes of state {}",
                        grant.state
                    )));
                }
            }
            Ok(*principal)
        }
        Caller::Platform { .. } => Err(forbidden(
            "a platform token calls the runs API only; use a personal access token".into(),
        )),
    }
}

/// Checks the request comes from the platform, for the runs API (Bearer only).
///
/// # Errors
/// 401 as above; 403 for any token but a platform token.
pub async fn authenticate_platform(app: &App, req: &Request) -> Result<(), HttpError> {
    match caller(app, Takes::Bearer, req).await? {
        Caller::Platform { .. } => Ok(()),
        Caller::Org(_) => Err(forbidden("the runs API needs a platform token".into())),
    }
}

async fn caller(app: &App, takes: Takes, req: &Request) -> Result<Caller, HttpError> {
    let token = token(takes, req)?;
    Ok(auth::authenticate(app, &token).await?)
}

/// Refuses a request that carries more than one set of credentials: two `Authorization`
/// headers, or one whose value joins several with commas, as API Gateway (and some proxies)
/// join repeated headers. Picking one would let a proxy in front, which may pick the other,
/// disagree with us about who is calling. No credentials we take hold a comma: a token does
/// not, nor does base64.
pub(super) fn one_authorization(req: &Request) -> Result<(), HttpError> {
    let mut values = req.headers().get_all(header::AUTHORIZATION).iter();
    let first = values.next();
    if values.next().is_some() || first.is_some_and(|v| v.as_bytes().contains(&b',')) {
        return Err(HttpError::InvalidRequest(
            "the request carries more than one Authorization header (or one value joining several with commas): send exactly one".into(),
        ));
    }
    Ok(())
}

fn token(takes: Takes, req: &Request) -> Result<String, HttpError> {
    one_authorization(req)?;
    let value = req
        .headers()
        .get(header::AUTHORIZATION)
        .ok_or_else(|| {
            unauthenticated(if takes == Takes::Backend {
                "no credentials: send your token as the password (TF_HTTP_PASSWORD) or as a Bearer token"
            } else {
                "no credentials: send your token as a Bearer token"
            })
        })?
        .to_str()
        .map_err(|_| unauthenticated("the Authorization header is not readable text"))?;
    let (scheme, rest) = value.trim().split_once(' ').unwrap_or((value.trim(), ""));
    let token = if scheme.eq_ignore_ascii_case("bearer") {
        rest.trim().to_owned()
    } else if scheme.eq_ignore_ascii_case("basic") {
        if takes != Takes::Backend {
            return Err(unauthenticated(
                "Basic credentials work only on the backend routes (state and lock); send the token as a Bearer token",
            ));
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest.trim())
            .map_err(|_| unauthenticated("the Basic credentials are not valid base64"))?;
        let text = String::from_utf8(decoded)
            .map_err(|_| unauthenticated("the Basic credentials are not UTF-8"))?;
        let (_user, password) = text
            .split_once(':')
            .ok_or_else(|| unauthenticated("the Basic credentials have no password"))?;
        password.to_owned()
    } else {
        return Err(unauthenticated(
            "unsupported Authorization scheme: use Bearer (or Basic on the backend routes)",
        ));
    };
    if token.is_empty() {
        return Err(unauthenticated("the token is empty"));
    }
    Ok(token)
}
