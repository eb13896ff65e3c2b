//! The audit log's records: what every port that changes something writes beside the change,
//! and how the log is read back, an org's newest first. No adapter, no I/O.

use serde::{Deserialize, Serialize};

use crate::domain::{Actor, Timestamp};

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
