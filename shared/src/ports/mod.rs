//! The ports: what storage must provide, as few and as narrow traits as the use cases need.
//! Adapters (memory, local, AWS) implement them and pass one contract suite. One file per
//! port, each with the records its calls carry: `state` (state records, versions, commits),
//! `deleted` (deleted states kept for their retention),
//! `audit` (the entries every port may write), `access` (tokens and orgs), `runs`, `sweep`,
//! `apps` (app states and their archives), `trust` (trust policies), `protection`
//! (protected states), `inventory` (resource instances across states), `issuers` (OpenID Connect issuers' keys, fetched and kept), `blobs`, `keys`, and
//! `metrics` (what the service reports about its work). Every type is re-exported
//! here, so callers name `crate::ports::X` whichever file holds it. No adapter, no I/O, no
//! AWS or HTTP types.

mod access;
mod apps;
mod audit;
mod blobs;
mod deleted;
mod inventory;
mod issuers;
mod keys;
mod metrics;
mod protection;
mod runs;
mod state;
mod sweep;
mod trust;

pub use access::{AccessCatalog, ExchangeMark, InventoryKey, OrgRecord, TokenKind, TokenRecord};
pub use apps::{AppCatalog, AppCommit};
pub use audit::{AuditEntry, AuditQuery, AuditRecord};
pub use blobs::{BlobStore, OpenedBlob, WriteObject};
pub use deleted::DeletedCatalog;
pub use inventory::{
    conflict_groups, conflicts_among, largest_first, provider_matches, IndexedState,
    InventoryCatalog, InventoryChange, InventoryCounts, InventoryPatch, InventorySummary,
    ResourceQuery, ResourceRow,
};
pub use issuers::{FetchedKeys, IssuerError, IssuerKeyStore, IssuerKeys, KeptKeys};
pub use keys::{key_backend, DataKey, KeyContext, KeyError, KeyOpener, KeyService, WrappedKey};
pub use metrics::{
    Census, KeyCall, LockCensus, Metrics, RequestMeasure, SweepPass, Unmeasured, VersionKind,
};
pub use protection::ProtectionCatalog;
pub use runs::{RunCatalog, RunItem, RunRecord};
pub use state::{
    Commit, DeletedChange, InlineContent, OrgAndState, SlotChange, SlotOwner, StateCatalog,
    StepCheck, VersionMark, INLINE_MAX_BYTES,
};
pub use sweep::SweepCatalog;
pub use trust::{TrustCatalog, TrustRecord, TrustWrite};

/// Why storage could not do what was asked. A lost compare-and-swap is an expected outcome
/// (`Conflict`), which the services retry; it never reaches a client as an error.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the record changed since it was read")]
    Conflict,
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    #[error("stored data is damaged: {0}")]
    Corrupt(String),
}

/// Everything a catalog provides.
pub trait Catalog:
    StateCatalog
    + DeletedCatalog
    + AccessCatalog
    + SweepCatalog
    + RunCatalog
    + AppCatalog
    + TrustCatalog
    + ProtectionCatalog
    + InventoryCatalog
{
}
impl<T> Catalog for T where
    T: StateCatalog
        + DeletedCatalog
        + AccessCatalog
        + SweepCatalog
        + RunCatalog
        + AppCatalog
        + TrustCatalog
        + ProtectionCatalog
        + InventoryCatalog
{
}
