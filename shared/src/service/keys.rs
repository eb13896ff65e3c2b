//! Key rotation: which keys wrap an org's versions (the report), and moving each version's
//! data key to the key in use (the re-wrap). A re-wrap replaces one version's key slot at a
//! time, conditionally, and never opens the content: beside live writes it loses nothing,
//! and a run stopped half way leaves every version on its old or its new key, so the next
//! run continues with the rest (those already on the key in use are skipped). Deleted states
//! kept for their retention are counted and moved too, so a rotation never strands a version
//! a restore would bring back.

use serde::Serialize;

use super::admin::require_admin;
use super::content::{self, Place, RecordedKey};
use super::{App, Error};
use crate::domain::audit::AuditAction;
use crate::domain::deleted::DeletedState;
use crate::domain::keys::{needs_rewrap, tally, KeyUse};
use crate::domain::record::StateRecord;
use crate::domain::version::VersionRecord;
use crate::domain::{Actor, Principal};
use crate::paging::{self, Page};
use crate::ports::{
    key_backend, AuditEntry, InventoryKey, KeyContext, KeyService, SlotChange, SlotOwner,
    StoreError,
};

/// Records read per catalog page.
pub(super) const PAGE: usize = 500;
/// Lost races on one version (or app state archive) before it counts as failed: each means
/// someone else changed it in between, which a re-read settles.
pub(super) const ATTEMPTS: usize = 5;

/// One state's versions by key, as the report shows them.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StateKeys {
    pub state: String,
    /// For a deleted state kept for its retention, its id (`GET /api/deleted-states`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted_id: Option<String>,
    /// The key a version made now gets: where a re-wrap takes the others.
    pub current_key: String,
    pub keys: Vec<KeyView>,
}

/// How many versions of one state one key id wraps.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(rename = "VersionKeys")]
pub struct KeyView {
    pub key: String,
    /// `transit`, `kms` or `platform`.
    pub key_backend: String,
    pub versions: u64,
    /// Behind the key in use: `keys rewrap` would move them.
    pub behind: bool,
}

impl From<KeyUse> for KeyView {
    fn from(u: KeyUse) -> Self {
        Self {
            key_backend: key_backend(&u.key).to_owned(),
            key: u.key,
            versions: u.versions,
            behind: u.behind,
        }
    }
}

/// Every state of `org` that exists, in name order.
pub async fn org_states(app: &App, org: &str) -> Result<Vec<StateRecord>, Error> {
    let states = org_records(app, org).await?;
    Ok(states.into_iter().filter(StateRecord::is_visible).collect())
}

/// Every state record of `org`, in name order: with those of a lock or a hold alone, and
/// tombstones.
pub async fn org_records(app: &App, org: &str) -> Result<Vec<StateRecord>, Error> {
    Ok(paging::all(move |after: Option<String>| async move {
        let page = app.catalog.states(org, after.as_deref(), PAGE).await;
        page.map(|records| Page::of(records, PAGE, |r| r.name.clone()))
    })
    .await?)
}

/// Every deleted state of `org` kept for its retention, in the order they were deleted.
pub async fn org_deleted_states(app: &App, org: &str) -> Result<Vec<DeletedState>, Error> {
    Ok(paging::all(move |after: Option<String>| async move {
        let page = app
            .catalog
            .deleted_states(org, after.as_deref(), PAGE)
            .await;
        page.map(|records| Page::of(records, PAGE, |d| d.id.clone()))
    })
    .await?)
}

/// Whose versions a report counts and a re-wrap moves: a state, or a deleted state kept for
/// its retention.
#[derive(Debug, Clone, Copy)]
pub enum Holder<'a> {
    State(&'a StateRecord),
    Deleted(&'a DeletedState),
}

impl<'a> Holder<'a> {
    /// The state record the versions belong to (a deleted state's as it was deleted).
    pub fn record(&self) -> &'a StateRecord {
        match self {
            Holder::State(record) => record,
            Holder::Deleted(deleted) => &deleted.record,
        }
    }

    /// How reports and errors name it: `net`, or `net (deleted 1795...-ab12)`.
    pub fn label(&self) -> String {
        match self {
            Holder::State(record) => record.name.clone(),
            Holder::Deleted(d) => format!("{} (deleted {})", d.name, d.id),
        }
    }

    fn deleted_id(&self) -> Option<String> {
        match self {
            Holder::State(_) => None,
            Holder::Deleted(d) => Some(d.id.clone()),
        }
    }

    fn owner(&self) -> SlotOwner<'a> {
        match self {
            Holder::State(record) => SlotOwner::State(&record.name),
            Holder::Deleted(d) => SlotOwner::Deleted(&d.id),
        }
    }
}

