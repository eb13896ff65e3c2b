//! App states (Octo's remote state): the records of an app state, its lock and open change,
//! its archives and their files. An app state holds sealed changes; a change starts with a
//! lock and ends with a seal (or an unlock that gives it up), both sealing what was uploaded
//! as the newest archive. Pure data and rules: `file_name` says what a name is, `change`
//! decides each step of a change, `key_slots` where a file's key slot is copied. No I/O, no
//! clock, no status codes.

pub mod change;
pub mod file_name;
pub mod key_slots;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use file_name::{FileKind, FileName};

use super::{Actor, Timestamp};

/// At most this many files in an archive (carried state files and the change's uploads):
/// deleting an archive lists each of its blobs for deletion in one commit, and one commit
/// stays small on every store.
pub const MAX_ARCHIVE_FILES: usize = 64;

/// At most this many bytes uploaded in one change (each name counted at its last upload).
pub const MAX_CHANGE_BYTES: u64 = 256 * 1024 * 1024;

/// At most this many characters in a lock's `who` and `info`.
pub const MAX_LOCK_TEXT: usize = 1024;

/// One stored file: what the listings show and where its sealed content is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRef {
    pub name: String,
    #[serde(flatten)]
    pub kind: FileKind,
    pub size: u64,
    /// Hex SHA-256 of the content as uploaded.
    pub sha256: String,
    /// A `.tfstate` file's lineage and serial, when the document carries them.
    pub lineage: Option<String>,
    pub serial: Option<u64>,
    /// The commit ID of the change that uploaded it.
    pub uploaded_in: String,
    #[serde(with = "time::serde::rfc3339")]
    pub uploaded_at: Timestamp,
    /// The blob holding its sealed content, and the number it was sealed with (bound into
    /// the envelope's associated data with the app state's incarnation).
    pub blob: String,
    pub seq: u64,
    /// What wrapped its data key.
    pub key: String,
    /// Its wrapped data key, beside `key`: the file's key slot, the only place a format-2
    /// object's wrapped key is kept (`None` for a file sealed in format 1, whose header has it).
    #[serde(
        default,
        with = "crate::domain::version::wrapped_key",
        skip_serializing_if = "Option::is_none"
    )]
    pub wrapped_key: Option<Vec<u8>>,
}

/// An app state's lock and the change it opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppLock {
    pub lock_id: String,
    /// `<milliseconds at the lock>-<8 hex>`: sorts in the order changes started.
    pub commit_id: String,
    pub holder: Actor,
    pub who: String,
    pub info: String,
    #[serde(with = "time::serde::rfc3339")]
    pub since: Timestamp,
    /// What the change uploaded, by name: each upload replaces the one before it.
    pub uploads: BTreeMap<String, FileRef>,
}

/// The lock as everyone but its holder sees it: no lock ID (the holder's to pass on).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "AppLock")]
pub struct PublicLock {
    pub commit_id: String,
    pub holder: Actor,
    pub who: String,
    pub info: String,
    #[serde(with = "time::serde::rfc3339")]
    #[schemars(with = "crate::domain::schema::Rfc3339")]
    pub since: Timestamp,
}

impl AppLock {
    pub fn public(&self) -> PublicLock {
        PublicLock {
            commit_id: self.commit_id.clone(),
            holder: self.holder.clone(),
            who: self.who.clone(),
            info: self.info.clone(),
            since: self.since,
        }
    }
}

/// How a change ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(rename = "ArchiveEnded")]
pub enum Ended {
    /// Sealed by its holder (Octo's commit).
    Sealed,
    /// Given up by its holder (`octo unlock`): what it uploaded is kept.
    GivenUp,
    /// Ended by an admin's force-unlock: what it uploaded is kept.
    ForceUnlocked,
}

impl Ended {
    pub fn as_str(self) -> &'static str {
        match self {
            Ended::Sealed => "sealed",
            Ended::GivenUp => "given_up",
            Ended::ForceUnlocked => "force_unlocked",
        }
    }
}

/// A sealed change: every file the app state had when it was sealed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveRecord {
    pub commit_id: String,
    pub lock_id: String,
    pub ended: Ended,
    pub holder: Actor,
    pub who: String,
    pub info: String,
    #[serde(with = "time::serde::rfc3339")]
    pub locked_at: Timestamp,
    #[serde(with = "time::serde::rfc3339")]
    pub sealed_at: Timestamp,
    pub sealed_by: Actor,
    /// In name order.
    pub files: Vec<FileRef>,
}

impl ArchiveRecord {
    pub fn file(&self, name: &str) -> Option<&FileRef> {
        self.files.iter().find(|f| f.name == name)
    }

    /// The sum of its files' sizes.
    pub fn size(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// One app state: its lock (and open change), a copy of its newest archive, and the
/// revision every change compares and swaps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppRecord {
    pub org: String,
    pub name: String,
    /// Bound into every file's envelope, so a blob never opens as another app state's.
    pub incarnation: String,
    /// 0 for a record not stored yet; each commit stores `revision + 1`.
    pub revision: u64,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: Timestamp,
    pub lock: Option<AppLock>,
    pub newest: Option<ArchiveRecord>,
    /// How many archives it holds.
    pub archives: u64,
    /// The next number a sealed file is bound with.
    pub next_seq: u64,
}

impl AppRecord {
    /// The record of an app state not stored yet.
    pub fn fresh(org: &str, name: &str, incarnation: &str, now: Timestamp) -> Self {
        Self {
            org: org.to_owned(),
            name: name.to_owned(),
            incarnation: incarnation.to_owned(),
            revision: 0,
            created_at: now,
            lock: None,
            newest: None,
            archives: 0,
            next_seq: 1,
        }
    }

    /// The record as the next commit stores it.
    pub fn successor(&self) -> Self {
        Self {
            revision: self.revision + 1,
            ..self.clone()
        }
    }

    /// Whether anyone but the lock holder may know it exists: a lock or an archive.
    pub fn is_visible(&self) -> bool {
        self.lock.is_some() || self.newest.is_some()
    }
}
