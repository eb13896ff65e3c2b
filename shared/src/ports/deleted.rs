//! The deleted-states port: the records of deleted states kept for their retention, listed
//! for admins and purged. A delete keeps one and a restore takes it in the state's own commit
//! (`Commit::deleted`); the sweeper finds those due through the sweep port. A migration
//! stores one as another store kept it. No adapter, no I/O.

use async_trait::async_trait;

use super::{AuditEntry, StoreError};
use crate::domain::deleted::DeletedState;
use crate::domain::version::VersionRecord;

/// Deleted states kept for their retention.
#[async_trait]
pub trait DeletedCatalog: Send + Sync {
    /// An org's deleted states in id order (the order they were deleted in), after `after`,
    /// at most `limit`.
    async fn deleted_states(
        &self,
        org: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeletedState>, StoreError>;

    /// One deleted state, read strongly consistently.
    async fn deleted_state(&self, org: &str, id: &str) -> Result<Option<DeletedState>, StoreError>;

    /// Purges a deleted state: removes its record if its revision is still `deleted`'s, and
    /// leaves every version of its incarnation to the sweeper (a version mark, as a delete
    /// without retention writes), with `audit`, in one transaction.
    ///
    /// # Errors
    /// `Conflict` when the record changed or is gone (a re-wrap, a restore, another purge).
    async fn purge_deleted(
        &self,
        deleted: &DeletedState,
        audit: &AuditEntry,
    ) -> Result<(), StoreError>;

    /// Stores one version of a deleted state as another store holds it (a migration), under
    /// the deleted state's home name and incarnation, no state record naming it: its record,
    /// its sealed bytes when it is inline (`sealed`), and when it is a blob, the blob's
    /// pending record gone. Replaces what is stored for that version.
    async fn put_deleted_version(
        &self,
        deleted: &DeletedState,
        version: &VersionRecord,
        sealed: Option<&[u8]>,
    ) -> Result<(), StoreError>;

    /// Stores a deleted state's record as another store holds it (a migration, once its
    /// versions are stored): its id, times, purge date and revision as they are, with `audit`.
    ///
    /// # Errors
    /// `Conflict` when the org keeps a deleted state with its id: nothing is written.
    async fn put_deleted(
        &self,
        deleted: &DeletedState,
        audit: &AuditEntry,
    ) -> Result<(), StoreError>;
}
