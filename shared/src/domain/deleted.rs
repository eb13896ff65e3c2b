//! Deleted states: what a delete keeps when the retention keeps anything, when it is due to
//! be purged (its delete time and the retention in force, so a changed setting moves the
//! date of states deleted already), and how a restore decides. A deleted state keeps its incarnation, so its
//! versions stay where they were stored, under the keys they were sealed with, until a
//! restore brings them back or a purge leaves them to the sweeper. No I/O, no status codes.

use serde::{Deserialize, Serialize};

use super::actor::Actor;
use super::record::StateRecord;
use super::version::VersionRecord;
use super::{Refusal, Timestamp};

/// A deleted state kept for its retention.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedState {
    pub org: String,
    /// Random: tells apart two deletions of one name.
    pub id: String,
    /// The name it had when it was deleted.
    pub name: String,
    #[serde(with = "time::serde::rfc3339")]
    pub deleted_at: Timestamp,
    pub deleted_by: Actor,
    /// How many versions it keeps.
    pub versions: u64,
    /// Their plaintext size, summed.
    pub bytes: u64,
    /// The state's record as the delete found it: what a restore brings back, with its lock
    /// and hold dropped and its latest version read again.
    pub record: StateRecord,
    /// Raised by each change of one of its versions' key slots (a re-wrap), so a restore
    /// decided on the record before re-reads the latest version.
    pub revision: u64,
}

impl DeletedState {
    /// What a delete of `record` (whose versions are `versions`) by `by` at `now` keeps,
    /// under `id`.
    pub fn kept(
        record: &StateRecord,
        id: &str,
        versions: &[VersionRecord],
        by: &Actor,
        now: Timestamp,
    ) -> Self {
        let mut record = record.clone();
        record.lock = None;
        record.hold = None;
        Self {
            org: record.org.clone(),
            id: id.to_owned(),
            name: record.name.clone(),
            deleted_at: now,
            deleted_by: by.clone(),
            versions: versions.len() as u64,
            bytes: versions.iter().map(|v| v.size).fold(0, u64::saturating_add),
            record,
            revision: 0,
        }
    }

    /// When the sweeper purges it under `retention`, the setting in force, unless it is
    /// restored or purged first: a setting raised before that date keeps it longer.
    pub fn purge_at(&self, retention: time::Duration) -> Timestamp {
        self.deleted_at.saturating_add(retention)
    }

    /// Whether `retention` has passed at `now`.
    pub fn is_due(&self, now: Timestamp, retention: time::Duration) -> bool {
        now >= self.purge_at(retention)
    }

    /// The number of the version a restore makes the latest.
    pub fn latest_version(&self) -> Option<u64> {
        self.record.latest.as_ref().map(|l| l.version)
    }
}

