//! App states and their archives in memory, compared and swapped on the record's revision
//! under the one lock.

use async_trait::async_trait;

use super::{org_page, MemoryStore};
use crate::domain::app::{AppRecord, ArchiveRecord};
use crate::ports::{AppCatalog, AppCommit, StoreError};

#[async_trait]
impl AppCatalog for MemoryStore {
    async fn app(&self, org: &str, name: &str) -> Result<Option<AppRecord>, StoreError> {
        Ok(self.lock().apps.get(&(org.into(), name.into())).cloned())
    }

    async fn apps(
        &self,
        org: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AppRecord>, StoreError> {
        Ok(org_page(&self.lock().apps, org, after, limit))
    }

    async fn archive(
        &self,
        org: &str,
        name: &str,
        commit_id: &str,
    ) -> Result<Option<ArchiveRecord>, StoreError> {
        let key = (org.to_owned(), name.to_owned(), commit_id.to_owned());
        Ok(self.lock().archives.get(&key).cloned())
    }

    async fn archives(
        &self,
        org: &str,
        name: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ArchiveRecord>, StoreError> {
        let inner = self.lock();
        let from = (org.to_owned(), name.to_owned(), String::new());
        Ok(inner
            .archives
            .range(from..)
            .take_while(|((o, n, _), _)| o == org && n == name)
            .filter(|((_, _, c), _)| before.is_none_or(|b| c.as_str() < b))
            .map(|(_, a)| a.clone())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .take(limit)
            .collect())
    }

    async fn archive_after(
        &self,
        org: &str,
        name: &str,
        after: &str,
    ) -> Result<Option<ArchiveRecord>, StoreError> {
        let inner = self.lock();
        let from = (org.to_owned(), name.to_owned(), after.to_owned());
        Ok(inner
            .archives
            .range(from..)
            .take_while(|((o, n, _), _)| o == org && n == name)
            .find(|((_, _, c), _)| c.as_str() > after)
            .map(|(_, a)| a.clone()))
    }

    async fn commit_app(&self, commit: AppCommit) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let key = (commit.app.org.clone(), commit.app.name.clone());
        let current = inner.apps.get(&key).map_or(0, |r| r.revision);
        if current != commit.expected_revision {
            return Err(StoreError::Conflict);
        }
        if let Some(archive) = commit.sealed {
            let akey = (key.0.clone(), key.1.clone(), archive.commit_id.clone());
            inner.archives.insert(akey, archive);
        }
        if let Some(commit_id) = commit.deleted {
            inner
                .archives
                .remove(&(key.0.clone(), key.1.clone(), commit_id));
        }
        inner.apps.insert(key, commit.app);
        for blob in &commit.committed_blobs {
            inner.pending.remove(blob);
        }
        for blob in commit.doomed_blobs {
            inner.doomed.entry(blob).or_insert(commit.at);
        }
        inner.audit.extend(commit.audit);
        Ok(())
    }
}
