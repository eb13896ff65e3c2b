//! The rules of one change to an app state: (record, request, principal, now) -> decision.
//! A lock starts a change with a commit ID that starts with its time; uploads go only to the
//! holder's open change, `.tfstate` files never to another lineage or a lower serial; a seal
//! (or an unlock, or a force-unlock) makes the change's view the newest archive and releases
//! the lock in one record; an old archive may go, never the newest.

use super::{
    AppLock, AppRecord, ArchiveRecord, Ended, FileKind, FileName, FileRef, MAX_ARCHIVE_FILES,
    MAX_CHANGE_BYTES, MAX_LOCK_TEXT,
};
use crate::domain::name::check_name;
use crate::domain::{rfc3339, Actor, Principal, Refusal, Timestamp};

/// What a lock request asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockRequest {
    /// The caller's own lock ID, so a retried lock is answered the same; else one is made.
    pub lock_id: Option<String>,
    pub who: String,
    pub info: String,
}

/// What a lock request gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockDecision {
    /// The lock is taken: the record to commit.
    Granted(Box<AppRecord>),
    /// The caller already holds this very lock (a retried request): nothing to commit.
    AlreadyYours(AppLock),
}

/// The commit ID of a change locked at `now`: its milliseconds, `-`, then `suffix`. Never
/// at or before the newest archive's time, so commit IDs keep sorting in the order changes
/// started even when two servers' clocks disagree.
pub fn commit_id(record: &AppRecord, now: Timestamp, suffix: &str) -> String {
    let now_ms = u64::try_from(now.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
    let after = record
        .newest
        .as_ref()
        .and_then(|a| a.commit_id.split_once('-'))
        .and_then(|(ms, _)| ms.parse::<u64>().ok())
        .map_or(0, |ms| ms.saturating_add(1));
    format!("{:013}-{suffix}", now_ms.max(after))
}

/// Decides a lock. `fresh_id` is the lock ID used when the request names none; `suffix`
/// ends the commit ID.
///
/// # Errors
/// `InvalidName` for a lock ID outside the naming rule, `InvalidRequest` for a `who` or
/// `info` too long, `AppLocked` while someone else's lock (or another lock of the caller's)
/// is held.
pub fn decide_lock(
    record: &AppRecord,
    request: &LockRequest,
    principal: &Principal,
    now: Timestamp,
    fresh_id: &str,
    suffix: &str,
) -> Result<LockDecision, Refusal> {
    if let Some(id) = &request.lock_id {
        check_name("lock ID", id)?;
    }
    for (field, text) in [("who", &request.who), ("info", &request.info)] {
        if text.chars().count() > MAX_LOCK_TEXT {
            return Err(Refusal::InvalidRequest {
                reason: format!("{field} is at most {MAX_LOCK_TEXT} characters"),
            });
        }
    }
    if let Some(lock) = &record.lock {
        if lock.holder == principal.actor && request.lock_id.as_deref() == Some(&lock.lock_id) {
            return Ok(LockDecision::AlreadyYours(lock.clone()));
        }
        return Err(locked(record, lock));
    }
    let mut next = record.successor();
    next.lock = Some(AppLock {
        lock_id: request
            .lock_id
            .clone()
            .unwrap_or_else(|| fresh_id.to_owned()),
        commit_id: commit_id(record, now, suffix),
        holder: principal.actor.clone(),
        who: request.who.clone(),
        info: request.info.clone(),
        since: now,
        uploads: Default::default(),
    });
    Ok(LockDecision::Granted(Box::new(next)))
}

fn locked(record: &AppRecord, lock: &AppLock) -> Refusal {
    Refusal::AppLocked {
        app: record.name.clone(),
        lock: Box::new(lock.public()),
        holder: format!("{} since {}", lock.holder.describe(), rfc3339(lock.since)),
    }
}

/// The caller's own open change, named by its lock ID.
///
/// # Errors
/// `AppLocked` when someone else holds the lock, `LockIdMismatch` when the caller's lock
/// is another or nothing is locked.
pub fn holders_lock<'a>(
    record: &'a AppRecord,
    lock_id: &str,
    principal: &Principal,
) -> Result<&'a AppLock, Refusal> {
    let mismatch = |current: Option<&str>| Refusal::LockIdMismatch {
        given: lock_id.to_owned(),
        current: current.map(str::to_owned),
    };
    let lock = record.lock.as_ref().ok_or_else(|| mismatch(None))?;
    if lock.holder != principal.actor {
        return Err(locked(record, lock));
    }
    if lock.lock_id != lock_id {
        return Err(mismatch(Some(&lock.lock_id)));
    }
    Ok(lock)
}

