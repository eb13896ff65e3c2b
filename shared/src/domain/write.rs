//! The checks on every write, in DESIGN section 6's order, and the folding rule: writes
//! under one lock acquisition update one version.
//!
//! The size check happens as the body arrives (in the http layer); everything else is here.

use super::document::StateMeta;
use super::hold::check_hold;
use super::record::StateRecord;
use super::version::{ChangeRecord, Ended, Source, VersionRecord};
use super::{Principal, Refusal, Timestamp};

/// What a write request brings besides its principal.
#[derive(Debug, Clone)]
pub struct WriteRequest<'a> {
    /// The `?ID=` query parameter.
    pub lock_id: Option<&'a str>,
    /// The body's classification, computed before the snapshot but reported in its turn.
    pub document: &'a Result<StateMeta, Refusal>,
    /// Hex SHA-256 of the body.
    pub sha256: &'a str,
}

/// What a write does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteDecision {
    /// The same bytes at the same serial: an idempotent replay that creates nothing.
    Unchanged,
    /// Seal the body and commit it as planned.
    Write(WritePlan),
}

/// A write that passed every check, holding what the checks found, so applying it looks
/// nothing up again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritePlan {
    /// The body, found to be a state.
    pub meta: StateMeta,
    pub target: Target,
}

/// Where a planned write goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A new version with this number; `under_lock` when the write named the lock (`?ID=`),
    /// so the version stays open for the lock's later writes.
    Create { version: u64, under_lock: bool },
    /// Replace the content of the latest version, which the same lock acquisition opened.
    Replace { latest: Box<VersionRecord> },
}

impl WritePlan {
    /// The version number the content is sealed for.
    pub fn version(&self) -> u64 {
        match &self.target {
            Target::Create { version, .. } => *version,
            Target::Replace { latest } => latest.version,
        }
    }
}

/// Runs the write checks on a snapshot and decides what the write does.
///
/// # Errors
/// In order: `Locked` (someone else's live lock), `LockIdMismatch` (`?ID=` not the current
/// lock), `NotAState`, `LineageMismatch`, `StaleSerial`, `Fork`.
pub fn plan_write(
    record: &StateRecord,
    request: &WriteRequest<'_>,
    principal: &Principal,
    now: Timestamp,
) -> Result<WriteDecision, Refusal> {
    let lock = record.live_lock(now);
    match (lock, request.lock_id) {
        (Some(lock), _) if !lock.is_held_by(principal) => return Err(lock.refusal(request.lock_id)),
        (Some(lock), Some(id)) if id != lock.id() => {
            return Err(Refusal::LockIdMismatch {
                given: id.to_owned(),
                current: Some(lock.id().to_owned()),
            })
        }
        (None, Some(id)) => {
            return Err(Refusal::LockIdMismatch {
                given: id.to_owned(),
                current: None,
            })
        }
        _ => {}
    }
    check_hold(record.hold.as_ref(), principal, request.lock_id)?;
    let meta = request.document.clone()?;
    if let Some(latest) = &record.latest {
        // Against the newest serial and lineage carried in plaintext, not only the latest
        // version's: a bare OpenTofu-encrypted version in between carries neither.
        if let (Some(stored), Some(given)) = (record.checked_lineage(), &meta.lineage) {
            if stored != given {
                return Err(Refusal::LineageMismatch {
                    stored: stored.to_owned(),
                    given: given.clone(),
                });
            }
        }
        if latest.sha256 == request.sha256 {
            return Ok(WriteDecision::Unchanged);
        }
        if let (Some(stored), Some(given)) = (record.checked_serial(), meta.serial) {
            if given < stored {
                return Err(Refusal::StaleSerial { stored, given });
            }
            if given == stored {
                return Err(Refusal::Fork { serial: given });
            }
        }
    }
    // Only a `?ID=` write belongs to the lock's operation; the holder saving without an ID
    // makes a version of its own.
    let opened = lock
        .filter(|_| request.lock_id.is_some())
        .and_then(|l| l.version_opened);
    let target = match (opened, &record.latest) {
        (Some(v), Some(latest)) if latest.version == v => Target::Replace {
            latest: Box::new(latest.clone()),
        },
        _ => Target::Create {
            version: record.next_version,
            under_lock: request.lock_id.is_some(),
        },
    };
    Ok(WriteDecision::Write(WritePlan { meta, target }))
}

