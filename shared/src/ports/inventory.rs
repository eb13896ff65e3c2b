//! The inventory port: the index of resource instances across an org's states (kept in the
//! same commit as the version it describes, `Commit::inventory`), and the reads that answer
//! a search, the objects two states manage, and the org's overview. It stores addresses,
//! types, providers and keyed digests, never a value. No adapter, no I/O.

use async_trait::async_trait;

use super::StoreError;
use crate::domain::inventory::{Mode, StateInventory};

/// What a commit does to its state's entry in the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InventoryChange {
    /// The state's instances are now these (a write, import, rollback or restore).
    Replace(StateInventory),
    /// The state is gone (a delete): its instances leave the index.
    Remove,
}

/// A search of an org's instances. Every filter that is set must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceQuery {
    /// A substring of the address, case-insensitive.
    pub q: Option<String>,
    /// The resource type, exactly.
    pub resource_type: Option<String>,
    /// The provider: its full source address, or its `namespace/type`, or its type
    /// (`hashicorp/aws` and `aws` both match `registry.terraform.io/hashicorp/aws`).
    pub provider: Option<String>,
    /// The module path, exactly (`""` is the root module).
    pub module: Option<String>,
    /// The state's name, exactly.
    pub state: Option<String>,
    /// Only instances after this (state, address), in (state, address) order.
    pub after: Option<(String, String)>,
    pub limit: usize,
}

/// One instance found, with the state and version it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRow {
    pub state: String,
    pub version: u64,
    pub address: String,
    pub module: String,
    pub mode: Mode,
    pub resource_type: String,
    pub provider: String,
}

/// A state's entry in the index, without its instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedState {
    pub state: String,
    pub version: u64,
    pub indexed: bool,
    pub instances: u64,
}

/// How many instances an org has by provider and by type, largest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InventoryCounts {
    pub instances: u64,
    pub by_provider: Vec<(String, u64)>,
    pub by_type: Vec<(String, u64)>,
}

/// The index's reads, and its writes outside a version's commit (a rebuild).
#[async_trait]
pub trait InventoryCatalog: Send + Sync {
    /// Instances matching `query`, in (state, address) order, at most `query.limit`.
    async fn resources(
        &self,
        org: &str,
        query: &ResourceQuery,
    ) -> Result<Vec<ResourceRow>, StoreError>;

    /// Groups of instances whose digests are equal and which lie in two or more different
    /// states: each group one object managed twice, its rows in (state, address) order; the
    /// groups in the order of their first row. `state` keeps only the groups that include
    /// that state.
    async fn conflicts(
        &self,
        org: &str,
        state: Option<&str>,
    ) -> Result<Vec<Vec<ResourceRow>>, StoreError>;

    /// Every state's entry in the index, in name order.
    async fn indexed_states(&self, org: &str) -> Result<Vec<IndexedState>, StoreError>;

    /// Counts of the org's instances.
    async fn inventory_counts(&self, org: &str) -> Result<InventoryCounts, StoreError>;

    /// Replaces one state's entry (a rebuild) if the state's record is still at `revision`
    /// and its latest version is `inventory.version`.
    ///
    /// # Errors
    /// `Conflict` when the state moved on (a commit since carries its own index): nothing
    /// is written.
    async fn put_inventory(
        &self,
        org: &str,
        state: &str,
        revision: u64,
        inventory: &StateInventory,
    ) -> Result<(), StoreError>;
}
