//! Versions and their change records: what each version holds and what the server saw of
//! the operation that produced it (the journal of DESIGN section 7).

use serde::{Deserialize, Serialize};

use super::lock::{Lock, LockDocument};
use super::{Actor, Timestamp};

/// Where a version came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Write,
    Import,
    Rollback,
}

/// How the operation that produced a version ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// The lock is still held: more saves may replace this version's content.
    Open,
    /// The holder released the lock.
    Released,
    /// Someone else released the lock.
    ForceUnlocked,
    /// The lock outlived its step's token (or the run's end plus the grace) and was taken
    /// over.
    Expired,
    /// Written without a lock ID: a version of its own.
    UnlockedWrite,
    /// Created by an import.
    Import,
    /// Created by a rollback.
    Rollback,
}

/// The lock as a change record shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockSummary {
    #[serde(rename = "ID")]
    pub id: String,
    #[serde(rename = "Operation")]
    pub operation: Option<String>,
    #[serde(rename = "Who")]
    pub who: Option<String>,
    #[serde(rename = "Version")]
    pub version: Option<String>,
    #[serde(rename = "Created")]
    pub created: Option<String>,
}

impl From<&LockDocument> for LockSummary {
    fn from(d: &LockDocument) -> Self {
        Self {
            id: d.id.clone(),
            operation: d.operation.clone(),
            who: d.who.clone(),
            version: d.version.clone(),
            created: d.created.clone(),
        }
    }
}

/// What the server saw of the operation that produced a version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeRecord {
    pub lock: Option<LockSummary>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub locked_at: Option<Timestamp>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub released_at: Option<Timestamp>,
    pub saves: u64,
    #[serde(with = "time::serde::rfc3339")]
    pub first_save_at: Timestamp,
    #[serde(with = "time::serde::rfc3339")]
    pub last_save_at: Timestamp,
    pub ended: Ended,
    /// For a rollback: the version whose content it made current again.
    pub rolled_back_from: Option<u64>,
}

impl ChangeRecord {
    /// The record of a version made in one step, outside any lock (import, rollback).
    pub fn single(ended: Ended, rolled_back_from: Option<u64>, now: Timestamp) -> Self {
        Self {
            lock: None,
            locked_at: None,
            released_at: None,
            saves: 1,
            first_save_at: now,
            last_save_at: now,
            ended,
            rolled_back_from,
        }
    }

    /// The record of a version's first save, under `lock` or without one.
    pub fn first_save(lock: Option<&Lock>, now: Timestamp) -> Self {
        Self {
            lock: lock.map(|l| LockSummary::from(&l.document)),
            locked_at: lock.map(|l| l.since),
            released_at: None,
            saves: 1,
            first_save_at: now,
            last_save_at: now,
            ended: if lock.is_some() {
                Ended::Open
            } else {
                Ended::UnlockedWrite
            },
            rolled_back_from: None,
        }
    }

    /// Closes an open record when its lock goes; a closed one is left as it is.
    pub fn close(&mut self, ended: Ended, now: Timestamp) {
        if self.ended == Ended::Open {
            self.ended = ended;
            self.released_at = Some(now);
        }
    }
}

/// The mark below which versions are pruned once `version` exists and the newest `keep`
/// are kept; `None` while there are no more than `keep`. The current version is the newest,
/// so it is never below the mark.
pub fn prune_below(version: u64, keep: u64) -> Option<u64> {
    (version > keep).then(|| version + 1 - keep)
}

/// One version of a state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionRecord {
    pub version: u64,
    pub serial: Option<u64>,
    pub lineage: Option<String>,
    /// Plaintext size in bytes.
    pub size: u64,
    /// Hex SHA-256 of the plaintext.
    pub sha256: String,
    pub source: Source,
    /// The key that wrapped the data key: `platform:<fingerprint>` or `kms:<key arn>`.
    pub key: String,
    pub opentofu_encrypted: bool,
    /// The state's `terraform_version`, from the write's validation pass; `None` when it
    /// has none, and for versions recorded before it was kept.
    #[serde(default)]
    pub terraform_version: Option<String>,
    /// How many resource instances the state holds, from the same pass; `None` when they
    /// cannot be counted (OpenTofu-encrypted, another format) or were not yet recorded.
    #[serde(default)]
    pub instances: Option<u64>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: Timestamp,
    pub writer: Actor,
    pub change: ChangeRecord,
    /// The blob holding the sealed content; never shown to clients. An inline version's
    /// content is in the catalog, but it keeps this id: the sealing binds it.
    pub blob: String,
    /// Whether the sealed content lives in the catalog beside this record (a small version:
    /// its save writes no blob) rather than in the blob store. Records stored before inline
    /// content existed have none, and read as blob versions.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inline: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pruning_keeps_the_newest_n() {
        assert_eq!(prune_below(50, 50), None);
        assert_eq!(prune_below(51, 50), Some(2));
        assert_eq!(
            prune_below(7, 1),
            Some(7),
            "keep 1: only the current survives"
        );
    }

    /// Records stored before the Terraform version and the instance count were kept read
    /// as unknown, not as a damaged record.
    #[test]
    fn an_older_record_reads_with_unknown_counts() {
        let stored = r#"{"version":3,"serial":3,"lineage":"l","size":10,"sha256":"00","source":"write","key":"platform:k","opentofu_encrypted":false,"created_at":"2026-11-30T01:00:00Z","writer":{"kind":"user","user":"alice"},"change":{"lock":null,"locked_at":null,"released_at":null,"saves":1,"first_save_at":"2026-11-30T01:00:00Z","last_save_at":"2026-11-30T01:00:00Z","ended":"unlocked_write","rolled_back_from":null},"blob":"b"}"#;
        let record: VersionRecord = serde_json::from_str(stored).unwrap();
        assert_eq!((record.terraform_version, record.instances), (None, None));
        assert!(!record.inline, "an older record's content is a blob");
    }
}