/// Where a body was sealed, and the facts of its plaintext a version records.
#[derive(Debug, Clone)]
pub struct SealedContent {
    pub size: u64,
    pub sha256: String,
    pub key: String,
    /// The data key as `key` wrapped it: the version's key slot.
    pub wrapped_key: Vec<u8>,
    pub blob: String,
    /// Whether the sealed bytes go into the catalog with the commit instead of a blob.
    pub inline: bool,
    /// The fingerprint of what the inventory keeps of the content (`VersionRecord::index`).
    pub index: Option<String>,
}

/// What made a new version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The backend's write; `under_lock` when it named the lock (`?ID=`).
    Write {
        under_lock: bool,
    },
    Import,
    Rollback {
        from: u64,
    },
}

/// What a write commits.
#[derive(Debug, Clone)]
pub struct WriteCommit {
    pub state: StateRecord,
    pub version: VersionRecord,
    /// The blob a replaced version no longer uses (none when its content was inline: the
    /// commit overwrites it).
    pub replaced_blob: Option<String>,
}

/// Applies a planned write to the snapshot it was planned on.
pub fn apply_write(
    record: &StateRecord,
    plan: WritePlan,
    content: SealedContent,
    principal: &Principal,
    now: Timestamp,
) -> WriteCommit {
    let latest = match plan.target {
        Target::Create {
            version,
            under_lock,
        } => {
            let origin = Origin::Write { under_lock };
            return create_version(record, version, plan.meta, content, principal, origin, now);
        }
        Target::Replace { latest } => latest,
    };
    let mut state = record.successor();
    state.carried = record
        .carried
        .then(plan.meta.serial, plan.meta.lineage.as_deref());
    let mut version = *latest;
    version.serial = plan.meta.serial;
    version.lineage = plan.meta.lineage;
    version.size = content.size;
    version.sha256 = content.sha256;
    version.key = content.key;
    version.wrapped_key = Some(content.wrapped_key);
    version.opentofu_encrypted = plan.meta.opentofu_encrypted;
    version.terraform_version = plan.meta.terraform_version;
    version.instances = plan.meta.instances;
    version.index = content.index;
    version.writer = principal.actor.clone();
    version.change.saves += 1;
    version.change.last_save_at = now;
    let old = std::mem::replace(&mut version.blob, content.blob);
    let was_inline = std::mem::replace(&mut version.inline, content.inline);
    state.latest = Some(version.clone());
    WriteCommit {
        state,
        version,
        replaced_blob: (!was_inline).then_some(old),
    }
}

/// Adds `version`, the next new version of `record`, holding the state `meta` sealed as
/// `content`. A backend write under the lock opens the version for the lock's later writes.
pub fn create_version(
    record: &StateRecord,
    version: u64,
    meta: StateMeta,
    content: SealedContent,
    principal: &Principal,
    origin: Origin,
    now: Timestamp,
) -> WriteCommit {
    let mut state = record.successor();
    let (source, change) = match origin {
        Origin::Write { under_lock } => {
            let lock = state.lock.as_mut().filter(|_| under_lock);
            let change = ChangeRecord::first_save(lock.as_deref(), now);
            if let Some(lock) = lock {
                // A version opened earlier and put behind stays open until the lock ends.
                if let Some(earlier) = lock.version_opened.replace(version) {
                    lock.earlier_versions_opened.push(earlier);
                }
            }
            (Source::Write, change)
        }
        Origin::Import => (
            Source::Import,
            ChangeRecord::single(Ended::Import, None, now),
        ),
        Origin::Rollback { from } => (
            Source::Rollback,
            ChangeRecord::single(Ended::Rollback, Some(from), now),
        ),
    };
    state.next_version = version + 1;
    state.carried = record.carried.then(meta.serial, meta.lineage.as_deref());
    let version = VersionRecord {
        version,
        serial: meta.serial,
        lineage: meta.lineage,
        size: content.size,
        sha256: content.sha256,
        source,
        key: content.key,
        wrapped_key: Some(content.wrapped_key),
        opentofu_encrypted: meta.opentofu_encrypted,
        terraform_version: meta.terraform_version,
        instances: meta.instances,
        index: content.index,
        created_at: now,
        writer: principal.actor.clone(),
        change,
        blob: content.blob,
        inline: content.inline,
    };
    state.latest = Some(version.clone());
    WriteCommit {
        state,
        version,
        replaced_blob: None,
    }
}

#[cfg(test)]
mod tests;
