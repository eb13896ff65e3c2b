//! State records, versions and audit in memory: a commit checks the revision and applies
//! every part under the one lock, so it is as atomic as a store's transaction.

use async_trait::async_trait;

use super::{org_page, MemoryStore};
use crate::domain::record::StateRecord;
use crate::domain::version::VersionRecord;
use crate::domain::Timestamp;
use crate::ports::{
    AuditEntry, AuditQuery, AuditRecord, Commit, DeletedChange, OrgAndState, OrgRecord, SlotChange,
    SlotOwner, StateCatalog, StoreError,
};

#[async_trait]
impl StateCatalog for MemoryStore {
    async fn state(&self, org: &str, name: &str) -> Result<Option<StateRecord>, StoreError> {
        Ok(self.lock().states.get(&(org.into(), name.into())).cloned())
    }

    async fn org_and_state(
        &self,
        org: &str,
        name: &str,
    ) -> Result<(Option<OrgRecord>, Option<StateRecord>), StoreError> {
        let inner = self.lock();
        Ok((
            inner.orgs.get(org).cloned(),
            inner.states.get(&(org.into(), name.into())).cloned(),
        ))
    }

    async fn org_and_state_with_content(
        &self,
        org: &str,
        name: &str,
    ) -> Result<OrgAndState, StoreError> {
        let inner = self.lock();
        let state = inner.states.get(&(org.into(), name.into())).map(|record| {
            let content = record.latest.as_ref().filter(|l| l.inline).and_then(|l| {
                let key = (
                    org.into(),
                    record.home().to_owned(),
                    record.incarnation.clone(),
                    l.version,
                );
                inner.contents.get(&key).map(|c| c.to_vec())
            });
            (record.clone(), content)
        });
        Ok((inner.orgs.get(org).cloned(), state))
    }

    async fn states(
        &self,
        org: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<StateRecord>, StoreError> {
        Ok(org_page(&self.lock().states, org, after, limit))
    }

    async fn version(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
        version: u64,
    ) -> Result<Option<VersionRecord>, StoreError> {
        let key = (org.into(), name.into(), incarnation.into(), version);
        Ok(self.lock().versions.get(&key).cloned())
    }

    async fn content(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
        version: u64,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let key = (org.into(), name.into(), incarnation.into(), version);
        Ok(self.lock().contents.get(&key).map(|c| c.to_vec()))
    }

    async fn versions(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
    ) -> Result<Vec<VersionRecord>, StoreError> {
        let inner = self.lock();
        let mut versions: Vec<VersionRecord> = inner
            .versions
            .iter()
            .filter(|((o, n, i, _), _)| o == org && n == name && i == incarnation)
            .map(|(_, v)| v.clone())
            .collect();
        versions.sort_by_key(|v| std::cmp::Reverse(v.version));
        Ok(versions)
    }

    async fn add_pending_blob(&self, blob: &str, at: Timestamp) -> Result<(), StoreError> {
        self.lock().pending.insert(blob.to_owned(), at);
        Ok(())
    }

    async fn commit(&self, commit: Commit) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let key = (commit.org.clone(), commit.name.clone());
        let current = inner.states.get(&key).map_or(0, |r| r.revision);
        if current != commit.expected_revision {
            return Err(StoreError::Conflict);
        }
        if let Some(check) = &commit.step {
            let revoked = inner
                .tokens
                .iter()
                .find(|t| t.hash == check.token_hash)
                .is_none_or(|t| t.revoked);
            let ended = inner.runs.get(&check.run).and_then(|r| r.ended_at);
            if revoked || ended.is_some_and(|at| at < check.ended_not_before) {
                return Err(StoreError::Conflict);
            }
        }
        if let Some(change) = &commit.inventory {
            if inner.refuses(&commit.org, &commit.name, change) {
                return Err(StoreError::Conflict);
            }
        }
        match &commit.deleted {
            Some(DeletedChange::Take { id, revision }) => {
                let dkey = (commit.org.clone(), id.clone());
                if inner.deleted.get(&dkey).map(|d| d.revision) != Some(*revision) {
                    return Err(StoreError::Conflict);
                }
                inner.deleted.remove(&dkey);
            }
            Some(DeletedChange::Keep(deleted)) => {
                let dkey = (commit.org.clone(), deleted.id.clone());
                inner.deleted.insert(dkey, (**deleted).clone());
            }
            None => {}
        }
        match &commit.state {
            Some(record) => {
                for v in &commit.versions {
                    let vkey = (
                        commit.org.clone(),
                        commit.home.clone(),
                        record.incarnation.clone(),
                        v.version,
                    );
                    match commit.content_of(v.version) {
                        Some(sealed) => {
                            inner.contents.insert(vkey.clone(), sealed.clone());
                        }
                        None if !v.inline => {
                            inner.contents.remove(&vkey);
                        }
                        None => {}
                    }
                    inner.versions.insert(vkey, v.clone());
                }
                inner.states.insert(key, record.clone());
            }
            None => {
                inner.states.remove(&key);
            }
        }
        for blob in &commit.committed_blobs {
            inner.pending.remove(blob);
        }
        for blob in commit.doomed_blobs {
            inner.doomed.entry(blob).or_insert(commit.at);
        }
        for item in commit.run_items {
            if !inner.run_items.contains(&item) {
                inner.run_items.push(item);
            }
        }
        for mark in commit.version_marks {
            let key = (commit.org.clone(), commit.home.clone(), mark.incarnation);
            let below = inner.marks.entry(key).or_insert(0);
            *below = (*below).max(mark.below);
        }
        if let Some(change) = &commit.inventory {
            inner.change_inventory(&commit.org, &commit.name, change);
        }
        inner.audit.extend(commit.audit);
        Ok(())
    }

