//! Managing states beyond the backend protocol: import, rollback, download, force unlock,
//! delete (restoring and purging a deleted state are `deleted`'s). Each is snapshot -> decide
//! -> write blobs -> one compare-and-swap commit.

use super::commit::{find_version, force_unlock_entry, release, take_over_dead_lock, Takeover};
use super::indexing::Indexer;
use super::retry::{commit, until_done, Attempt, Carried};
use super::state::{content, examine, open_version, seal, Content, Sealed};
use super::{App, Error};
use crate::domain::audit::AuditAction;
use crate::domain::deleted::DeletedState;
use crate::domain::document::{with_serial, StateMeta};
use crate::domain::hold::Hold;
use crate::domain::lock::Lock;
use crate::domain::manage::{check_delete, check_import, check_rollback, tombstone};
use crate::domain::name::StateName;
use crate::domain::permission::Permission;
use crate::domain::protection::Change;
use crate::domain::record::StateRecord;
use crate::domain::version::VersionRecord;
use crate::domain::write::{create_version, Origin, SealedContent, WriteCommit};
use crate::domain::{Principal, Refusal, Timestamp};
use crate::ids::new_id;
use crate::ports::{
    key_backend, AuditEntry, Commit, DeletedChange, InventoryChange, VersionKind, VersionMark,
};
use time::format_description::well_known::Rfc3339;

fn entry(
    principal: &Principal,
    name: &StateName,
    action: AuditAction,
    version: Option<u64>,
    detail: serde_json::Value,
    now: Timestamp,
) -> AuditEntry {
    AuditEntry {
        org: principal.org.clone(),
        at: now,
        action: action.as_str().into(),
        actor: principal.actor.clone(),
        state: Some(name.to_string()),
        version,
        detail,
    }
}

fn not_found(name: &StateName) -> Error {
    Error::Refused(Refusal::NotFound {
        what: format!("state {name}"),
    })
}

/// The record of a state the list shows (written, or held before its first version), or
/// `NotFound`: what its page, versions and audit are read from.
pub(super) async fn existing(app: &App, org: &str, name: &StateName) -> Result<StateRecord, Error> {
    app.catalog
        .state(org, name.as_str())
        .await?
        .filter(StateRecord::is_listed)
        .ok_or_else(|| not_found(name))
}

/// `record` if it is a visible state's, or `NotFound`.
fn visible(record: Option<StateRecord>, name: &StateName) -> Result<StateRecord, Error> {
    record
        .filter(StateRecord::is_visible)
        .ok_or_else(|| not_found(name))
}

/// A new version to commit: what the domain made of it, where its content is sealed, and
/// its index.
struct NewVersion<'a> {
    write: WriteCommit,
    sealed: &'a Sealed,
    inventory: InventoryChange,
}

/// Commits the new version made over `snapshot`, with what a takeover adds.
async fn commit_version(
    app: &App,
    snapshot: &StateRecord,
    takeover: Takeover,
    new: NewVersion<'_>,
    audit: AuditEntry,
    now: Timestamp,
) -> Result<Attempt<VersionRecord>, Error> {
    let NewVersion {
        write,
        sealed,
        inventory,
    } = new;
    let version = write.version.clone();
    let changes = takeover.into_commit(sealed.add_to(Commit {
        versions: vec![write.version],
        inventory: Some(inventory),
        version_marks: app.prune_mark(&snapshot.incarnation, version.version),
        audit: vec![audit],
        ..Commit::over(snapshot, now, Some(write.state))
    }));
    commit(app, changes, version).await
}

/// Creates a state from a state file: its first version, source import, with the file's
/// serial and lineage. A name with a version is refused, so an import never changes a state.
///
/// # Errors
/// `Refused`: without tf_state:write, `Locked` while a lock is live, `StateExists`,
/// `NotAState`.
pub async fn import(
    app: &App,
    principal: &Principal,
    name: &StateName,
    body: Vec<u8>,
) -> Result<VersionRecord, Error> {
    let (_, first) = app
        .require_to_change(principal, Permission::Write, Change::Import, name)
        .await?;
    let keys = app.keys()?;
    let (body, document, sha256, found) = examine(body).await?;
    let (org, stored) = (&principal.org, first.inventory_key());
    let indexer = Indexer::new(app, keys, org, stored, found, body.len()).await?;
    let sealed: Carried<Sealed> = Carried::default();
    let written = until_done(|| async {
        let now = app.clock.now();
        let snapshot = first.snapshot(app, &principal.org, name, now).await?;
        let (snapshot, takeover) =
            take_over_dead_lock(app, snapshot, &principal.actor, now).await?;
        let version = check_import(&snapshot, now)?;
        let meta = document.clone()?;
        // The index's entry is built while the blob's writes wait on the disk.
        let change = indexer.change(version);
        let (inventory, blob) = match sealed.take() {
            Some(blob) if blob.fits(&snapshot, version) => (change.await?, blob),
            _ => seal(app, keys, &snapshot, version, &body, now, change).await?,
        };
        let detail = serde_json::json!({"source": "import", "key": blob.sealed.key_id, "key_backend": key_backend(&blob.sealed.key_id), "serial": meta.serial, "lineage": meta.lineage});
        let content = blob.content(body.len(), sha256.clone(), indexer.fingerprint());
        let audit = entry(
            principal,
            name,
            AuditAction::StateImported,
            Some(version),
            detail,
            now,
        );
        let write = create_version(
            &snapshot,
            version,
            meta,
            content,
            principal,
            Origin::Import,
            now,
        );
        let new = NewVersion {
            write,
            sealed: &blob,
            inventory,
        };
        let attempt = commit_version(app, &snapshot, takeover, new, audit, now).await;
        sealed.put(blob);
        attempt
    })
    .await?;
    // Counted once committed, as a save is: a lost race re-decides.
    app.metrics
        .version_written(VersionKind::Import, Some(written.size));
    Ok(written)
}

