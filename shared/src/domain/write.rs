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
mod tests {
    use super::*;
    use crate::domain::document::sniff;
    use crate::domain::lock::parse_lock;
    use crate::domain::locking::{decide_lock, LockDecision};
    use crate::domain::permission::Role;
    use crate::domain::version::Ended;
    use crate::domain::Actor;
    use time::macros::datetime;

    const NOW: Timestamp = datetime!(2026-11-30 01:00:00 UTC);

    fn user(name: &str) -> Principal {
        Principal {
            org: "acme".into(),
            role: Role::Operator,
            actor: Actor::User { user: name.into() },
            step: None,
        }
    }

    fn state_doc(serial: u64, lineage: &str, extra: &str) -> String {
        format!(
            r#"{{"version":4,"serial":{serial},"lineage":"{lineage}","outputs":{{"x":"{extra}"}}}}"#
        )
    }

    /// What a write did, as the tests compare it.
    #[derive(Debug, PartialEq, Eq)]
    enum Wrote {
        Unchanged,
        Create { version: u64 },
        Replace { version: u64 },
    }

    /// Plans and applies a write of `body`, as the service does, returning what it did.
    fn write(
        record: &mut StateRecord,
        who: &Principal,
        lock_id: Option<&str>,
        body: &str,
    ) -> Result<Wrote, Refusal> {
        let document = sniff(body.as_bytes());
        let sha = format!("{:x}", md5_like(body));
        let request = WriteRequest {
            lock_id,
            document: &document,
            sha256: &sha,
        };
        let plan = match plan_write(record, &request, who, NOW)? {
            WriteDecision::Unchanged => return Ok(Wrote::Unchanged),
            WriteDecision::Write(plan) => plan,
        };
        let wrote = match &plan.target {
            Target::Create { version, .. } => Wrote::Create { version: *version },
            Target::Replace { latest } => Wrote::Replace {
                version: latest.version,
            },
        };
        let content = SealedContent {
            size: body.len() as u64,
            sha256: sha,
            key: "platform:test".into(),
            wrapped_key: vec![7; 40],
            blob: format!("blob-{}", record.revision),
            inline: false,
        };
        *record = apply_write(record, plan, content, who, NOW).state;
        Ok(wrote)
    }

    /// A stand-in digest for tests: distinct bodies get distinct values.
    fn md5_like(body: &str) -> u128 {
        body.bytes().fold(0xcbf29ce484222325u128, |h, b| {
            (h ^ b as u128).wrapping_mul(0x100000001b3)
        })
    }

