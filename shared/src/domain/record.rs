//! The state record: one per (org, state name), the unit of every compare-and-swap. It holds
//! the lock, a copy of the latest version record, the version counter and the revision.

use serde::{Deserialize, Serialize};

use super::hold::Hold;
use super::lock::Lock;
use super::version::{prune_below, KeySlot, VersionRecord};
use super::Timestamp;

/// A state's record as the catalog stores it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateRecord {
    pub org: String,
    pub name: String,
    /// Random id of this incarnation of the name; blobs and encryption bindings use it, so a
    /// state created later under the same name never meets an earlier one's objects.
    pub incarnation: String,
    /// Bumped by every commit; 0 for a record not yet stored. The compare-and-swap condition.
    pub revision: u64,
    pub lock: Option<Lock>,
    /// A run's hold, from its plan until its apply releases, it ends, or a force unlock.
    #[serde(default)]
    pub hold: Option<Hold>,
    /// A copy of the latest version's record, so reads and listings need one lookup.
    pub latest: Option<VersionRecord>,
    /// The number the next new version gets; versions are never renumbered or reused.
    pub next_version: u64,
    /// The number of this incarnation's first version, what its versions are counted from
    /// ([`Self::versions_held`]). `None` in a record stored before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_version: Option<u64>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: Timestamp,
    /// Set by a delete: the state reads as absent, and its versions and blobs wait for the
    /// sweeper. The record stays, so version numbers are never reused.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub deleted_at: Option<Timestamp>,
    /// The serial and lineage of the newest content that carried them in plaintext, kept
    /// when a later version (a bare OpenTofu-encrypted document) carries neither, so the
    /// next write and a rollback's new serial are still checked against them. Empty in a
    /// record stored before it was kept: the latest version's facts then stand alone.
    #[serde(default, skip_serializing_if = "Carried::is_empty")]
    pub carried: Carried,
    /// The name this incarnation's versions are stored under and its data keys are asked
    /// for: the name it was created with. Set only on a state restored under another name
    /// (`None` reads as `name`), so its versions stay where they are and keep their keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<String>,
}

/// The serial and lineage the newest plaintext of a state carried, each kept on its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Carried {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<String>,
}

impl Carried {
    fn is_empty(&self) -> bool {
        self.serial.is_none() && self.lineage.is_none()
    }

    /// These facts once content carrying `serial` and `lineage` (each where present) is
    /// stored: what it carries replaces, what it lacks is kept.
    pub fn then(&self, serial: Option<u64>, lineage: Option<&str>) -> Self {
        Self {
            serial: serial.or(self.serial),
            lineage: lineage.map(str::to_owned).or_else(|| self.lineage.clone()),
        }
    }
}

impl StateRecord {
    /// The record of a state that does not exist yet (revision 0).
    pub fn fresh(org: &str, name: &str, incarnation: &str, now: Timestamp) -> Self {
        Self {
            org: org.to_owned(),
            name: name.to_owned(),
            incarnation: incarnation.to_owned(),
            revision: 0,
            lock: None,
            hold: None,
            latest: None,
            next_version: 1,
            first_version: Some(1),
            created_at: now,
            deleted_at: None,
            carried: Carried::default(),
            home: None,
        }
    }

    /// How many versions the state holds once the sweeper has pruned those past the `keep`
    /// newest: its incarnation's from the first to the latest, at most `keep`, 0 before its
    /// first. `None` when the record does not know its first version (stored before it
    /// kept one): its versions must be counted.
    pub fn versions_held(&self, keep: u64) -> Option<u64> {
        let Some(latest) = &self.latest else {
            return Some(0);
        };
        let first = self.first_version?;
        let from = prune_below(latest.version, keep).unwrap_or(1).max(first);
        Some((latest.version + 1).saturating_sub(from))
    }

    /// The name this incarnation's versions are stored under and keyed for (see `home`).
    pub fn home(&self) -> &str {
        self.home.as_deref().unwrap_or(&self.name)
    }

    /// Whether the state exists for readers: written at least once and not deleted.
    pub fn is_visible(&self) -> bool {
        self.deleted_at.is_none() && self.latest.is_some()
    }

    /// Whether the state list and the state's page show it: a state written at least once,
    /// or one a run holds before its first version (a first plan that holds the state until
    /// its apply writes nothing), so the hold that answers everyone else 423 is seen and can be
    /// forced. A record for a lock alone is not shown.
    pub fn is_listed(&self) -> bool {
        self.is_visible() || (self.deleted_at.is_none() && self.hold.is_some())
    }

