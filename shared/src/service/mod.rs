//! The use cases. Each reads a snapshot, asks the domain for a decision, writes blobs, and
//! commits with one compare-and-swap, re-reading and deciding again when it lost a race (a
//! lost race is never an error a client sees).

pub mod admin;
pub mod app_changes;
pub mod app_keys;
pub mod app_reads;
pub mod auth;
mod commit;
pub mod comparison;
mod content;
pub mod deleted;
pub mod identity;
mod indexing;
pub mod issuers;
pub mod key_cache;
pub mod keys;
pub mod listing;
pub mod lock;
pub mod manage;
mod metered_keys;
pub mod migrate;
pub mod outputs;
pub mod overview;
pub mod protection;
pub mod reindex;
pub mod resources;
mod retry;
pub mod runs;
pub mod state;
pub mod sweep;
pub mod tokens;
pub mod trust;
pub mod verify;
mod work;
pub mod workload;

use std::sync::Arc;

use crate::domain::name::StateName;
use crate::domain::permission::{Allocation, Permission};
use crate::domain::protection::{check_change, Change};
use crate::domain::record::StateRecord;
use crate::domain::version::prune_below;
use crate::domain::{Principal, Refusal, Timestamp};
use commit::FirstRead;
pub use indexing::IndexKeys;
use key_cache::KeyCache;

use crate::ports::{BlobStore, Catalog, KeyError, KeyService, Metrics, StoreError, VersionMark};
use metered_keys::MeteredKeys;

/// The time, injectable so tests move it instead of sleeping.
pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

/// The system clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        time::OffsetDateTime::now_utc()
    }
}

/// Limits that requests are checked against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// `HEGEMONY_TF_STATE_MAX_BYTES`: the largest state accepted.
    pub max_state_bytes: u64,
    /// `HEGEMONY_TF_STATE_KEEP_VERSIONS`: how many versions of a state are kept.
    pub keep_versions: u64,
    /// `HEGEMONY_TF_STATE_RUN_END_GRACE_SECONDS`: how long a step's lock outlives its run.
    pub run_end_grace: time::Duration,
    /// `HEGEMONY_TF_STATE_DELETED_RETENTION_DAYS`: how long a deleted state is kept for a
    /// restore; zero purges it at once.
    pub deleted_retention: time::Duration,
    /// On Lambda, the payload ceiling a request must fit in (`max_state_bytes` is clamped
    /// under it), so a refusal can name it and the front door for larger states.
    pub lambda_ceiling: Option<u64>,
}

/// Everything a handler needs: built once at start, borrowed by every request.
pub struct App {
    pub catalog: Arc<dyn Catalog>,
    pub blobs: Arc<dyn BlobStore>,
    /// `None` when no key is configured: managed state is then unavailable, and says why.
    pub keys: Option<Arc<dyn KeyService>>,
    /// The data keys `keys` unwrapped lately, so reading a version again does not ask the
    /// key service again (`HEGEMONY_TF_STATE_KEY_CACHE_*`).
    pub key_cache: KeyCache,
    /// The orgs' inventory keys unwrapped lately, so a save indexes its version without
    /// asking the key service.
    pub index_keys: IndexKeys,
    pub clock: Arc<dyn Clock>,
    pub limits: Limits,
    /// Where the links the service hands out point.
    pub links: Links,
    /// OpenID Connect issuers' signing keys, for the workload exchange.
    pub issuers: issuers::Issuers,
    /// Where requests, sealed versions, key calls and sweeps are reported
    /// ([`App::measured`]); [`Unmeasured`](crate::ports::Unmeasured) until a deployment asks for metrics.
    pub metrics: Arc<dyn Metrics>,
}

/// Where the links the service hands out point, from the settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Links {
    /// `HEGEMONY_RUN_URL_TEMPLATE`, e.g. `https://ci.example.com/runs/{run}`.
    pub run_url_template: Option<String>,
    /// `HEGEMONY_PUBLIC_URL`, e.g. `https://state.example.com/prefix` (no trailing slash):
    /// the API's base as clients reach it, for the backend addresses a mint hands out. When
    /// unset they come from the request's `Host` and `X-Forwarded-Proto`, which a proxy with
    /// a path prefix or a rewritten Host makes wrong.
    pub public_url: Option<String>,
    /// `HEGEMONY_CONTAINER_URL`, e.g. `https://door.example.com`: the container front door of
    /// a deployment on Lambda, where a read whose answer is too large for a function is sent.
    pub container_url: Option<String>,
}

