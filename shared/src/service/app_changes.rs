//! An app state's changes (Octo's remote state, docs/octo.md): lock, upload under the lock,
//! seal or give up, force-unlock. Each reads the app state's record, asks `domain::app` for a
//! decision, seals and stores any file first, and commits with one compare-and-swap; a seal
//! and the lock's release are one commit, so either both happen or neither does.

use std::sync::Arc;

use serde::de::IgnoredAny;
use sha2::{Digest, Sha256};

use super::content::{self, open_whole, Keep, Place, RecordedKey};
use super::retry::{until_done, Attempt, Carried};
use super::{App, Error};
use crate::domain::app::change::{
    apply_upload, check_upload, decide_lock, decide_seal, holders_lock, is_retry_of,
    may_be_older_retry, seal as seal_change, LockDecision, LockRequest, SealDecision, UploadFacts,
};
use crate::domain::app::{AppLock, AppRecord, ArchiveRecord, Ended, FileKind, FileName, FileRef};
use crate::domain::audit::AuditAction;
use crate::domain::document::sniff;
use crate::domain::name::{check_name, StateName};
use crate::domain::permission::Permission;
use crate::domain::{Principal, Refusal, Timestamp};
use crate::ids::{hex, new_id};
use crate::paging::{self, Page};
use crate::ports::{AppCommit, AuditEntry, KeyService, OpenedBlob, StoreError};

/// The key context of an app state's files: `app:<name>` can never be a state's name (a
/// name holds no `:`), so an app state's data keys never open a state's content.
pub(super) fn key_state(name: &str) -> String {
    format!("app:{name}")
}

/// The blob key of a file: ids only, never a name.
fn blob_key(org: &str, incarnation: &str, seq: u64) -> String {
    format!("orgs/{org}/apps/{incarnation}/{seq}-{}", new_id())
}

/// The app state's record, or the record of one not stored yet.
pub(super) async fn snapshot(
    app: &App,
    org: &str,
    name: &StateName,
    now: Timestamp,
) -> Result<AppRecord, Error> {
    Ok(app
        .catalog
        .app(org, name.as_str())
        .await?
        .unwrap_or_else(|| AppRecord::fresh(org, name.as_str(), &new_id(), now)))
}

/// Commits `commit`: done with `answer`, or a lost race to decide again.
async fn commit<T>(app: &App, commit: AppCommit, answer: T) -> Result<Attempt<T>, Error> {
    match app.catalog.commit_app(commit).await {
        Ok(()) => Ok(Attempt::Done(answer)),
        Err(StoreError::Conflict) => Ok(Attempt::LostRace),
        Err(e) => Err(e.into()),
    }
}

fn commit_of(snapshot: &AppRecord, next: AppRecord, now: Timestamp) -> AppCommit {
    AppCommit {
        expected_revision: snapshot.revision,
        at: now,
        app: next,
        sealed: None,
        deleted: None,
        committed_blobs: Vec::new(),
        doomed_blobs: Vec::new(),
        audit: Vec::new(),
    }
}

/// An audit entry about an app state: its name is in the detail, since the entry's state is
/// a Terraform state's.
pub(super) fn entry(
    principal: &Principal,
    name: &StateName,
    action: AuditAction,
    mut detail: serde_json::Value,
    now: Timestamp,
) -> AuditEntry {
    detail["app"] = serde_json::Value::String(name.to_string());
    AuditEntry {
        org: principal.org.clone(),
        at: now,
        action: action.as_str().into(),
        actor: principal.actor.clone(),
        state: None,
        version: None,
        detail,
    }
}

/// Checks a lock ID or commit ID from a request against the naming rule.
///
/// # Errors
/// `InvalidName` naming what is wrong.
pub fn check_id(kind: &'static str, raw: &str) -> Result<(), Refusal> {
    check_name(kind, raw)
}

