//! Deleted states in memory: kept by a delete's commit, taken by a restore's (in `state`),
//! listed, purged and stored as a migration copies them here.

use async_trait::async_trait;

use super::MemoryStore;
use std::sync::Arc;

use crate::domain::deleted::DeletedState;
use crate::domain::version::VersionRecord;
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

    async fn put_deleted_version(
        &self,
        deleted: &DeletedState,
        version: &VersionRecord,
        sealed: Option<&[u8]>,
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let record = &deleted.record;
        let vkey = (
            record.org.clone(),
            record.home().to_owned(),
            record.incarnation.clone(),
            version.version,
        );
        match sealed {
            Some(sealed) => {
                inner
                    .contents
                    .insert(vkey.clone(), Arc::new(sealed.to_vec()));
            }
            None => {
                inner.contents.remove(&vkey);
            }
        }
        if !version.inline {
            inner.pending.remove(&version.blob);
        }
        inner.versions.insert(vkey, version.clone());
        Ok(())
    }

    async fn put_deleted(
        &self,
        deleted: &DeletedState,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let key = (deleted.org.clone(), deleted.id.clone());
        if inner.deleted.contains_key(&key) {
            return Err(StoreError::Conflict);
        }
        inner.deleted.insert(key, deleted.clone());
        inner.audit.push(audit.clone());
        Ok(())
    }
}
