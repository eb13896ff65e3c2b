//! The inventory in memory: each state's entry whole, under the one lock, searched by
//! walking the org's entries in name order.

use std::collections::HashSet;

use async_trait::async_trait;

use super::{Inner, MemoryStore};
use crate::domain::inventory::{ResourceTag, StateInventory, TagSet};
use crate::ports::{
    conflicts_among, IndexedState, InventoryCatalog, InventoryChange, InventorySummary,
    ResourceQuery, ResourceRow, StoreError,
};

impl Inner {
    /// The org's entries, in state name order.
    fn entries<'a>(
        &'a self,
        org: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a StateInventory)> + Clone {
        self.inventory
            .range((org.to_owned(), String::new())..)
            .take_while(move |((o, _), _)| o == org)
            .map(|((_, state), inventory)| (state.as_str(), inventory))
    }

    /// Whether a commit's change to its state's entry is refused: a keep over an entry that
    /// is missing or not indexed (see [`InventoryChange::Keep`]).
    pub(super) fn refuses(&self, org: &str, state: &str, change: &InventoryChange) -> bool {
        let key = (org.to_owned(), state.to_owned());
        matches!(change, InventoryChange::Keep { .. })
            && !self.inventory.get(&key).is_some_and(|e| e.indexed)
    }

    /// Applies a commit's change to its state's entry.
    pub(super) fn change_inventory(&mut self, org: &str, state: &str, change: &InventoryChange) {
        let key = (org.to_owned(), state.to_owned());
        match change {
            InventoryChange::Replace(inventory) => {
                self.inventory.insert(key, inventory.clone());
            }
            InventoryChange::Keep { version } => {
                // `refuses` turned down a keep over an entry missing or not indexed.
                if let Some(entry) = self.inventory.get_mut(&key) {
                    entry.version = *version;
                }
            }
            InventoryChange::Patch(patch) => {
                let entry = self
                    .inventory
                    .entry(key)
                    .or_insert_with(|| not_indexed(patch.version));
                if entry.tags.is_none() {
                    *entry = not_indexed(patch.version);
                    return;
                }
                let gone = TagSet::of(&patch.gone);
                entry.instances.retain(|i| !gone.contains(i.resource));
                let mut addresses: HashSet<String> =
                    entry.instances.iter().map(|i| i.address.clone()).collect();
                // An address a kept row holds stays that row's, as the other stores keep it.
                entry.instances.extend(
                    patch
                        .instances
                        .iter()
                        .filter(|i| addresses.insert(i.address.clone()))
                        .cloned(),
                );
                entry.instances.sort_by(|a, b| a.address.cmp(&b.address));
                entry.version = patch.version;
                entry.tags = Some(patch.tags.clone());
            }
            InventoryChange::Remove => {
                self.inventory.remove(&key);
            }
        }
    }
}

/// An entry listed as not indexed at `version`, for `index rebuild` to fill.
fn not_indexed(version: u64) -> StateInventory {
    StateInventory {
        version,
        indexed: false,
        instances: Vec::new(),
        tags: None,
    }
}

#[async_trait]
impl InventoryCatalog for MemoryStore {
    async fn resources(
        &self,
        org: &str,
        query: &ResourceQuery,
    ) -> Result<Vec<ResourceRow>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .entries(org)
            .flat_map(|(state, inventory)| {
                inventory
                    .instances
                    .iter()
                    .filter(move |i| query.is_after(state, &i.address) && query.matches(state, i))
                    .map(move |i| ResourceRow::of(state, inventory.version, i))
            })
            .take(query.limit)
            .collect())
    }

    async fn conflicts(
        &self,
        org: &str,
        state: Option<&str>,
    ) -> Result<Vec<Vec<ResourceRow>>, StoreError> {
        Ok(conflicts_among(self.lock().entries(org), state))
    }

    async fn indexed_states(&self, org: &str) -> Result<Vec<IndexedState>, StoreError> {
        Ok(self
            .lock()
            .entries(org)
            .map(|(state, inventory)| IndexedState::of(state, inventory))
            .collect())
    }

    async fn inventory_summary(&self, org: &str) -> Result<InventorySummary, StoreError> {
        Ok(InventorySummary::of(self.lock().entries(org)))
    }

    async fn resource_tags(
        &self,
        org: &str,
        state: &str,
    ) -> Result<Option<Vec<ResourceTag>>, StoreError> {
        let inner = self.lock();
        let key = (org.to_owned(), state.to_owned());
        Ok(inner
            .inventory
            .get(&key)
            .and_then(|entry| entry.tags.clone()))
    }

    async fn holds_version(
        &self,
        org: &str,
        state: &str,
        version: u64,
    ) -> Result<bool, StoreError> {
        let inner = self.lock();
        let key = (org.to_owned(), state.to_owned());
        Ok(inner
            .inventory
            .get(&key)
            .is_some_and(|e| e.indexed && e.version == version))
    }

    async fn put_inventory(
        &self,
        org: &str,
        state: &str,
        revision: u64,
        inventory: &StateInventory,
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let record = inner.states.get(&(org.to_owned(), state.to_owned()));
        let current = record.filter(|r| {
            r.revision == revision
                && r.latest.as_ref().map(|v| v.version) == Some(inventory.version)
        });
        if current.is_none() {
            return Err(StoreError::Conflict);
        }
        inner.change_inventory(org, state, &InventoryChange::Replace(inventory.clone()));
        Ok(())
    }
}
