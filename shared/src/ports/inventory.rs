//! The inventory port: the index of resource instances across an org's states (kept in the
//! same commit as the version it describes, `Commit::inventory`, whatever the state's size,
//! so every read answers as of the last commit from the index alone), and the reads that
//! answer a search, the objects two states manage, and the org's overview. It stores addresses,
//! types, providers and keyed digests, never a value. No adapter, no I/O.

use async_trait::async_trait;

use super::StoreError;
use crate::domain::inventory::{namespace_type, Instance, Mode, ResourceTag, StateInventory};

/// What a commit does to its state's entry in the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InventoryChange {
    /// The state's instances are now these (a write, import, rollback or restore).
    Replace(StateInventory),
    /// The state's latest version is now `version`, its instances as they are: a save whose
    /// content the inventory keeps as it kept the latest version's (equal fingerprints). A
    /// store that can tell at no cost refuses the commit (`Conflict`) when the entry does
    /// not hold the latest version ([`InventoryCatalog::holds_version`]: missing or not
    /// indexed), so that the save decides again and sends the whole entry. One that cannot
    /// (DynamoDB, which would read the entry's head in every save) leaves a missing entry
    /// listed as not indexed at `version`, for the next save that changes an instance to
    /// build whole, rather than missing without a trace.
    Keep { version: u64 },
    /// The state's resources are now those of a document the entry holds most of: a save
    /// that changed a few resources sends only theirs.
    Patch(InventoryPatch),
    /// The state is gone (a delete): its instances leave the index.
    Remove,
}

/// A save's change to an entry kept by resource ([`InventoryCatalog::resource_tags`]): its
/// resources are now those of `tags`. The rows of the resources of `gone` are dropped, and
/// `instances` (the instances of the resources whose tags the entry lacks) added; every
/// other row stays. An entry that holds no tags (gone, not indexed, or kept whole) cannot
/// take it: it is left listed as not indexed at `version`, with no instances, for the next
/// save to build whole, as [`InventoryChange::Keep`] leaves a missing one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryPatch {
    pub version: u64,
    /// Every resource's tag, in the document's order.
    pub tags: Vec<ResourceTag>,
    /// The tags the entry holds that `tags` lacks: the resources whose rows go.
    pub gone: Vec<ResourceTag>,
    /// In address order.
    pub instances: Vec<Instance>,
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

impl IndexedState {
    /// `state`'s entry `inventory`, its instances counted.
    pub fn of(state: &str, inventory: &StateInventory) -> Self {
        Self {
            state: state.to_owned(),
            version: inventory.version,
            indexed: inventory.indexed,
            instances: inventory.instances.len() as u64,
        }
    }
}

/// What an org's overview shows of its index, read as of one commit, so that its figures
/// agree with each other.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InventorySummary {
    /// Every state's entry, in name order.
    pub states: Vec<IndexedState>,
    pub counts: InventoryCounts,
    /// How many objects two or more states manage (the groups of
    /// [`InventoryCatalog::conflicts`]).
    pub conflicts: u64,
}

impl InventorySummary {
    /// The summary of an org's entries, given in state name order: what an adapter that
    /// holds an org's whole index in memory answers [`InventoryCatalog::inventory_summary`]
    /// with, from one read of it.
    pub fn of<'a, I>(entries: I) -> Self
    where
        I: IntoIterator<Item = (&'a str, &'a StateInventory)>,
        I::IntoIter: Clone,
    {
        let entries = entries.into_iter();
        Self {
            states: entries
                .clone()
                .map(|(state, inventory)| IndexedState::of(state, inventory))
                .collect(),
            counts: InventoryCounts::of(entries.clone().map(|(_, inventory)| inventory)),
            conflicts: conflicts_among(entries, None).len() as u64,
        }
    }
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

    /// The org's entries, the counts of its instances and how many objects two of its
    /// states manage, as of one commit: what the overview shows, in one read of the index.
    async fn inventory_summary(&self, org: &str) -> Result<InventorySummary, StoreError>;

    /// The tags of the resources `state`'s entry holds, in their document's order, which a
    /// save compares its own with to send only what changed ([`InventoryChange::Patch`]).
    /// `None` when the entry holds none: missing, not indexed, replaced as a whole (two of
    /// its resources named one address), or on a store that keeps entries whole (there a
    /// patch would read the entry back: a save sends the whole entry instead).
    async fn resource_tags(
        &self,
        org: &str,
        state: &str,
    ) -> Result<Option<Vec<ResourceTag>>, StoreError>;

