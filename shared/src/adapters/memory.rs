//! The ports in memory: one lock around plain maps. For tests and the contract suite's
//! reference; nothing survives the process.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::domain::app::{AppRecord, ArchiveRecord};
use crate::domain::permission::Allocation;
use crate::domain::record::StateRecord;
use crate::domain::version::{KeySlot, VersionRecord};
use crate::domain::Timestamp;
use crate::ports::{
    AccessCatalog, AppCatalog, AppCommit, AuditEntry, AuditQuery, AuditRecord, BlobStore, Commit,
    OrgAndState, OrgRecord, RunCatalog, RunItem, RunRecord, StateCatalog, StoreError, SweepCatalog,
    TokenRecord, WriteObject,
};

/// A catalog and blob store in memory.
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    states: BTreeMap<(String, String), StateRecord>,
    versions: HashMap<(String, String, String, u64), VersionRecord>,
    /// The sealed content of inline versions, keyed as `versions`.
    contents: HashMap<(String, String, String, u64), Arc<Vec<u8>>>,
    pending: HashMap<String, Timestamp>,
    doomed: HashMap<String, Timestamp>,
    /// (org, name, incarnation) -> versions below this go.
    marks: HashMap<(String, String, String), u64>,
    audit: Vec<AuditEntry>,
    /// In creation order, so listings are stable.
    tokens: Vec<TokenRecord>,
    runs: HashMap<String, RunRecord>,
    ended_runs: Vec<String>,
    /// Settled runs and when they ended, waiting to be pruned.
    settled_runs: Vec<(String, Timestamp)>,
    run_items: Vec<RunItem>,
    orgs: HashMap<String, OrgRecord>,
    blobs: HashMap<String, Vec<u8>>,
    apps: BTreeMap<(String, String), AppRecord>,
    /// (org, app, commit ID) -> archive: in commit ID order, which is the changes' order.
    archives: BTreeMap<(String, String, String), ArchiveRecord>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding this lock can only come from a bug in a test; the maps are
        // still consistent (every mutation is a single insert or remove), so carry on.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blobs written but never committed, for tests of crash leftovers.
    pub fn pending_blobs(&self) -> Vec<String> {
        self.lock().pending.keys().cloned().collect()
    }

    /// Blobs listed for deletion.
    pub fn listed_for_deletion(&self) -> Vec<String> {
        self.lock().doomed.keys().cloned().collect()
    }
}

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
                    name.into(),
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
        match &commit.state {
            Some(record) => {
                for v in &commit.versions {
                    let vkey = (
                        commit.org.clone(),
                        commit.name.clone(),
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
            let key = (commit.org.clone(), commit.name.clone(), mark.incarnation);
            let below = inner.marks.entry(key).or_insert(0);
            *below = (*below).max(mark.below);
        }
        inner.audit.extend(commit.audit);
        Ok(())
    }

    async fn replace_key_slot(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
        version: u64,
        old: &KeySlot,
        new: &KeySlot,
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let skey = (org.to_owned(), name.to_owned());
        let vkey = (
            org.to_owned(),
            name.to_owned(),
            incarnation.to_owned(),
            version,
        );
        let state = inner
            .states
            .get(&skey)
            .filter(|r| r.incarnation == incarnation)
            .ok_or(StoreError::Conflict)?
            .with_key_slot(version, new);
        let record = inner
            .versions
            .get_mut(&vkey)
            .filter(|v| v.slot() == *old)
            .ok_or(StoreError::Conflict)?;
        record.set_slot(new);
        inner.states.insert(skey, state);
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

#[async_trait]
impl RunCatalog for MemoryStore {
    async fn run(&self, run: &str) -> Result<Option<RunRecord>, StoreError> {
        Ok(self.lock().runs.get(run).cloned())
    }

    async fn bind_run(&self, record: &RunRecord) -> Result<RunRecord, StoreError> {
        let mut inner = self.lock();
        Ok(inner
            .runs
            .entry(record.run.clone())
            .or_insert_with(|| record.clone())
            .clone())
    }

    async fn end_run(
        &self,
        run: &str,
        at: Timestamp,
        status: Option<&str>,
    ) -> Result<RunRecord, StoreError> {
        let mut inner = self.lock();
        let record = inner
            .runs
            .entry(run.to_owned())
            .or_insert_with(|| RunRecord {
                run: run.to_owned(),
                org: String::new(),
                created_at: at,
                ended_at: None,
                status: None,
            });
        let first_end = record.ended_at.is_none();
        if first_end {
            record.ended_at = Some(at);
            record.status = status.map(str::to_owned);
        }
        let record = record.clone();
        if first_end {
            inner.ended_runs.push(run.to_owned());
        }
        Ok(record)
    }

    async fn run_items(&self, run: &str) -> Result<Vec<RunItem>, StoreError> {
        Ok(self
            .lock()
            .run_items
            .iter()
            .filter(|i| i.run == run)
            .cloned()
            .collect())
    }

    async fn run_tokens(&self, run: &str) -> Result<Vec<TokenRecord>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .tokens
            .iter()
            .filter(|t| t.step.as_ref().is_some_and(|g| g.run == run))
            .cloned()
            .collect())
    }
}

/// Up to `limit` blobs of `records` listed before `before`.
fn older_than(
    records: &HashMap<String, Timestamp>,
    before: Timestamp,
    limit: usize,
) -> Vec<String> {
    records
        .iter()
        .filter(|(_, at)| **at < before)
        .map(|(blob, _)| blob.clone())
        .take(limit)
        .collect()
}

#[async_trait]
impl SweepCatalog for MemoryStore {
    async fn drop_marked_versions(&self, limit: usize, at: Timestamp) -> Result<usize, StoreError> {
        let mut inner = self.lock();
        let marks: Vec<_> = inner.marks.iter().map(|(k, v)| (k.clone(), *v)).collect();
        let mut dropped = 0;
        for ((org, name, incarnation), below) in marks {
            let doomed: Vec<_> = inner
                .versions
                .keys()
                .filter(|(o, n, i, v)| *o == org && *n == name && *i == incarnation && *v < below)
                .take(limit - dropped)
                .cloned()
                .collect();
            for key in &doomed {
                inner.contents.remove(key);
                if let Some(v) = inner.versions.remove(key).filter(|v| !v.inline) {
                    inner.doomed.entry(v.blob).or_insert(at);
                }
            }
            dropped += doomed.len();
            if dropped == limit {
                break;
            }
            inner.marks.remove(&(org, name, incarnation));
        }
        Ok(dropped)
    }

    async fn doomed_blobs(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        Ok(older_than(&self.lock().doomed, before, limit))
    }

    async fn stale_pending_blobs(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        Ok(older_than(&self.lock().pending, before, limit))
    }

    async fn drop_expired_tokens(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<usize, StoreError> {
        let mut inner = self.lock();
        let mut dropped = 0;
        inner.tokens.retain(|t| {
            let expired = dropped < limit && t.expires_at.is_some_and(|at| at < before);
            dropped += usize::from(expired);
            !expired
        });
        Ok(dropped)
    }

    async fn ended_runs(&self, limit: usize) -> Result<Vec<String>, StoreError> {
        Ok(self.lock().ended_runs.iter().take(limit).cloned().collect())
    }

    async fn settle_ended_run(&self, run: &str) -> Result<(), StoreError> {
        let mut inner = self.lock();
        if !inner.ended_runs.iter().any(|r| r == run) {
            return Ok(());
        }
        inner.ended_runs.retain(|r| r != run);
        if let Some(ended) = inner.runs.get(run).and_then(|r| r.ended_at) {
            inner.settled_runs.push((run.to_owned(), ended));
            inner.settled_runs.sort_by_key(|(_, ended)| *ended);
        }
        Ok(())
    }

    async fn settled_runs(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        Ok(self
            .lock()
            .settled_runs
            .iter()
            .filter(|(_, ended)| *ended < before)
            .take(limit)
            .map(|(run, _)| run.clone())
            .collect())
    }

    async fn prune_run(&self, run: &str, limit: usize) -> Result<(usize, bool), StoreError> {
        let mut inner = self.lock();
        let mut deleted = 0;
        inner.run_items.retain(|i| {
            let doomed = i.run == run && deleted < limit;
            deleted += usize::from(doomed);
            !doomed
        });
        let done = !inner.run_items.iter().any(|i| i.run == run);
        if done {
            inner.settled_runs.retain(|(r, _)| r != run);
        }
        Ok((deleted, done))
    }

    async fn forget_blobs(&self, blobs: &[String]) -> Result<(), StoreError> {
        let mut inner = self.lock();
        for blob in blobs {
            inner.doomed.remove(blob);
            inner.pending.remove(blob);
        }
        Ok(())
    }
}

#[async_trait]
impl AccessCatalog for MemoryStore {
    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        Ok(self.lock().tokens.iter().find(|t| t.hash == hash).cloned())
    }

    async fn put_token(&self, token: &TokenRecord, audit: &AuditEntry) -> Result<(), StoreError> {
        let mut inner = self.lock();
        match inner.tokens.iter_mut().find(|t| t.hash == token.hash) {
            Some(stored) => *stored = token.clone(),
            None => inner.tokens.push(token.clone()),
        }
        inner.audit.push(audit.clone());
        Ok(())
    }

    async fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        Ok(self.lock().tokens.clone())
    }

    async fn set_allocation(
        &self,
        org: &str,
        expected: &Allocation,
        allocation: &Allocation,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let stored = inner
            .orgs
            .get(org)
            .map(|o| o.allocation)
            .unwrap_or_default();
        if stored != *expected {
            return Err(StoreError::Conflict);
        }
        let record = inner
            .orgs
            .entry(org.to_owned())
            .or_insert_with(|| OrgRecord {
                org: org.to_owned(),
                allocation: *allocation,
                created_at: audit.at,
            });
        record.allocation = *allocation;
        inner.audit.push(audit.clone());
        Ok(())
    }

    async fn org(&self, org: &str) -> Result<Option<OrgRecord>, StoreError> {
        Ok(self.lock().orgs.get(org).cloned())
    }

    async fn create_org(&self, org: &OrgRecord) -> Result<bool, StoreError> {
        let mut inner = self.lock();
        if inner.orgs.contains_key(&org.org) {
            return Ok(false);
        }
        inner.orgs.insert(org.org.clone(), org.clone());
        Ok(true)
    }
}

#[async_trait]
impl BlobStore for MemoryStore {
    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        self.lock().blobs.insert(key.to_owned(), bytes);
        Ok(())
    }

    async fn put_written(&self, key: &str, write: WriteObject) -> Result<(), StoreError> {
        super::put_gathered(self, key, write).await
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.lock().blobs.get(key).cloned())
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.lock().blobs.remove(key);
        Ok(())
    }

    async fn remove_leftovers(&self, _before: Timestamp) -> Result<usize, StoreError> {
        // A put here is one insert: it never leaves part of itself behind.
        Ok(0)
    }
}

/// A page of an org's records of one kind (keyed by org and name), by name after `after`.
fn org_page<T: Clone>(
    records: &BTreeMap<(String, String), T>,
    org: &str,
    after: Option<&str>,
    limit: usize,
) -> Vec<T> {
    records
        .range((org.to_owned(), after.unwrap_or("").to_owned())..)
        .take_while(|((o, _), _)| o == org)
        .filter(|((_, n), _)| after.is_none_or(|a| n.as_str() > a))
        .take(limit)
        .map(|(_, r)| r.clone())
        .collect()
}