    /// The record a new state under a deleted name starts from: a new incarnation, the
    /// version counter and revision kept. A record that is not deleted is returned as is,
    /// but that one with no version yet (a lock's) counts its versions from its next.
    pub fn reincarnated(self, incarnation: &str, now: Timestamp) -> Self {
        if self.deleted_at.is_none() {
            if self.latest.is_none() && self.first_version.is_none() {
                return Self {
                    first_version: Some(self.next_version),
                    ..self
                };
            }
            return self;
        }
        Self {
            incarnation: incarnation.to_owned(),
            lock: None,
            hold: None,
            latest: None,
            first_version: Some(self.next_version),
            created_at: now,
            deleted_at: None,
            carried: Carried::default(),
            home: None,
            ..self
        }
    }

    /// This record once `version`'s key slot is `slot`: its copy of the latest version takes
    /// it when that is the one, and the revision rises either way, so a commit decided on
    /// the record before (which may write that version's record back) re-decides.
    pub fn with_key_slot(&self, version: u64, slot: &KeySlot) -> Self {
        let mut record = self.clone();
        record.revision += 1;
        if let Some(latest) = record.latest.as_mut().filter(|l| l.version == version) {
            latest.set_slot(slot);
        }
        record
    }

    /// The lock, if it is live at `now`: a lock past its `live_until` reads as unlocked.
    pub fn live_lock(&self, now: Timestamp) -> Option<&Lock> {
        self.lock.as_ref().filter(|l| l.is_live(now))
    }

    /// The serial a write is checked against: the latest version's, or, when it carries none,
    /// the newest one carried before it.
    pub fn checked_serial(&self) -> Option<u64> {
        let latest = self.latest.as_ref().and_then(|l| l.serial);
        latest.or(self.carried.serial)
    }

    /// The lineage a write is checked against, as [`Self::checked_serial`].
    pub fn checked_lineage(&self) -> Option<&str> {
        let latest = self.latest.as_ref().and_then(|l| l.lineage.as_deref());
        latest.or(self.carried.lineage.as_deref())
    }

    /// The record a commit stores in place of this one: the same content, the next revision.
    pub fn successor(&self) -> Self {
        Self {
            revision: self.revision + 1,
            ..self.clone()
        }
    }

    /// Whether the record only exists for a lock (a plan or migration that never wrote): such
    /// a record is not listed and is removed at its unlock.
    pub fn is_lock_only(&self) -> bool {
        self.latest.is_none() && self.next_version == 1 && self.hold.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const NOW: Timestamp = datetime!(2026-11-30 01:00:00 UTC);

    #[test]
    fn a_deleted_name_comes_back_as_a_new_incarnation_keeping_its_counter() {
        let mut r = StateRecord::fresh("acme", "net", "inc1", NOW);
        r.next_version = 7;
        r.revision = 9;
        r.deleted_at = Some(NOW);
        let again = r.reincarnated("inc2", NOW);
        assert_eq!(again.incarnation, "inc2");
        assert_eq!((again.next_version, again.revision), (7, 9));
        assert!(again.deleted_at.is_none() && !again.is_visible());
        let live = StateRecord::fresh("acme", "net", "inc1", NOW).reincarnated("inc3", NOW);
        assert_eq!(live.incarnation, "inc1");
    }

    #[test]
    fn the_versions_held_are_the_incarnations_from_its_first_at_most_the_kept() {
        let mut r = StateRecord::fresh("acme", "net", "inc1", NOW);
        assert_eq!(r.versions_held(3), Some(0));
        let latest = |version: u64| crate::domain::version::test_record(version, NOW);
        r.latest = Some(latest(2));
        assert_eq!(r.versions_held(3), Some(2));
        r.latest = Some(latest(9));
        assert_eq!(r.versions_held(3), Some(3), "pruned past the three newest");
        r.deleted_at = Some(NOW);
        r.next_version = 10;
        let mut again = r.clone().reincarnated("inc2", NOW);
        again.latest = Some(latest(10));
        assert_eq!(
            again.versions_held(3),
            Some(1),
            "the new incarnation's alone"
        );
        r.first_version = None;
        assert_eq!(r.versions_held(3), None, "a record from before it was kept");
        let mut lock = StateRecord::fresh("acme", "lock", "inc1", NOW);
        lock.first_version = None;
        lock.next_version = 4;
        assert_eq!(lock.reincarnated("inc2", NOW).first_version, Some(4));
    }

    #[test]
    fn a_hold_before_the_first_version_is_listed_and_a_lock_alone_is_not() {
        let mut r = StateRecord::fresh("acme", "net", "inc1", NOW);
        assert!(!r.is_listed(), "a record for a lock alone");
        r.hold = Some(crate::domain::hold::Hold {
            run: "r1".into(),
            since: NOW,
        });
        assert!(
            r.is_listed() && !r.is_visible(),
            "listed, with nothing to read"
        );
        r.deleted_at = Some(NOW);
        assert!(!r.is_listed());
    }
}