/// Makes `version` current again as a new version, source rollback: its bytes with only the
/// top-level serial raised above the current one.
///
/// # Errors
/// `Refused`: without tf_state:write, `NotFound` (state or version), `Locked`,
/// `RollbackEncrypted`.
pub async fn rollback(
    app: &App,
    principal: &Principal,
    name: &StateName,
    version: u64,
) -> Result<VersionRecord, Error> {
    let (_, first) = app
        .require_to_change(principal, Permission::Write, Change::Rollback, name)
        .await?;
    let keys = app.keys()?;
    // The rolled-back content is indexed as it is sealed: it is open here already.
    let sealed: Carried<(Sealed, StateMeta, SealedContent, InventoryChange)> = Carried::default();
    let written = until_done(|| async {
        let now = app.clock.now();
        let snapshot = visible(first.record(app, &principal.org, name).await?, name)?;
        let (snapshot, takeover) =
            take_over_dead_lock(app, snapshot, &principal.actor, now).await?;
        let target = find_version(app, &snapshot, version).await?;
        let plan = check_rollback(&snapshot, version, target, now)?;
        let (blob, meta, content, inventory) = match sealed.take() {
            Some((s, m, c, i))
                if s.fits(&snapshot, plan.version) && m.serial == Some(plan.serial) =>
            {
                (s, m, c, i)
            }
            _ => {
                let old = open_version(app, keys, &snapshot, &plan.target).await?;
                let body = with_serial(old, plan.serial)?;
                let (body, document, sha256, found) = examine(body).await?;
                let meta = document?;
                let (org, stored) = (&principal.org, first.inventory_key());
                let indexer = Indexer::new(app, keys, org, stored, found, body.len()).await?;
                let change = indexer.change(plan.version);
                let (inventory, blob) =
                    seal(app, keys, &snapshot, plan.version, &body, now, change).await?;
                let content = blob.content(body.len(), sha256, indexer.fingerprint());
                (blob, meta, content, inventory)
            }
        };
        let detail =
            serde_json::json!({"from": version, "serial": plan.serial, "key": blob.sealed.key_id, "key_backend": key_backend(&blob.sealed.key_id)});
        let audit = entry(
            principal,
            name,
            AuditAction::StateRolledBack,
            Some(plan.version),
            detail,
            now,
        );
        let write = create_version(
            &snapshot,
            plan.version,
            meta.clone(),
            content.clone(),
            principal,
            Origin::Rollback { from: version },
            now,
        );
        let new = NewVersion {
            write,
            sealed: &blob,
            inventory: inventory.clone(),
        };
        let attempt = commit_version(app, &snapshot, takeover, new, audit, now).await;
        sealed.put((blob, meta, content, inventory));
        attempt
    })
    .await?;
    // Counted once committed, as a save is: a lost race re-decides.
    app.metrics
        .version_written(VersionKind::Rollback, Some(written.size));
    Ok(written)
}

/// The content of one version, exactly as written (as a read gets it). Audited.
///
/// # Errors
/// `Refused`: without tf_state:read, `NotFound` (state or version).
pub async fn download(
    app: &App,
    principal: &Principal,
    name: &StateName,
    version: u64,
) -> Result<Content, Error> {
    let (_, first) = app
        .require_with_state(principal, Permission::Read, name)
        .await?;
    let keys = app.keys()?;
    let record = visible(first.record(app, &principal.org, name).await?, name)?;
    let target = find_version(app, &record, version)
        .await?
        .ok_or_else(|| Refusal::NotFound {
            what: format!("version {version} of state {name}"),
        })?;
    let bytes = content(app, keys, &record, &target, None).await?;
    let now = app.clock.now();
    let detail = serde_json::json!({"sha256": target.sha256});
    app.catalog
        .append_audit(&entry(
            principal,
            name,
            AuditAction::VersionDownloaded,
            Some(version),
            detail,
            now,
        ))
        .await?;
    Ok(bytes)
}

