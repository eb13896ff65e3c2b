//! The ports: what storage must provide, as few and as narrow traits as the use cases need.
//! Adapters (memory, local, AWS) implement them and pass one contract suite.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::domain::actor::StepGrant;
use crate::domain::app::{AppRecord, ArchiveRecord};
use crate::domain::permission::{Allocation, Role};
use crate::domain::record::StateRecord;
use crate::domain::version::{KeySlot, VersionRecord};
use crate::domain::{Actor, Timestamp};

/// Why storage could not do what was asked. A lost compare-and-swap is an expected outcome
/// (`Conflict`), which the services retry; it never reaches a client as an error.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the record changed since it was read")]
    Conflict,
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    #[error("stored data is damaged: {0}")]
    Corrupt(String),
}

/// An org's settings and one of its states' record with its latest version's inline sealed
/// content (`None` for a blob version), as one read gives them.
pub type OrgAndState = (Option<OrgRecord>, Option<(StateRecord, Option<Vec<u8>>)>);

/// One mutation of a state, committed atomically: the state record (compare-and-swap on its
/// revision), the version records it writes, the blobs it commits and dooms, its audit.
#[derive(Debug, Clone)]
pub struct Commit {
    pub org: String,
    pub name: String,
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
    pub audit: Vec<AuditEntry>,
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

/// An audit entry: who did what to which state and version, when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditEntry {
    pub org: String,
    #[serde(with = "time::serde::rfc3339")]
    #[schemars(with = "crate::domain::schema::Rfc3339")]
    pub at: Timestamp,
    #[schemars(with = "crate::domain::audit::AuditAction")]
    pub action: String,
    pub actor: Actor,
    pub state: Option<String>,
    pub version: Option<u64>,
    /// Action-specific facts (the key of a new version, old and new allocations...).
    pub detail: serde_json::Value,
}

/// Which audit entries to read: an org's, newest first, optionally of one state or action,
/// older than a cursor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    pub state: Option<String>,
    pub action: Option<String>,
    /// Only entries older than this sequence number (the previous page's cursor).
    pub before: Option<u64>,
    pub limit: usize,
}

/// An audit entry with its sequence number in the org's log (newer entries, higher numbers).
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    pub seq: u64,
    pub entry: AuditEntry,
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

    /// Every version of one incarnation of a state, newest first.
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
    /// record and, when it is the latest, in the state record's copy; the state record's
    /// revision rises (see [`StateRecord::with_key_slot`]). One version per call, atomic.
    ///
    /// # Errors
    /// `Conflict` when the version's slot is no longer `old`, the version is gone, or the
    /// state is no longer at `incarnation`: nothing is written; re-read and decide again.
    async fn replace_key_slot(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
        version: u64,
        old: &KeySlot,
        new: &KeySlot,
    ) -> Result<(), StoreError>;

    /// Appends an audit entry that goes with no state change (a download, a token).
    async fn append_audit(&self, entry: &AuditEntry) -> Result<(), StoreError>;

    /// Audit entries of an org, newest first.
    async fn audit(&self, org: &str, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError>;
}

/// What a token is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenKind {
    /// A person's or script's, bound to one org, user and role.
    #[default]
    Personal,
    /// The platform's: calls the runs API only, for any org.
    Platform,
    /// A step's: the backend routes of one state, for one attempt of one step of one run.
    Step,
}

/// A token as stored: its SHA-256, never the token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// Hex SHA-256 of the token.
    pub hash: String,
    /// A short public id, to list and revoke it by.
    pub id: String,
    #[serde(default)]
    pub kind: TokenKind,
    pub org: String,
    pub user: String,
    pub role: Role,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: Timestamp,
    #[serde(with = "time::serde::rfc3339::option")]
    pub expires_at: Option<Timestamp>,
    pub revoked: bool,
    /// What a step token allows.
    #[serde(default)]
    pub step: Option<StepGrant>,
}

/// An org's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgRecord {
    pub org: String,
    pub allocation: Allocation,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: Timestamp,
}

