//! The catalog in SQLite: opening it (creating or updating its tables, read-only when the
//! disk has no room), its connections and how every port's impl runs on them. Writes (each a
//! `BEGIN IMMEDIATE` transaction ending in an fsync) run on the blocking pool; point reads,
//! one indexed lookup of microseconds, run in place on a second connection, which WAL lets
//! read while a write is under way; the inventory's reads, which may take tens of
//! milliseconds, on a few more ([`Scanners`]), on the blocking pool. The audit insert every
//! port's commit makes is here too; what each port's calls do is its own file (`state`,
//! `access`, `apps`, `sweep`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::{params, Connection, OpenFlags, TransactionBehavior};

use super::scanners::Scanners;
use super::tables::{
    sql_error, to_json, DELETED_BY_TIME, END_WAITING, ENTRY_TAGS, FIRST_VERSIONS, INVENTORY_ASIDE,
    INVENTORY_BACK, ROW_RESOURCES, SCHEMA, SCHEMA_VERSION,
};
use crate::ports::{AuditEntry, StoreError};

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
    /// The connections the inventory's reads use, on the blocking pool: a search may read
    /// for tens of milliseconds, which on the point reads' connection would hold every
    /// request's reads back, and in place would hold an async thread. `None` as `reader`.
    scanners: Option<Arc<Scanners>>,
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
        // Read-only, reads take the writer's connection as writes do.
        let (reader, scanners) = match opened.read_only {
            None => (
                Some(Arc::new(Mutex::new(open_reader(path).map_err(fail)?))),
                Some(Arc::new(Scanners::new(
                    (0..Scanners::wanted())
                        .map(|_| open_reader(path))
                        .collect::<Result<_, _>>()
                        .map_err(fail)?,
                ))),
            ),
            Some(_) => (None, None),
        };
        Ok(Self {
            opened: Arc::new(Mutex::new(opened)),
            reader,
            scanners,
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

    /// Runs `f`, a read that may take long (the inventory's), on its own connection off the
    /// async threads.
    pub(super) async fn scan<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let Some(scanners) = self.scanners.clone() else {
            return self.with(move |conn| f(conn)).await;
        };
        tokio::task::spawn_blocking(move || scanners.run(f))
            .await
            .map_err(|e| StoreError::Unavailable(format!("catalog task failed: {e}")))?
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
    match set_up(&mut conn, version) {
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

/// Creates the tables, or those an older catalog (at `version`) lacks, in WAL mode, which
/// lets readers proceed during a write; one at 8 has its inventory reshaped too, one at 8
/// or 9 gains the columns of the resources' tags, one at 5 to 14 has its deleted states
/// keyed by delete time, one before 16 gives its records their first versions, and one at
/// 13 to 16 lists the entries it left waiting as not indexed.
fn set_up(conn: &mut Connection, version: i64) -> Result<(), rusqlite::Error> {
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        conn.pragma_update(None, "journal_mode", "WAL")?;
    }
    // IMMEDIATE, like every write here: a deferred transaction that reads first cannot
    // wait for another process's writer (SQLite answers busy at once instead).
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let reshape = version == 8;
    if reshape {
        tx.execute_batch(INVENTORY_ASIDE)?;
    }
    if version == 9 {
        tx.execute_batch(ROW_RESOURCES)?;
    }
    if matches!(version, 8 | 9) {
        tx.execute_batch(ENTRY_TAGS)?;
    }
    if (5..15).contains(&version) && has_column(&tx, "deleted_states", "purge_at")? {
        tx.execute_batch(DELETED_BY_TIME)?;
    }
    tx.execute_batch(SCHEMA)?;
    if reshape {
        tx.execute_batch(INVENTORY_BACK)?;
    }
    if (1..16).contains(&version) {
        tx.execute_batch(FIRST_VERSIONS)?;
    }
    if (13..17).contains(&version) && has_table(&tx, "inventory_waiting")? {
        let no_rows = super::inventory::no_rows();
        for sql in END_WAITING {
            let mut statement = tx.prepare(sql)?;
            // Only the step that records the changes takes the empty change's rows.
            match statement.parameter_count() {
                0 => statement.execute([])?,
                _ => statement.execute([&no_rows])?,
            };
        }
    }
    tx.commit()
}

/// Whether the catalog has a table `table`.
fn has_table(conn: &Connection, table: &str) -> Result<bool, rusqlite::Error> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1)",
        [table],
        |r| r.get(0),
    )
}

/// Whether `table` has a column `column`.
fn has_column(conn: &Connection, table: &str, column: &str) -> Result<bool, rusqlite::Error> {
    let mut stmt = conn.prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?;
    let names = stmt.query_map([], |r| r.get::<_, String>(0))?;
    for name in names {
        if name? == column {
            return Ok(true);
        }
    }
    Ok(false)
}

pub(super) fn insert_audit(conn: &Connection, entry: &AuditEntry) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO audit (org, state, action, entry) VALUES (?1, ?2, ?3, ?4)",
        params![entry.org, entry.state, entry.action, to_json(entry)],
    )
    .map_err(sql_error)?;
    Ok(())
}
