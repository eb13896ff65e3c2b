//! What the changes to a state share around their one commit: the snapshot they decide on
//! (read with the permission check, once), the takeover of a dead lock, and the release of a
//! lock, each closing the version the lock opened. The use cases (`state`, `lock`, `manage`,
//! `sweep`) build on it; it decides nothing itself (the rules are the domain's) and never
//! commits.

use super::retry::Carried;
use super::{App, Error};
use crate::domain::audit::AuditAction;
use crate::domain::hold::Hold;
use crate::domain::lock::Lock;
use crate::domain::name::StateName;
use crate::domain::record::StateRecord;
use crate::domain::version::{Ended, VersionRecord};
use crate::domain::{rfc3339, Actor, Principal, Timestamp};
use crate::ids::new_id;
use crate::ports::{AuditEntry, Commit, InventoryKey};

/// The state's record as read, or the record of a state not created yet.
fn snapshot_of(
    record: Option<StateRecord>,
    org: &str,
    name: &StateName,
    now: Timestamp,
) -> StateRecord {
    record
        .map(|r| r.reincarnated(&new_id(), now))
        .unwrap_or_else(|| StateRecord::fresh(org, name.as_str(), &new_id(), now))
}

/// The record read together with the permission check ([`App::require_with_state`]): the
/// first attempt decides on it, so a backend request reads the catalog once before it
/// commits; an attempt after a lost race reads the record again.
/// The org's inventory key comes from the same read (the org's settings), for a change that
/// indexes a version.
pub(super) struct FirstRead(Carried<Option<StateRecord>>, Option<InventoryKey>);

impl FirstRead {
    pub(super) fn new(record: Option<StateRecord>, inventory_key: Option<InventoryKey>) -> Self {
        let carried = Carried::default();
        carried.put(record);
        Self(carried, inventory_key)
    }

    /// The org's inventory key as its settings were read, if it has one yet.
    pub(super) fn inventory_key(&self) -> Option<InventoryKey> {
        self.1.clone()
    }

    /// The state's record: the one read first, once; afterwards read again.
    pub(super) async fn record(
        &self,
        app: &App,
        org: &str,
        name: &StateName,
    ) -> Result<Option<StateRecord>, Error> {
        match self.0.take() {
            Some(record) => Ok(record),
            None => Ok(app.catalog.state(org, name.as_str()).await?),
        }
    }

    /// The snapshot a change decides on: the record read first when it has not been used
    /// yet, or a state not created yet.
    pub(super) async fn snapshot(
        &self,
        app: &App,
        org: &str,
        name: &StateName,
        now: Timestamp,
    ) -> Result<StateRecord, Error> {
        let record = self.record(app, org, name).await?;
        Ok(snapshot_of(record, org, name, now))
    }
}

/// One version of a state: the latest from the record itself, older ones from the catalog.
pub(super) async fn find_version(
    app: &App,
    record: &StateRecord,
    version: u64,
) -> Result<Option<VersionRecord>, Error> {
    match &record.latest {
        Some(latest) if latest.version == version => Ok(Some(latest.clone())),
        _ => Ok(app
            .catalog
            .version(&record.org, record.home(), &record.incarnation, version)
            .await?),
    }
}

/// Closes the change records of the versions `lock` opened, as `ended`, and the record's
/// copy of the latest. Returns the closed versions for the commit to store; none when the
/// lock opened none (or they were pruned).
async fn close_opened_versions(
    app: &App,
    state: &mut StateRecord,
    lock: &Lock,
    ended: Ended,
    now: Timestamp,
) -> Result<Vec<VersionRecord>, Error> {
    let mut closed = Vec::new();
    for opened in lock.versions_opened() {
        let Some(mut version) = find_version(app, state, opened).await? else {
            continue;
        };
        version.change.close(ended, now);
        if let Some(latest) = state.latest.as_mut().filter(|l| l.version == opened) {
            *latest = version.clone();
        }
        closed.push(version);
    }
    Ok(closed)
}

/// What taking over a dead lock adds to the commit of the change that takes it over.
#[derive(Debug, Default)]
pub(super) struct Takeover {
    versions: Vec<VersionRecord>,
    audit: Vec<AuditEntry>,
}

impl Takeover {
    /// Adds the closed version and the audit entry to `commit`.
    pub(super) fn into_commit(self, mut commit: Commit) -> Commit {
        let mut versions = self.versions;
        versions.append(&mut commit.versions);
        commit.versions = versions;
        commit.audit.extend(self.audit);
        commit
    }
}

/// A lock past its `live_until` reads as unlocked, and the next change takes it over inside
/// its own conditional write: not a force unlock, audited `lock.expired`, the version it left
/// open ended `expired`. Returns the record to decide on (same revision, lock gone) and what
/// the change's commit must carry.
pub(super) async fn take_over_dead_lock(
    app: &App,
    mut snapshot: StateRecord,
    by: &Actor,
    now: Timestamp,
) -> Result<(StateRecord, Takeover), Error> {
    let Some(lock) = snapshot.lock.take_if(|l| !l.is_live(now)) else {
        return Ok((snapshot, Takeover::default()));
    };
    let versions = close_opened_versions(app, &mut snapshot, &lock, Ended::Expired, now).await?;
    let audit = AuditEntry {
        org: snapshot.org.clone(),
        at: now,
        action: AuditAction::LockExpired.as_str().into(),
        actor: by.clone(),
        state: Some(snapshot.name.clone()),
        version: lock.version_opened,
        detail: serde_json::json!({
            "lock_id": lock.id(),
            "holder": lock.holder,
            "live_until": lock.live_until.map(rfc3339),
        }),
    };
    tracing::info!(state = %snapshot.name, lock_id = lock.id(), holder = %lock.holder.describe(), "an expired lock was taken over");
    Ok((
        snapshot,
        Takeover {
            versions,
            audit: vec![audit],
        },
    ))
}

/// The record without `lock` (and its run's hold, when `end_hold`), and the version the lock
/// opened with its change record closed. A record that only existed for the lock is removed
/// (`None`).
pub(super) async fn release(
    app: &App,
    snapshot: &StateRecord,
    lock: Option<&Lock>,
    end_hold: bool,
    forced: bool,
    now: Timestamp,
) -> Result<(Option<StateRecord>, Vec<VersionRecord>), Error> {
    let mut state = snapshot.successor();
    if lock.is_some() {
        state.lock = None;
    }
    if end_hold {
        state.hold = None;
    }
    if state.lock.is_none() && state.is_lock_only() {
        return Ok((None, Vec::new()));
    }
    let Some(lock) = lock else {
        return Ok((Some(state), Vec::new()));
    };
    let ended = if forced {
        Ended::ForceUnlocked
    } else {
        Ended::Released
    };
    let versions = close_opened_versions(app, &mut state, lock, ended, now).await?;
    Ok((Some(state), versions))
}

/// The audit entry of a force: which lock and which hold it released.
pub(super) fn force_unlock_entry(
    principal: &Principal,
    name: &StateName,
    lock: Option<&Lock>,
    hold: Option<&Hold>,
    now: Timestamp,
) -> AuditEntry {
    AuditEntry {
        org: principal.org.clone(),
        at: now,
        action: AuditAction::LockForceUnlocked.as_str().into(),
        actor: principal.actor.clone(),
        state: Some(name.to_string()),
        version: lock.and_then(|l| l.version_opened),
        detail: serde_json::json!({
            "lock_id": lock.map(Lock::id),
            "holder": lock.map(|l| &l.holder),
            "hold": hold.map(Hold::id),
        }),
    }
}