/// What a seal of `lock` would archive now: the newest archive's state files (every file
/// but its journal, which belongs to its own change), this change's uploads over them.
pub fn change_files(newest: Option<&ArchiveRecord>, lock: &AppLock) -> Vec<FileRef> {
    let carried = newest
        .into_iter()
        .flat_map(|a| &a.files)
        .filter(|f| !matches!(f.kind, FileKind::Journal { .. }))
        .filter(|f| !lock.uploads.contains_key(&f.name));
    let mut files: Vec<FileRef> = carried.chain(lock.uploads.values()).cloned().collect();
    files.sort_by(|a, b| a.name.cmp(&b.name));
    files
}

/// What an upload's body turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadFacts {
    pub size: u64,
    /// A `.tfstate` file's lineage and serial (when the document carries them).
    pub lineage: Option<String>,
    pub serial: Option<u64>,
}

/// Checks an upload of `file` to the caller's open change.
///
/// # Errors
/// What [`holders_lock`] refuses; `LineageMismatch` or `StaleSerial` for a `.tfstate` file
/// of another configuration or older than the one it replaces (the change's earlier upload,
/// else the newest archive's); `ChangeTooLarge` past the archive's files or the change's
/// bytes.
pub fn check_upload(
    record: &AppRecord,
    lock_id: &str,
    principal: &Principal,
    file: &FileName,
    facts: &UploadFacts,
) -> Result<(), Refusal> {
    let lock = holders_lock(record, lock_id, principal)?;
    let files = change_files(record.newest.as_ref(), lock);
    let replaced = files.iter().find(|f| f.name == file.name);
    if let (FileKind::Tfstate, Some(old)) = (&file.kind, replaced) {
        if let (Some(stored), Some(given)) = (&old.lineage, &facts.lineage) {
            if stored != given {
                return Err(Refusal::LineageMismatch {
                    stored: stored.clone(),
                    given: given.clone(),
                });
            }
        }
        if let (Some(stored), Some(given)) = (old.serial, facts.serial) {
            if given < stored {
                return Err(Refusal::StaleSerial { stored, given });
            }
        }
    }
    if replaced.is_none() && files.len() >= MAX_ARCHIVE_FILES {
        return Err(Refusal::ChangeTooLarge {
            reason: format!("an archive holds at most {MAX_ARCHIVE_FILES} files, and this change's would hold {}", files.len() + 1),
        });
    }
    let uploaded: u64 = lock
        .uploads
        .values()
        .filter(|f| f.name != file.name)
        .map(|f| f.size)
        .sum();
    if uploaded.saturating_add(facts.size) > MAX_CHANGE_BYTES {
        return Err(Refusal::ChangeTooLarge {
            reason: format!("one change uploads at most {MAX_CHANGE_BYTES} bytes; this upload would take it to {}", uploaded.saturating_add(facts.size)),
        });
    }
    Ok(())
}

/// The record with `file` as the open change's upload of its name, and the blob of the
/// upload it replaces (no archive holds that one).
///
/// # Panics
/// Never on a record [`check_upload`] passed: it has an open change.
pub fn apply_upload(record: &AppRecord, file: FileRef) -> (AppRecord, Option<String>) {
    let mut next = record.successor();
    next.next_seq = next.next_seq.max(file.seq + 1);
    let lock = next
        .lock
        .as_mut()
        .expect("check_upload passed: the change is open");
    let replaced = lock.uploads.insert(file.name.clone(), file).map(|f| f.blob);
    (next, replaced)
}

/// What a seal (or an unlock) does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SealDecision {
    /// The record to commit (lock released, the archive its newest) and the archive.
    Seal(Box<AppRecord>, ArchiveRecord),
    /// This lock's change is already the newest archive (a retried request).
    AlreadySealed(ArchiveRecord),
}

