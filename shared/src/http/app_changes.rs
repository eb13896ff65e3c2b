//! Changing app states (Octo's remote state, docs/octo.md): the lock, the open change's
//! uploads under `/locks/{lock_id}`, seal and unlock, and an admin's force-unlock.

use lambda_http::http::StatusCode;
use schemars::JsonSchema;
use serde::Serialize;

use super::app_reads::{app_name, lock_id, param};
use super::error::HttpError;
use super::handler::{Answer, Call};
use super::response::json_response;
use super::state::into_bytes;
use crate::domain::app::change::LockRequest;
use crate::domain::app::{Ended, PublicLock};
use crate::domain::Principal;
use crate::service::app_changes;
use crate::service::app_reads::{ArchiveView, FileView, HeldLockView};

/// A field that, when present, must be a string (not `null`).
fn some_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    <String as serde::Deserialize>::deserialize(d).map(Some)
}

/// The lock body: optional, each field optional.
fn lock_request(body: &[u8]) -> Result<LockRequest, HttpError> {
    #[derive(serde::Deserialize, Default)]
    #[serde(deny_unknown_fields)]
    struct Wanted {
        /// Absent, or a string: `null` is refused, as the document's schema says.
        #[serde(default, deserialize_with = "some_string")]
        lock_id: Option<String>,
        #[serde(default)]
        who: String,
        #[serde(default)]
        info: String,
    }
    let refuse = |e: &dyn std::fmt::Display| {
        HttpError::InvalidRequest(format!(
            "the body must be empty or {{\"lock_id\", \"who\", \"info\"}}, each an optional string: {e}"
        ))
    };
    let wanted: Wanted = match body.iter().find(|b| !b.is_ascii_whitespace()) {
        None => Wanted::default(),
        // serde reads a struct from an array too, its items by position: the document says
        // an object, so anything else is refused before it is read.
        Some(b'{') => serde_json::from_slice(body).map_err(|e| refuse(&e))?,
        Some(_) => return Err(refuse(&"it is not a JSON object")),
    };
    Ok(LockRequest {
        lock_id: wanted.lock_id,
        who: wanted.who,
        info: wanted.info,
    })
}

pub async fn lock(call: Call<'_>, principal: &Principal) -> Answer {
    let name = app_name(&call)?;
    let request = lock_request(call.req.body())?;
    let lock = app_changes::lock(call.app, principal, &name, &request).await?;
    tracing::info!(app = %name, commit_id = %lock.commit_id, by = %principal.actor.describe(), "app state locked");
    Ok(json_response(StatusCode::OK, &HeldLockView::of(&lock)))
}

pub async fn upload(mut call: Call<'_>, principal: &Principal) -> Answer {
    let (name, lock_id) = (app_name(&call)?, lock_id(&mut call));
    let file = param(&call, "file");
    let Call { app, req, .. } = call;
    let body = into_bytes(req.into_body());
    let stored = app_changes::upload(app, principal, &name, &lock_id, &file, body).await?;
    Ok(json_response(StatusCode::OK, &FileView::of(&stored)))
}

async fn end(mut call: Call<'_>, principal: &Principal, ended: Ended) -> Answer {
    let (name, lock_id) = (app_name(&call)?, lock_id(&mut call));
    let archive = app_changes::seal(call.app, principal, &name, &lock_id, ended).await?;
    tracing::info!(app = %name, commit_id = %archive.commit_id, ended = archive.ended.as_str(), by = %principal.actor.describe(), "app state change sealed");
    Ok(json_response(StatusCode::OK, &ArchiveView::of(&archive)))
}

pub async fn seal(call: Call<'_>, principal: &Principal) -> Answer {
    end(call, principal, Ended::Sealed).await
}

pub async fn unlock(call: Call<'_>, principal: &Principal) -> Answer {
    end(call, principal, Ended::GivenUp).await
}

pub async fn force_unlock(call: Call<'_>, principal: &Principal) -> Answer {
    let name = app_name(&call)?;
    let released = app_changes::force_unlock(call.app, principal, &name).await?;
    if let Some((lock, _)) = &released {
        tracing::warn!(app = %name, lock_id = %lock.lock_id, holder = %lock.holder.describe(), by = %principal.actor.describe(), "app state force-unlocked");
    }
    let (lock, archive) = match &released {
        Some((lock, archive)) => (Some(lock.public()), Some(ArchiveView::of(archive))),
        None => (None, None),
    };
    Ok(json_response(
        StatusCode::OK,
        &AppForceUnlockResult {
            released: lock,
            archive,
        },
    ))
}

/// What an app state's force-unlock ended: its lock, and the archive its change was sealed
/// into; both null when nothing was locked.
#[derive(Serialize, JsonSchema)]
pub(super) struct AppForceUnlockResult {
    released: Option<PublicLock>,
    archive: Option<ArchiveView>,
}
