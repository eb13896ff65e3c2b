//! Reading app states (Octo's remote state, docs/octo.md): `/api/apps`, `/api/apps/{name}`,
//! the holder's view of its open change and that change's files, the newest archive's
//! files, the archives and their files, and an archive's deletion; the path parameters
//! every app state route reads.

use lambda_http::http::StatusCode;
use lambda_http::{Body, RequestExt, Response};

use super::error::HttpError;
use super::handler::{Answer, Call};
use super::number::page_limit;
use super::response::{accepts_gzip, content_response, json_response};
use crate::domain::name::{check_name, StateName};
use crate::domain::Principal;
use crate::service::app_reads::{self, Source};

/// The app state the path names.
pub(super) fn app_name(call: &Call<'_>) -> Result<StateName, HttpError> {
    let raw = call.param("name").unwrap_or_default();
    check_name("app state", &raw)?;
    Ok(StateName::parse(&raw)?)
}

/// A path parameter that must be there (its route's path has it).
pub(super) fn param(call: &Call<'_>, name: &str) -> String {
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

/// The lock ID the path names, for the log line of a refusal too.
pub(super) fn lock_id(call: &mut Call<'_>) -> String {
    let id = param(call, "lock_id");
    call.ctx.lock_id = Some(id.clone());
    id
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

pub async fn change(mut call: Call<'_>, principal: &Principal) -> Answer {
    let (name, lock_id) = (app_name(&call)?, lock_id(&mut call));
    let view = app_reads::change(call.app, principal, &name, &lock_id).await?;
    Ok(json_response(StatusCode::OK, &view))
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
