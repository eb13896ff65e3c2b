//! `POST`/`LOCK` and `DELETE`/`UNLOCK /api/tf-states/{name}/lock`. Success is exactly 200:
//! the tools treat any other 2xx as a failure. A refusal's log line takes the lock IDs from
//! the refusal itself, so the body is parsed once, by the domain.

use lambda_http::{Body, Request, Response};

use super::error::HttpError;
use super::response::ok_empty;
use crate::domain::name::StateName;
use crate::domain::Principal;
use crate::service::lock::{self, UnlockOutcome};
use crate::service::App;

pub async fn lock(
    app: &App,
    principal: &Principal,
    name: &StateName,
    req: &Request,
) -> Result<Response<Body>, HttpError> {
    lock::lock(app, principal, name, req.body()).await?;
    Ok(ok_empty())
}

pub async fn unlock(
    app: &App,
    principal: &Principal,
    name: &StateName,
    req: &Request,
) -> Result<Response<Body>, HttpError> {
    if let UnlockOutcome::Released {
        lock,
        hold,
        forced: true,
    } = lock::unlock(app, principal, name, req.body()).await?
    {
        tracing::warn!(
            state = %name,
            lock_id = lock.as_ref().map(|l| l.id()),
            holder = lock.as_ref().map(|l| l.holder.describe()),
            hold = hold.as_ref().map(|h| h.id()),
            by = %principal.actor.describe(),
            "lock force-unlocked"
        );
    }
    Ok(ok_empty())
}
