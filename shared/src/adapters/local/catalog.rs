//! The catalog in SQLite, and its state records, versions and audit. A commit is one
//! `BEGIN IMMEDIATE` transaction that checks the state record's revision first, so two
//! processes on one folder never both win a compare-and-swap. Writes (each ending in an
//! fsync) run on the blocking pool; point reads, one indexed lookup of microseconds, run in
//! place on a second connection, which WAL lets read while a write is under way.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use super::tables::{from_json, seconds, sql_error, to_json, SCHEMA, SCHEMA_VERSION};
use crate::domain::record::StateRecord;
use crate::domain::version::{KeySlot, VersionRecord};
use crate::domain::Timestamp;
use crate::ports::{
    AuditEntry, AuditQuery, AuditRecord, Commit, OrgAndState, OrgRecord, RunRecord, StateCatalog,
    StepCheck, StoreError, TokenRecord,
};

/// How long a writer waits for another process's transaction before giving up (a 503 with
/// `Retry-After`, which clients retry).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The catalog on one SQLite file.
#[derive(Clone)]
pub struct SqliteCatalog {
    opened: Arc<Mutex<Opened>>,
    /// The connection point reads use in place, without a thread hand-off; `None` while the
    /// catalog is served read-only, when reads take the writer's connection as writes do.
    reader: Option<Arc<Mutex<Connection>>>,
}

/// The connection, and whether it is read-only for want of disk space.
struct Opened {
    conn: Connection,
    /// While the catalog is open read-only: its file, and when opening it for writing was
    /// last tried.
    read_only: Option<(PathBuf, Instant)>,
}

/// How often a catalog open read-only for want of space tries to open for writing again.
const REOPEN_EVERY: Duration = Duration::from_secs(5);

impl SqliteCatalog {
    /// Opens the catalog file, creating its tables on first use and bringing an older
    /// catalog's up to date. A catalog already current is opened without a single write, so
    /// a server on a full disk still starts and serves reads. When the disk has no room for
    /// what opening needs, it says so at ERROR and serves the catalog as it is: an older
    /// catalog without its update; one closed cleanly (whose shared-memory file SQLite must
    /// first make) read-only, trying every few seconds to open it for writing again, so
    /// writes work again soon after the disk has room.
    ///
    /// # Errors
    /// A message naming the file when it cannot be opened or set up.
    pub fn open(path: &Path) -> Result<Self, String> {
        let fail = |e: rusqlite::Error| format!("cannot open the catalog {}: {e}", path.display());
        super::disk::touch_private(path)
            .map_err(|e| format!("cannot create the catalog {}: {e}", path.display()))?;
        let opened = match open_writable(path) {
            Ok(conn) => Opened {
                conn,
                read_only: None,
            },
            // Nothing unsaved is missed read-only: without a write-ahead log, the catalog
            // file holds every commit.
            Err(e) if no_room(&e) && !has_log(path) => {
                tracing::error!(catalog = %path.display(), error = %e, "cannot open the catalog for writing (is the disk full?): serving it read-only, and writes fail until the disk has room");
                Opened {
                    conn: open_read_only(path).map_err(fail)?,
                    read_only: Some((path.to_owned(), Instant::now())),
                }
            }
            Err(e) => return Err(fail(e)),
        };
        let reader = match opened.read_only {
            None => Some(Arc::new(Mutex::new(open_reader(path).map_err(fail)?))),
            Some(_) => None,
        };
        Ok(Self {
            opened: Arc::new(Mutex::new(opened)),
            reader,
        })
    }

