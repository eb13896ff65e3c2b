//! `POST`/`LOCK` and `DELETE`/`UNLOCK /api/tf-states/{name}/lock`. Success is exactly 200:
//! the tools treat any other 2xx as a failure. A refusal's log line takes the lock IDs from
//! the refusal itself, so the body is parsed once, by the domain.

use lambda_http::{Body, Response};

use super::error::HttpError;
use super::handler::Call;
use super::response::ok_empty;
use crate::domain::Principal;
use crate::service::lock::{self, UnlockOutcome};

pub async fn lock(call: Call<'_>, principal: &Principal) -> Result<Response<Body>, HttpError> {
    let name = &call.state()?;
    let Call { app, req, .. } = call;
    lock::lock(app, principal, name, req.body()).await?;
    Ok(ok_empty())
}

pub async fn unlock(call: Call<'_>, principal: &Principal) -> Result<Response<Body>, HttpError> {
    let name = &call.state()?;
    let Call { app, req, .. } = call;
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