    async fn replace_key_slot(&self, change: &SlotChange<'_>) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let vkey = (
            change.org.to_owned(),
            change.home.to_owned(),
            change.incarnation.to_owned(),
            change.version,
        );
        if inner.versions.get(&vkey).map(|v| v.slot()).as_ref() != Some(change.old) {
            return Err(StoreError::Conflict);
        }
        match change.owner {
            SlotOwner::State(name) => {
                let skey = (change.org.to_owned(), name.to_owned());
                let state = inner
                    .states
                    .get(&skey)
                    .filter(|r| r.incarnation == change.incarnation)
                    .ok_or(StoreError::Conflict)?
                    .with_key_slot(change.version, change.new);
                inner.states.insert(skey, state);
            }
            SlotOwner::Deleted(id) => {
                let deleted = inner
                    .deleted
                    .get_mut(&(change.org.to_owned(), id.to_owned()))
                    .filter(|d| d.record.incarnation == change.incarnation)
                    .ok_or(StoreError::Conflict)?;
                deleted.revision += 1;
            }
        }
        if let Some(record) = inner.versions.get_mut(&vkey) {
            record.set_slot(change.new);
        }
        Ok(())
    }

    async fn append_audit(&self, entry: &AuditEntry) -> Result<(), StoreError> {
        self.lock().audit.push(entry.clone());
        Ok(())
    }

    async fn audit(&self, org: &str, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .audit
            .iter()
            .enumerate()
            .rev()
            .map(|(i, e)| (i as u64 + 1, e))
            .filter(|(seq, e)| {
                e.org == org
                    && query.before.is_none_or(|b| *seq < b)
                    && query
                        .state
                        .as_ref()
                        .is_none_or(|s| e.state.as_ref() == Some(s))
                    && query.action.as_ref().is_none_or(|a| &e.action == a)
            })
            .take(query.limit)
            .map(|(seq, e)| AuditRecord {
                seq,
                entry: e.clone(),
            })
            .collect())
    }
}
