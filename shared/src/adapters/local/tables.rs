//! The catalog's tables and the codecs between records and rows, the counterpart of the AWS
//! store's single-table layout. Records are stored as JSON beside the columns their lookups
//! need; only what a lookup, a compare-and-swap or the sweeper sorts on is a column of its own.
//! An inline version's sealed content is a row of `contents`, beside its record.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::domain::Timestamp;
use crate::ports::StoreError;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS states (
    org TEXT NOT NULL, name TEXT NOT NULL, revision INTEGER NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (org, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS versions (
    org TEXT NOT NULL, name TEXT NOT NULL, incarnation TEXT NOT NULL, version INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (org, name, incarnation, version)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS contents (
    org TEXT NOT NULL, name TEXT NOT NULL, incarnation TEXT NOT NULL, version INTEGER NOT NULL,
    sealed BLOB NOT NULL,
    PRIMARY KEY (org, name, incarnation, version));
CREATE TABLE IF NOT EXISTS pending_blobs (blob TEXT PRIMARY KEY, since INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS doomed_blobs (blob TEXT PRIMARY KEY, since INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ended_runs (run TEXT PRIMARY KEY, since INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS settled_runs (run TEXT PRIMARY KEY, since INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS settled_runs_by_end ON settled_runs (since);
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
CREATE TABLE IF NOT EXISTS apps (
    org TEXT NOT NULL, name TEXT NOT NULL, revision INTEGER NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (org, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deleted_states (
    org TEXT NOT NULL, id TEXT NOT NULL, deleted_at INTEGER NOT NULL, revision INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (org, id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS deleted_states_by_deletion ON deleted_states (deleted_at);
CREATE TABLE IF NOT EXISTS archives (
    org TEXT NOT NULL, name TEXT NOT NULL, commit_id TEXT NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (org, name, commit_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS trust_policies (
    org TEXT NOT NULL, name TEXT NOT NULL, issuer TEXT NOT NULL, audience TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (org, name)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS trust_policies_by_pair ON trust_policies (issuer, audience);
CREATE TABLE IF NOT EXISTS protected_states (
    org TEXT NOT NULL, pattern TEXT NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (org, pattern)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS inventory (
    id INTEGER PRIMARY KEY,
    org TEXT NOT NULL, state TEXT NOT NULL, address TEXT NOT NULL, module TEXT NOT NULL,
    mode TEXT NOT NULL, type TEXT NOT NULL, provider TEXT NOT NULL, digest TEXT,
    resource INTEGER,
    UNIQUE (org, state, address));
CREATE INDEX IF NOT EXISTS inventory_by_type ON inventory (org, type, state, address);
CREATE INDEX IF NOT EXISTS inventory_by_provider ON inventory (org, provider, state, address);
CREATE INDEX IF NOT EXISTS inventory_by_module ON inventory (org, module, state, address);
CREATE INDEX IF NOT EXISTS inventory_by_digest ON inventory (org, digest, state)
    WHERE digest IS NOT NULL;
CREATE INDEX IF NOT EXISTS inventory_by_resource ON inventory (org, state, resource);
CREATE TABLE IF NOT EXISTS inventory_states (
    org TEXT NOT NULL, state TEXT NOT NULL, version INTEGER NOT NULL, indexed INTEGER NOT NULL,
    instances INTEGER NOT NULL, tags BLOB,
    PRIMARY KEY (org, state)) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS inventory_text USING fts5(
    address, content='', contentless_delete=1, tokenize='trigram', detail='none');
CREATE TABLE IF NOT EXISTS inventory_text_behind (id INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS inventory_pending (
    seq INTEGER PRIMARY KEY,
    org TEXT NOT NULL, state TEXT NOT NULL, clear INTEGER NOT NULL,
    gone BLOB NOT NULL, instances BLOB NOT NULL, size INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS inventory_pending_by_state ON inventory_pending (org, state);
CREATE TABLE IF NOT EXISTS exchanged_tokens (key TEXT PRIMARY KEY, until INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS exchanged_tokens_by_until ON exchanged_tokens (until);
PRAGMA user_version = 17;
";

/// The `user_version` of a catalog that `SCHEMA` made: one at it needs no write to open.
/// 3 added `apps` and `archives`, the app states; 4 added `contents`, the sealed bytes of
/// inline versions (a table of its own, not a column of `versions`, so an older catalog gains
/// it without rewriting a row, and a version's record is replaced without touching its
/// content); 5 added `deleted_states`, deleted states kept for their retention; 6 added
/// `trust_policies`, the orgs' trust policies for workloads; 7 added `protected_states`, the
/// orgs' protected-state rules (a table of its own, so the step is one `CREATE TABLE` and
/// touches no row); 8 added `inventory` and `inventory_states`, the resource index (empty
/// after the step: `index rebuild` fills it); 9 gave `inventory` a rowid (`id`) and added
/// `inventory_text`, a trigram index of its addresses by that rowid (see [`INVENTORY_ASIDE`]);
/// 10 gave each row the tag of its resource (`resource`, indexed by state) and each entry its
/// resources' tags (`tags`), so a save writes only the rows of the resources it changed (see
/// [`ENTRY_TAGS`]); 11 added `inventory_text_behind`, the ids of the rows a small save left
/// for the trigram index to take later (empty after the step: every row is in the index);
/// 12 added `inventory_pending`, the changes to the rows that commits recorded and that are
/// written before a read (empty after the step); 13 added `inventory_waiting`, the states
/// whose entries wait to be derived from their latest versions (empty after the step); 14
/// added `exchanged_tokens`, the marks of the ID tokens exchanged for sessions (empty after
/// the step: a token exchanged before it could be exchanged once more); 15 keys
/// `deleted_states` by delete time (`deleted_at`, not the purge date the retention in force
/// at the delete gave: the sweeper adds the setting in force now; see [`DELETED_BY_TIME`]);
/// 16 gives each state's record its incarnation's first version, what the overview counts
/// its versions from (see [`FIRST_VERSIONS`]); 17 drops `inventory_waiting`, as every commit
/// now carries its entry (see [`END_WAITING`]). Every table is created if missing, so a
/// catalog of any older version gains all it lacks in one pass.
pub(super) const SCHEMA_VERSION: i64 = 17;

/// What a catalog at 13 to 16 holds that 17 does not: `inventory_waiting`, the states whose
/// entries an older build left for the next read to derive from their latest versions.
/// Each such entry holds an older version's rows, so it is listed as not indexed and its
/// rows are recorded to go (`?1` is an empty change's rows): the state's next save builds
/// it whole, and `index rebuild` fills it at once. Its changes recorded before are moot.
/// One statement at a time, in order; the one that records the changes takes the parameter.
pub(super) const END_WAITING: [&str; 4] = [
    "DELETE FROM inventory_pending WHERE (org, state) IN (SELECT org, state FROM inventory_waiting)",
    "INSERT INTO inventory_pending (org, state, clear, gone, instances, size)
        SELECT org, state, 1, X'', ?1, 0 FROM inventory_waiting ORDER BY org, state",
    "UPDATE inventory_states SET indexed = 0, tags = NULL
        WHERE (org, state) IN (SELECT org, state FROM inventory_waiting)",
    "DROP TABLE inventory_waiting",
];

/// What a catalog at 5 to 14 lacks that creating what is missing cannot add: its deleted
/// states keyed by their purge date become keyed by their delete time, read from each
/// record (RFC 3339, which SQLite's `strftime` reads, fractions and offset included), before
/// `SCHEMA` indexes the column.
pub(super) const DELETED_BY_TIME: &str = "
DROP INDEX IF EXISTS deleted_states_by_purge;
ALTER TABLE deleted_states RENAME COLUMN purge_at TO deleted_at;
UPDATE deleted_states
    SET deleted_at = CAST(strftime('%s', json_extract(record, '$.deleted_at')) AS INTEGER);
";

/// What a catalog before 16 lacks that creating what is missing cannot add: each written
/// state's record its `first_version`, taken as its incarnation's oldest version still held.
/// A version older than that was pruned or is the sweeper's to prune, so the versions
/// counted from it are the ones the state holds. Records only: no version is rewritten.
pub(super) const FIRST_VERSIONS: &str = "
UPDATE states SET record = json_set(record, '$.first_version',
    (SELECT min(v.version) FROM versions AS v
     WHERE v.org = states.org
       AND v.name = coalesce(json_extract(states.record, '$.home'), states.name)
       AND v.incarnation = json_extract(states.record, '$.incarnation')))
WHERE json_extract(record, '$.first_version') IS NULL
  AND json_extract(record, '$.latest') IS NOT NULL;
";

/// What a catalog at 8 or 9 lacks that creating what is missing cannot add: a column of a
/// table it has. Entries without tags (every one, after the step) are replaced whole by their
/// state's next save, which gives them tags.
pub(super) const ENTRY_TAGS: &str = "ALTER TABLE inventory_states ADD COLUMN tags BLOB;";

/// As [`ENTRY_TAGS`], for a catalog at 9 (one at 8 has its rows' table made anew).
pub(super) const ROW_RESOURCES: &str = "ALTER TABLE inventory ADD COLUMN resource INTEGER;";

/// The one step creating what is missing cannot take: a catalog at 8 holds `inventory`
/// without the rowid its addresses' index is keyed by. Before `SCHEMA` runs, that table is
/// renamed aside and its indexes dropped (their names are the new table's); after it,
/// [`INVENTORY_BACK`] copies the rows into the new table and indexes their addresses. One
/// transaction, so a crash leaves the catalog at 8.
pub(super) const INVENTORY_ASIDE: &str = "
ALTER TABLE inventory RENAME TO inventory_8;
DROP INDEX IF EXISTS inventory_by_address;
DROP INDEX IF EXISTS inventory_by_type;
DROP INDEX IF EXISTS inventory_by_provider;
DROP INDEX IF EXISTS inventory_by_module;
DROP INDEX IF EXISTS inventory_by_digest;
";

/// See [`INVENTORY_ASIDE`].
pub(super) const INVENTORY_BACK: &str = "
INSERT INTO inventory (org, state, address, module, mode, type, provider, digest)
    SELECT org, state, address, module, mode, type, provider, digest FROM inventory_8;
INSERT INTO inventory_text (rowid, address) SELECT id, address FROM inventory;
DROP TABLE inventory_8;
";

/// A catalog fault: transient (clients retry a 503) only when it can pass, as a busy
/// database, a full disk or an I/O error can; anything else is a fault of the stored data or
/// of ours, which a retry would only repeat.
pub(super) fn sql_error(e: rusqlite::Error) -> StoreError {
    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) {
        // Said in words an operator acts on, wherever it surfaces (a log, `token create`).
        StoreError::Unavailable(format!(
            "catalog: the disk holding the data folder is full ({e}): free space on it and retry"
        ))
    } else if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ReadOnly) {
        StoreError::Unavailable(format!(
            "catalog: it was opened read-only ({e}), as its disk had no room: free space on the data folder's disk and retry (a server opens it for writing again within seconds)"
        ))
    } else if can_pass(&e) {
        StoreError::Unavailable(format!("catalog: {e}"))
    } else {
        StoreError::Corrupt(format!("catalog: {e}"))
    }
}

/// Whether a catalog fault can pass by itself or once an operator makes room.
fn can_pass(e: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode::*;
    matches!(
        e.sqlite_error_code(),
        Some(
            DatabaseBusy
                | DatabaseLocked
                | SystemIoFailure
                | DiskFull
                | CannotOpen
                | ReadOnly
                | OutOfMemory
                | FileLockingProtocolFailed
                | OperationInterrupted,
        )
    )
}

/// Times the sweeper compares are stored as whole Unix seconds: RFC 3339 text with varying
/// fractions does not sort as time does.
pub(super) fn seconds(at: Timestamp) -> i64 {
    at.unix_timestamp()
}

pub(super) fn to_json<T: Serialize>(value: &T) -> String {
    // Records are plain data (strings, numbers, options): serializing them cannot fail.
    serde_json::to_string(value).expect("records serialize")
}

pub(super) fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("catalog record: {e}")))
}

/// The records `select` (a query of one JSON column, no parameters) reads, in its order.
pub(super) fn all_records<T: DeserializeOwned>(
    conn: &rusqlite::Connection,
    select: &str,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = conn.prepare_cached(select).map_err(sql_error)?;
    let rows = stmt
        .query_map([], |row| row.get::<_, String>(0))
        .map_err(sql_error)?;
    rows.map(|r| from_json(&r.map_err(sql_error)?)).collect()
}
