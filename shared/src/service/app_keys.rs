//! Key rotation for app states (Octo's remote state, docs/octo.md): which keys wrap their
//! files (the report), and moving each file's data key to the key in use (the re-wrap). A
//! file's key slot is copied into every record that lists it (`domain::app::key_slots`), so a
//! re-wrap moves each blob's data key once, then writes the new slot into each archive that
//! carries it, one archive per compare-and-swap commit on the app state's revision, the
//! record's own copies with it. A commit lost to a live change is decided again on a fresh
//! read; a run stopped half way leaves each copy on its old or its new key (both open the
//! file), and the next run moves what is still behind. The content is never opened.

use std::collections::BTreeMap;

use serde::Serialize;

use super::admin::require_admin;
use super::app_changes::key_state;
use super::content::{self, Place, RecordedKey};
use super::keys::{ATTEMPTS, PAGE};
use super::{App, Error};
use crate::domain::app::key_slots::{blobs, holds_behind};
use crate::domain::app::{AppRecord, ArchiveRecord, FileRef};
use crate::domain::audit::AuditAction;
use crate::domain::keys::{needs_rewrap, tally};
use crate::domain::version::KeySlot;
use crate::domain::{Actor, Principal};
use crate::paging::{self, Page};
use crate::ports::{key_backend, AppCommit, AuditEntry, KeyContext, KeyService, StoreError};

/// One app state's files by key, as the report shows them.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct AppKeys {
    pub app: String,
    /// The key a file sealed now gets: where a re-wrap takes the others.
    pub current_key: String,
    pub keys: Vec<FileKeys>,
}

/// How many files of one app state one key id wraps: each sealed file once, however many
/// archives carry it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FileKeys {
    pub key: String,
    /// `transit`, `kms` or `platform`.
    pub key_backend: String,
    pub files: u64,
    /// Behind the key in use: `keys rewrap` would move them.
    pub behind: bool,
}

/// What a re-wrap did to one app state, counted in files (blobs), as the report counts them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AppRewrap {
    pub app: String,
    /// Files moved to the key in use (with `--dry-run`: that would be).
    pub rewrapped: u64,
    /// Files already on the key in use.
    pub current: u64,
    /// What could not be moved (a file by name, or an archive by commit ID), with why.
    pub failed: Vec<(String, String)>,
    pub to: String,
}

/// Every app state of `org` that anyone may know exists, in name order.
pub async fn org_apps(app: &App, org: &str) -> Result<Vec<AppRecord>, Error> {
    let apps = paging::all(move |after: Option<String>| async move {
        let page = app.catalog.apps(org, after.as_deref(), PAGE).await;
        page.map(|records| Page::of(records, PAGE, |r| r.name.clone()))
    })
    .await?;
    Ok(apps.into_iter().filter(AppRecord::is_visible).collect())
}

/// Every archive of an app state, newest first.
pub(super) async fn archives(app: &App, record: &AppRecord) -> Result<Vec<ArchiveRecord>, Error> {
    let (org, name) = (record.org.as_str(), record.name.as_str());
    let archives = paging::all(move |before: Option<String>| async move {
        let page = app
            .catalog
            .archives(org, name, before.as_deref(), PAGE)
            .await;
        page.map(|archives| Page::of(archives, PAGE, |a| a.commit_id.clone()))
    })
    .await?;
    Ok(archives)
}

/// Every copy of a file's key slot: in the archives and in the record itself.
pub(super) fn copies<'a>(
    archives: &'a [ArchiveRecord],
    record: &'a AppRecord,
) -> impl Iterator<Item = &'a FileRef> {
    archives
        .iter()
        .flat_map(|a| a.files.iter())
        .chain(record.listed_files())
}

/// The key service's current key for an app state's files.
async fn current_key(keys: &dyn KeyService, record: &AppRecord) -> Result<String, Error> {
    let state = key_state(&record.name);
    let context = KeyContext {
        org: &record.org,
        state: &state,
    };
    Ok(keys.current_key_id(&context).await?)
}

