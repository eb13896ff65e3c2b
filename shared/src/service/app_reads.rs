//! Reading app states (docs/octo.md): the list, one app state, its archives, a file's
//! content (the newest archive's, an archive's, or the holder's open change's), and an
//! admin's deletion of an old archive. Lists never carry content; content needs
//! tf_state:read and every download is audited. Readers see archives only: an open change
//! is its holder's, through its lock ID.

use serde::Serialize;

use super::app_changes::{check_id, entry, existing, open_file};
use super::retry::{until_done, Attempt};
use super::{App, Error};
use crate::domain::app::change::{
    after_delete, change_files, check_delete, freed_blobs, holders_lock,
};
use crate::domain::app::{AppLock, AppRecord, ArchiveRecord, Ended, FileRef, PublicLock};
use crate::domain::audit::AuditAction;
use crate::domain::name::StateName;
use crate::domain::permission::Permission;
use crate::domain::{Actor, Principal, Refusal};
use crate::ports::{AppCommit, StoreError};

/// The most app states one page lists.
pub const MAX_APPS_PAGE: usize = 1000;
/// The most archives one page lists (each carries its files' list).
pub const MAX_ARCHIVES_PAGE: usize = 100;

/// A file as listed: never its content, never where it is stored.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "AppFile")]
pub struct FileView {
    pub name: String,
    /// `tfstate`, `journal` or `json`, as the file's name says (docs/octo.md).
    pub kind: &'static str,
    /// The command a journal file came from; null for other kinds.
    pub command: Option<String>,
    pub size: u64,
    pub sha256: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lineage: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serial: Option<u64>,
    pub uploaded_in: String,
    #[serde(with = "time::serde::rfc3339")]
    #[schemars(with = "crate::domain::schema::Rfc3339")]
    pub uploaded_at: crate::domain::Timestamp,
}

impl FileView {
    pub fn of(f: &FileRef) -> Self {
        Self {
            name: f.name.clone(),
            kind: f.kind.as_str(),
            command: f.kind.command().map(str::to_owned),
            size: f.size,
            sha256: f.sha256.clone(),
            lineage: f.lineage.clone(),
            serial: f.serial,
            uploaded_in: f.uploaded_in.clone(),
            uploaded_at: f.uploaded_at,
        }
    }
}

/// An archive as listed.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "Archive")]
pub struct ArchiveView {
    pub commit_id: String,
    pub ended: Ended,
    pub holder: Actor,
    pub who: String,
    pub info: String,
    #[serde(with = "time::serde::rfc3339")]
    #[schemars(with = "crate::domain::schema::Rfc3339")]
    pub locked_at: crate::domain::Timestamp,
    #[serde(with = "time::serde::rfc3339")]
    #[schemars(with = "crate::domain::schema::Rfc3339")]
    pub sealed_at: crate::domain::Timestamp,
    pub sealed_by: Actor,
    pub size: u64,
    pub files: Vec<FileView>,
}

impl ArchiveView {
    pub fn of(a: &ArchiveRecord) -> Self {
        Self {
            commit_id: a.commit_id.clone(),
            ended: a.ended,
            holder: a.holder.clone(),
            who: a.who.clone(),
            info: a.info.clone(),
            locked_at: a.locked_at,
            sealed_at: a.sealed_at,
            sealed_by: a.sealed_by.clone(),
            size: a.size(),
            files: a.files.iter().map(FileView::of).collect(),
        }
    }
}

/// The lock as its holder sees it: with its lock ID.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "HeldAppLock")]
pub struct HeldLockView {
    pub lock_id: String,
    #[serde(flatten)]
    pub lock: PublicLock,
}

impl HeldLockView {
    pub fn of(lock: &AppLock) -> Self {
        Self {
            lock_id: lock.lock_id.clone(),
            lock: lock.public(),
        }
    }
}

/// The newest archive in a list item: its files counted, not listed.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "NewestArchive")]
pub struct NewestSummary {
    pub commit_id: String,
    pub ended: Ended,
    #[serde(with = "time::serde::rfc3339")]
    #[schemars(with = "crate::domain::schema::Rfc3339")]
    pub sealed_at: crate::domain::Timestamp,
    pub size: u64,
    pub files: usize,
}

/// An app state as the list shows it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct AppItem {
    pub name: String,
    pub lock: Option<PublicLock>,
    pub newest: Option<NewestSummary>,
    pub archives: u64,
}

impl AppItem {
    fn of(r: &AppRecord) -> Self {
        Self {
            name: r.name.clone(),
            lock: r.lock.as_ref().map(AppLock::public),
            newest: r.newest.as_ref().map(|a| NewestSummary {
                commit_id: a.commit_id.clone(),
                ended: a.ended,
                sealed_at: a.sealed_at,
                size: a.size(),
                files: a.files.len(),
            }),
            archives: r.archives,
        }
    }
}

