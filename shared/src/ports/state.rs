//! The state port: state records compared and swapped on their revision, committed in one
//! transaction with their versions, inline content, blob bookkeeping, run items, version marks
//! and audit (`Commit`), and the reads a request decides on. No adapter, no I/O.

use std::sync::Arc;

use async_trait::async_trait;

use super::{AuditEntry, AuditQuery, AuditRecord, InventoryChange, OrgRecord, RunItem, StoreError};
use crate::domain::deleted::DeletedState;
use crate::domain::record::StateRecord;
use crate::domain::version::{KeySlot, VersionRecord};
use crate::domain::Timestamp;

/// An org's settings and one of its states' record with its latest version's inline sealed
/// content (`None` for a blob version), as one read gives them.
pub type OrgAndState = (Option<OrgRecord>, Option<(StateRecord, Option<Vec<u8>>)>);

/// One mutation of a state, committed atomically: the state record (compare-and-swap on its
/// revision), the version records it writes, the blobs it commits and dooms, its audit.
#[derive(Debug, Clone)]
pub struct Commit {
    pub org: String,
    pub name: String,
    /// The name the state's versions are stored under (`StateRecord::home`): its versions,
    /// their content and its version marks are keyed by it.
    pub home: String,
    /// The revision the decision was made on; 0 means the record must not exist yet.
    pub expected_revision: u64,
    /// When the decision was made: the time doomed blobs are listed with.
    pub at: Timestamp,
    /// The record to store (its revision is `expected_revision + 1`), or `None` to remove it.
    pub state: Option<StateRecord>,
    /// Version records to insert or replace, under `state`'s incarnation.
    pub versions: Vec<VersionRecord>,
    /// The sealed content of the inline versions among `versions` (a small save writes no
    /// blob): stored with their records, replacing what an earlier save of the same version
    /// stored. A version written without content here keeps the content it has, unless its
    /// record says it is not inline, which drops it.
    pub contents: Vec<InlineContent>,
    /// Blobs this commit makes part of a version: their pending records go.
    pub committed_blobs: Vec<String>,
    /// Blobs no committed version uses any more: listed for deletion.
    pub doomed_blobs: Vec<String>,
    /// Run -> token -> state items a step's lock adds, so a run's end or a step's gone
    /// report finds the states its tokens hold.
    pub run_items: Vec<RunItem>,
    /// The step whose lock this commit takes, checked in the same transaction.
    pub step: Option<StepCheck>,
    /// Versions this commit leaves to the sweeper: pruned past the limit, or all those of an
    /// incarnation a delete retires.
    pub version_marks: Vec<VersionMark>,
    /// A deleted state's record this commit keeps (a delete) or takes (a restore).
    pub deleted: Option<DeletedChange>,
    /// What the commit does to the state's entry in the inventory, in the same transaction;
    /// `None` leaves it as it is (a lock, an unlock: the latest version did not change).
    pub inventory: Option<InventoryChange>,
    pub audit: Vec<AuditEntry>,
}

/// What a commit does to a deleted state's record, in the same transaction as the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeletedChange {
    /// Stores it (a delete kept for its retention); its id is new.
    Keep(Box<DeletedState>),
    /// Removes it if its revision is still `revision` (a restore decided on it); else the
    /// commit fails with `Conflict`.
    Take { id: String, revision: u64 },
}

/// Whose record a key slot's change checks and updates besides the version's: a state's (by
/// name, which must still be at the version's incarnation) or a deleted state's (by id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotOwner<'a> {
    State(&'a str),
    Deleted(&'a str),
}

/// One version's key slot replaced (a re-wrap): the version of `incarnation` numbered
/// `version`, stored under `home`, from `old` to `new`.
#[derive(Debug, Clone, Copy)]
pub struct SlotChange<'a> {
    pub org: &'a str,
    pub owner: SlotOwner<'a>,
    pub home: &'a str,
    pub incarnation: &'a str,
    pub version: u64,
    pub old: &'a KeySlot,
    pub new: &'a KeySlot,
}

/// What a step's lock commits on besides the state's revision: that its token is still
/// unrevoked, and that its run has not ended so long before the lock's liveness runs out that
/// the lock would outlive the run's end plus the grace. A run's end and a gone report record
/// themselves first and then read the run's items, so either they find this commit's item and
/// lower its lock, or this commit finds them and fails (`Conflict`), and the lock decides again
/// on the token as it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepCheck {
    pub run: String,
    /// The hash of the step's token.
    pub token_hash: String,
    /// The commit fails when the run ended before this: the lock's liveness minus the grace.
    pub ended_not_before: Timestamp,
}

/// The largest sealed version kept inline in the catalog, in bytes; larger ones go to the
/// blob store. Chosen by measurement (docs/performance.md): below it a save is one catalog
/// transaction (one fsync on the local store, no S3 PUT on AWS), and it keeps a DynamoDB state
/// item, which holds the latest version's content beside its record, well under the 400 KB
/// item limit whatever the record holds.
pub const INLINE_MAX_BYTES: usize = 64 * 1024;

