//! The app-state port: app states (Octo's remote state) compared and swapped on their
//! revision, and their archives. No adapter, no I/O.

use async_trait::async_trait;

use super::{AuditEntry, StoreError};
use crate::domain::app::{AppRecord, ArchiveRecord};
use crate::domain::Timestamp;

/// One change to an app state, committed atomically: its record (compare-and-swap on its
/// revision), the archive it seals or deletes, the blobs it commits and dooms, its audit.
#[derive(Debug, Clone)]
pub struct AppCommit {
    /// The revision the decision was made on; 0 means the record must not exist yet.
    pub expected_revision: u64,
    /// When the decision was made: the time doomed blobs are listed with.
    pub at: Timestamp,
    /// The record to store (its revision is `expected_revision + 1`).
    pub app: AppRecord,
    /// An archive this commit stores: the one it seals, or one whose key slots a re-wrap
    /// replaced.
    pub sealed: Option<ArchiveRecord>,
    /// The commit ID of an archive this commit deletes.
    pub deleted: Option<String>,
    /// Blobs this commit makes part of the app state: their pending records go.
    pub committed_blobs: Vec<String>,
    /// Blobs nothing holds any more: listed for deletion, which the sweeper carries out.
    pub doomed_blobs: Vec<String>,
    pub audit: Vec<AuditEntry>,
}

/// App states (Octo's remote state) and their archives, read strongly consistently. Their
/// blobs' pending records are
/// [`StateCatalog::add_pending_blob`](super::StateCatalog::add_pending_blob)'s, and their
/// doomed blobs go the way of every other ([`SweepCatalog`](super::SweepCatalog)).
#[async_trait]
pub trait AppCatalog: Send + Sync {
    async fn app(&self, org: &str, name: &str) -> Result<Option<AppRecord>, StoreError>;

    /// Records of an org's app states in name order, after `after`, at most `limit`.
    async fn apps(
        &self,
        org: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AppRecord>, StoreError>;

    async fn archive(
        &self,
        org: &str,
        name: &str,
        commit_id: &str,
    ) -> Result<Option<ArchiveRecord>, StoreError>;

    /// Archives of an app state, newest first, with commit IDs before `before`, at most
    /// `limit`.
    async fn archives(
        &self,
        org: &str,
        name: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ArchiveRecord>, StoreError>;

    /// The oldest archive of an app state with a commit ID after `after`.
    async fn archive_after(
        &self,
        org: &str,
        name: &str,
        after: &str,
    ) -> Result<Option<ArchiveRecord>, StoreError>;

    /// Commits a change if the app state's revision is still `expected_revision`.
    ///
    /// # Errors
    /// `Conflict` when it is not (someone else committed first): re-read and decide again.
    async fn commit_app(&self, commit: AppCommit) -> Result<(), StoreError>;
}