/// Takes the app state's lock, starting a change.
///
/// # Errors
/// `Refused`: without tf_state:write, `AppLocked` while another lock is held, `InvalidName`
/// or `InvalidRequest` for a bad request.
pub async fn lock(
    app: &App,
    principal: &Principal,
    name: &StateName,
    request: &LockRequest,
) -> Result<AppLock, Error> {
    app.require(principal, Permission::Write).await?;
    until_done(|| async {
        let now = app.clock.now();
        let snapshot = snapshot(app, &principal.org, name, now).await?;
        let suffix = &new_id()[..8];
        match decide_lock(&snapshot, request, principal, now, &new_id(), suffix)? {
            LockDecision::AlreadyYours(lock) => Ok(Attempt::Done(lock)),
            LockDecision::Granted(next) => {
                // `decide_lock` grants by setting the lock on the record it returns.
                let lock = next.lock.clone().expect("a granted lock is set");
                commit(app, commit_of(&snapshot, *next, now), lock).await
            }
        }
    })
    .await
}

/// What an upload's body is, checked off the async threads: its digest and, for a
/// `.tfstate` file, its lineage and serial.
async fn examine(
    file: &FileName,
    body: Vec<u8>,
) -> Result<(Arc<Vec<u8>>, UploadFacts, String), Error> {
    let (kind, name) = (file.kind.clone(), file.name.clone());
    tokio::task::spawn_blocking(move || {
        let sha256 = hex(&Sha256::digest(&body));
        let mut facts = UploadFacts {
            size: body.len() as u64,
            lineage: None,
            serial: None,
        };
        match kind {
            FileKind::Tfstate => {
                let meta = sniff(&body)?;
                facts.lineage = meta.lineage;
                facts.serial = meta.serial;
            }
            FileKind::Journal { .. } | FileKind::Json => check_json(&name, &body)?,
        }
        Ok((Arc::new(body), facts, sha256))
    })
    .await
    .map_err(|e| Error::Unavailable(format!("validation task failed: {e}")))?
}

/// Valid JSON throughout, without building a tree.
fn check_json(name: &str, body: &[u8]) -> Result<(), Refusal> {
    let refuse = |reason: String| Refusal::NotJson {
        name: name.to_owned(),
        reason,
    };
    // Skipped strings are not checked for UTF-8 by the parser: check the whole body once.
    if let Err(e) = std::str::from_utf8(body) {
        return Err(refuse(format!("invalid UTF-8 at byte {}", e.valid_up_to())));
    }
    serde_json::from_slice::<IgnoredAny>(body)
        .map(|_| ())
        .map_err(|e| {
            refuse(format!(
                "invalid JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            ))
        })
}

/// A sealed file, remembered across compare-and-swap retries so it is sealed once.
struct SealedFile {
    incarnation: String,
    seq: u64,
    blob: String,
    sealed: content::Sealed,
}

/// Where a file of `record` is sealed.
fn place<'a>(
    record: &'a AppRecord,
    key_state: &'a str,
    seq: u64,
    blob: &'a str,
    what: &'a str,
) -> Place<'a> {
    Place {
        org: &record.org,
        key_state,
        incarnation: &record.incarnation,
        number: seq,
        blob,
        what,
    }
}

/// Seals `body` under a fresh data key into its blob, pending until a commit names it.
async fn seal_file(
    app: &App,
    keys: &dyn KeyService,
    record: &AppRecord,
    body: &Arc<Vec<u8>>,
    now: Timestamp,
) -> Result<SealedFile, Error> {
    let (state, seq) = (key_state(&record.name), record.next_seq);
    let blob = blob_key(&record.org, &record.incarnation, seq);
    let what = format!("file {seq} of app state {}", record.name);
    let place = place(record, &state, seq, &blob, &what);
    let nothing = async { Ok(()) };
    let ((), sealed) = content::seal(app, keys, &place, body, Keep::Blob, now, nothing).await?;
    Ok(SealedFile {
        incarnation: record.incarnation.clone(),
        seq,
        blob,
        sealed,
    })
}