    /// Runs `f`, a point read (one indexed lookup: microseconds), in place on the reader
    /// connection. In WAL mode a reader never waits for a writer's transaction or fsync: it
    /// waits only for another point read, or, rarely, for another process recovering the
    /// log after a crash (within the busy timeout).
    pub(super) async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        match &self.reader {
            // As for the writer: a panic inside `f` leaves nothing half done (it only reads).
            Some(reader) => f(&reader.lock().unwrap_or_else(|e| e.into_inner())),
            None => self.with(move |conn| f(conn)).await,
        }
    }

    /// Runs `f` on the connection off the async threads.
    pub(super) async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let opened = self.opened.clone();
        tokio::task::spawn_blocking(move || {
            // A panic inside `f` leaves SQLite consistent (an open transaction rolls back
            // when dropped), so a poisoned lock is safe to take over.
            let mut opened = opened.lock().unwrap_or_else(|e| e.into_inner());
            opened.reopen_when_there_is_room();
            f(&mut opened.conn)
        })
        .await
        .map_err(|e| StoreError::Unavailable(format!("catalog task failed: {e}")))?
    }

    /// The org's settings and one state's record, and with `with_content` the latest
    /// version's inline content: one statement, a point read, so all of it comes from one
    /// snapshot of the catalog (the content found is the latest version's as that record
    /// names it).
    async fn org_and_state_rows(
        &self,
        org: &str,
        name: &str,
        with_content: bool,
    ) -> Result<OrgAndState, StoreError> {
        let (org, name) = (org.to_owned(), name.to_owned());
        self.read(move |conn| {
            let sql = if with_content {
                "SELECT (SELECT record FROM orgs WHERE org = ?1), s.record, c.sealed
                 FROM (SELECT 1) LEFT JOIN states s ON s.org = ?1 AND s.name = ?2
                 LEFT JOIN contents c ON c.org = s.org AND c.name = s.name
                   AND c.incarnation = json_extract(s.record, '$.incarnation')
                   AND c.version = json_extract(s.record, '$.latest.version')"
            } else {
                "SELECT (SELECT record FROM orgs WHERE org = ?1), s.record, NULL
                 FROM (SELECT 1) LEFT JOIN states s ON s.org = ?1 AND s.name = ?2"
            };
            type Row = (Option<String>, Option<String>, Option<Vec<u8>>);
            let (settings, state, content): Row = conn
                .prepare_cached(sql)
                .and_then(|mut stmt| {
                    stmt.query_row(params![org, name], |row| {
                        Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                    })
                })
                .map_err(sql_error)?;
            let state = state
                .map(|text| Ok::<_, StoreError>((from_json::<StateRecord>(&text)?, content)))
                .transpose()?;
            Ok((settings.as_deref().map(from_json).transpose()?, state))
        })
        .await
    }
}

impl Opened {
    /// A read-only catalog reads what the file held when it was opened, and another process
    /// may write the file once there is room: so it tries to open for writing again.
    fn reopen_when_there_is_room(&mut self) {
        let Some((path, tried)) = &self.read_only else {
            return;
        };
        if tried.elapsed() < REOPEN_EVERY {
            return;
        }
        let path = path.clone();
        match open_writable(&path) {
            Ok(conn) => {
                tracing::info!(catalog = %path.display(), "the catalog's disk has room again: it is open for writing");
                self.conn = conn;
                self.read_only = None;
            }
            Err(_) => self.read_only = Some((path, Instant::now())),
        }
    }
}

/// The catalog open for reading and writing, its tables set up. An older catalog whose
/// update the disk has no room for is served as it is, said at ERROR.
fn open_writable(path: &Path) -> Result<Connection, rusqlite::Error> {
    let (mut conn, version) = open_current(path)?;
    if version >= SCHEMA_VERSION {
        return Ok(conn);
    }
    match set_up(&mut conn) {
        Ok(()) => Ok(conn),
        // Its tables exist: serve what they hold until there is room.
        Err(e) if version > 0 && no_room(&e) => {
            tracing::error!(catalog = %path.display(), error = %e, "cannot bring the catalog up to date (is the disk full?): serving it as it is, and writes fail until the disk has room");
            Ok(conn)
        }
        Err(e) => Err(e),
    }
}

