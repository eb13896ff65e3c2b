//! Deleted states, for admins: the list of those kept for their retention, a restore under
//! the old name or a new one, a purge now, and the sweeper's purge of those past their
//! retention. A restore is snapshot (the deleted state, the name's record, its latest
//! version) -> decide -> one commit storing the record and taking the deleted state's,
//! conditioned on both; a purge is one conditional write that leaves the versions to the
//! sweeper. Every restore and purge is audited.

use serde::Serialize;

use super::admin::require_admin;
use super::indexing::Indexer;
use super::retry::{commit, until_done, Attempt, Carried};
use super::state::{examine, open_version};
use super::{App, Error};
use crate::domain::audit::AuditAction;
use crate::domain::deleted::{check_restore, DeletedState};
use crate::domain::name::StateName;
use crate::domain::protection::{check_change, Change};
use crate::domain::record::StateRecord;
use crate::domain::{Actor, Principal, Refusal, Timestamp};
use crate::ports::{AuditEntry, Commit, DeletedChange, InlineContent, InventoryChange, StoreError};

/// The most deleted states one page lists.
pub const MAX_PAGE: usize = 1000;

/// A deleted state as admins see it (DESIGN section 17).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DeletedStateView {
    pub id: String,
    pub name: String,
    #[serde(with = "time::serde::rfc3339")]
    #[schemars(with = "crate::domain::schema::Rfc3339")]
    pub deleted_at: Timestamp,
    pub deleted_by: Actor,
    /// How many versions it keeps.
    pub versions: u64,
    /// Their plaintext size in bytes, summed.
    pub bytes: u64,
    /// When the sweeper purges it, unless it is restored or purged first: its delete time
    /// and the retention in force (`HEGEMONY_TF_STATE_DELETED_RETENTION_DAYS`), so raising
    /// the setting before this date keeps it longer.
    #[serde(with = "time::serde::rfc3339")]
    #[schemars(with = "crate::domain::schema::Rfc3339")]
    pub purge_at: Timestamp,
}

impl DeletedStateView {
    /// What a listing shows of `d` under `retention`, the setting in force.
    fn of(d: &DeletedState, retention: time::Duration) -> Self {
        Self {
            id: d.id.clone(),
            name: d.name.clone(),
            deleted_at: d.deleted_at,
            deleted_by: d.deleted_by.clone(),
            versions: d.versions,
            bytes: d.bytes,
            purge_at: d.purge_at(retention),
        }
    }
}

/// One page of an org's deleted states, in the order they were deleted (the soonest purged
/// first).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DeletedStateList {
    pub deleted_states: Vec<DeletedStateView>,
    /// The `cursor` of the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// What a restore brought back.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Restored {
    /// The name it has now.
    pub name: String,
    /// Its latest version, as the restore makes it current again.
    pub version: u64,
    /// How many versions came back with it.
    pub versions: u64,
}

fn not_found(id: &str) -> Error {
    Error::Refused(Refusal::NotFound {
        what: format!("deleted state {id}"),
    })
}

fn entry(
    org: &str,
    actor: &Actor,
    name: &str,
    action: AuditAction,
    version: Option<u64>,
    detail: serde_json::Value,
    now: Timestamp,
) -> AuditEntry {
    AuditEntry {
        org: org.to_owned(),
        at: now,
        action: action.as_str().into(),
        actor: actor.clone(),
        state: Some(name.to_owned()),
        version,
        detail,
    }
}

/// One page of the caller's org's deleted states, after `cursor`.
///
/// # Errors
/// `Refused(Forbidden)` without the admin role.
pub async fn list(
    app: &App,
    principal: &Principal,
    limit: usize,
    cursor: Option<&str>,
) -> Result<DeletedStateList, Error> {
    require_admin(principal, "the list of deleted states")?;
    let limit = limit.clamp(1, MAX_PAGE);
    // One more than asked for tells whether a next page exists.
    let mut page = app
        .catalog
        .deleted_states(&principal.org, cursor, limit + 1)
        .await?;
    let next_cursor = (page.len() > limit).then(|| {
        page.truncate(limit);
        page.last().map(|d| d.id.clone())
    });
    Ok(DeletedStateList {
        deleted_states: page
            .iter()
            .map(|d| DeletedStateView::of(d, app.limits.deleted_retention))
            .collect(),
        next_cursor: next_cursor.flatten(),
    })
}

