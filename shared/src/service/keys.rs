//! Key rotation: which keys wrap an org's versions (the report), and moving each version's
//! data key to the key in use (the re-wrap). A re-wrap replaces one version's key slot at a
//! time, conditionally, and never opens the content: beside live writes it loses nothing,
//! and a run stopped half way leaves every version on its old or its new key, so the next
//! run continues with the rest (those already on the key in use are skipped).

use serde::Serialize;

use super::admin::require_admin;
use super::content::{self, Place, RecordedKey};
use super::{App, Error};
use crate::domain::audit::AuditAction;
use crate::domain::keys::{needs_rewrap, tally, KeyUse};
use crate::domain::record::StateRecord;
use crate::domain::version::VersionRecord;
use crate::domain::{Actor, Principal};
use crate::paging::{self, Page};
use crate::ports::{key_backend, AuditEntry, KeyContext, KeyService, StoreError};

/// Records read per catalog page.
pub(super) const PAGE: usize = 500;
/// Lost races on one version (or app state archive) before it counts as failed: each means
/// someone else changed it in between, which a re-read settles.
pub(super) const ATTEMPTS: usize = 5;

/// One state's versions by key, as the report shows them.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StateKeys {
    pub state: String,
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
    let states = paging::all(move |after: Option<String>| async move {
        let page = app.catalog.states(org, after.as_deref(), PAGE).await;
        page.map(|records| Page::of(records, PAGE, |r| r.name.clone()))
    })
    .await?;
    Ok(states.into_iter().filter(StateRecord::is_visible).collect())
}

fn context(record: &StateRecord) -> KeyContext<'_> {
    KeyContext {
        org: &record.org,
        state: &record.name,
    }
}

/// How one state's versions spread over keys.
///
/// # Errors
/// `NoKey` without a key service; `Unavailable` when it cannot say which key is current.
pub async fn state_report(app: &App, record: &StateRecord) -> Result<StateKeys, Error> {
    let keys = app.keys()?;
    let current_key = keys.current_key_id(&context(record)).await?;
    let versions = app
        .catalog
        .versions(&record.org, &record.name, &record.incarnation)
        .await?;
    let keys = tally(versions.iter().map(|v| v.key.as_str()), &current_key);
    Ok(StateKeys {
        state: record.name.clone(),
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
        report.push(state_report(app, &record).await?);
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
    record: &StateRecord,
    dry_run: bool,
    on_version: &(dyn Fn() + Sync),
) -> Result<StateRewrap, Error> {
    let keys = app.keys()?;
    let to = keys.current_key_id(&context(record)).await?;
    let versions = app
        .catalog
        .versions(&record.org, &record.name, &record.incarnation)
        .await?;
    let mut done = StateRewrap {
        state: record.name.clone(),
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
            rewrap_version(app, keys, record, version, &to).await
        };
        match moved {
            Ok(Moved::Rewrapped) => done.rewrapped += 1,
            Ok(Moved::AlreadyCurrent) => done.current += 1,
            Ok(Moved::Gone) => {}
            Err(e) => {
                tracing::warn!(org = %record.org, state = %record.name, version = number, "re-wrap failed: {e}");
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
                detail: serde_json::json!({"rewrapped": done.rewrapped, "current": done.current, "failed": failed, "to": to, "key_backend": key_backend(&to)}),
            })
            .await?;
    }
    Ok(done)
}

/// Moves one version's slot to `to`, re-reading it after a lost race (a write replaced the
/// open version's content, another re-wrap moved it first).
async fn rewrap_version(
    app: &App,
    keys: &dyn KeyService,
    record: &StateRecord,
    mut version: VersionRecord,
    to: &str,
) -> Result<Moved, Error> {
    let (org, name, incarnation) = (&record.org, &record.name, &record.incarnation);
    for _ in 0..ATTEMPTS {
        if !needs_rewrap(&version.key, to) {
            return Ok(Moved::AlreadyCurrent);
        }
        let old = version.slot();
        let what = format!("version {} of state {}", version.version, record.name);
        let place = Place {
            org,
            key_state: name,
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
        match app
            .catalog
            .replace_key_slot(org, name, incarnation, version.version, &old, &new)
            .await
        {
            Ok(()) => return Ok(Moved::Rewrapped),
            Err(StoreError::Conflict) => {
                match app
                    .catalog
                    .version(org, name, incarnation, version.version)
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
