//! The metrics port: what the service reports about its own work, for an operator's
//! dashboards and alerts (docs/metrics.md). Each call is one event, measured where it
//! happens; an adapter decides how it is kept and shown (Prometheus counters for the server,
//! CloudWatch Embedded Metric Format log lines on Lambda). Labels are `&'static str` from
//! closed sets (a route's pattern, an error code, a backend's kind), never a path or a name
//! a client chose, so no label can grow without bound. Beside it, [`LockCensus`]: the locks
//! and holds a scrape reads from the store. No adapter, no I/O.

use async_trait::async_trait;

use super::StoreError;
use crate::domain::Timestamp;

/// One answered request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestMeasure {
    /// The route's pattern from the route table (`/api/tf-states/{name}/state`), or
    /// `unrouted` for a request no row matched.
    pub route: &'static str,
    pub method: &'static str,
    pub status: u16,
    pub seconds: f64,
    /// The error code a refusal answered with (`locked`, `unauthenticated`, ...).
    pub refusal: Option<&'static str>,
    /// Why a 503 was answered (`storage`, `transient`, `no_key`).
    pub fault: Option<&'static str>,
}

/// One call on a key service.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeyCall {
    /// `platform`, `kms`, `transit`, or `other`.
    pub backend: &'static str,
    /// `data_key`, `unwrap`, `rewrap`, `wrap` or `current_key`.
    pub operation: &'static str,
    pub ok: bool,
    pub seconds: f64,
}

/// One pass of the sweeper.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SweepPass<'a> {
    pub ok: bool,
    pub seconds: f64,
    /// What the pass removed, by kind (`versions`, `locks`, ...); empty for a failed pass.
    pub removed: &'a [(&'static str, u64)],
}

/// What wrote a new version: each way the service makes one, as the version metrics are
/// kept by (a Prometheus label, an EMF dimension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionKind {
    /// The backend's write, creating a version or replacing the lock's open one.
    Save,
    Import,
    Rollback,
    /// A deleted state restored: its latest version current again.
    Restore,
}

impl VersionKind {
    pub const ALL: [VersionKind; 4] = [Self::Save, Self::Import, Self::Rollback, Self::Restore];

    /// The label's value: `save`, `import`, `rollback`, `restore`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Save => "save",
            Self::Import => "import",
            Self::Rollback => "rollback",
            Self::Restore => "restore",
        }
    }
}

/// Where the service reports what it did. Every call must be cheap (an atomic add): the
/// request path makes several.
pub trait Metrics: Send + Sync {
    /// A request was answered.
    fn request(&self, measure: &RequestMeasure);
    /// A version was committed by `kind`, sealing a document `sealed_bytes` long; `None`
    /// when it sealed nothing (a restore brings versions back as they were sealed).
    fn version_written(&self, kind: VersionKind, sealed_bytes: Option<u64>);
    /// A key service answered (or failed).
    fn key_call(&self, call: &KeyCall);
    /// A data key was wanted: found in the key cache (`hit`) or not.
    fn key_cache(&self, hit: bool);
    /// The sweeper finished a pass.
    fn sweep(&self, pass: &SweepPass<'_>);
}

/// Reports nothing: what a command that is not a server (a backup, a re-wrap, a one-off
/// sweep) and a server without a metrics listener run with, so they pay for no counter.
pub struct Unmeasured;

impl Metrics for Unmeasured {
    fn request(&self, _: &RequestMeasure) {}
    fn version_written(&self, _: VersionKind, _: Option<u64>) {}
    fn key_call(&self, _: &KeyCall) {}
    fn key_cache(&self, _: bool) {}
    fn sweep(&self, _: &SweepPass<'_>) {}
}

/// The locks and holds stored now, read when metrics are scraped: a count kept in memory
/// would start at zero after a restart and miss what other processes did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Census {
    /// Live locks on states (a dead one the sweeper has yet to clear is not counted).
    pub locks: u64,
    /// Holds of runs on states.
    pub holds: u64,
    /// When the oldest live lock was taken.
    pub oldest_lock_since: Option<Timestamp>,
}

/// Counting the locks and holds of every state: one read of the catalog.
#[async_trait]
pub trait LockCensus: Send + Sync {
    /// # Errors
    /// `Unavailable` when the catalog cannot be read.
    async fn census(&self, now: Timestamp) -> Result<Census, StoreError>;
}
