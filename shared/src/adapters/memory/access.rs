//! Tokens, orgs and runs in memory: an org's allocation compared and swapped, a run bound or
//! ended once.

use async_trait::async_trait;

use super::MemoryStore;
use crate::domain::permission::Allocation;
use crate::domain::Timestamp;
use crate::ports::{
    AccessCatalog, AuditEntry, OrgRecord, RunCatalog, RunItem, RunRecord, StoreError, TokenRecord,
};

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
