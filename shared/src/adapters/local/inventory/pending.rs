//! The inventory's changes a commit records rather than writes: one row of
//! `inventory_pending` each, in commit order, holding which of its state's rows go (all of
//! them, or those of the resources it names) and the rows that come, as bytes. A commit
//! writes one such row where writing the rows themselves touches seven b-trees and the
//! trigram index a row (a save that renames 2,000 instances spent 36 ms there); the rows
//! are written later, in order, before anything reads them (see `settled` in the parent).
//!
//! The bytes are our own ([`rows`]): the record must carry each instance's resource tag,
//! which the instances' serde form leaves out (it is of no use where entries are stored
//! whole), and its size is the commit's, which a layout of our own keeps to under a third
//! of the rows laid out whole. Decoding checks every length, so a damaged row is refused as corrupt.

use rusqlite::{params, Connection, OptionalExtension};

use super::super::tables::sql_error;
use crate::domain::inventory::{Instance, ResourceTag};
use crate::ports::StoreError;
use rows::{instances_bytes, instances_of};

mod rows;

/// One commit's change to its state's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pending {
    /// Every row of the state goes first.
    pub clear: bool,
    /// The resources whose rows go (when not `clear`).
    pub gone: Vec<ResourceTag>,
    /// The rows that come, in address order.
    pub instances: Vec<Instance>,
}

/// A recorded change, with the state it is of.
pub(super) struct Recorded {
    pub seq: i64,
    pub org: String,
    pub state: String,
    pub pending: Pending,
}

/// Records a change after the state's earlier ones: its rows all go first (`clear`) or
/// those of the resources `gone`, and `instances` come. A change that clears the state's
/// rows makes the earlier ones moot, so they are dropped unwritten. Its size, by which the
/// waiting work is bounded, counts the rows it names (a cleared state's count as none:
/// their number is not known until they go).
pub(super) fn record(
    conn: &Connection,
    org: &str,
    state: &str,
    clear: bool,
    gone: &[ResourceTag],
    instances: &[&Instance],
) -> Result<(), StoreError> {
    if clear {
        forget(conn, org, state)?;
    }
    conn.prepare_cached(
        "INSERT INTO inventory_pending (org, state, clear, gone, instances, size)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| {
        s.execute(params![
            org,
            state,
            clear,
            tags_bytes(gone),
            instances_bytes(instances),
            (gone.len() + instances.len()) as i64,
        ])
    })
    .map(drop)
    .map_err(sql_error)
}

/// The rows of a change that adds none, as a record holds them.
pub(super) fn no_rows() -> Vec<u8> {
    instances_bytes(&[])
}

/// Drops the state's recorded changes (its rows are going whole).
fn forget(conn: &Connection, org: &str, state: &str) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM inventory_pending WHERE org = ?1 AND state = ?2")
        .and_then(|mut s| s.execute(params![org, state]))
        .map(drop)
        .map_err(sql_error)
}

/// Whether any change is recorded and not yet written. A catalog older than the table (one
/// a full disk kept from being brought up to date) has none.
pub(super) fn any(conn: &Connection) -> Result<bool, StoreError> {
    let table: bool = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = 'inventory_pending')",
        )
        .and_then(|mut s| s.query_row([], |row| row.get(0)))
        .map_err(sql_error)?;
    if !table {
        return Ok(false);
    }
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM inventory_pending)")
        .and_then(|mut s| s.query_row([], |row| row.get(0)))
        .map_err(sql_error)
}

/// The rows the recorded changes write or remove, all told.
pub(super) fn size(conn: &Connection) -> Result<u64, StoreError> {
    let size: i64 = conn
        .prepare_cached("SELECT coalesce(sum(size), 0) FROM inventory_pending")
        .and_then(|mut s| s.query_row([], |row| row.get(0)))
        .map_err(sql_error)?;
    Ok(size.max(0) as u64)
}

/// A row of `inventory_pending` as stored: seq, org, state, clear, gone and instances.
type Row = (i64, String, String, bool, Vec<u8>, Vec<u8>);

/// The oldest recorded change, if any.
pub(super) fn oldest(conn: &Connection) -> Result<Option<Recorded>, StoreError> {
    let row: Option<Row> = conn
        .prepare_cached(
            "SELECT seq, org, state, clear, gone, instances FROM inventory_pending
             ORDER BY seq LIMIT 1",
        )
        .and_then(|mut s| {
            s.query_row([], |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                ))
            })
            .optional()
        })
        .map_err(sql_error)?;
    row.map(|(seq, org, state, clear, gone, instances)| {
        let pending = Pending {
            clear,
            gone: tags_of(&gone).ok_or_else(|| corrupt(&org, &state))?,
            instances: instances_of(&instances).ok_or_else(|| corrupt(&org, &state))?,
        };
        Ok(Recorded {
            seq,
            org,
            state,
            pending,
        })
    })
    .transpose()
}

/// Removes a change once written.
pub(super) fn done(conn: &Connection, seq: i64) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM inventory_pending WHERE seq = ?1")
        .and_then(|mut s| s.execute(params![seq]))
        .map(drop)
        .map_err(sql_error)
}

fn corrupt(org: &str, state: &str) -> StoreError {
    StoreError::Corrupt(format!(
        "catalog: a recorded inventory change of state {state} (org {org}) is damaged"
    ))
}

/// Tags as 8 bytes each, little-endian (as an entry's `tags` column holds them).
pub(super) fn tags_bytes(tags: &[ResourceTag]) -> Vec<u8> {
    tags.iter().flat_map(|t| t.0.to_le_bytes()).collect()
}

/// The tags of [`tags_bytes`]; `None` unless a whole number of them.
pub(super) fn tags_of(bytes: &[u8]) -> Option<Vec<ResourceTag>> {
    if !bytes.len().is_multiple_of(8) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(8)
            .map(|b| ResourceTag(u64::from_le_bytes(b.try_into().expect("8 bytes"))))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_come_back_as_they_went_in() {
        let tags = vec![ResourceTag(1), ResourceTag(u64::MAX)];
        assert_eq!(tags_of(&tags_bytes(&tags)), Some(tags));
        assert_eq!(tags_of(&[0; 9]), None);
    }
}