/// Whether `archive` is what a seal or an unlock (`ended`) of `lock_id` by `principal`
/// sealed: the answer to that request sent again, however many changes were sealed since.
/// Only the same ending again: a change force-unlocked meanwhile was not sealed by its
/// holder, and a seal after a give-up (or the other way round) is another request.
pub fn is_retry_of(
    archive: &ArchiveRecord,
    lock_id: &str,
    principal: &Principal,
    ended: Ended,
) -> bool {
    archive.lock_id == lock_id && archive.ended == ended && archive.holder == principal.actor
}

/// Whether a refusal of [`decide_seal`] may still be a retry of a seal that went through
/// before a newer change was sealed: then an older archive (which only the store can list)
/// may be [`is_retry_of`] the request.
pub fn may_be_older_retry(refusal: &Refusal) -> bool {
    matches!(
        refusal,
        Refusal::LockIdMismatch { .. } | Refusal::AppLocked { .. }
    )
}

/// Decides a seal or an unlock (`ended`) of the caller's change.
///
/// # Errors
/// What [`holders_lock`] refuses, unless the lock's change is already the newest archive,
/// ended the way asked (an older archive is the caller's to look for: [`may_be_older_retry`]).
pub fn decide_seal(
    record: &AppRecord,
    lock_id: &str,
    principal: &Principal,
    ended: Ended,
    now: Timestamp,
) -> Result<SealDecision, Refusal> {
    if let Some(newest) = &record.newest {
        let released = record.lock.as_ref().is_none_or(|l| l.lock_id != lock_id);
        if released && is_retry_of(newest, lock_id, principal, ended) {
            return Ok(SealDecision::AlreadySealed(newest.clone()));
        }
    }
    let lock = holders_lock(record, lock_id, principal)?;
    let (next, archive) = seal(record, lock, ended, &principal.actor, now);
    Ok(SealDecision::Seal(Box::new(next), archive))
}

/// Seals `lock`'s change as the newest archive and releases the lock, in one record.
pub fn seal(
    record: &AppRecord,
    lock: &AppLock,
    ended: Ended,
    by: &Actor,
    now: Timestamp,
) -> (AppRecord, ArchiveRecord) {
    let archive = ArchiveRecord {
        commit_id: lock.commit_id.clone(),
        lock_id: lock.lock_id.clone(),
        ended,
        holder: lock.holder.clone(),
        who: lock.who.clone(),
        info: lock.info.clone(),
        locked_at: lock.since,
        sealed_at: now,
        sealed_by: by.clone(),
        files: change_files(record.newest.as_ref(), lock),
    };
    let mut next = record.successor();
    next.lock = None;
    next.newest = Some(archive.clone());
    next.archives += 1;
    (next, archive)
}

/// Checks that an archive may be deleted: any but the newest.
///
/// # Errors
/// `NewestArchive` for the newest: it is the sealed state.
pub fn check_delete(record: &AppRecord, commit_id: &str) -> Result<(), Refusal> {
    if record
        .newest
        .as_ref()
        .is_some_and(|n| n.commit_id == commit_id)
    {
        return Err(Refusal::NewestArchive {
            commit_id: commit_id.to_owned(),
        });
    }
    Ok(())
}

/// The blobs deleting `archive` frees: those neither remaining neighbour holds. A file
/// carried from change to change keeps its blob, so the archives holding one blob are
/// consecutive; a blob is still held by a remaining archive exactly when the nearest older or
/// the nearest newer one holds it.
pub fn freed_blobs(
    archive: &ArchiveRecord,
    older: Option<&ArchiveRecord>,
    newer: Option<&ArchiveRecord>,
) -> Vec<String> {
    let held = |blob: &str| {
        [older, newer]
            .into_iter()
            .flatten()
            .any(|a| a.files.iter().any(|f| f.blob == blob))
    };
    archive
        .files
        .iter()
        .filter(|f| !held(&f.blob))
        .map(|f| f.blob.clone())
        .collect()
}

/// The record after deleting one of its archives.
pub fn after_delete(record: &AppRecord) -> AppRecord {
    let mut next = record.successor();
    next.archives = next.archives.saturating_sub(1);
    next
}

#[cfg(test)]
mod tests;
