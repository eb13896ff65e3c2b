//! App states (Octo's remote state, docs/octo.md): `/api/apps`, `/api/apps/{name}`, its
//! lock, the open change's files under `/locks/{lock_id}`, seal and unlock, the newest
//! archive's files, the archives and their files, an archive's deletion, force-unlock.

use lambda_http::http::StatusCode;
use lambda_http::{Body, RequestExt, Response};
use schemars::JsonSchema;
use serde::Serialize;

use super::error::HttpError;
use super::handler::{Answer, Call};
use super::number::page_limit;
use super::response::{accepts_gzip, content_response, json_response};
use super::state::into_bytes;
use crate::domain::app::change::LockRequest;
use crate::domain::app::{Ended, PublicLock};
use crate::domain::name::{check_name, StateName};
use crate::domain::Principal;
use crate::service::app_reads::{self, ArchiveView, FileView, HeldLockView, Source};
use crate::service::apps;

/// The app state the path names.
fn app_name(call: &Call<'_>) -> Result<StateName, HttpError> {
    let raw = call.param("name").unwrap_or_default();
    check_name("app state", &raw)?;
    Ok(StateName::parse(&raw)?)
}

/// A path parameter that must be there (its route's path has it).
fn param(call: &Call<'_>, name: &str) -> String {
    call.param(name).unwrap_or_default()
}

/// `cursor` from the query: the `next_cursor` of the page before, a name or commit ID.
fn cursor(call: &Call<'_>, kind: &'static str) -> Result<Option<String>, HttpError> {
    match call.req.query_string_parameters().first("cursor") {
        None => Ok(None),
        Some(raw) => {
            check_name(kind, raw)?;
            Ok(Some(raw.to_owned()))
        }
    }
}

pub async fn list(call: Call<'_>, principal: &Principal) -> Answer {
    let limit = page_limit(&call.req, 100, app_reads::MAX_APPS_PAGE)?;
    let cursor = cursor(&call, "app state")?;
    let page = app_reads::list(call.app, principal, limit, cursor.as_deref()).await?;
    Ok(json_response(StatusCode::OK, &page))
}

pub async fn show(call: Call<'_>, principal: &Principal) -> Answer {
    let view = app_reads::show(call.app, principal, &app_name(&call)?).await?;
    Ok(json_response(StatusCode::OK, &view))
}

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
    let lock = apps::lock(call.app, principal, &name, &request).await?;
    tracing::info!(app = %name, commit_id = %lock.commit_id, by = %principal.actor.describe(), "app state locked");
    Ok(json_response(StatusCode::OK, &HeldLockView::of(&lock)))
}

/// The lock ID the path names, for the log line of a refusal too.
fn lock_id(call: &mut Call<'_>) -> String {
    let id = param(call, "lock_id");
    call.ctx.lock_id = Some(id.clone());
    id
}

pub async fn change(mut call: Call<'_>, principal: &Principal) -> Answer {
    let (name, lock_id) = (app_name(&call)?, lock_id(&mut call));
    let view = app_reads::change(call.app, principal, &name, &lock_id).await?;
    Ok(json_response(StatusCode::OK, &view))
}

pub async fn upload(mut call: Call<'_>, principal: &Principal) -> Answer {
    let (name, lock_id) = (app_name(&call)?, lock_id(&mut call));
    let file = param(&call, "file");
    let Call { app, req, .. } = call;
    let body = into_bytes(req.into_body());
    let stored = apps::upload(app, principal, &name, &lock_id, &file, body).await?;
    Ok(json_response(StatusCode::OK, &FileView::of(&stored)))
}

async fn end(mut call: Call<'_>, principal: &Principal, ended: Ended) -> Answer {
    let (name, lock_id) = (app_name(&call)?, lock_id(&mut call));
    let archive = apps::seal(call.app, principal, &name, &lock_id, ended).await?;
    tracing::info!(app = %name, commit_id = %archive.commit_id, ended = archive.ended.as_str(), by = %principal.actor.describe(), "app state change sealed");
    Ok(json_response(StatusCode::OK, &ArchiveView::of(&archive)))
}

pub async fn seal(call: Call<'_>, principal: &Principal) -> Answer {
    end(call, principal, Ended::Sealed).await
}

pub async fn unlock(call: Call<'_>, principal: &Principal) -> Answer {
    end(call, principal, Ended::GivenUp).await
}

/// A file's bytes exactly as uploaded, gzip when accepted.
async fn file(call: Call<'_>, principal: &Principal, source: Source<'_>) -> Answer {
    let name = app_name(&call)?;
    let file = param(&call, "file");
    let bytes = app_reads::download(call.app, principal, &name, source, &file).await?;
    Ok(content_response(bytes, accepts_gzip(call.req.headers())))
}

pub async fn newest_file(call: Call<'_>, principal: &Principal) -> Answer {
    file(call, principal, Source::Newest).await
}

pub async fn change_file(mut call: Call<'_>, principal: &Principal) -> Answer {
    let lock_id = lock_id(&mut call);
    file(call, principal, Source::Change(&lock_id)).await
}

pub async fn archive_file(call: Call<'_>, principal: &Principal) -> Answer {
    let commit_id = param(&call, "commit_id");
    file(call, principal, Source::Archive(&commit_id)).await
}

pub async fn archives(call: Call<'_>, principal: &Principal) -> Answer {
    let name = app_name(&call)?;
    let limit = page_limit(&call.req, 20, app_reads::MAX_ARCHIVES_PAGE)?;
    let cursor = cursor(&call, "commit ID")?;
    let page = app_reads::archives(call.app, principal, &name, limit, cursor.as_deref()).await?;
    Ok(json_response(StatusCode::OK, &page))
}

pub async fn archive(call: Call<'_>, principal: &Principal) -> Answer {
    let name = app_name(&call)?;
    let commit_id = param(&call, "commit_id");
    let view = app_reads::archive(call.app, principal, &name, &commit_id).await?;
    Ok(json_response(StatusCode::OK, &view))
}

pub async fn delete_archive(call: Call<'_>, principal: &Principal) -> Answer {
    let name = app_name(&call)?;
    let commit_id = param(&call, "commit_id");
    app_reads::delete_archive(call.app, principal, &name, &commit_id).await?;
    tracing::info!(app = %name, commit_id = %commit_id, by = %principal.actor.describe(), "app state archive deleted");
    Ok(Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(Body::Empty)
        .expect("static headers are valid"))
}

pub async fn force_unlock(call: Call<'_>, principal: &Principal) -> Answer {
    let name = app_name(&call)?;
    let released = apps::force_unlock(call.app, principal, &name).await?;
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
