//! Locking and unlocking a state: the backend protocol's LOCK and UNLOCK.

use super::state::snapshot;
use super::{App, Error, MAX_ATTEMPTS};
use crate::domain::hold::{hold_set_by, Hold};
use crate::domain::lock::{parse_lock, parse_unlock, Lock};
use crate::domain::locking::{decide_lock, decide_unlock, LockDecision, UnlockDecision};
use crate::domain::name::StateName;
use crate::domain::permission::Permission;
use crate::domain::record::StateRecord;
use crate::domain::version::{Ended, VersionRecord};
use crate::domain::{Actor, Principal, Timestamp};
use crate::ports::{AuditEntry, Commit, RunItem, StoreError};

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
    let Some(lock) = snapshot.lock.clone().filter(|l| !l.is_live(now)) else {
        return Ok((snapshot, Takeover::default()));
    };
    snapshot.lock = None;
    let mut versions = Vec::new();
    if let Some(opened) = lock.version_opened {
        let version = match &snapshot.latest {
            Some(latest) if latest.version == opened => Some(latest.clone()),
            _ => {
                app.catalog
                    .version(&snapshot.org, &snapshot.name, &snapshot.incarnation, opened)
                    .await?
            }
        };
        if let Some(mut version) = version {
            version.change.close(Ended::Expired, now);
            if let Some(latest) = snapshot.latest.as_mut().filter(|l| l.version == opened) {
                *latest = version.clone();
            }
            versions.push(version);
        }
    }
    let audit = AuditEntry {
        org: snapshot.org.clone(),
        at: now,
        action: "lock.expired".into(),
        actor: by.clone(),
        state: Some(snapshot.name.clone()),
        version: lock.version_opened,
        detail: serde_json::json!({
            "lock_id": lock.id(),
            "holder": lock.holder,
            "live_until": lock.live_until.map(crate::domain::rfc3339),
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

/// What an unlock did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnlockOutcome {
    /// Nothing was locked.
    NotLocked,
    /// This lock and/or the run's hold were released; `forced` when by someone other than
    /// the lock's holder.
    Released {
        lock: Option<Box<Lock>>,
        hold: Option<Hold>,
        forced: bool,
    },
}

/// Takes the lock described by `body` (a lock document), or confirms the caller already
/// holds it with that ID.
///
/// # Errors
/// `Refused` for an invalid document, without tf_state:write, or when someone else's lock
/// is live (`Locked`, carrying the holder's document).
pub async fn lock(
    app: &App,
    principal: &Principal,
    name: &StateName,
    body: &[u8],
) -> Result<(), Error> {
    app.require(principal, Permission::Write).await?;
    app.keys()?;
    let document = parse_lock(body)?;
    for _ in 0..MAX_ATTEMPTS {
        let now = app.clock.now();
        let snapshot = snapshot(app, &principal.org, name, now).await?;
        let (snapshot, takeover) =
            take_over_dead_lock(app, snapshot, &principal.actor, now).await?;
        let lock = match decide_lock(&snapshot, document.clone(), principal, now)? {
            LockDecision::AlreadyHeld => return Ok(()),
            LockDecision::Granted(lock) => lock,
        };
        let mut state = snapshot.successor();
        state.lock = Some(*lock);
        if state.hold.is_none() {
            state.hold = hold_set_by(principal, now);
        }
        // A step's lock is findable from its run, for the run's end and the step's gone report.
        let run_items = principal
            .step
            .iter()
            .map(|grant| RunItem {
                run: grant.run.clone(),
                token_id: grant.token_id.clone(),
                org: snapshot.org.clone(),
                state: snapshot.name.clone(),
            })
            .collect();
        let commit = Commit {
            run_items,
            ..simple_commit(&snapshot, now, Some(state), Vec::new(), Vec::new())
        };
        match app.catalog.commit(takeover.into_commit(commit)).await {
            Ok(()) => return Ok(()),
            Err(StoreError::Conflict) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(StoreError::Conflict.into())
}

fn simple_commit(
    snapshot: &StateRecord,
    at: Timestamp,
    state: Option<StateRecord>,
    versions: Vec<VersionRecord>,
    audit: Vec<AuditEntry>,
) -> Commit {
    Commit {
        versions,
        audit,
        ..Commit::over(snapshot, at, state)
    }
}

/// Releases a lock as `body` asks: empty (release what the caller holds, or force), or
/// naming a lock ID.
///
/// # Errors
/// `Refused` for an invalid body, without tf_state:write, for an ID that is not the current
/// lock's, or for a force unlock without tf_state:manage.
pub async fn unlock(
    app: &App,
    principal: &Principal,
    name: &StateName,
    body: &[u8],
) -> Result<UnlockOutcome, Error> {
    let allocation = app.require(principal, Permission::Write).await?;
    app.keys()?;
    let request = parse_unlock(body)?;
    for _ in 0..MAX_ATTEMPTS {
        let now = app.clock.now();
        let Some(snapshot) = app.catalog.state(&principal.org, name.as_str()).await? else {
            return Ok(UnlockOutcome::NotLocked);
        };
        let (lock, end_hold, forced) =
            match decide_unlock(&snapshot, &request, principal, &allocation, now)? {
                UnlockDecision::NotLocked => return Ok(UnlockOutcome::NotLocked),
                UnlockDecision::Release { forced, end_hold } => {
                    (snapshot.lock.clone(), end_hold, forced)
                }
                UnlockDecision::EndHold => (None, true, true),
            };
        let hold = snapshot.hold.clone().filter(|_| end_hold);
        let (state, versions) =
            release(app, &snapshot, lock.as_ref(), end_hold, forced, now).await?;
        let audit = if forced {
            vec![force_unlock_entry(
                principal,
                name,
                lock.as_ref(),
                hold.as_ref(),
                now,
            )]
        } else {
            Vec::new()
        };
        match app
            .catalog
            .commit(simple_commit(&snapshot, now, state, versions, audit))
            .await
        {
            Ok(()) => {
                return Ok(UnlockOutcome::Released {
                    lock: lock.map(Box::new),
                    hold,
                    forced,
                })
            }
            Err(StoreError::Conflict) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(StoreError::Conflict.into())
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
        action: "lock.force_unlocked".into(),
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
    let mut versions = Vec::new();
    if let Some(opened) = lock.version_opened {
        let version = match &state.latest {
            Some(latest) if latest.version == opened => Some(latest.clone()),
            _ => {
                app.catalog
                    .version(&state.org, &state.name, &state.incarnation, opened)
                    .await?
            }
        };
        if let Some(mut version) = version {
            version.change.close(ended, now);
            if let Some(latest) = state.latest.as_mut().filter(|l| l.version == opened) {
                *latest = version.clone();
            }
            versions.push(version);
        }
    }
    Ok((Some(state), versions))
}
