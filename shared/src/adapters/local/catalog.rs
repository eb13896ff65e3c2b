//! The catalog in SQLite. Records are stored as JSON beside the columns their lookups need;
//! a commit is one `BEGIN IMMEDIATE` transaction that checks the state record's revision
//! first, so two processes on one folder never both win a compare-and-swap.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::domain::permission::Allocation;
use crate::domain::record::StateRecord;
use crate::domain::version::VersionRecord;
use crate::domain::Timestamp;
use crate::ports::{
    AccessCatalog, AuditEntry, AuditQuery, AuditRecord, Commit, OrgRecord, RunCatalog, RunItem,
    RunRecord, StateCatalog, StoreError, SweepCatalog, TokenRecord,
};

/// How long a writer waits for another process's transaction before giving up (a 503 with
/// `Retry-After`, which clients retry).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS states (
    org TEXT NOT NULL, name TEXT NOT NULL, revision INTEGER NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (org, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS versions (
    org TEXT NOT NULL, name TEXT NOT NULL, incarnation TEXT NOT NULL, version INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (org, name, incarnation, version)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pending_blobs (blob TEXT PRIMARY KEY, since INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS doomed_blobs (blob TEXT PRIMARY KEY, since INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ended_runs (run TEXT PRIMARY KEY, since INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS version_marks (
    org TEXT NOT NULL, name TEXT NOT NULL, incarnation TEXT NOT NULL, below INTEGER NOT NULL,
    PRIMARY KEY (org, name, incarnation)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT, org TEXT NOT NULL, state TEXT, action TEXT NOT NULL,
    entry TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS audit_by_org ON audit (org, id);
CREATE INDEX IF NOT EXISTS audit_by_state ON audit (org, state, id);
CREATE TABLE IF NOT EXISTS tokens (
    hash TEXT PRIMARY KEY, id TEXT NOT NULL UNIQUE, run TEXT, expires INTEGER,
    record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS tokens_by_expiry ON tokens (expires) WHERE expires IS NOT NULL;
CREATE INDEX IF NOT EXISTS tokens_by_run ON tokens (run) WHERE run IS NOT NULL;
CREATE TABLE IF NOT EXISTS runs (run TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS run_items (
    run TEXT NOT NULL, token_id TEXT NOT NULL, org TEXT NOT NULL, state TEXT NOT NULL,
    PRIMARY KEY (run, token_id, org, state)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS orgs (org TEXT PRIMARY KEY, record TEXT NOT NULL);
PRAGMA user_version = 1;
";

/// The catalog on one SQLite file.
#[derive(Clone)]
pub struct SqliteCatalog {
    conn: Arc<Mutex<Connection>>,
}

fn sql_error(e: rusqlite::Error) -> StoreError {
    StoreError::Unavailable(format!("catalog: {e}"))
}

/// Times the sweeper compares are stored as whole Unix seconds: RFC 3339 text with varying
/// fractions does not sort as time does.
fn seconds(at: Timestamp) -> i64 {
    at.unix_timestamp()
}

fn to_json<T: Serialize>(value: &T) -> String {
    // Records are plain data (strings, numbers, options): serializing them cannot fail.
    serde_json::to_string(value).expect("records serialize")
}

fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("catalog record: {e}")))
}

impl SqliteCatalog {
    /// Opens the catalog file, creating its tables on first use.
    ///
    /// # Errors
    /// A message naming the file when it cannot be opened or set up.
    pub fn open(path: &Path) -> Result<Self, String> {
        let fail = |e: rusqlite::Error| format!("cannot open the catalog {}: {e}", path.display());
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
    async fn with<T: Send + 'static>(
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

fn insert_audit(conn: &Connection, entry: &AuditEntry) -> Result<(), StoreError> {
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
                        query.before,
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

fn drop_marked_in(conn: &mut Connection, limit: usize, at: i64) -> Result<usize, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_error)?;
    let marks: Vec<(String, String, String, u64)> = {
        let mut stmt = tx
            .prepare_cached("SELECT org, name, incarnation, below FROM version_marks LIMIT ?1")
            .map_err(sql_error)?;
        let rows = stmt
            .query_map(params![limit as i64], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .map_err(sql_error)?;
        rows.collect::<Result<_, _>>().map_err(sql_error)?
    };
    let mut dropped = 0;
    for (org, name, incarnation, below) in marks {
        let doomed: Vec<(u64, String)> = {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT version, record FROM versions
                     WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND version < ?4
                     ORDER BY version LIMIT ?5",
                )
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(
                    params![org, name, incarnation, below, (limit - dropped) as i64],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(sql_error)?;
            rows.collect::<Result<_, _>>().map_err(sql_error)?
        };
        for (version, text) in &doomed {
            let record: VersionRecord = from_json(text)?;
            tx.execute(
                "INSERT OR IGNORE INTO doomed_blobs (blob, since) VALUES (?1, ?2)",
                params![record.blob, at],
            )
            .map_err(sql_error)?;
            tx.execute(
                "DELETE FROM versions WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND version = ?4",
                params![org, name, incarnation, version],
            )
            .map_err(sql_error)?;
        }
        dropped += doomed.len();
        if dropped == limit {
            break;
        }
        tx.execute(
            "DELETE FROM version_marks WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND below = ?4",
            params![org, name, incarnation, below],
        )
        .map_err(sql_error)?;
    }
    tx.commit().map_err(sql_error)?;
    Ok(dropped)
}

fn blobs_since(
    conn: &Connection,
    table: &'static str,
    before: i64,
    limit: usize,
) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT blob FROM {table} WHERE since < ?1 LIMIT ?2"
        ))
        .map_err(sql_error)?;
    let rows = stmt
        .query_map(params![before, limit as i64], |r| r.get::<_, String>(0))
        .map_err(sql_error)?;
    rows.collect::<Result<_, _>>().map_err(sql_error)
}

fn run_in(conn: &Connection, run: &str) -> Result<Option<RunRecord>, StoreError> {
    let text: Option<String> = conn
        .query_row(
            "SELECT record FROM runs WHERE run = ?1",
            params![run],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql_error)?;
    text.as_deref().map(from_json).transpose()
}

#[async_trait]
impl RunCatalog for SqliteCatalog {
    async fn run(&self, run: &str) -> Result<Option<RunRecord>, StoreError> {
        let run = run.to_owned();
        self.with(move |conn| run_in(conn, &run)).await
    }

    async fn bind_run(&self, record: &RunRecord) -> Result<RunRecord, StoreError> {
        let record = record.clone();
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            let stored = match run_in(&tx, &record.run)? {
                Some(existing) => existing,
                None => {
                    tx.execute(
                        "INSERT INTO runs (run, record) VALUES (?1, ?2)",
                        params![record.run, to_json(&record)],
                    )
                    .map_err(sql_error)?;
                    record
                }
            };
            tx.commit().map_err(sql_error)?;
            Ok(stored)
        })
        .await
    }

    async fn end_run(
        &self,
        run: &str,
        at: Timestamp,
        status: Option<&str>,
    ) -> Result<RunRecord, StoreError> {
        let (run, status) = (run.to_owned(), status.map(str::to_owned));
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            let mut record = run_in(&tx, &run)?.unwrap_or(RunRecord {
                run: run.clone(),
                org: String::new(),
                created_at: at,
                ended_at: None,
                status: None,
            });
            if record.ended_at.is_none() {
                record.ended_at = Some(at);
                record.status = status;
                tx.execute(
                    "INSERT OR REPLACE INTO runs (run, record) VALUES (?1, ?2)",
                    params![run, to_json(&record)],
                )
                .map_err(sql_error)?;
                // A sparse record: the sweeper tidies the run's dead locks from here.
                tx.execute(
                    "INSERT OR IGNORE INTO ended_runs (run, since) VALUES (?1, ?2)",
                    params![run, seconds(at)],
                )
                .map_err(sql_error)?;
            }
            tx.commit().map_err(sql_error)?;
            Ok(record)
        })
        .await
    }

    async fn run_items(&self, run: &str) -> Result<Vec<RunItem>, StoreError> {
        let run = run.to_owned();
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached("SELECT token_id, org, state FROM run_items WHERE run = ?1")
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(params![run], |r| {
                    Ok(RunItem {
                        run: run.clone(),
                        token_id: r.get(0)?,
                        org: r.get(1)?,
                        state: r.get(2)?,
                    })
                })
                .map_err(sql_error)?;
            rows.collect::<Result<_, _>>().map_err(sql_error)
        })
        .await
    }

    async fn run_tokens(&self, run: &str) -> Result<Vec<TokenRecord>, StoreError> {
        let run = run.to_owned();
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached("SELECT record FROM tokens WHERE run = ?1 ORDER BY rowid")
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(params![run], |r| r.get::<_, String>(0))
                .map_err(sql_error)?;
            rows.map(|r| from_json(&r.map_err(sql_error)?)).collect()
        })
        .await
    }
}