/// Restores deleted state `id` under `name` (its own when `None`): every version comes
/// back, the latest current again, under the keys it was sealed with.
///
/// # Errors
/// `Refused`: `Forbidden` without the admin role, `NotFound` for an id the org does not
/// keep, `NameTaken` when a state has the name, `Locked` while a lock on it is live,
/// `ProtectedState` for a name a protected-state rule keeps to workload sessions.
pub async fn restore(
    app: &App,
    principal: &Principal,
    id: &str,
    name: Option<&StateName>,
) -> Result<Restored, Error> {
    require_admin(principal, "restoring a deleted state")?;
    let org = &principal.org;
    // A restore writes the state as a write does: onto a protected name only as the
    // protection lets (no admin's token, as a trust policy never grants admin).
    let (protections, inventory_key) = app
        .catalog
        .org(org)
        .await?
        .map(|o| (o.protections, o.inventory_key))
        .unwrap_or_default();
    let keys = app.keys()?;
    // The restored latest version is opened once and indexed, in the restore's commit; a
    // retry of the same version reuses what it gave.
    let indexed: Carried<(u64, InventoryChange)> = Carried::default();
    let restored = until_done(|| async {
        let now = app.clock.now();
        let deleted = app
            .catalog
            .deleted_state(org, id)
            .await?
            .ok_or_else(|| not_found(id))?;
        let name = name.map_or(deleted.name.as_str(), StateName::as_str);
        check_change(&protections, name, principal, Change::Restore)?;
        let kept = &deleted.record;
        let target = app
            .catalog
            .state(org, name)
            .await?
            .unwrap_or_else(|| StateRecord::fresh(org, name, &kept.incarnation, now));
        let latest = match deleted.latest_version() {
            Some(n) => {
                let home = kept.home();
                app.catalog.version(org, home, &kept.incarnation, n).await?
            }
            None => None,
        };
        let record = check_restore(&deleted, &target, latest, now)?;
        let latest = record.latest.clone().expect("a restored state has a version");
        let inventory = match indexed.take() {
            Some((version, change)) if version == latest.version => change,
            _ => {
                let plain = open_version(app, keys, kept, &latest).await?;
                let bytes = plain.len();
                let (_, _, _, found) = examine(plain).await?;
                Indexer::new(app, keys, org, inventory_key.clone(), found, bytes)
                    .await?
                    .change(latest.version)
                    .await?
            }
        };
        // The state's record carries its latest inline content (one read serves a read of
        // the state): the restore writes the version back with it.
        let contents = if latest.inline {
            let home = kept.home();
            let sealed = app
                .catalog
                .content(org, home, &kept.incarnation, latest.version)
                .await?
                .ok_or_else(|| {
                    Error::Damaged(format!(
                        "the content of version {} of deleted state {id} is missing from the catalog",
                        latest.version
                    ))
                })?;
            vec![InlineContent {
                version: latest.version,
                sealed: sealed.into(),
            }]
        } else {
            Vec::new()
        };
        let detail = serde_json::json!({"id": id, "from": deleted.name, "versions": deleted.versions});
        let audit = entry(
            org,
            &principal.actor,
            name,
            AuditAction::StateRestored,
            Some(latest.version),
            detail,
            now,
        );
        let restored = Restored {
            name: name.to_owned(),
            version: latest.version,
            versions: deleted.versions,
        };
        let mut changes = Commit::over(&target, now, Some(record));
        changes.home = kept.home().to_owned();
        changes.versions = vec![latest];
        changes.contents = contents;
        changes.deleted = Some(DeletedChange::Take {
            id: id.to_owned(),
            revision: deleted.revision,
        });
        changes.audit = vec![audit];
        changes.inventory = Some(inventory.clone());
        indexed.put((restored.version, inventory));
        commit(app, changes, restored).await
    })
    .await?;
    // One version written, its latest current again; it seals nothing.
    app.metrics
        .version_written(crate::ports::VersionKind::Restore, None);
    Ok(restored)
}

/// Purges deleted state `id` now: it can no longer be restored, and the sweeper deletes its
/// versions and their blobs.
///
/// # Errors
/// `Refused`: `Forbidden` without the admin role, `NotFound` for an id the org does not
/// keep.
pub async fn purge(app: &App, principal: &Principal, id: &str) -> Result<DeletedStateView, Error> {
    require_admin(principal, "purging a deleted state")?;
    until_done(|| async {
        let deleted = app
            .catalog
            .deleted_state(&principal.org, id)
            .await?
            .ok_or_else(|| not_found(id))?;
        let now = app.clock.now();
        purge_one(app, &deleted, &principal.actor, now).await
    })
    .await
}

/// One purge attempt of `deleted` by `actor`, audited.
async fn purge_one(
    app: &App,
    deleted: &DeletedState,
    actor: &Actor,
    now: Timestamp,
) -> Result<Attempt<DeletedStateView>, Error> {
    let view = DeletedStateView::of(deleted, app.limits.deleted_retention);
    let detail = serde_json::json!({"id": deleted.id, "versions": deleted.versions, "bytes": deleted.bytes, "purge_at": view.purge_at.format(&time::format_description::well_known::Rfc3339).ok()});
    let audit = entry(
        &deleted.org,
        actor,
        &deleted.name,
        AuditAction::StatePurged,
        None,
        detail,
        now,
    );
    match app.catalog.purge_deleted(deleted, &audit).await {
        Ok(()) => Ok(Attempt::Done(view)),
        Err(StoreError::Conflict) => Ok(Attempt::LostRace),
        Err(e) => Err(e.into()),
    }
}

/// The sweeper's part: purges up to `limit` deleted states whose retention (the setting in
/// force) has passed at `now`; returns how many. A state restored or purged meanwhile is
/// skipped.
///
/// # Errors
/// `Unavailable` when storage fails; those purged before stay purged.
pub async fn purge_due(app: &App, now: Timestamp, limit: usize) -> Result<usize, Error> {
    let mut purged = 0;
    let retention = app.limits.deleted_retention;
    let deleted_before = now.saturating_sub(retention);
    for (org, id) in app.catalog.deleted_due(deleted_before, limit).await? {
        let done = until_done(|| async {
            match app.catalog.deleted_state(&org, &id).await? {
                Some(d) if d.is_due(now, retention) => {
                    let view = purge_one(app, &d, &Actor::Sweeper, now).await?;
                    Ok(match view {
                        Attempt::Done(_) => Attempt::Done(true),
                        Attempt::LostRace => Attempt::LostRace,
                    })
                }
                _ => Ok(Attempt::Done(false)),
            }
        })
        .await?;
        purged += usize::from(done);
    }
    Ok(purged)
}