/// One page of an org's app states.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(rename = "AppList")]
pub struct AppListing {
    pub org: String,
    pub apps: Vec<AppItem>,
    pub next_cursor: Option<String>,
}

/// One app state, with what the caller may do to it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct AppView {
    pub name: String,
    pub lock: Option<PublicLock>,
    pub newest: Option<ArchiveView>,
    pub archives: u64,
    pub allowed_actions: AllowedAppActions,
}

/// What the caller may do to an app state, so a page never hard-codes permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct AllowedAppActions {
    pub download: bool,
    pub force_unlock: bool,
    pub delete_archive: bool,
}

/// A page of an app state's archives, newest first.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(rename = "ArchiveList")]
pub struct ArchiveListing {
    pub app: String,
    pub archives: Vec<ArchiveView>,
    pub next_cursor: Option<String>,
}

/// The holder's view of its open change.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(rename = "AppChange")]
pub struct ChangeView {
    pub lock: HeldLockView,
    pub files: Vec<FileView>,
}

/// The org's app states, by name. Viewer.
///
/// # Errors
/// `Unavailable` when the catalog cannot be read.
pub async fn list(
    app: &App,
    principal: &Principal,
    limit: usize,
    cursor: Option<&str>,
) -> Result<AppListing, Error> {
    let limit = limit.clamp(1, MAX_APPS_PAGE);
    let records = app.catalog.apps(&principal.org, cursor, limit).await?;
    let next_cursor = (records.len() == limit)
        .then(|| records.last().map(|r| r.name.clone()))
        .flatten();
    Ok(AppListing {
        org: principal.org.clone(),
        apps: records
            .iter()
            .filter(|r| r.is_visible())
            .map(AppItem::of)
            .collect(),
        next_cursor,
    })
}

/// One app state. Viewer.
///
/// # Errors
/// `NotFound`.
pub async fn show(app: &App, principal: &Principal, name: &StateName) -> Result<AppView, Error> {
    let record = existing(app, principal, name).await?;
    let allocation = app.allocation(&principal.org).await?;
    let allowed = |p| allocation.allows(principal.role, p);
    let actions = AllowedAppActions {
        download: allowed(Permission::Read),
        force_unlock: allowed(Permission::Manage),
        delete_archive: allowed(Permission::Manage),
    };
    let item = AppItem::of(&record);
    Ok(AppView {
        name: item.name,
        lock: item.lock,
        newest: record.newest.as_ref().map(ArchiveView::of),
        archives: record.archives,
        allowed_actions: actions,
    })
}

/// An app state's archives, newest first, older than `cursor`. Viewer.
///
/// # Errors
/// `NotFound`, `InvalidName` for a cursor that is not a commit ID.
pub async fn archives(
    app: &App,
    principal: &Principal,
    name: &StateName,
    limit: usize,
    cursor: Option<&str>,
) -> Result<ArchiveListing, Error> {
    if let Some(cursor) = cursor {
        check_id("commit ID", cursor)?;
    }
    existing(app, principal, name).await?;
    let limit = limit.clamp(1, MAX_ARCHIVES_PAGE);
    let found = app
        .catalog
        .archives(&principal.org, name.as_str(), cursor, limit)
        .await?;
    let next_cursor = (found.len() == limit)
        .then(|| found.last().map(|a| a.commit_id.clone()))
        .flatten();
    Ok(ArchiveListing {
        app: name.to_string(),
        archives: found.iter().map(ArchiveView::of).collect(),
        next_cursor,
    })
}

/// One archive of `record`: the newest from the record itself, older ones from the catalog.
async fn find_archive(
    app: &App,
    record: &AppRecord,
    commit_id: &str,
) -> Result<ArchiveRecord, Error> {
    check_id("commit ID", commit_id)?;
    if let Some(newest) = record.newest.as_ref().filter(|a| a.commit_id == commit_id) {
        return Ok(newest.clone());
    }
    app.catalog
        .archive(&record.org, &record.name, commit_id)
        .await?
        .ok_or_else(|| {
            Refusal::NotFound {
                what: format!("archive {commit_id} of app state {}", record.name),
            }
            .into()
        })
}

/// One archive, its files listed. Viewer.
///
/// # Errors
/// `NotFound`.
pub async fn archive(
    app: &App,
    principal: &Principal,
    name: &StateName,
    commit_id: &str,
) -> Result<ArchiveView, Error> {
    let record = existing(app, principal, name).await?;
    Ok(ArchiveView::of(
        &find_archive(app, &record, commit_id).await?,
    ))
}