    fn lock(record: &mut StateRecord, who: &Principal, id: &str) {
        let doc = parse_lock(format!(r#"{{"ID":"{id}"}}"#).as_bytes()).unwrap();
        let LockDecision::Granted(lock) = decide_lock(record, doc, who, NOW).unwrap() else {
            panic!("expected a grant")
        };
        record.lock = Some(*lock);
    }

    fn fresh() -> StateRecord {
        StateRecord::fresh("acme", "net", "inc", NOW)
    }

    #[test]
    fn three_writes_under_one_lock_make_one_version_with_the_last_serial() {
        let alice = user("alice");
        let mut r = fresh();
        lock(&mut r, &alice, "L1");
        assert_eq!(
            write(&mut r, &alice, Some("L1"), &state_doc(1, "l", "a")),
            Ok(Wrote::Create { version: 1 })
        );
        assert_eq!(
            write(&mut r, &alice, Some("L1"), &state_doc(2, "l", "b")),
            Ok(Wrote::Replace { version: 1 })
        );
        assert_eq!(
            write(&mut r, &alice, Some("L1"), &state_doc(3, "l", "c")),
            Ok(Wrote::Replace { version: 1 })
        );
        let latest = r.latest.unwrap();
        assert_eq!(
            (latest.version, latest.serial, latest.change.saves),
            (1, Some(3), 3)
        );
        assert_eq!(latest.change.ended, Ended::Open);
        assert_eq!(latest.change.lock.unwrap().id, "L1");
    }

    /// A replaced blob is listed for deletion; replaced inline content goes with the
    /// commit that overwrites it, so there is nothing to delete.
    #[test]
    fn replacing_an_inline_version_leaves_no_blob_to_delete() {
        let alice = user("alice");
        let mut r = fresh();
        lock(&mut r, &alice, "L1");
        write(&mut r, &alice, Some("L1"), &state_doc(1, "l", "a")).unwrap();
        let replace = |r: &StateRecord, serial: u64, inline: bool| {
            let body = state_doc(serial, "l", "x");
            let document = sniff(body.as_bytes());
            let sha = format!("{:x}", md5_like(&body));
            let request = WriteRequest {
                lock_id: Some("L1"),
                document: &document,
                sha256: &sha,
            };
            let Ok(WriteDecision::Write(plan)) = plan_write(r, &request, &alice, NOW) else {
                panic!("expected a write")
            };
            let content = SealedContent {
                size: body.len() as u64,
                sha256: sha.clone(),
                key: "platform:test".into(),
                wrapped_key: vec![7; 40],
                blob: format!("blob-{serial}"),
                inline,
            };
            apply_write(r, plan, content, &alice, NOW)
        };
        let to_inline = replace(&r, 2, true);
        assert_eq!(to_inline.replaced_blob.as_deref(), Some("blob-0"));
        assert!(to_inline.version.inline);
        let back_to_blob = replace(&to_inline.state, 3, false);
        assert_eq!(back_to_blob.replaced_blob, None);
        assert!(!back_to_blob.version.inline);
    }

    #[test]
    fn relocking_with_the_same_id_starts_a_new_version() {
        let alice = user("alice");
        let mut r = fresh();
        lock(&mut r, &alice, "L1");
        write(&mut r, &alice, Some("L1"), &state_doc(1, "l", "a")).unwrap();
        r.lock = None;
        lock(&mut r, &alice, "L1");
        assert_eq!(
            write(&mut r, &alice, Some("L1"), &state_doc(2, "l", "b")),
            Ok(Wrote::Create { version: 2 })
        );
    }

    #[test]
    fn a_holders_write_without_id_is_its_own_version_and_the_next_id_write_another() {
        let alice = user("alice");
        let mut r = fresh();
        lock(&mut r, &alice, "L1");
        write(&mut r, &alice, Some("L1"), &state_doc(1, "l", "a")).unwrap();
        assert_eq!(
            write(&mut r, &alice, None, &state_doc(2, "l", "b")),
            Ok(Wrote::Create { version: 2 })
        );
        assert_eq!(
            r.latest.as_ref().unwrap().change.ended,
            Ended::UnlockedWrite
        );
        assert_eq!(
            write(&mut r, &alice, Some("L1"), &state_doc(3, "l", "c")),
            Ok(Wrote::Create { version: 3 })
        );
        assert_eq!(
            write(&mut r, &alice, Some("L1"), &state_doc(4, "l", "d")),
            Ok(Wrote::Replace { version: 3 })
        );
    }

    #[test]
    fn someone_elses_lock_refuses_before_anything_else() {
        let mut r = fresh();
        lock(&mut r, &user("alice"), "L1");
        let err = write(&mut r, &user("bob"), Some("L1"), "not json").unwrap_err();
        assert!(matches!(err, Refusal::Locked { ref lock_id, .. } if lock_id == "L1"));
        let err = write(&mut r, &user("bob"), None, &state_doc(1, "l", "")).unwrap_err();
        assert!(matches!(err, Refusal::Locked { .. }));
    }

    #[test]
    fn an_id_must_name_the_current_lock() {
        let alice = user("alice");
        let mut r = fresh();
        assert!(matches!(
            write(&mut r, &alice, Some("GONE"), &state_doc(1, "l", "")),
            Err(Refusal::LockIdMismatch { current: None, .. })
        ));
        lock(&mut r, &alice, "L1");
        assert!(matches!(
            write(&mut r, &alice, Some("L0"), &state_doc(1, "l", "")),
            Err(Refusal::LockIdMismatch {
                current: Some(_),
                ..
            })
        ));
    }

    #[test]
    fn a_bad_document_is_refused_after_the_lock_checks() {
        let mut r = fresh();
        assert!(matches!(
            write(&mut r, &user("a"), None, "[]"),
            Err(Refusal::NotAState { .. })
        ));
    }

    #[test]
    fn lineage_then_serial_are_checked_against_the_latest_version() {
        let a = user("a");
        let mut r = fresh();
        write(&mut r, &a, None, &state_doc(5, "l", "x")).unwrap();
        assert!(matches!(
            write(&mut r, &a, None, &state_doc(9, "other", "")),
            Err(Refusal::LineageMismatch { .. })
        ));
        assert_eq!(
            write(&mut r, &a, None, &state_doc(4, "l", "")),
            Err(Refusal::StaleSerial {
                stored: 5,
                given: 4
            })
        );
        assert_eq!(
            write(&mut r, &a, None, &state_doc(5, "l", "different")),
            Err(Refusal::Fork { serial: 5 })
        );
        assert_eq!(
            write(&mut r, &a, None, &state_doc(5, "l", "x")),
            Ok(Wrote::Unchanged)
        );
        assert_eq!(
            write(&mut r, &a, None, &state_doc(6, "l", "y")),
            Ok(Wrote::Create { version: 2 })
        );
    }

    #[test]
    fn any_lineage_is_accepted_when_none_is_stored() {
        let mut r = fresh();
        assert!(write(&mut r, &user("a"), None, &state_doc(1, "first", "")).is_ok());
    }

    #[test]
    fn encrypted_states_are_checked_when_they_carry_serial_and_lineage() {
        let a = user("a");
        let mut r = fresh();
        let enc = |serial: u64, data: &str| {
            format!(
                r#"{{"serial":{serial},"lineage":"l","meta":{{}},"encrypted_data":"{data}","encryption_version":"v0"}}"#
            )
        };
        write(&mut r, &a, None, &enc(3, "AA")).unwrap();
        assert!(r.latest.as_ref().unwrap().opentofu_encrypted);
        assert_eq!(
            write(&mut r, &a, None, &enc(2, "BB")),
            Err(Refusal::StaleSerial {
                stored: 3,
                given: 2
            })
        );
        let bare = r#"{"encrypted_data":"CC","encryption_version":"v0"}"#;
        assert_eq!(
            write(&mut r, &a, None, bare),
            Ok(Wrote::Create { version: 2 })
        );
    }

    #[test]
    fn a_write_after_a_bare_encrypted_version_is_checked_against_the_last_facts_carried() {
        let a = user("a");
        let mut r = fresh();
        write(&mut r, &a, None, &state_doc(3, "l", "")).unwrap();
        let bare = r#"{"encrypted_data":"CC","encryption_version":"v0"}"#;
        write(&mut r, &a, None, bare).unwrap();
        assert_eq!(r.latest.as_ref().unwrap().serial, None);
        assert_eq!(
            write(&mut r, &a, None, &state_doc(2, "l", "")),
            Err(Refusal::StaleSerial {
                stored: 3,
                given: 2
            })
        );
        assert_eq!(
            write(&mut r, &a, None, &state_doc(3, "l", "other")),
            Err(Refusal::Fork { serial: 3 })
        );
        assert_eq!(
            write(&mut r, &a, None, &state_doc(4, "m", "")),
            Err(Refusal::LineageMismatch {
                stored: "l".into(),
                given: "m".into()
            })
        );
        // A second bare version keeps them too, and a write that carries them moves on.
        write(
            &mut r,
            &a,
            None,
            r#"{"encrypted_data":"DD","encryption_version":"v0"}"#,
        )
        .unwrap();
        assert_eq!(
            write(&mut r, &a, None, &state_doc(4, "l", "")),
            Ok(Wrote::Create { version: 4 })
        );
        assert_eq!(
            write(&mut r, &a, None, &state_doc(4, "l", "x")),
            Err(Refusal::Fork { serial: 4 })
        );
    }

    #[test]
    fn version_numbers_keep_counting() {
        let a = user("a");
        let mut r = fresh();
        for serial in 1..=3 {
            write(&mut r, &a, None, &state_doc(serial, "l", "")).unwrap();
        }
        assert_eq!(r.next_version, 4);
        assert_eq!(r.revision, 3);
    }
}