/// The sealed bytes of one inline version, as a commit carries them. Shared, so retries of a
/// commit and the commit itself do not copy them.
#[derive(Clone)]
pub struct InlineContent {
    pub version: u64,
    pub sealed: Arc<Vec<u8>>,
}

impl std::fmt::Debug for InlineContent {
    /// The length, not the (encrypted, but long) bytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InlineContent")
            .field("version", &self.version)
            .field("bytes", &self.sealed.len())
            .finish()
    }
}

/// A sparse record for the sweeper: the versions of `incarnation` numbered below `below` are
/// to be dropped, their blobs with them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionMark {
    pub incarnation: String,
    pub below: u64,
}

impl VersionMark {
    /// Every version of the incarnation (a delete). Stored as SQLite's largest integer.
    pub const ALL: u64 = i64::MAX as u64;
}

impl Commit {
    /// A commit of `state` over `snapshot` (the record the decision was made on), with no
    /// versions, blobs or audit yet.
    pub fn over(snapshot: &StateRecord, at: Timestamp, state: Option<StateRecord>) -> Self {
        Self {
            org: snapshot.org.clone(),
            name: snapshot.name.clone(),
            home: snapshot.home().to_owned(),
            expected_revision: snapshot.revision,
            at,
            state,
            versions: Vec::new(),
            contents: Vec::new(),
            committed_blobs: Vec::new(),
            doomed_blobs: Vec::new(),
            run_items: Vec::new(),
            step: None,
            version_marks: Vec::new(),
            deleted: None,
            inventory: None,
            audit: Vec::new(),
        }
    }

    /// The inline content this commit stores for `version`, if any.
    pub fn content_of(&self, version: u64) -> Option<&Arc<Vec<u8>>> {
        self.contents
            .iter()
            .find(|c| c.version == version)
            .map(|c| &c.sealed)
    }
}

/// State records and versions.
#[async_trait]
pub trait StateCatalog: Send + Sync {
    /// The record of one state, read strongly consistently.
    async fn state(&self, org: &str, name: &str) -> Result<Option<StateRecord>, StoreError>;

    /// The org's settings and the record of one of its states, both read strongly
    /// consistently, together where the store can (one round trip on AWS): what a backend
    /// request needs before it decides, the allocation its permission is checked against and
    /// the record it decides on.
    async fn org_and_state(
        &self,
        org: &str,
        name: &str,
    ) -> Result<(Option<OrgRecord>, Option<StateRecord>), StoreError>;

    /// As [`StateCatalog::org_and_state`], and, when the state's latest version is inline,
    /// that version's sealed content, from the same consistent read: what a read of the
    /// state needs, so a small read is one catalog read.
    async fn org_and_state_with_content(
        &self,
        org: &str,
        name: &str,
    ) -> Result<OrgAndState, StoreError>;

    /// Records of an org's states in name order, after `after`, at most `limit`.
    async fn states(
        &self,
        org: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<StateRecord>, StoreError>;

    /// One version of one incarnation of a state.
    async fn version(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
        version: u64,
    ) -> Result<Option<VersionRecord>, StoreError>;

    /// The sealed content of an inline version; `None` when the catalog holds none for it.
    async fn content(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
        version: u64,
    ) -> Result<Option<Vec<u8>>, StoreError>;

    /// Every version of one incarnation of a state, newest first. Like [`Self::version`] and
    /// [`Self::content`], it takes the name the versions are stored under (`StateRecord::home`).
    async fn versions(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
    ) -> Result<Vec<VersionRecord>, StoreError>;

    /// Records a blob about to be written, so one never committed can be found and deleted.
    async fn add_pending_blob(&self, blob: &str, at: Timestamp) -> Result<(), StoreError>;

    /// Commits a mutation if the state record's revision is still `expected_revision` (and
    /// its [`StepCheck`] holds).
    ///
    /// # Errors
    /// `Conflict` when it is not (someone else committed first, or the step's token was
    /// revoked or its run ended): re-read and decide again.
    async fn commit(&self, commit: Commit) -> Result<(), StoreError>;

    /// Replaces one version's key slot if it is still `old` (a re-wrap), in the version's
    /// record and in its owner's: a state's copy of its latest version takes it and its
    /// revision rises (see [`StateRecord::with_key_slot`]); a deleted state's revision rises.
    /// One version per call, atomic.
    ///
    /// # Errors
    /// `Conflict` when the version's slot is no longer `old`, the version is gone, the state
    /// is no longer at the incarnation, or the deleted state is gone (restored or purged):
    /// nothing is written; re-read and decide again.
    async fn replace_key_slot(&self, change: &SlotChange<'_>) -> Result<(), StoreError>;

    /// Appends an audit entry that goes with no state change (a download, a token).
    async fn append_audit(&self, entry: &AuditEntry) -> Result<(), StoreError>;

    /// Audit entries of an org, newest first.
    async fn audit(&self, org: &str, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError>;
}