/// Why a use case did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// No, unknown, expired or revoked credentials.
    #[error("{0}")]
    Unauthenticated(String),
    /// An ID token that is genuine but used up: it was exchanged for a session already.
    #[error("{0}")]
    InvalidToken(String),
    /// A transient fault: contention, the key service down. Clients retry.
    #[error("{0}")]
    Unavailable(String),
    /// Storage failed in a way that can pass (busy, I/O, a full disk): clients retry as for
    /// `Unavailable`, and an operator should look, so it is logged as an error, not as a
    /// refusal.
    #[error("{0}")]
    StorageFault(String),
    /// No key is configured: permanent until an operator configures one.
    #[error("managed state unavailable: no key configured (set HEGEMONY_TF_STATE_ENCRYPTION_KEY or HEGEMONY_TF_STATE_KEY_BACKEND)")]
    NoKey,
    /// A version was sealed under another key than the one configured.
    #[error("{0}")]
    WrongKey(String),
    /// Stored data does not open or is missing: needs an operator.
    #[error("{0}")]
    Damaged(String),
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        match e {
            // Use cases retry conflicts themselves; one that escapes has exhausted them.
            StoreError::Conflict => {
                Error::Unavailable("too many concurrent changes to this state; retry".into())
            }
            StoreError::Unavailable(why) => Error::StorageFault(why),
            StoreError::Corrupt(why) => Error::Damaged(why),
        }
    }
}

impl From<KeyError> for Error {
    fn from(e: KeyError) -> Self {
        match e {
            KeyError::WrongKey { .. } => Error::WrongKey(e.to_string()),
            KeyError::Unwrap { .. } => Error::Damaged(e.to_string()),
            KeyError::Unavailable(_) => Error::Unavailable(e.to_string()),
        }
    }
}

impl App {
    /// This app reporting to `metrics`: its requests (counted by the HTTP layer), sealed
    /// versions, sweeps, key cache and every call on its key service.
    #[must_use]
    pub fn measured(mut self, metrics: Arc<dyn Metrics>) -> Self {
        self.keys = self
            .keys
            .map(|keys| Arc::new(MeteredKeys::new(keys, metrics.clone())) as Arc<dyn KeyService>);
        self.key_cache.report_to(metrics.clone());
        self.metrics = metrics;
        self
    }

    /// The link to a run, when a template is configured.
    pub fn run_url(&self, run: &str) -> Option<String> {
        self.links
            .run_url_template
            .as_ref()
            .map(|t| t.replace("{run}", run))
    }

    /// The sweeper's mark for a commit that creates `version` in `incarnation`.
    fn prune_mark(&self, incarnation: &str, version: u64) -> Vec<VersionMark> {
        prune_below(version, self.limits.keep_versions)
            .map(|below| VersionMark {
                incarnation: incarnation.to_owned(),
                below,
            })
            .into_iter()
            .collect()
    }

    fn keys(&self) -> Result<&dyn KeyService, Error> {
        self.keys.as_deref().ok_or(Error::NoKey)
    }

    /// The caller's org's allocation of permissions to roles.
    async fn allocation(&self, org: &str) -> Result<Allocation, Error> {
        Ok(self
            .catalog
            .org(org)
            .await?
            .map(|o| o.allocation)
            .unwrap_or_default())
    }

    /// Checks that the caller holds `permission`, reading the state's record in the same
    /// catalog read as the org's allocation; returns both, the record for the first attempt.
    async fn require_with_state(
        &self,
        principal: &Principal,
        permission: Permission,
        name: &StateName,
    ) -> Result<(Allocation, FirstRead), Error> {
        self.require_for(principal, permission, None, name).await
    }

    /// As [`App::require_with_state`], for a change the org's protected-state rules may keep
    /// to workload sessions of some trust policies: the rules come in the same read, with the
    /// org's settings.
    async fn require_to_change(
        &self,
        principal: &Principal,
        permission: Permission,
        change: Change,
        name: &StateName,
    ) -> Result<(Allocation, FirstRead), Error> {
        self.require_for(principal, permission, Some(change), name)
            .await
    }

    async fn require_for(
        &self,
        principal: &Principal,
        permission: Permission,
        change: Option<Change>,
        name: &StateName,
    ) -> Result<(Allocation, FirstRead), Error> {
        let (org, state) = self
            .catalog
            .org_and_state(&principal.org, name.as_str())
            .await?;
        let (allocation, protections, inventory_key) = org
            .map(|o| (o.allocation, o.protections, o.inventory_key))
            .unwrap_or_default();
        allocation.require(principal.role, permission)?;
        if let Some(change) = change {
            check_change(&protections, name.as_str(), principal, change)?;
        }
        Ok((allocation, FirstRead::new(state, inventory_key)))
    }

    /// Checks that the caller holds `permission`, reading the state's record, and its latest
    /// version's inline content, in the same catalog read as the org's allocation.
    async fn require_with_content(
        &self,
        principal: &Principal,
        permission: Permission,
        name: &StateName,
    ) -> Result<Option<(StateRecord, Option<Vec<u8>>)>, Error> {
        let (org, state) = self
            .catalog
            .org_and_state_with_content(&principal.org, name.as_str())
            .await?;
        let allocation = org.map(|o| o.allocation).unwrap_or_default();
        allocation.require(principal.role, permission)?;
        Ok(state)
    }

    /// Checks that the caller holds `permission`, returning the org's allocation.
    async fn require(
        &self,
        principal: &Principal,
        permission: Permission,
    ) -> Result<Allocation, Error> {
        let allocation = self.allocation(&principal.org).await?;
        allocation.require(principal.role, permission)?;
        Ok(allocation)
    }
}