/// Decides a restore of `deleted` under `target`'s name, where `target` is that name's
/// record as it stands (a fresh record, revision 0, when there is none) and `latest` is the
/// deleted state's latest version as stored now. Returns the record to store over `target`.
///
/// # Errors
/// `NameTaken` when a state has the name (written, or held by a run); `Locked` while a lock
/// on the name is live (a first apply under way); `NotFound` when the latest version is gone.
pub fn check_restore(
    deleted: &DeletedState,
    target: &StateRecord,
    latest: Option<VersionRecord>,
    now: Timestamp,
) -> Result<StateRecord, Refusal> {
    if target.is_listed() {
        return Err(Refusal::NameTaken {
            name: target.name.clone(),
        });
    }
    if let Some(lock) = target.live_lock(now) {
        return Err(lock.refusal(None));
    }
    let latest = latest.ok_or_else(|| Refusal::NotFound {
        what: format!("the latest version of deleted state {}", deleted.id),
    })?;
    let kept = &deleted.record;
    let home = kept.home();
    Ok(StateRecord {
        org: target.org.clone(),
        name: target.name.clone(),
        incarnation: kept.incarnation.clone(),
        revision: target.revision + 1,
        lock: None,
        hold: None,
        latest: Some(latest),
        // Above every number either name gave out, so no number is given twice under it.
        next_version: kept.next_version.max(target.next_version),
        first_version: kept.first_version,
        created_at: kept.created_at,
        deleted_at: None,
        carried: kept.carried.clone(),
        home: (home != target.name).then(|| home.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::lock::parse_lock;
    use crate::domain::locking::{decide_lock, LockDecision};
    use crate::domain::permission::Role;
    use crate::domain::Principal;
    use time::macros::datetime;

    const NOW: Timestamp = datetime!(2026-12-02 10:00:00 UTC);

    fn version(n: u64, size: u64) -> VersionRecord {
        VersionRecord {
            size,
            ..crate::domain::version::test_record(n, NOW)
        }
    }

    fn written(name: &str, incarnation: &str) -> StateRecord {
        let mut r = StateRecord::fresh("acme", name, incarnation, NOW);
        r.revision = 4;
        r.latest = Some(version(3, 10));
        r.next_version = 4;
        r
    }

    fn deleted() -> DeletedState {
        let versions = [version(3, 10), version(2, 7)];
        let by = Actor::User {
            user: "alice".into(),
        };
        DeletedState::kept(&written("net", "inc1"), "d1", &versions, &by, NOW)
    }

    #[test]
    fn a_delete_keeps_the_count_the_size_and_the_purge_date() {
        let d = deleted();
        assert_eq!((d.versions, d.bytes), (2, 17));
        let week = time::Duration::days(7);
        assert_eq!(d.purge_at(week), datetime!(2026-12-09 10:00:00 UTC));
        assert!(!d.is_due(datetime!(2026-12-09 09:59:59 UTC), week));
        assert!(d.is_due(datetime!(2026-12-09 10:00:00 UTC), week));
        // The setting in force decides, for states deleted under another.
        let month = time::Duration::days(30);
        assert!(!d.is_due(datetime!(2026-12-09 10:00:00 UTC), month));
        assert!(d.is_due(datetime!(2026-12-02 11:00:00 UTC), time::Duration::hours(1)));
        assert_eq!(d.latest_version(), Some(3));
    }

    #[test]
    fn a_restore_under_its_own_name_brings_the_incarnation_back_over_the_tombstone() {
        let d = deleted();
        let mut tombstone = written("net", "inc1");
        tombstone.revision = 5;
        tombstone.latest = None;
        tombstone.deleted_at = Some(NOW);
        let r = check_restore(&d, &tombstone, Some(version(3, 10)), NOW).unwrap();
        assert_eq!((r.name.as_str(), r.incarnation.as_str()), ("net", "inc1"));
        assert_eq!(
            (r.revision, r.next_version, r.home.as_deref()),
            (6, 4, None)
        );
        assert!(r.is_visible());
    }

    #[test]
    fn a_restore_under_a_new_name_keeps_its_versions_home_and_the_higher_counter() {
        let d = deleted();
        let mut other = StateRecord::fresh("acme", "net2", "inc2", NOW);
        other.next_version = 9;
        other.revision = 3;
        other.deleted_at = Some(NOW);
        let r = check_restore(&d, &other, Some(version(3, 10)), NOW).unwrap();
        assert_eq!(r.home(), "net");
        assert_eq!((r.name.as_str(), r.incarnation.as_str()), ("net2", "inc1"));
        assert_eq!((r.revision, r.next_version), (4, 9));
    }

    #[test]
    fn a_taken_or_locked_name_is_refused_and_a_pruned_latest_is_not_found() {
        let d = deleted();
        let taken = written("net", "inc9");
        assert!(matches!(
            check_restore(&d, &taken, Some(version(3, 10)), NOW),
            Err(Refusal::NameTaken { name }) if name == "net"
        ));
        let mut locked = StateRecord::fresh("acme", "net", "inc9", NOW);
        let bob = Principal {
            org: "acme".into(),
            role: Role::Operator,
            actor: Actor::User { user: "bob".into() },
            step: None,
            session: None,
        };
        let doc = parse_lock(br#"{"ID":"L"}"#).unwrap();
        let Ok(LockDecision::Granted(lock)) = decide_lock(&locked, doc, &bob, NOW) else {
            panic!("expected a grant")
        };
        locked.lock = Some(*lock);
        assert!(matches!(
            check_restore(&d, &locked, Some(version(3, 10)), NOW),
            Err(Refusal::Locked { .. })
        ));
        let free = StateRecord::fresh("acme", "net", "inc9", NOW);
        assert!(matches!(
            check_restore(&d, &free, None, NOW),
            Err(Refusal::NotFound { .. })
        ));
    }
}