/// The context a state's data keys are asked for under: its versions' home.
fn context(record: &StateRecord) -> KeyContext<'_> {
    KeyContext {
        org: &record.org,
        state: record.home(),
    }
}

/// How one state's versions spread over keys.
///
/// # Errors
/// `NoKey` without a key service; `Unavailable` when it cannot say which key is current.
pub async fn state_report(app: &App, holder: Holder<'_>) -> Result<StateKeys, Error> {
    let record = holder.record();
    let keys = app.keys()?;
    let current_key = keys.current_key_id(&context(record)).await?;
    let versions = app
        .catalog
        .versions(&record.org, record.home(), &record.incarnation)
        .await?;
    let keys = tally(versions.iter().map(|v| v.key.as_str()), &current_key);
    Ok(StateKeys {
        state: holder.record().name.clone(),
        deleted_id: holder.deleted_id(),
        current_key,
        keys: keys.into_iter().map(KeyView::from).collect(),
    })
}

/// The key report of the caller's org, for its admins.
///
/// # Errors
/// `Refused(Forbidden)` without the admin role; as [`state_report`].
pub async fn report(app: &App, principal: &Principal) -> Result<Vec<StateKeys>, Error> {
    require_admin(principal, "the key report")?;
    let mut report = Vec::new();
    for record in org_states(app, &principal.org).await? {
        report.push(state_report(app, Holder::State(&record)).await?);
    }
    for deleted in org_deleted_states(app, &principal.org).await? {
        report.push(state_report(app, Holder::Deleted(&deleted)).await?);
    }
    Ok(report)
}

/// What a re-wrap did to one state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StateRewrap {
    pub state: String,
    /// Versions moved to the key in use (with `--dry-run`: that would be).
    pub rewrapped: u64,
    /// Versions already on the key in use.
    pub current: u64,
    /// Versions that could not be moved, with why.
    pub failed: Vec<(u64, String)>,
    pub to: String,
}

/// What became of one version.
enum Moved {
    Rewrapped,
    AlreadyCurrent,
    /// Pruned or deleted while the re-wrap ran: nothing to move.
    Gone,
}

/// Moves every version of one state to the key in use, one version's slot at a time, and
/// audits what it did (not for a dry run, which reads only). `on_version` is called once
/// per version, for a progress bar.
///
/// # Errors
/// `NoKey` without a key service; `Unavailable` when it cannot say which key is current or
/// the catalog fails. A version that fails is counted, not raised.
pub async fn rewrap_state(
    app: &App,
    holder: Holder<'_>,
    dry_run: bool,
    on_version: &(dyn Fn() + Sync),
) -> Result<StateRewrap, Error> {
    let record = holder.record();
    let keys = app.keys()?;
    let to = keys.current_key_id(&context(record)).await?;
    let versions = app
        .catalog
        .versions(&record.org, record.home(), &record.incarnation)
        .await?;
    let mut done = StateRewrap {
        state: holder.label(),
        to: to.clone(),
        ..StateRewrap::default()
    };
    for version in versions {
        let number = version.version;
        let moved = if dry_run {
            Ok(if needs_rewrap(&version.key, &to) {
                Moved::Rewrapped
            } else {
                Moved::AlreadyCurrent
            })
        } else {
            rewrap_version(app, keys, holder, version, &to).await
        };
        match moved {
            Ok(Moved::Rewrapped) => done.rewrapped += 1,
            Ok(Moved::AlreadyCurrent) => done.current += 1,
            Ok(Moved::Gone) => {}
            Err(e) => {
                tracing::warn!(org = %record.org, state = %holder.label(), version = number, "re-wrap failed: {e}");
                done.failed.push((number, e.to_string()));
            }
        }
        on_version();
    }
    if !dry_run {
        let failed: Vec<u64> = done.failed.iter().map(|(n, _)| *n).collect();
        app.catalog
            .append_audit(&AuditEntry {
                org: record.org.clone(),
                at: app.clock.now(),
                action: AuditAction::KeysRewrapped.as_str().into(),
                actor: Actor::Cli,
                state: Some(record.name.clone()),
                version: None,
                detail: serde_json::json!({"rewrapped": done.rewrapped, "current": done.current, "failed": failed, "to": to, "key_backend": key_backend(&to), "deleted_id": holder.deleted_id()}),
            })
            .await?;
    }
    Ok(done)
}

