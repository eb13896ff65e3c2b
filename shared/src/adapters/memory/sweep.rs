//! What the sweeper reads and tidies, in memory: marks, deleted states due, doomed and
//! pending blobs, expired tokens, ended and settled runs.

use std::collections::HashMap;

use async_trait::async_trait;

use super::MemoryStore;
use crate::domain::Timestamp;
use crate::ports::{StoreError, SweepCatalog};

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

    async fn deleted_due(
        &self,
        deleted_before: Timestamp,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let inner = self.lock();
        let mut due: Vec<_> = inner
            .deleted
            .values()
            .filter(|d| d.deleted_at <= deleted_before)
            .collect();
        due.sort_by_key(|d| d.deleted_at);
        Ok(due
            .into_iter()
            .take(limit)
            .map(|d| (d.org.clone(), d.id.clone()))
            .collect())
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