#[async_trait]
impl SweepCatalog for SqliteCatalog {
    async fn drop_marked_versions(&self, limit: usize, at: Timestamp) -> Result<usize, StoreError> {
        let at = seconds(at);
        self.with(move |conn| drop_marked_in(conn, limit, at)).await
    }

    async fn doomed_blobs(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let before = seconds(before);
        self.with(move |conn| blobs_since(conn, "doomed_blobs", before, limit))
            .await
    }

    async fn stale_pending_blobs(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let before = seconds(before);
        self.with(move |conn| blobs_since(conn, "pending_blobs", before, limit))
            .await
    }

    async fn drop_expired_tokens(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<usize, StoreError> {
        let before = seconds(before);
        self.with(move |conn| {
            conn.execute(
                "DELETE FROM tokens WHERE rowid IN
                 (SELECT rowid FROM tokens WHERE expires IS NOT NULL AND expires < ?1 LIMIT ?2)",
                params![before, limit as i64],
            )
            .map_err(sql_error)
        })
        .await
    }

    async fn ended_runs(&self, limit: usize) -> Result<Vec<String>, StoreError> {
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached("SELECT run FROM ended_runs ORDER BY since LIMIT ?1")
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(params![limit as i64], |r| r.get::<_, String>(0))
                .map_err(sql_error)?;
            rows.collect::<Result<_, _>>().map_err(sql_error)
        })
        .await
    }

    async fn forget_ended_run(&self, run: &str) -> Result<(), StoreError> {
        let run = run.to_owned();
        self.with(move |conn| {
            conn.execute("DELETE FROM ended_runs WHERE run = ?1", params![run])
                .map_err(sql_error)?;
            Ok(())
        })
        .await
    }

    async fn forget_blobs(&self, blobs: &[String]) -> Result<(), StoreError> {
        let blobs = blobs.to_vec();
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            for blob in &blobs {
                tx.execute("DELETE FROM doomed_blobs WHERE blob = ?1", params![blob])
                    .map_err(sql_error)?;
                tx.execute("DELETE FROM pending_blobs WHERE blob = ?1", params![blob])
                    .map_err(sql_error)?;
            }
            tx.commit().map_err(sql_error)
        })
        .await
    }
}