/// Tokens and orgs.
#[async_trait]
pub trait AccessCatalog: Send + Sync {
    /// The token with this hash. Looked up on every request, never cached, so a revocation
    /// takes effect at once.
    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError>;

    /// Stores a new or revoked token and its audit entry together.
    async fn put_token(&self, token: &TokenRecord, audit: &AuditEntry) -> Result<(), StoreError>;

    /// Every token (hashes only: no token is ever stored), oldest first.
    async fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError>;

    /// Replaces an org's allocation and records the change, together, if the stored one (the
    /// default for an org not created yet) is still `expected`: two admins changing it at
    /// once then cannot lose a change or audit the wrong old value.
    ///
    /// # Errors
    /// `Conflict` when the stored allocation is not `expected`; nothing is written.
    async fn set_allocation(
        &self,
        org: &str,
        expected: &Allocation,
        allocation: &Allocation,
        audit: &AuditEntry,
    ) -> Result<(), StoreError>;

    async fn org(&self, org: &str) -> Result<Option<OrgRecord>, StoreError>;

    /// Creates the org unless it exists; returns whether it was created.
    async fn create_org(&self, org: &OrgRecord) -> Result<bool, StoreError>;
}

/// What the sweeper reads and tidies: only sparse records (marks, doomed and pending
/// blobs), never a scan of every state or blob.
#[async_trait]
pub trait SweepCatalog: Send + Sync {
    /// Drops up to `limit` versions below their marks, with their inline content, listing
    /// their blobs (those not inline) for deletion at `at` in the same transaction; a mark with nothing left below it goes. Returns how many
    /// versions were dropped.
    async fn drop_marked_versions(&self, limit: usize, at: Timestamp) -> Result<usize, StoreError>;

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

    /// Drops up to `limit` tokens that expired before `before`; returns how many.
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
/// blobs' pending records are [`StateCatalog::add_pending_blob`]'s, and their doomed blobs
/// go the way of every other ([`SweepCatalog`]).
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

/// Everything a catalog provides.
pub trait Catalog: StateCatalog + AccessCatalog + SweepCatalog + RunCatalog + AppCatalog {}
impl<T: StateCatalog + AccessCatalog + SweepCatalog + RunCatalog + AppCatalog> Catalog for T {}

/// A stored object as [`BlobStore::open`] gives it.
pub enum OpenedBlob {
    /// All of its bytes.
    Whole(Vec<u8>),
    /// Its first bytes and a reader of the ones after them, `len` bytes in all: an object
    /// read as it is sent, so a read holds a segment of it and not all of it.
    Reading {
        head: Vec<u8>,
        rest: Box<dyn std::io::Read + Send>,
        len: u64,
    },
}

/// What writes a new object's bytes, in order, to the writer it is given: a large state
/// sealed as it is made. It runs off the async threads.
pub type WriteObject = Box<dyn FnOnce(&mut dyn std::io::Write) -> std::io::Result<()> + Send>;

/// Sealed state content by blob key. Keys are made of ids, never of state names.
#[async_trait]
pub trait BlobStore: Send + Sync {
    /// Stores a new object durably before returning.
    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), StoreError>;
    /// Stores the new object `write` writes, as durably as [`BlobStore::put`]. A store that
    /// can write an object as it is made never holds it whole; one whose writes take the
    /// whole object gathers it first. A `write` that fails stores nothing.
    async fn put_written(&self, key: &str, write: WriteObject) -> Result<(), StoreError>;
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// The object to read from its start, with at least its first `head` bytes (all of them
    /// when it is shorter) at hand. A store that can read an object as it goes gives a
    /// reader; one that cannot, or whose callers gather the whole object anyway (a Lambda
    /// function answers with one payload, built in the object's own buffer), gives it whole.
    async fn open(&self, key: &str, head: usize) -> Result<Option<OpenedBlob>, StoreError> {
        let _ = head;
        Ok(self.get(key).await?.map(OpenedBlob::Whole))
    }
    async fn delete(&self, key: &str) -> Result<(), StoreError>;
    /// Removes what puts that died part way left behind before `before` (never a put under
    /// way); returns how many. Only a store whose put leaves something has anything to do.
    async fn remove_leftovers(&self, before: Timestamp) -> Result<usize, StoreError>;
}