/// What a re-wrap did to an org's inventory key (the key its index's digests are made
/// under, docs/inventory.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InventoryKeyRewrap {
    /// The org has none yet (nothing of it was indexed).
    NoKey,
    /// Already on the key in use.
    Current,
    /// Moved to the key in use (with `--dry-run`: would be).
    Rewrapped,
}

/// Moves the org's inventory key to the key in use, as a version's key is moved (by the key
/// service's re-wrap), stored only while the stored one is as read. The key itself stays, so every digest stays valid. Without it an
/// operator who retires the old key after a re-wrap would leave every save of the org
/// unable to index.
///
/// # Errors
/// `NoKey` without a key service; what the key service answers; a storage fault;
/// `Unavailable` when the key kept changing under the re-wrap.
pub async fn rewrap_inventory_key(
    app: &App,
    org: &str,
    dry_run: bool,
) -> Result<InventoryKeyRewrap, Error> {
    let context = KeyContext {
        org,
        state: InventoryKey::STATE,
    };
    // The key service is asked only for an org that has a key: one with none may have no
    // key set up on it.
    let mut to = None;
    for _ in 0..ATTEMPTS {
        let Some(stored) = app.catalog.org(org).await?.and_then(|o| o.inventory_key) else {
            return Ok(InventoryKeyRewrap::NoKey);
        };
        let keys = app.keys()?;
        let to = match &to {
            Some(to) => to,
            None => to.insert(keys.current_key_id(&context).await?),
        };
        if !needs_rewrap(&stored.key_id, to) {
            return Ok(InventoryKeyRewrap::Current);
        }
        if dry_run {
            return Ok(InventoryKeyRewrap::Rewrapped);
        }
        let wrapped = keys
            .rewrap_key(&stored.key_id, &stored.wrapped, &context)
            .await?;
        let new = InventoryKey {
            key_id: wrapped.key_id,
            wrapped: wrapped.wrapped,
        };
        match app
            .catalog
            .put_inventory_key(org, Some(&stored), &new, app.clock.now())
            .await
        {
            Ok(()) => {
                app.catalog
                    .append_audit(&AuditEntry {
                        org: org.to_owned(),
                        at: app.clock.now(),
                        action: AuditAction::KeysRewrapped.as_str().into(),
                        actor: Actor::Cli,
                        state: None,
                        version: None,
                        detail: serde_json::json!({"inventory_key": true, "from": stored.key_id, "to": new.key_id, "key_backend": key_backend(&new.key_id)}),
                    })
                    .await?;
                return Ok(InventoryKeyRewrap::Rewrapped);
            }
            // Another re-wrap (or a first save's key) came between: read it again.
            Err(StoreError::Conflict) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Unavailable(format!(
        "org {org}'s inventory key changed {ATTEMPTS} times during its re-wrap: run it again"
    )))
}

/// Moves one version's slot to `to`, re-reading it after a lost race (a write replaced the
/// open version's content, another re-wrap moved it first).
async fn rewrap_version(
    app: &App,
    keys: &dyn KeyService,
    holder: Holder<'_>,
    mut version: VersionRecord,
    to: &str,
) -> Result<Moved, Error> {
    let record = holder.record();
    let (org, home, incarnation) = (&record.org, record.home(), &record.incarnation);
    for _ in 0..ATTEMPTS {
        if !needs_rewrap(&version.key, to) {
            return Ok(Moved::AlreadyCurrent);
        }
        let old = version.slot();
        let what = format!("version {} of state {}", version.version, holder.label());
        let place = Place {
            org,
            key_state: home,
            incarnation,
            number: version.version,
            blob: &version.blob,
            what: &what,
        };
        let recorded = RecordedKey {
            key_id: &old.key,
            wrapped: old.wrapped_key.as_deref(),
        };
        let new = content::rewrap(app, keys, &place, recorded).await?;
        let change = SlotChange {
            org,
            owner: holder.owner(),
            home,
            incarnation,
            version: version.version,
            old: &old,
            new: &new,
        };
        match app.catalog.replace_key_slot(&change).await {
            Ok(()) => return Ok(Moved::Rewrapped),
            Err(StoreError::Conflict) => {
                if let Holder::Deleted(d) = holder {
                    // Restored meanwhile: its versions are the restored state's now, which
                    // the re-wrap of states moves.
                    if app.catalog.deleted_state(org, &d.id).await?.is_none() {
                        return Ok(Moved::Gone);
                    }
                }
                match app
                    .catalog
                    .version(org, home, incarnation, version.version)
                    .await?
                {
                    Some(again) => version = again,
                    None => return Ok(Moved::Gone),
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Unavailable(format!(
        "version {} kept changing during the re-wrap; run it again",
        version.version
    )))
}