#[async_trait]
impl AccessCatalog for SqliteCatalog {
    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        let hash = hash.to_owned();
        self.with(move |conn| {
            let text: Option<String> = conn
                .query_row(
                    "SELECT record FROM tokens WHERE hash = ?1",
                    params![hash],
                    |row| row.get(0),
                )
                .optional()
                .map_err(sql_error)?;
            text.as_deref().map(from_json).transpose()
        })
        .await
    }

    async fn put_token(&self, token: &TokenRecord, audit: &AuditEntry) -> Result<(), StoreError> {
        let (token, audit) = (token.clone(), audit.clone());
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            tx.execute(
                // An upsert, not a replace: a token keeps its place in listings when revoked.
                "INSERT INTO tokens (hash, id, run, expires, record) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (hash) DO UPDATE SET record = excluded.record",
                params![
                    token.hash,
                    token.id,
                    token.step.as_ref().map(|g| &g.run),
                    token.expires_at.map(seconds),
                    to_json(&token)
                ],
            )
            .map_err(sql_error)?;
            insert_audit(&tx, &audit)?;
            tx.commit().map_err(sql_error)
        })
        .await
    }

    async fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached("SELECT record FROM tokens ORDER BY rowid")
                .map_err(sql_error)?;
            let rows = stmt
                .query_map([], |row| row.get::<_, String>(0))
                .map_err(sql_error)?;
            rows.map(|r| from_json(&r.map_err(sql_error)?)).collect()
        })
        .await
    }

    async fn set_allocation(
        &self,
        org: &str,
        allocation: &Allocation,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let record = OrgRecord {
            org: org.to_owned(),
            allocation: *allocation,
            created_at: audit.at,
        };
        let audit = audit.clone();
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            let existing: Option<String> = tx
                .query_row(
                    "SELECT record FROM orgs WHERE org = ?1",
                    params![record.org],
                    |row| row.get(0),
                )
                .optional()
                .map_err(sql_error)?;
            let stored = match existing {
                Some(text) => OrgRecord {
                    allocation: record.allocation,
                    ..from_json(&text)?
                },
                None => record,
            };
            tx.execute(
                "INSERT OR REPLACE INTO orgs (org, record) VALUES (?1, ?2)",
                params![stored.org, to_json(&stored)],
            )
            .map_err(sql_error)?;
            insert_audit(&tx, &audit)?;
            tx.commit().map_err(sql_error)
        })
        .await
    }

    async fn org(&self, org: &str) -> Result<Option<OrgRecord>, StoreError> {
        let org = org.to_owned();
        self.with(move |conn| {
            let text: Option<String> = conn
                .query_row(
                    "SELECT record FROM orgs WHERE org = ?1",
                    params![org],
                    |row| row.get(0),
                )
                .optional()
                .map_err(sql_error)?;
            text.as_deref().map(from_json).transpose()
        })
        .await
    }

    async fn create_org(&self, org: &OrgRecord) -> Result<bool, StoreError> {
        let (name, record) = (org.org.clone(), to_json(org));
        self.with(move |conn| {
            let inserted = conn
                .execute(
                    "INSERT OR IGNORE INTO orgs (org, record) VALUES (?1, ?2)",
                    params![name, record],
                )
                .map_err(sql_error)?;
            Ok(inserted == 1)
        })
        .await
    }
}
