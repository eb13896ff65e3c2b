//! The catalog in SQLite, and its state records, versions and audit. A commit is one
//! `BEGIN IMMEDIATE` transaction that checks the state record's revision first, so two
//! processes on one folder never both win a compare-and-swap.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::tables::{from_json, seconds, sql_error, to_json, SCHEMA};
use crate::domain::record::StateRecord;
use crate::domain::version::VersionRecord;
use crate::domain::Timestamp;
use crate::ports::{AuditEntry, AuditQuery, AuditRecord, Commit, StateCatalog, StoreError};

/// How long a writer waits for another process's transaction before giving up (a 503 with
/// `Retry-After`, which clients retry).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The catalog on one SQLite file.
#[derive(Clone)]
pub struct SqliteCatalog {
    conn: Arc<Mutex<Connection>>,
}

impl SqliteCatalog {
    /// Opens the catalog file, creating its tables on first use.
    ///
    /// # Errors
    /// A message naming the file when it cannot be opened or set up.
    pub fn open(path: &Path) -> Result<Self, String> {
        let fail = |e: rusqlite::Error| format!("cannot open the catalog {}: {e}", path.display());
        super::disk::touch_private(path)
            .map_err(|e| format!("cannot create the catalog {}: {e}", path.display()))?;
        let mut conn = Connection::open(path).map_err(fail)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
        // WAL lets readers proceed during a write; FULL makes every commit durable.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(fail)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(fail)?;
        // IMMEDIATE, like every write here: a deferred transaction that reads first cannot
        // wait for another process's writer (SQLite answers busy at once instead).
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail)?;
        tx.execute_batch(SCHEMA).map_err(fail)?;
        tx.commit().map_err(fail)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Runs `f` on the connection off the async threads.
    pub(super) async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            // A panic inside `f` leaves SQLite consistent (an open transaction rolls back
            // when dropped), so a poisoned lock is safe to take over.
            let mut conn = conn.lock().unwrap_or_else(|e| e.into_inner());
            f(&mut conn)
        })
        .await
        .map_err(|e| StoreError::Unavailable(format!("catalog task failed: {e}")))?
    }
}

fn commit_in(conn: &mut Connection, commit: Commit) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_error)?;
    let current: u64 = tx
        .query_row(
            "SELECT revision FROM states WHERE org = ?1 AND name = ?2",
            params![commit.org, commit.name],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql_error)?
        .unwrap_or(0);
    if current != commit.expected_revision {
        return Err(StoreError::Conflict);
    }
    match &commit.state {
        Some(record) => {
            tx.execute(
                "INSERT OR REPLACE INTO states (org, name, revision, record) VALUES (?1, ?2, ?3, ?4)",
                params![commit.org, commit.name, record.revision, to_json(record)],
            )
            .map_err(sql_error)?;
            for v in &commit.versions {
                tx.execute(
                    "INSERT OR REPLACE INTO versions (org, name, incarnation, version, record)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        commit.org,
                        commit.name,
                        record.incarnation,
                        v.version,
                        to_json(v)
                    ],
                )
                .map_err(sql_error)?;
            }
        }
        None => {
            tx.execute(
                "DELETE FROM states WHERE org = ?1 AND name = ?2",
                params![commit.org, commit.name],
            )
            .map_err(sql_error)?;
        }
    }
    for blob in &commit.committed_blobs {
        tx.execute("DELETE FROM pending_blobs WHERE blob = ?1", params![blob])
            .map_err(sql_error)?;
    }
    let now = seconds(commit.at);
    for blob in &commit.doomed_blobs {
        tx.execute(
            "INSERT OR IGNORE INTO doomed_blobs (blob, since) VALUES (?1, ?2)",
            params![blob, now],
        )
        .map_err(sql_error)?;
    }
    for item in &commit.run_items {
        tx.execute(
            "INSERT OR IGNORE INTO run_items (run, token_id, org, state) VALUES (?1, ?2, ?3, ?4)",
            params![item.run, item.token_id, item.org, item.state],
        )
        .map_err(sql_error)?;
    }
    for mark in &commit.version_marks {
        tx.execute(
            "INSERT INTO version_marks (org, name, incarnation, below) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (org, name, incarnation) DO UPDATE SET below = max(below, excluded.below)",
            params![commit.org, commit.name, mark.incarnation, mark.below],
        )
        .map_err(sql_error)?;
    }
    for entry in &commit.audit {
        insert_audit(&tx, entry)?;
    }
    tx.commit().map_err(sql_error)
}