/// What a force unlock released.
#[derive(Debug, Clone, Default)]
pub struct Released {
    pub lock: Option<Lock>,
    pub hold: Option<Hold>,
}

/// Releases whatever lock is held and a run's hold (a force unlock, audited). Nothing
/// released when nothing was held.
///
/// A person's act: a CI job's session or a step token is refused whatever the org's
/// allocation gives its role, so no job frees another's lock.
///
/// # Errors
/// `Refused`: for a session or a step token, without tf_state:manage, `NotFound` for a state
/// that does not exist.
pub async fn force_unlock(
    app: &App,
    principal: &Principal,
    name: &StateName,
) -> Result<Released, Error> {
    if principal.session.is_some() || principal.step.is_some() {
        return Err(Refusal::Forbidden {
            reason: format!(
                "a force unlock is a person's act: {} may not force-unlock state {name}, whatever the org's allocation; a person with tf_state:manage does it with a personal token",
                crate::domain::untrusted::shown(&principal.actor.describe())
            ),
        }
        .into());
    }
    let (_, first) = app
        .require_with_state(principal, Permission::Manage, name)
        .await?;
    until_done(|| async {
        let now = app.clock.now();
        let snapshot = first
            .record(app, &principal.org, name)
            .await?
            .filter(|r| r.is_visible() || r.live_lock(now).is_some() || r.hold.is_some())
            .ok_or_else(|| not_found(name))?;
        let lock = snapshot.live_lock(now).cloned();
        let hold = snapshot.hold.clone();
        if lock.is_none() && hold.is_none() {
            return Ok(Attempt::Done(Released::default()));
        }
        let (state, versions) = release(app, &snapshot, lock.as_ref(), true, true, now).await?;
        let audit = force_unlock_entry(principal, name, lock.as_ref(), hold.as_ref(), now);
        let changes = Commit {
            versions,
            audit: vec![audit],
            ..Commit::over(&snapshot, now, state)
        };
        commit(app, changes, Released { lock, hold }).await
    })
    .await
}

/// Deletes a state: one conditional write that tombstones it, its name free at once. With
/// a retention (`HEGEMONY_TF_STATE_DELETED_RETENTION_DAYS`) the same write keeps it as a
/// deleted state, every version and key in place, until it is restored or purged; without
/// one its versions and blobs are left to the sweeper at once. The version counter survives
/// either way. Returns what was kept, if anything.
///
/// # Errors
/// `Refused`: without tf_state:manage, `NotFound`, `Locked`.
pub async fn delete(
    app: &App,
    principal: &Principal,
    name: &StateName,
) -> Result<Option<DeletedState>, Error> {
    let (_, first) = app
        .require_to_change(principal, Permission::Manage, Change::Delete, name)
        .await?;
    let retention = app.limits.deleted_retention;
    until_done(|| async {
        let now = app.clock.now();
        let snapshot = first
            .record(app, &principal.org, name)
            .await?
            .ok_or_else(|| not_found(name))?;
        let (snapshot, takeover) =
            take_over_dead_lock(app, snapshot, &principal.actor, now).await?;
        check_delete(&snapshot, now)?;
        let kept = if retention.is_positive() {
            let versions = app
                .catalog
                .versions(&snapshot.org, snapshot.home(), &snapshot.incarnation)
                .await?;
            let id = deleted_id(now);
            let by = &principal.actor;
            Some(DeletedState::kept(&snapshot, &id, &versions, by, now))
        } else {
            None
        };
        let latest = snapshot.latest.as_ref().map(|l| l.version);
        let detail = match &kept {
            Some(d) => serde_json::json!({"incarnation": snapshot.incarnation, "id": d.id, "versions": d.versions, "purge_at": d.purge_at(retention).format(&Rfc3339).ok()}),
            None => serde_json::json!({"incarnation": snapshot.incarnation}),
        };
        let audit = entry(
            principal,
            name,
            AuditAction::StateDeleted,
            latest,
            detail,
            now,
        );
        let mut changes = Commit {
            audit: vec![audit],
            inventory: Some(InventoryChange::Remove),
            ..Commit::over(&snapshot, now, Some(tombstone(&snapshot, now)))
        };
        match &kept {
            Some(d) => changes.deleted = Some(DeletedChange::Keep(Box::new(d.clone()))),
            None => {
                changes.version_marks = vec![VersionMark {
                    incarnation: snapshot.incarnation.clone(),
                    below: VersionMark::ALL,
                }]
            }
        }
        commit(app, takeover.into_commit(changes), kept).await
    })
    .await
}

/// A new deleted state's id: the time, so ids sort in the order states were deleted, then
/// random, so two deletions in one second differ.
fn deleted_id(now: Timestamp) -> String {
    format!("{:010}-{}", now.unix_timestamp().max(0), &new_id()[..16])
}