/// How one app state's files spread over keys.
///
/// # Errors
/// `NoKey` without a key service; `Unavailable` when it cannot say which key is current or
/// the catalog fails.
pub async fn app_report(app: &App, record: &AppRecord) -> Result<AppKeys, Error> {
    let current_key = current_key(app.keys()?, record).await?;
    let archives = archives(app, record).await?;
    let files = blobs(copies(&archives, record), &current_key);
    let keys = tally(files.values().map(|f| f.key.as_str()), &current_key);
    Ok(AppKeys {
        app: record.name.clone(),
        current_key,
        keys: keys
            .into_iter()
            .map(|u| FileKeys {
                key_backend: key_backend(&u.key).to_owned(),
                key: u.key,
                files: u.versions,
                behind: u.behind,
            })
            .collect(),
    })
}

/// The key report of the caller's org's app states, for its admins.
///
/// # Errors
/// `Refused(Forbidden)` without the admin role; as [`app_report`].
pub async fn report(app: &App, principal: &Principal) -> Result<Vec<AppKeys>, Error> {
    require_admin(principal, "the key report")?;
    let mut report = Vec::new();
    for record in org_apps(app, &principal.org).await? {
        report.push(app_report(app, &record).await?);
    }
    Ok(report)
}

/// How many files a re-wrap of `record` looks at: its progress bar's length.
///
/// # Errors
/// `Unavailable` when the catalog fails.
pub async fn file_count(app: &App, record: &AppRecord) -> Result<u64, Error> {
    let archives = archives(app, record).await?;
    // The key id only decides which copy stands for a blob, not how many blobs there are.
    Ok(blobs(copies(&archives, record), "").len() as u64)
}

/// Moves every file of one app state to the key in use and audits what it did (not for a
/// dry run, which reads only). `on_file` is called once per file, for a progress bar.
///
/// # Errors
/// `NoKey` without a key service; `Unavailable` when it cannot say which key is current or
/// the catalog fails. A file or archive that fails is counted, not raised.
pub async fn rewrap_app(
    app: &App,
    record: &AppRecord,
    dry_run: bool,
    on_file: &(dyn Fn() + Sync),
) -> Result<AppRewrap, Error> {
    let keys = app.keys()?;
    let to = current_key(keys, record).await?;
    let archives = archives(app, record).await?;
    let mut done = AppRewrap {
        app: record.name.clone(),
        to: to.clone(),
        ..AppRewrap::default()
    };
    let mut moved: BTreeMap<String, KeySlot> = BTreeMap::new();
    for (blob, file) in blobs(copies(&archives, record), &to) {
        if !needs_rewrap(&file.key, &to) {
            done.current += 1;
        } else if dry_run {
            done.rewrapped += 1;
        } else {
            match rewrap_file(app, keys, record, file).await {
                Ok(slot) => {
                    moved.insert(blob.to_owned(), slot);
                }
                Err(e) => {
                    tracing::warn!(org = %record.org, app = %record.name, file = %file.name, "re-wrap failed: {e}");
                    done.failed.push((file.name.clone(), e.to_string()));
                }
            }
        }
        on_file();
    }
    if dry_run {
        return Ok(done);
    }
    done.rewrapped = moved.len() as u64;
    if !moved.is_empty() {
        done.failed
            .extend(write_all(app, record, &moved, &to).await?);
    }
    let failed: Vec<&str> = done.failed.iter().map(|(what, _)| what.as_str()).collect();
    app.catalog
        .append_audit(&AuditEntry {
            org: record.org.clone(),
            at: app.clock.now(),
            action: AuditAction::KeysRewrapped.as_str().into(),
            actor: Actor::Cli,
            state: None,
            version: None,
            detail: serde_json::json!({"app": record.name, "rewrapped": done.rewrapped, "current": done.current, "failed": failed, "to": to, "key_backend": key_backend(&to)}),
        })
        .await?;
    Ok(done)
}