pub(super) fn insert_audit(conn: &Connection, entry: &AuditEntry) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO audit (org, state, action, entry) VALUES (?1, ?2, ?3, ?4)",
        params![entry.org, entry.state, entry.action, to_json(entry)],
    )
    .map_err(sql_error)?;
    Ok(())
}

#[async_trait]
impl StateCatalog for SqliteCatalog {
    async fn state(&self, org: &str, name: &str) -> Result<Option<StateRecord>, StoreError> {
        let (org, name) = (org.to_owned(), name.to_owned());
        self.with(move |conn| {
            let text: Option<String> = conn
                .query_row(
                    "SELECT record FROM states WHERE org = ?1 AND name = ?2",
                    params![org, name],
                    |row| row.get(0),
                )
                .optional()
                .map_err(sql_error)?;
            text.as_deref().map(from_json).transpose()
        })
        .await
    }

    async fn states(
        &self,
        org: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<StateRecord>, StoreError> {
        let (org, after) = (org.to_owned(), after.unwrap_or("").to_owned());
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT record FROM states WHERE org = ?1 AND name > ?2 ORDER BY name LIMIT ?3",
                )
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(params![org, after, limit as i64], |row| {
                    row.get::<_, String>(0)
                })
                .map_err(sql_error)?;
            rows.map(|r| from_json(&r.map_err(sql_error)?)).collect()
        })
        .await
    }

    async fn version(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
        version: u64,
    ) -> Result<Option<VersionRecord>, StoreError> {
        // Versions are stored as SQLite integers, which stop at 2^63-1: a larger number
        // (only a request can carry one) names no version.
        let Ok(version) = i64::try_from(version) else {
            return Ok(None);
        };
        let key = (org.to_owned(), name.to_owned(), incarnation.to_owned());
        self.with(move |conn| {
            let text: Option<String> = conn
                .query_row(
                    "SELECT record FROM versions
                     WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND version = ?4",
                    params![key.0, key.1, key.2, version],
                    |row| row.get(0),
                )
                .optional()
                .map_err(sql_error)?;
            text.as_deref().map(from_json).transpose()
        })
        .await
    }

    async fn versions(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
    ) -> Result<Vec<VersionRecord>, StoreError> {
        let key = (org.to_owned(), name.to_owned(), incarnation.to_owned());
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT record FROM versions WHERE org = ?1 AND name = ?2 AND incarnation = ?3
                     ORDER BY version DESC",
                )
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(params![key.0, key.1, key.2], |row| row.get::<_, String>(0))
                .map_err(sql_error)?;
            rows.map(|r| from_json(&r.map_err(sql_error)?)).collect()
        })
        .await
    }

    async fn add_pending_blob(&self, blob: &str, at: Timestamp) -> Result<(), StoreError> {
        let (blob, since) = (blob.to_owned(), seconds(at));
        self.with(move |conn| {
            conn.execute(
                "INSERT OR IGNORE INTO pending_blobs (blob, since) VALUES (?1, ?2)",
                params![blob, since],
            )
            .map_err(sql_error)?;
            Ok(())
        })
        .await
    }

    async fn commit(&self, commit: Commit) -> Result<(), StoreError> {
        self.with(move |conn| commit_in(conn, commit)).await
    }

    async fn append_audit(&self, entry: &AuditEntry) -> Result<(), StoreError> {
        let entry = entry.clone();
        self.with(move |conn| insert_audit(conn, &entry)).await
    }

    async fn audit(&self, org: &str, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        let (org, query) = (org.to_owned(), query.clone());
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, entry FROM audit
                     WHERE org = ?1 AND (?2 IS NULL OR state = ?2) AND (?3 IS NULL OR action = ?3)
                       AND (?4 IS NULL OR id < ?4)
                     ORDER BY id DESC LIMIT ?5",
                )
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(
                    params![
                        org,
                        query.state,
                        query.action,
                        // Ids are SQLite integers, which stop at 2^63-1: a cursor past that
                        // is older than nothing, so it reads from the newest entry.
                        query.before.map(|b| i64::try_from(b).unwrap_or(i64::MAX)),
                        query.limit as i64
                    ],
                    |row| Ok((row.get::<_, u64>(0)?, row.get::<_, String>(1)?)),
                )
                .map_err(sql_error)?;
            rows.map(|r| {
                let (seq, text) = r.map_err(sql_error)?;
                Ok(AuditRecord {
                    seq,
                    entry: from_json(&text)?,
                })
            })
            .collect()
        })
        .await
    }
}
