//! Versions and their change records: what each version holds and what the server saw of
//! the operation that produced it (the journal of DESIGN section 7).

use serde::{Deserialize, Serialize};

use super::lock::{Lock, LockDocument};
use super::{Actor, Timestamp};

/// Where a version came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Write,
    Import,
    Rollback,
}

/// How the operation that produced a version ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(rename = "VersionEnded")]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChangeRecord {
    pub lock: Option<LockSummary>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schemars(with = "Option<crate::domain::schema::Rfc3339>")]
    pub locked_at: Option<Timestamp>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schemars(with = "Option<crate::domain::schema::Rfc3339>")]
    pub released_at: Option<Timestamp>,
    pub saves: u64,
    #[serde(with = "time::serde::rfc3339")]
    #[schemars(with = "crate::domain::schema::Rfc3339")]
    pub first_save_at: Timestamp,
    #[serde(with = "time::serde::rfc3339")]
    #[schemars(with = "crate::domain::schema::Rfc3339")]
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
    /// The key that wrapped the data key: `platform:<fingerprint>`, `kms:<key arn>` or
    /// `transit:<tag>:<key>:v<key version>`. With `wrapped_key`, the version's key slot.
    pub key: String,
    /// The data key as `key` wrapped it: the slot a re-wrap replaces, which a reader unwraps
    /// in place of the sealed object's header's copy. `None` for versions recorded before
    /// the record kept it: their header's wrapped key is the only one.
    #[serde(default, with = "wrapped_key", skip_serializing_if = "Option::is_none")]
    pub wrapped_key: Option<Vec<u8>>,
    pub opentofu_encrypted: bool,
    /// The state's `terraform_version`, from the write's validation pass; `None` when it
    /// has none, and for versions recorded before it was kept.
    #[serde(default)]
    pub terraform_version: Option<String>,
    /// How many resource instances the state holds, from the same pass; `None` when they
    /// cannot be counted (OpenTofu-encrypted, another format) or were not yet recorded.
    #[serde(default)]
    pub instances: Option<u64>,
    /// The fingerprint of what the inventory keeps of this version's content
    /// ([`super::inventory::fingerprint`]): a save whose content has the latest version's
    /// fingerprint leaves the state's entry in the index as it is. `None` when the content
    /// cannot be indexed, and for versions recorded before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
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

/// A version's key slot: the key that wrapped its data key and the wrapped form (`None`: only
/// the sealed object's header holds it, for versions recorded before the slot was kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySlot {
    pub key: String,
    pub wrapped_key: Option<Vec<u8>>,
}

impl VersionRecord {
    /// This version's key slot.
    pub fn slot(&self) -> KeySlot {
        KeySlot {
            key: self.key.clone(),
            wrapped_key: self.wrapped_key.clone(),
        }
    }

    /// Puts `slot` in place of this version's.
    pub fn set_slot(&mut self, slot: &KeySlot) {
        self.key.clone_from(&slot.key);
        self.wrapped_key.clone_from(&slot.wrapped_key);
    }
}

/// The wrapped key as base64 text in the stored JSON (bytes as a number array would be four
/// times their size).
pub(crate) mod wrapped_key {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

    pub fn serialize<S: Serializer>(bytes: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(bytes) => s.serialize_some(&B64.encode(bytes)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| B64.decode(text).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// A version record for the domain's tests: version `n`, written by alice at `at`, its
/// other fields plain.
#[cfg(test)]
pub(crate) fn test_record(n: u64, at: Timestamp) -> VersionRecord {
    VersionRecord {
        version: n,
        serial: Some(n),
        lineage: Some("l".into()),
        size: 1,
        sha256: "x".into(),
        source: Source::Write,
        key: "platform:k".into(),
        wrapped_key: None,
        opentofu_encrypted: false,
        terraform_version: None,
        instances: None,
        index: None,
        created_at: at,
        writer: Actor::User {
            user: "alice".into(),
        },
        change: ChangeRecord::first_save(None, at),
        blob: "b".into(),
        inline: false,
    }
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
        assert_eq!(
            record.wrapped_key, None,
            "no slot: the header's wrapped key opens it"
        );
    }

    /// The key slot's wrapped key is stored as base64 text and reads back as the same bytes.
    #[test]
    fn the_wrapped_key_round_trips_as_base64() {
        let stored = r#"{"version":3,"serial":3,"lineage":"l","size":10,"sha256":"00","source":"write","key":"platform:k","wrapped_key":"AAEC/w==","opentofu_encrypted":false,"created_at":"2026-11-30T01:00:00Z","writer":{"kind":"user","user":"alice"},"change":{"lock":null,"locked_at":null,"released_at":null,"saves":1,"first_save_at":"2026-11-30T01:00:00Z","last_save_at":"2026-11-30T01:00:00Z","ended":"unlocked_write","rolled_back_from":null},"blob":"b"}"#;
        let record: VersionRecord = serde_json::from_str(stored).unwrap();
        assert_eq!(record.wrapped_key.as_deref(), Some(&[0u8, 1, 2, 255][..]));
        let again = serde_json::to_string(&record).unwrap();
        assert!(again.contains(r#""wrapped_key":"AAEC/w==""#), "{again}");
        assert!(serde_json::from_str::<VersionRecord>(&stored.replace("AAEC/w==", "!")).is_err());
    }
}