/// Whether a fault is the disk's: full, or failing as a full disk makes SQLite's
/// shared-memory file fail.
fn no_room(e: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode::{DiskFull, SystemIoFailure};
    matches!(e.sqlite_error_code(), Some(DiskFull | SystemIoFailure))
}

/// The catalog opened for reading and writing, with its schema version.
fn open_current(path: &Path) -> Result<(Connection, i64), rusqlite::Error> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // FULL makes every commit durable; it is a setting of the connection, not a write.
    conn.pragma_update(None, "synchronous", "FULL")?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    Ok((conn, version))
}

/// The connection for point reads, on a catalog already open for writing (so in WAL mode,
/// its tables set up). `query_only`, so nothing can write through it by mistake.
fn open_reader(path: &Path) -> Result<Connection, rusqlite::Error> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

/// Whether the catalog has a write-ahead log with commits the catalog file may lack yet.
fn has_log(path: &Path) -> bool {
    let mut log = path.as_os_str().to_owned();
    log.push("-wal");
    std::fs::metadata(log).is_ok_and(|m| m.len() > 0)
}

/// The catalog read-only, needing no file of its own (SQLite's `immutable`): for a disk
/// with no room, when the catalog file holds every commit.
fn open_read_only(path: &Path) -> Result<Connection, rusqlite::Error> {
    let escaped = path
        .to_string_lossy()
        .replace('%', "%25")
        .replace('?', "%3f")
        .replace('#', "%23");
    Connection::open_with_flags(
        format!("file:{escaped}?immutable=1"),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
    )
}

/// Creates the tables, or those an older catalog lacks, in WAL mode, which lets readers
/// proceed during a write.
fn set_up(conn: &mut Connection) -> Result<(), rusqlite::Error> {
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        conn.pragma_update(None, "journal_mode", "WAL")?;
    }
    // IMMEDIATE, like every write here: a deferred transaction that reads first cannot
    // wait for another process's writer (SQLite answers busy at once instead).
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(SCHEMA)?;
    tx.commit()
}

/// [`StateCatalog::replace_key_slot`] in one transaction: the version's record and the state
/// record are read and written under SQLite's one writer, so the slot compared is the one
/// replaced.
fn replace_key_slot_in(
    conn: &mut Connection,
    (org, name, incarnation): (&str, &str, &str),
    version: i64,
    old: &KeySlot,
    new: &KeySlot,
) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_error)?;
    let state: Option<String> = tx
        .query_row(
            "SELECT record FROM states WHERE org = ?1 AND name = ?2",
            params![org, name],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql_error)?;
    let state: StateRecord = from_json(&state.ok_or(StoreError::Conflict)?)?;
    let stored: Option<String> = tx
        .query_row(
            "SELECT record FROM versions
             WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND version = ?4",
            params![org, name, incarnation, version],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql_error)?;
    let mut record: VersionRecord = from_json(&stored.ok_or(StoreError::Conflict)?)?;
    if state.incarnation != incarnation || record.slot() != *old {
        return Err(StoreError::Conflict);
    }
    record.set_slot(new);
    let state = state.with_key_slot(record.version, new);
    tx.execute(
        "UPDATE versions SET record = ?5
         WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND version = ?4",
        params![org, name, incarnation, version, to_json(&record)],
    )
    .map_err(sql_error)?;
    tx.execute(
        "UPDATE states SET revision = ?3, record = ?4 WHERE org = ?1 AND name = ?2",
        params![org, name, state.revision, to_json(&state)],
    )
    .map_err(sql_error)?;
    tx.commit().map_err(sql_error)
}

