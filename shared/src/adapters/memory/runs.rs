//! Runs in memory: a run bound or ended once, its items and step tokens found by its id.

use async_trait::async_trait;

use super::MemoryStore;
use crate::domain::Timestamp;
use crate::ports::{RunCatalog, RunItem, RunRecord, StoreError, TokenRecord};

#[async_trait]
impl RunCatalog for MemoryStore {
    async fn run(&self, run: &str) -> Result<Option<RunRecord>, StoreError> {
        Ok(self.lock().runs.get(run).cloned())
    }

    async fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        Ok(self.lock().runs.values().cloned().collect())
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