    /// Whether `state`'s entry holds `version`, indexed at it. A save whose keep was refused
    /// ([`InventoryChange::Keep`]) asks before keeping again and sends the whole entry when
    /// it does not, so an entry left not indexed (one an upgrade could not carry over, an
    /// entry removed outside the service) is indexed again by the state's next save.
    /// DynamoDB answers `true` unread: every commit there carries its entry whole, so one
    /// misses its version only when removed outside the service, and reading an entry's
    /// head would bill its first chunk to every save.
    async fn holds_version(&self, org: &str, state: &str, version: u64)
        -> Result<bool, StoreError>;

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

impl ResourceQuery {
    /// Whether an instance of `state` passes every filter that is set (`after` and `limit`
    /// aside): the one reading of the filters every adapter that filters in memory shares.
    pub fn matches(&self, state: &str, instance: &Instance) -> bool {
        self.state.as_deref().is_none_or(|s| s == state)
            && self
                .resource_type
                .as_deref()
                .is_none_or(|t| t == &*instance.resource_type)
            && self
                .module
                .as_deref()
                .is_none_or(|m| m == &*instance.module)
            && self
                .provider
                .as_deref()
                .is_none_or(|p| provider_matches(p, &instance.provider))
            && self.q.as_deref().is_none_or(|q| {
                // ASCII folding only, as SQLite's lower() does: every adapter agrees.
                instance
                    .address
                    .to_ascii_lowercase()
                    .contains(&q.to_ascii_lowercase())
            })
    }

    /// Whether (`state`, `address`) comes after the query's cursor.
    pub fn is_after(&self, state: &str, address: &str) -> bool {
        self.after
            .as_ref()
            .is_none_or(|(s, a)| (state, address) > (s.as_str(), a.as_str()))
    }
}

/// Whether `wanted` names the provider `source`: its full source address, its
/// `namespace/type`, or its type.
pub fn provider_matches(wanted: &str, source: &str) -> bool {
    let namespace_type = namespace_type(source);
    wanted == source
        || wanted == namespace_type
        || namespace_type
            .rsplit('/')
            .next()
            .is_some_and(|kind| kind == wanted)
}

impl ResourceRow {
    /// The row of `instance`, indexed from `version` of `state`.
    pub fn of(state: &str, version: u64, instance: &Instance) -> Self {
        Self {
            state: state.to_owned(),
            version,
            address: instance.address.clone(),
            module: instance.module.to_string(),
            mode: instance.mode,
            resource_type: instance.resource_type.to_string(),
            provider: instance.provider.to_string(),
        }
    }
}

/// The conflicts among an org's states' entries, given in state name order: instances with
/// equal digests in two or more states, grouped, each group in (state, address) order and the
/// groups in the order of their first rows; `state` keeps the groups that include it. What
/// an adapter that holds an org's whole index in memory answers
/// [`InventoryCatalog::conflicts`] with.
pub fn conflicts_among<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a StateInventory)>,
    state: Option<&str>,
) -> Vec<Vec<ResourceRow>> {
    let rows = entries.into_iter().flat_map(|(name, inventory)| {
        inventory.instances.iter().filter_map(move |instance| {
            let digest = instance.digest.clone()?;
            Some((digest, ResourceRow::of(name, inventory.version, instance)))
        })
    });
    conflict_groups(rows, state)
}

/// [`conflicts_among`] over rows found with their digests, in any order.
pub fn conflict_groups(
    rows: impl IntoIterator<Item = (String, ResourceRow)>,
    state: Option<&str>,
) -> Vec<Vec<ResourceRow>> {
    let mut by_digest: std::collections::HashMap<String, Vec<ResourceRow>> =
        std::collections::HashMap::new();
    for (digest, row) in rows {
        by_digest.entry(digest).or_default().push(row);
    }
    let mut groups: Vec<Vec<ResourceRow>> = by_digest
        .into_values()
        .filter_map(|mut rows| {
            rows.sort_by(|a, b| (&a.state, &a.address).cmp(&(&b.state, &b.address)));
            let first = rows.first()?;
            let states = rows.iter().filter(|r| r.state != first.state).count();
            let kept = state.is_none_or(|s| rows.iter().any(|r| r.state == s));
            (states > 0 && kept).then_some(rows)
        })
        .collect();
    groups.sort_by(|a, b| (&a[0].state, &a[0].address).cmp(&(&b[0].state, &b[0].address)));
    groups
}

impl InventoryCounts {
    /// The counts of an org's entries: by provider and by type, largest first (ties by
    /// name, so the order is stable).
    pub fn of<'a>(entries: impl IntoIterator<Item = &'a StateInventory>) -> Self {
        let mut instances = 0u64;
        let mut providers: std::collections::HashMap<&str, u64> = Default::default();
        let mut types: std::collections::HashMap<&str, u64> = Default::default();
        for inventory in entries {
            for instance in &inventory.instances {
                instances += 1;
                *providers.entry(&instance.provider).or_default() += 1;
                *types.entry(&instance.resource_type).or_default() += 1;
            }
        }
        Self {
            instances,
            by_provider: largest_first(providers),
            by_type: largest_first(types),
        }
    }
}

/// Counts, largest first, ties in name order.
pub fn largest_first(counts: std::collections::HashMap<&str, u64>) -> Vec<(String, u64)> {
    let mut counts: Vec<(String, u64)> = counts
        .into_iter()
        .map(|(name, n)| (name.to_owned(), n))
        .collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counts
}
