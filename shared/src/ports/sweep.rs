//! The sweep port: what the sweeper reads and tidies, sparse records only. No adapter, no I/O.

use async_trait::async_trait;

use super::StoreError;
use crate::domain::Timestamp;

/// What the sweeper reads and tidies: only sparse records (marks, doomed and pending
/// blobs, deleted states by purge date), never a scan of every state or blob.
#[async_trait]
pub trait SweepCatalog: Send + Sync {
    /// Drops up to `limit` versions below their marks, with their inline content, listing
    /// their blobs (those not inline) for deletion at `at` in the same transaction; a mark with nothing left below it goes. Returns how many
    /// versions were dropped.
    async fn drop_marked_versions(&self, limit: usize, at: Timestamp) -> Result<usize, StoreError>;

    /// Deleted states deleted at or before `deleted_before` (the sweeper's now less the
    /// retention in force: those due), the earliest deleted first, at most `limit`:
    /// (org, id) pairs.
    async fn deleted_due(
        &self,
        deleted_before: Timestamp,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError>;

    /// Blobs listed for deletion before `before`, at most `limit`.
    async fn doomed_blobs(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError>;

    /// Blobs written but never committed, pending since before `before`, at most `limit`.
    async fn stale_pending_blobs(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError>;

    /// Forgets the doomed or pending records of blobs whose objects are deleted.
    async fn forget_blobs(&self, blobs: &[String]) -> Result<(), StoreError>;

    /// Drops up to `limit` tokens that expired before `before`, and as many exchanged ID
    /// tokens' marks past their time (on stores whose records do not expire by themselves);
    /// returns how many tokens went.
    async fn drop_expired_tokens(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<usize, StoreError>;

    /// Ended runs whose steps' locks are not all tidied yet, oldest end first.
    async fn ended_runs(&self, limit: usize) -> Result<Vec<String>, StoreError>;

    /// Moves an ended run none of whose steps' locks is left from the ended runs to the
    /// settled ones, listed by its end, where it waits to be pruned. Repeating it is harmless.
    async fn settle_ended_run(&self, run: &str) -> Result<(), StoreError>;

    /// Settled runs that ended before `before`, oldest end first, at most `limit`.
    async fn settled_runs(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError>;

    /// Deletes up to `limit` of a settled run's run -> token -> state items (and, where the
    /// store keeps them apart, its links to tokens already gone); once none is left, takes
    /// the run off the settled list. The run's own record stays: it is the ended marker that
    /// refuses a late mint. Returns how many items went and whether the run is done.
    async fn prune_run(&self, run: &str, limit: usize) -> Result<(usize, bool), StoreError>;
}