/// Whether a step's lock may commit: its token unrevoked, its run not ended too early (read
/// inside the commit's transaction, which holds the write lock).
fn step_stands(tx: &Connection, check: &StepCheck) -> Result<bool, StoreError> {
    let token: Option<String> = tx
        .query_row(
            "SELECT record FROM tokens WHERE hash = ?1",
            params![check.token_hash],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql_error)?;
    let Some(token) = token else {
        return Ok(false);
    };
    if from_json::<TokenRecord>(&token)?.revoked {
        return Ok(false);
    }
    let run: Option<String> = tx
        .query_row(
            "SELECT record FROM runs WHERE run = ?1",
            params![check.run],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql_error)?;
    let ended = run
        .map(|r| from_json::<RunRecord>(&r))
        .transpose()?
        .and_then(|r| r.ended_at);
    Ok(ended.is_none_or(|at| at >= check.ended_not_before))
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
    if let Some(check) = &commit.step {
        if !step_stands(&tx, check)? {
            return Err(StoreError::Conflict);
        }
    }
    match &commit.state {
        Some(record) => {
            tx.execute(
                "INSERT OR REPLACE INTO states (org, name, revision, record) VALUES (?1, ?2, ?3, ?4)",
                params![commit.org, commit.name, record.revision, to_json(record)],
            )
            .map_err(sql_error)?;
            for v in &commit.versions {
                let key = params![commit.org, commit.name, record.incarnation, v.version];
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
                if let Some(sealed) = commit.content_of(v.version) {
                    tx.execute(
                        "INSERT OR REPLACE INTO contents (org, name, incarnation, version, sealed)
                         VALUES (?1, ?2, ?3, ?4, ?5)",
                        params![
                            commit.org,
                            commit.name,
                            record.incarnation,
                            v.version,
                            sealed.as_slice()
                        ],
                    )
                    .map_err(sql_error)?;
                } else if !v.inline {
                    // A version whose content moved to a blob (a replacing save too large to
                    // be inline) leaves none behind.
                    tx.execute(
                        "DELETE FROM contents
                         WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND version = ?4",
                        key,
                    )
                    .map_err(sql_error)?;
                }
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
        self.read(move |conn| {
            let text: Option<String> = conn
                .prepare_cached("SELECT record FROM states WHERE org = ?1 AND name = ?2")
                .and_then(|mut stmt| stmt.query_row(params![org, name], |row| row.get(0)))
                .optional()
                .map_err(sql_error)?;
            text.as_deref().map(from_json).transpose()
        })
        .await
    }

    async fn org_and_state(
        &self,
        org: &str,
        name: &str,
    ) -> Result<(Option<OrgRecord>, Option<StateRecord>), StoreError> {
        let (org, state) = self.org_and_state_rows(org, name, false).await?;
        Ok((org, state.map(|(state, _)| state)))
    }

    async fn org_and_state_with_content(
        &self,
        org: &str,
        name: &str,
    ) -> Result<OrgAndState, StoreError> {
        self.org_and_state_rows(org, name, true).await
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
        self.read(move |conn| {
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

    async fn content(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
        version: u64,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        // As for `version`: a number past SQLite's integers names nothing.
        let Ok(version) = i64::try_from(version) else {
            return Ok(None);
        };
        let key = (org.to_owned(), name.to_owned(), incarnation.to_owned());
        self.read(move |conn| {
            conn.query_row(
                "SELECT sealed FROM contents
                 WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND version = ?4",
                params![key.0, key.1, key.2, version],
                |row| row.get(0),
            )
            .optional()
            .map_err(sql_error)
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

    async fn replace_key_slot(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
        version: u64,
        old: &KeySlot,
        new: &KeySlot,
    ) -> Result<(), StoreError> {
        let Ok(version) = i64::try_from(version) else {
            return Err(StoreError::Conflict);
        };
        let (org, name, incarnation) = (org.to_owned(), name.to_owned(), incarnation.to_owned());
        let (old, new) = (old.clone(), new.clone());
        self.with(move |conn| {
            replace_key_slot_in(conn, (&org, &name, &incarnation), version, &old, &new)
        })
        .await
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