/// What a data key is bound to (KMS's encryption context).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyContext<'a> {
    pub org: &'a str,
    pub state: &'a str,
}

/// A fresh data key: its plaintext for this one seal, and its wrapped form to store.
pub struct DataKey {
    pub plaintext: Zeroizing<[u8; 32]>,
    pub wrapped: Vec<u8>,
    /// What wrapped it: `platform:<fingerprint>`, `kms:<key arn>` or
    /// `transit:<tag>:<key>:v<key version>`.
    pub key_id: String,
}

/// A data key wrapped anew (a re-wrap, a move between backends): a version's new key slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrappedKey {
    /// What wrapped it, as [`DataKey::key_id`].
    pub key_id: String,
    pub wrapped: Vec<u8>,
}

/// Which kind of key service a recorded key id names: `transit`, `kms` or `platform`, as
/// the versions list and the audit show it.
pub fn key_backend(key_id: &str) -> &str {
    key_id.split_once(':').map_or(key_id, |(kind, _)| kind)
}

/// Why a key operation failed.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The object was sealed under another key than the one configured.
    #[error("this version's data key was wrapped by {stored}, but the configured key is {configured}; configure the key it was written with")]
    WrongKey { stored: String, configured: String },
    /// The wrapped key does not open: damaged, or a different context.
    #[error("the data key does not unwrap under {key_id}: the stored key is damaged or belongs to another state")]
    Unwrap { key_id: String },
    /// The key service is down, throttled or refused: a transient fault.
    #[error("key service unavailable: {0}")]
    Unavailable(String),
}

/// Unwrapping stored data keys: what a service that only keeps old versions readable does.
#[async_trait]
pub trait KeyOpener: Send + Sync {
    async fn unwrap_key(
        &self,
        key_id: &str,
        wrapped: &[u8],
        context: &KeyContext<'_>,
    ) -> Result<Zeroizing<[u8; 32]>, KeyError>;
}

/// Data keys: a new one per version, unwrapping stored ones, and re-wrapping them.
#[async_trait]
pub trait KeyService: KeyOpener {
    async fn data_key(&self, context: &KeyContext<'_>) -> Result<DataKey, KeyError>;

    /// The key id a data key made now for `context` records (the newest version of the
    /// key): where a re-wrap takes a version.
    async fn current_key_id(&self, context: &KeyContext<'_>) -> Result<String, KeyError>;

    /// Wraps a data key unwrapped elsewhere (a move from another backend) under the key
    /// [`current_key_id`](Self::current_key_id) names.
    async fn wrap_key(
        &self,
        plaintext: &[u8; 32],
        context: &KeyContext<'_>,
    ) -> Result<WrappedKey, KeyError>;

    /// Re-wraps a stored data key under the key [`current_key_id`](Self::current_key_id)
    /// names. Where the stored key is one the service holds, the data key never leaves it
    /// (Transit `rewrap`, KMS `ReEncrypt`); otherwise it is unwrapped and wrapped again here,
    /// in memory only ([`rewrap_in_memory`](Self::rewrap_in_memory), what a service that
    /// cannot re-wrap on its side, such as the platform key, does for every key). The
    /// content it seals is never touched.
    async fn rewrap_key(
        &self,
        key_id: &str,
        wrapped: &[u8],
        context: &KeyContext<'_>,
    ) -> Result<WrappedKey, KeyError> {
        self.rewrap_in_memory(key_id, wrapped, context).await
    }

    /// Unwraps a stored data key and wraps it again under the current key, in this process's
    /// memory only: the one fallback of [`rewrap_key`](Self::rewrap_key) for a key the
    /// service cannot re-wrap on its side.
    async fn rewrap_in_memory(
        &self,
        key_id: &str,
        wrapped: &[u8],
        context: &KeyContext<'_>,
    ) -> Result<WrappedKey, KeyError> {
        let plaintext = self.unwrap_key(key_id, wrapped, context).await?;
        self.wrap_key(&plaintext, context).await
    }
}