/// Opens a stored file of `record`, through the key cache as a version is: a file read again
/// (every Octo command reads the newest seal) calls no key service again.
pub(super) async fn open_file(
    app: &App,
    keys: &dyn KeyService,
    record: &AppRecord,
    file: &FileRef,
) -> Result<Vec<u8>, Error> {
    let what = format!("file {} of app state {}", file.name, record.name);
    let object = app.blobs.get(&file.blob).await?.ok_or_else(|| {
        Error::Damaged(format!(
            "the content of {what} is missing from the blob store"
        ))
    })?;
    let state = key_state(&record.name);
    let place = place(record, &state, file.seq, &file.blob, &what);
    let recorded = RecordedKey {
        key_id: &file.key,
        wrapped: file.wrapped_key.as_deref(),
    };
    let opening = content::opening(app, keys, &place, recorded, OpenedBlob::Whole(object)).await?;
    open_whole(opening, file.size, Vec::new(), &what).await
}

/// Uploads one file to the caller's open change, replacing its earlier upload of that name.
///
/// # Errors
/// `Refused`: without tf_state:write, `InvalidFileName`, `NotAState`, `NotJson`,
/// `AppLocked`, `LockIdMismatch`, `LineageMismatch`, `StaleSerial`, `ChangeTooLarge`.
pub async fn upload(
    app: &App,
    principal: &Principal,
    name: &StateName,
    lock_id: &str,
    file: &str,
    body: Vec<u8>,
) -> Result<FileRef, Error> {
    app.require(principal, Permission::Write).await?;
    check_id("lock ID", lock_id)?;
    let keys = app.keys()?;
    // The lock first: a request under no lock of the caller's is answered about the lock,
    // whatever its file, and its body is never read.
    let now = app.clock.now();
    holders_lock(
        &snapshot(app, &principal.org, name, now).await?,
        lock_id,
        principal,
    )?;
    let file = FileName::parse(file)?;
    let (body, facts, sha256) = examine(&file, body).await?;
    let sealed: Carried<SealedFile> = Carried::default();
    until_done(|| async {
        let now = app.clock.now();
        let snapshot = snapshot(app, &principal.org, name, now).await?;
        check_upload(&snapshot, lock_id, principal, &file, &facts)?;
        let blob = match sealed.take() {
            Some(blob) if blob.incarnation == snapshot.incarnation => blob,
            _ => seal_file(app, keys, &snapshot, &body, now).await?,
        };
        let change = snapshot.lock.as_ref().map(|l| l.commit_id.clone());
        let stored = FileRef {
            name: file.name.clone(),
            kind: file.kind.clone(),
            size: facts.size,
            sha256: sha256.clone(),
            lineage: facts.lineage.clone(),
            serial: facts.serial,
            uploaded_in: change.unwrap_or_default(),
            uploaded_at: now,
            blob: blob.blob.clone(),
            seq: blob.seq,
            key: blob.sealed.key_id.clone(),
            wrapped_key: Some(blob.sealed.wrapped_key.clone()),
        };
        let (next, replaced) = apply_upload(&snapshot, stored.clone());
        let changes = AppCommit {
            committed_blobs: vec![blob.blob.clone()],
            doomed_blobs: replaced.into_iter().collect(),
            ..commit_of(&snapshot, next, now)
        };
        sealed.put(blob);
        commit(app, changes, stored).await
    })
    .await
}

/// Seals the caller's change as the newest archive and releases the lock (`Sealed`), or
/// gives it up (`GivenUp`), sealing what it uploaded all the same. A retry of a seal that
/// went through answers the same archive, for as long as that archive is kept.
///
/// # Errors
/// `Refused`: without tf_state:write, `AppLocked`, `LockIdMismatch`.
pub async fn seal(
    app: &App,
    principal: &Principal,
    name: &StateName,
    lock_id: &str,
    ended: Ended,
) -> Result<ArchiveRecord, Error> {
    app.require(principal, Permission::Write).await?;
    check_id("lock ID", lock_id)?;
    until_done(|| async {
        let now = app.clock.now();
        let snapshot = snapshot(app, &principal.org, name, now).await?;
        match decide_seal(&snapshot, lock_id, principal, ended, now) {
            Ok(SealDecision::AlreadySealed(archive)) => Ok(Attempt::Done(archive)),
            Ok(SealDecision::Seal(next, archive)) => {
                let changes = sealed_commit(principal, name, &snapshot, *next, &archive, now);
                commit(app, changes, archive).await
            }
            Err(refusal) if may_be_older_retry(&refusal) => {
                match sealed_before(app, principal, name, lock_id, ended).await? {
                    Some(archive) => Ok(Attempt::Done(archive)),
                    None => Err(refusal.into()),
                }
            }
            Err(refusal) => Err(refusal.into()),
        }
    })
    .await
}