/// One file's data key wrapped by the key in use.
async fn rewrap_file(
    app: &App,
    keys: &dyn KeyService,
    record: &AppRecord,
    file: &FileRef,
) -> Result<KeySlot, Error> {
    let state = key_state(&record.name);
    let what = format!("file {} of app state {}", file.name, record.name);
    let place = Place {
        org: &record.org,
        key_state: &state,
        incarnation: &record.incarnation,
        number: file.seq,
        blob: &file.blob,
        what: &what,
    };
    let recorded = RecordedKey {
        key_id: &file.key,
        wrapped: file.wrapped_key.as_deref(),
    };
    content::rewrap(app, keys, &place, recorded).await
}

/// Writes the moved slots into every copy still behind, passing over the archives again
/// until none is: an archive sealed while the run went on may carry a copy read before the
/// record's own copies moved. What could not be written, with why.
async fn write_all(
    app: &App,
    seen: &AppRecord,
    moved: &BTreeMap<String, KeySlot>,
    to: &str,
) -> Result<Vec<(String, String)>, Error> {
    for _ in 0..ATTEMPTS {
        let Some(record) = app.catalog.app(&seen.org, &seen.name).await? else {
            return Ok(Vec::new());
        };
        if record.incarnation != seen.incarnation {
            return Ok(Vec::new());
        }
        let mut targets: Vec<Option<String>> = archives(app, &record)
            .await?
            .into_iter()
            .filter(|a| holds_behind(&a.files, moved, to))
            .map(|a| Some(a.commit_id))
            .collect();
        if holds_behind(record.listed_files(), moved, to) {
            targets.push(None);
        }
        if targets.is_empty() {
            return Ok(Vec::new());
        }
        let mut failed = Vec::new();
        for target in targets {
            if let Err(e) = write_slots(app, seen, target.as_deref(), moved, to).await {
                let place = target.map_or("the open change".to_owned(), |c| format!("archive {c}"));
                tracing::warn!(org = %seen.org, app = %seen.name, "re-wrap of {place} failed: {e}");
                failed.push((place, e.to_string()));
            }
        }
        if !failed.is_empty() {
            return Ok(failed);
        }
    }
    Ok(vec![(
        "the app state".to_owned(),
        "it kept changing during the re-wrap; run it again".to_owned(),
    )])
}

/// Writes the moved slots into one archive (`Some(commit ID)`) and the record's own copies,
/// or into the record alone (`None`), in one commit on a fresh read; nothing when every copy
/// there is already current, or the archive or the app state is gone.
async fn write_slots(
    app: &App,
    seen: &AppRecord,
    archive: Option<&str>,
    moved: &BTreeMap<String, KeySlot>,
    to: &str,
) -> Result<(), Error> {
    let (org, name) = (seen.org.as_str(), seen.name.as_str());
    for _ in 0..ATTEMPTS {
        let Some(record) = app.catalog.app(org, name).await? else {
            return Ok(());
        };
        if record.incarnation != seen.incarnation {
            return Ok(());
        }
        let sealed = match archive {
            Some(commit_id) => match app.catalog.archive(org, name, commit_id).await? {
                Some(mut archive) => archive.replace_slots(moved, to).then_some(archive),
                None => return Ok(()),
            },
            None => None,
        };
        let mut next = record.successor();
        let listed = next.replace_slots(moved, to);
        if sealed.is_none() && !listed {
            return Ok(());
        }
        let commit = AppCommit {
            expected_revision: record.revision,
            at: app.clock.now(),
            app: next,
            sealed,
            deleted: None,
            committed_blobs: Vec::new(),
            doomed_blobs: Vec::new(),
            audit: Vec::new(),
        };
        match app.catalog.commit_app(commit).await {
            Ok(()) => return Ok(()),
            Err(StoreError::Conflict) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Unavailable(
        "the app state kept changing during the re-wrap; run it again".into(),
    ))
}
