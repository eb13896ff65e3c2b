//! The runs port: runs of a flow, their step tokens and the states those tokens lock. No
//! adapter, no I/O.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{StoreError, TokenRecord};
use crate::domain::Timestamp;

/// A run of a flow, as the platform reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    pub run: String,
    /// Bound by the run's first mint; empty for a run only ever reported ended.
    pub org: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: Timestamp,
    #[serde(with = "time::serde::rfc3339::option")]
    pub ended_at: Option<Timestamp>,
    pub status: Option<String>,
}

/// A state one of a run's step tokens locked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunItem {
    pub run: String,
    pub token_id: String,
    pub org: String,
    pub state: String,
}

/// Runs, their tokens and the states they lock, read strongly consistently.
#[async_trait]
pub trait RunCatalog: Send + Sync {
    async fn run(&self, run: &str) -> Result<Option<RunRecord>, StoreError>;

    /// Every run recorded, ended or not, in no set order. It reads every run (a scan on
    /// DynamoDB): for a migration, never for a request.
    async fn runs(&self) -> Result<Vec<RunRecord>, StoreError>;

    /// Stores `record` unless the run exists; returns the run as stored.
    async fn bind_run(&self, record: &RunRecord) -> Result<RunRecord, StoreError>;

    /// Records the run's end at `at` (the first end wins; an unknown run is recorded) and
    /// returns the run as stored.
    async fn end_run(
        &self,
        run: &str,
        at: Timestamp,
        status: Option<&str>,
    ) -> Result<RunRecord, StoreError>;

    /// The states the run's step tokens locked.
    async fn run_items(&self, run: &str) -> Result<Vec<RunItem>, StoreError>;

    /// The run's step tokens.
    async fn run_tokens(&self, run: &str) -> Result<Vec<TokenRecord>, StoreError>;
}