/// The holder's open change: what a seal would archive now. tf_state:write, the holder.
///
/// # Errors
/// `NotFound`, `AppLocked`, `LockIdMismatch`.
pub async fn change(
    app: &App,
    principal: &Principal,
    name: &StateName,
    lock_id: &str,
) -> Result<ChangeView, Error> {
    app.require(principal, Permission::Write).await?;
    check_id("lock ID", lock_id)?;
    let record = existing(app, principal, name).await?;
    let lock = holders_lock(&record, lock_id, principal)?;
    Ok(ChangeView {
        lock: HeldLockView::of(lock),
        files: change_files(record.newest.as_ref(), lock)
            .iter()
            .map(FileView::of)
            .collect(),
    })
}

/// Which copy of a file to read.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// The newest archive's: the sealed state.
    Newest,
    /// An archive's, by commit ID.
    Archive(&'a str),
    /// The holder's open change's, by lock ID.
    Change(&'a str),
}

/// A file's content, exactly as uploaded. tf_state:read (and, for an open change, its
/// holder). Audited.
///
/// # Errors
/// `NotFound` for no such app state, archive or file (or no archive yet), what
/// [`holders_lock`] refuses for an open change, and the key and storage faults of opening.
pub async fn download(
    app: &App,
    principal: &Principal,
    name: &StateName,
    source: Source<'_>,
    file: &str,
) -> Result<Vec<u8>, Error> {
    app.require(principal, Permission::Read).await?;
    let keys = app.keys()?;
    let record = existing(app, principal, name).await?;
    let missing = |place: String| -> Error {
        Refusal::NotFound {
            what: format!("file {file} {place}"),
        }
        .into()
    };
    let (found, place) = match source {
        Source::Newest => {
            let newest = record.newest.as_ref().ok_or_else(|| -> Error {
                Refusal::NotFound {
                    what: format!("a sealed archive of app state {name}"),
                }
                .into()
            })?;
            (
                newest.file(file).cloned(),
                serde_json::json!({"commit_id": newest.commit_id}),
            )
        }
        Source::Archive(commit_id) => {
            let archive = find_archive(app, &record, commit_id).await?;
            (
                archive.file(file).cloned(),
                serde_json::json!({"commit_id": commit_id}),
            )
        }
        Source::Change(lock_id) => {
            check_id("lock ID", lock_id)?;
            let lock = holders_lock(&record, lock_id, principal)?;
            let files = change_files(record.newest.as_ref(), lock);
            let found = files.into_iter().find(|f| f.name == file);
            (found, serde_json::json!({"lock_commit_id": lock.commit_id}))
        }
    };
    let found = found.ok_or_else(|| missing(format!("in app state {name}")))?;
    let bytes = open_file(app, keys, &record, &found).await?;
    let mut detail = place;
    detail["file"] = serde_json::Value::String(found.name.clone());
    detail["sha256"] = serde_json::Value::String(found.sha256.clone());
    let now = app.clock.now();
    app.catalog
        .append_audit(&entry(
            principal,
            name,
            AuditAction::AppFileDownloaded,
            detail,
            now,
        ))
        .await?;
    Ok(bytes)
}

/// Deletes an old archive (never the newest): one commit removes it and lists the blobs no
/// remaining archive holds for the sweeper. tf_state:manage, audited.
///
/// # Errors
/// `NotFound`, `NewestArchive`.
pub async fn delete_archive(
    app: &App,
    principal: &Principal,
    name: &StateName,
    commit_id: &str,
) -> Result<(), Error> {
    app.require(principal, Permission::Manage).await?;
    check_id("commit ID", commit_id)?;
    until_done(|| async {
        let now = app.clock.now();
        let record = existing(app, principal, name).await?;
        check_delete(&record, commit_id)?;
        let archive = find_archive(app, &record, commit_id).await?;
        let (org, app_name) = (record.org.as_str(), record.name.as_str());
        let older = app
            .catalog
            .archives(org, app_name, Some(commit_id), 1)
            .await?;
        let newer = app.catalog.archive_after(org, app_name, commit_id).await?;
        let freed = freed_blobs(&archive, older.first(), newer.as_ref());
        let detail = serde_json::json!({"commit_id": commit_id, "files": archive.files.len()});
        let changes = AppCommit {
            expected_revision: record.revision,
            at: now,
            app: after_delete(&record),
            sealed: None,
            deleted: Some(commit_id.to_owned()),
            committed_blobs: Vec::new(),
            doomed_blobs: freed,
            audit: vec![entry(
                principal,
                name,
                AuditAction::AppArchiveDeleted,
                detail,
                now,
            )],
        };
        match app.catalog.commit_app(changes).await {
            Ok(()) => Ok(Attempt::Done(())),
            Err(StoreError::Conflict) => Ok(Attempt::LostRace),
            Err(e) => Err(e.into()),
        }
    })
    .await
}
