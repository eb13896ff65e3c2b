//! The inventory in DynamoDB: not stored yet; its reads answer that storage is unavailable.

use async_trait::async_trait;

use super::DynamoCatalog;
use crate::domain::inventory::StateInventory;
use crate::ports::{
    IndexedState, InventoryCatalog, InventoryCounts, ResourceQuery, ResourceRow, StoreError,
};

fn not_yet() -> StoreError {
    StoreError::Unavailable("the inventory is not kept on this store yet".into())
}

#[async_trait]
impl InventoryCatalog for DynamoCatalog {
    async fn resources(&self, _: &str, _: &ResourceQuery) -> Result<Vec<ResourceRow>, StoreError> {
        Err(not_yet())
    }
    async fn conflicts(
        &self,
        _: &str,
        _: Option<&str>,
    ) -> Result<Vec<Vec<ResourceRow>>, StoreError> {
        Err(not_yet())
    }
    async fn indexed_states(&self, _: &str) -> Result<Vec<IndexedState>, StoreError> {
        Err(not_yet())
    }
    async fn inventory_counts(&self, _: &str) -> Result<InventoryCounts, StoreError> {
        Err(not_yet())
    }
    async fn put_inventory(
        &self,
        _: &str,
        _: &str,
        _: u64,
        _: &StateInventory,
    ) -> Result<(), StoreError> {
        Err(not_yet())
    }
}