/// The archive a seal (or an unlock) of `lock_id` sealed before newer changes were sealed
/// over it, if it still exists: a retry whose answer was lost is answered with it for as
/// long as it is kept. Newest first, page by page, since a retry comes soon after its seal;
/// only a refused seal or unlock looks.
async fn sealed_before(
    app: &App,
    principal: &Principal,
    name: &StateName,
    lock_id: &str,
    ended: Ended,
) -> Result<Option<ArchiveRecord>, Error> {
    const PAGE: usize = 100;
    let org = principal.org.as_str();
    let found = paging::walk(
        move |before: Option<String>| async move {
            let page = app
                .catalog
                .archives(org, name.as_str(), before.as_deref(), PAGE)
                .await;
            page.map(|archives| Page::of(archives, PAGE, |a| a.commit_id.clone()))
        },
        |page| {
            page.into_iter()
                .find(|a| is_retry_of(a, lock_id, principal, ended))
        },
    )
    .await?;
    Ok(found)
}

/// The commit of a sealed change, audited.
fn sealed_commit(
    principal: &Principal,
    name: &StateName,
    snapshot: &AppRecord,
    next: AppRecord,
    archive: &ArchiveRecord,
    now: Timestamp,
) -> AppCommit {
    let detail = serde_json::json!({
        "commit_id": archive.commit_id,
        "ended": archive.ended.as_str(),
        "files": archive.files.len(),
    });
    AppCommit {
        sealed: Some(archive.clone()),
        audit: vec![entry(principal, name, AuditAction::AppSealed, detail, now)],
        ..commit_of(snapshot, next, now)
    }
}

/// Releases whatever lock is held, sealing its change as `force_unlocked` (audited). `None`
/// when nothing was held.
///
/// # Errors
/// `Refused`: without tf_state:manage, `NotFound` for an app state that does not exist.
pub async fn force_unlock(
    app: &App,
    principal: &Principal,
    name: &StateName,
) -> Result<Option<(AppLock, ArchiveRecord)>, Error> {
    app.require(principal, Permission::Manage).await?;
    until_done(|| async {
        let now = app.clock.now();
        let snapshot = existing(app, principal, name).await?;
        let Some(lock) = snapshot.lock.clone() else {
            return Ok(Attempt::Done(None));
        };
        let (next, archive) = seal_change(
            &snapshot,
            &lock,
            Ended::ForceUnlocked,
            &principal.actor,
            now,
        );
        let mut changes = sealed_commit(principal, name, &snapshot, next, &archive, now);
        let detail = serde_json::json!({"commit_id": lock.commit_id, "holder": lock.holder});
        changes.audit.push(entry(
            principal,
            name,
            AuditAction::AppForceUnlocked,
            detail,
            now,
        ));
        commit(app, changes, Some((lock, archive))).await
    })
    .await
}

/// An app state that exists in the caller's org.
///
/// # Errors
/// `NotFound` otherwise, the same whether it exists in another org or not.
pub(super) async fn existing(
    app: &App,
    principal: &Principal,
    name: &StateName,
) -> Result<AppRecord, Error> {
    app.catalog
        .app(&principal.org, name.as_str())
        .await?
        .filter(AppRecord::is_visible)
        .ok_or_else(|| {
            Refusal::NotFound {
                what: format!("app state {name}"),
            }
            .into()
        })
}
