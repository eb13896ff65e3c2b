//! The issuers' keys kept in memory, compared and swapped under the one lock: the reference
//! the service's tests share among several `Issuers`, as the functions share the table.

use async_trait::async_trait;

use super::MemoryStore;
use crate::domain::Timestamp;
use crate::ports::{IssuerKeyStore, KeptKeys, StoreError};

#[async_trait]
impl IssuerKeyStore for MemoryStore {
    async fn kept_keys(&self, issuer: &str) -> Result<Option<KeptKeys>, StoreError> {
        Ok(self.lock().kept_keys.get(issuer).cloned())
    }

    async fn put_kept_keys(
        &self,
        kept: &KeptKeys,
        expected_tried_at: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let stored = inner.kept_keys.get(&kept.issuer).map(|k| k.tried_at);
        if stored != expected_tried_at {
            return Err(StoreError::Conflict);
        }
        inner.kept_keys.insert(kept.issuer.clone(), kept.clone());
        Ok(())
    }
}
