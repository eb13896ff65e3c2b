//! Deleted states in memory: kept by a delete's commit, taken by a restore's (in `state`),
//! listed and purged here.

use async_trait::async_trait;

use super::MemoryStore;
use crate::domain::deleted::DeletedState;
use crate::ports::{AuditEntry, DeletedCatalog, StoreError, VersionMark};

#[async_trait]
impl DeletedCatalog for MemoryStore {
    async fn deleted_states(
        &self,
        org: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeletedState>, StoreError> {
        Ok(super::org_page(&self.lock().deleted, org, after, limit))
    }

    async fn deleted_state(&self, org: &str, id: &str) -> Result<Option<DeletedState>, StoreError> {
        Ok(self.lock().deleted.get(&(org.into(), id.into())).cloned())
    }

    async fn purge_deleted(
        &self,
        deleted: &DeletedState,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let key = (deleted.org.clone(), deleted.id.clone());
        if inner.deleted.get(&key).map(|d| d.revision) != Some(deleted.revision) {
            return Err(StoreError::Conflict);
        }
        inner.deleted.remove(&key);
        let record = &deleted.record;
        let mark = (
            record.org.clone(),
            record.home().to_owned(),
            record.incarnation.clone(),
        );
        inner.marks.insert(mark, VersionMark::ALL);
        inner.audit.push(audit.clone());
        Ok(())
    }
}
