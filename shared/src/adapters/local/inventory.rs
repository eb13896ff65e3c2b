//! The inventory in SQLite: one row of `inventory` per instance, unique by (org, state,
//! address) so a search walks that key's index in the order it answers in and stops at its
//! limit, with indexes by type, provider and module in that same order beneath them, and by
//! digest for the conflicts, and by its resource's tag within its state; `inventory_text`, a
//! trigram index of the addresses by row id, from which a substring that few addresses hold
//! is found without reading the others, and `inventory_text_behind`, the ids of the few rows
//! it has not yet taken (see [`Text`]); one row of `inventory_states` per state indexed,
//! with its version and its resources' tags (8 bytes each, in their document's order). A
//! commit writes its state's entry and records the change to the rows of the resources that
//! changed (`change_inventory`, [`pending`]), found by comparing tags: no row is read to
//! find them. The rows are written before anything reads them ([`write_pending`]); a
//! change of more rows than that record holds is written in its commit ([`change_rows`]).

use std::sync::Arc;

use async_trait::async_trait;

use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, TransactionBehavior};

use super::tables::{from_json, sql_error};
use super::SqliteCatalog;
use crate::domain::inventory::{Instance, Mode, ResourceTag, StateInventory, TagSet};
use crate::domain::record::StateRecord;
use crate::ports::{
    conflict_groups, provider_matches, IndexedState, InventoryCatalog, InventoryChange,
    InventoryCounts, InventoryPatch, InventorySummary, ResourceQuery, ResourceRow, StoreError,
};

mod pending;

/// Replaces, patches, keeps or removes one state's entry, on the commit's transaction, and
/// records the change to its rows (see [`pending`]): they are written before anything reads
/// them ([`write_pending`]), so every answer is as of the commit. Only the rows of resources
/// that changed are written: a save changes a few of a state's resources, if any, and a row
/// holds nothing that changes with the version (that is kept once, in `inventory_states`),
/// so a save of a big state that changed one resource records that resource's rows, not
/// thousands.
pub(super) fn change_inventory(
    conn: &Connection,
    org: &str,
    state: &str,
    change: &InventoryChange,
) -> Result<(), StoreError> {
    match change {
        InventoryChange::Replace(inventory) => replace_inventory(conn, org, state, inventory)?,
        InventoryChange::Patch(patch) => patch_inventory(conn, org, state, patch)?,
        InventoryChange::Keep { version } => return keep_inventory(conn, org, state, *version),
        InventoryChange::Remove => remove_inventory(conn, org, state)?,
    }
    if pending::size(conn)? > PENDING_MAX {
        write_pending(conn)?;
    }
    Ok(())
}

/// The most rows recorded changes may write or remove before the commit that records more
/// writes them all: the work a read may find waiting stays bounded (about 0.15 s).
const PENDING_MAX: u64 = 8192;

/// A whole entry: resource by resource when both it and the stored entry are kept by
/// resource, else every row replaced.
fn replace_inventory(
    conn: &Connection,
    org: &str,
    state: &str,
    inventory: &StateInventory,
) -> Result<(), StoreError> {
    let stored = match &inventory.tags {
        Some(_) => stored_tags(conn, org, state)?,
        None => None,
    };
    put_entry(
        conn,
        org,
        state,
        inventory.version,
        inventory.indexed,
        inventory.tags.as_deref(),
    )?;
    match (&inventory.tags, stored) {
        (Some(tags), Some((kept, _))) => {
            let now = TagSet::of(tags);
            let gone: Vec<ResourceTag> =
                kept.iter().copied().filter(|t| !now.contains(*t)).collect();
            if gone.len() == kept.len() {
                // Every resource changed (renamed, or the rules or the key did): one sweep
                // of the state's rows rather than one a resource.
                let all: Vec<&Instance> = inventory.instances.iter().collect();
                change_rows(conn, org, state, true, &[], &all)
            } else {
                let kept = TagSet::of(&kept);
                let new: Vec<&Instance> = inventory
                    .instances
                    .iter()
                    .filter(|i| !kept.contains(i.resource))
                    .collect();
                change_rows(conn, org, state, false, &gone, &new)
            }
        }
        _ => {
            let all: Vec<&Instance> = inventory.instances.iter().collect();
            change_rows(conn, org, state, true, &[], &all)
        }
    }
}

/// Records a change to the state's rows ([`pending`]), or, when it names more rows than
/// the recorded changes may hold ([`PENDING_MAX`]), writes them in the commit after the
/// changes recorded before it: recorded, they were written at once all the same, decoded
/// from the record into a second copy of every row (a sixth of the memory a 60,000-instance
/// import held at its peak). The state's entry is put first.
fn change_rows(
    conn: &Connection,
    org: &str,
    state: &str,
    clear: bool,
    gone: &[ResourceTag],
    instances: &[&Instance],
) -> Result<(), StoreError> {
    if (gone.len() + instances.len()) as u64 <= PENDING_MAX {
        return pending::record(conn, org, state, clear, gone, instances);
    }
    write_pending(conn)?;
    write_rows(conn, org, state, clear, gone, instances.iter().copied())
}

/// A save's patch over an entry kept by resource; one that is not is left not indexed.
fn patch_inventory(
    conn: &Connection,
    org: &str,
    state: &str,
    patch: &InventoryPatch,
) -> Result<(), StoreError> {
    // Whether the entry holds tags: its tags themselves are not read (the save read them
    // to make the patch).
    let kept: bool = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM inventory_states
               WHERE org = ?1 AND state = ?2 AND indexed AND tags IS NOT NULL)",
        )
        .and_then(|mut s| s.query_row(params![org, state], |row| row.get(0)))
        .map_err(sql_error)?;
    if !kept {
        put_entry(conn, org, state, patch.version, false, None)?;
        return change_rows(conn, org, state, true, &[], &[]);
    }
    put_entry(conn, org, state, patch.version, true, Some(&patch.tags))?;
    let new: Vec<&Instance> = patch.instances.iter().collect();
    change_rows(conn, org, state, false, &patch.gone, &new)
}

/// The tags and instance count of the state's entry, when it is kept by resource.
fn stored_tags(
    conn: &Connection,
    org: &str,
    state: &str,
) -> Result<Option<(Vec<ResourceTag>, u64)>, StoreError> {
    let stored: Option<(Vec<u8>, u64)> = conn
        .prepare_cached(
            "SELECT tags, instances FROM inventory_states
             WHERE org = ?1 AND state = ?2 AND indexed AND tags IS NOT NULL",
        )
        .and_then(|mut s| {
            s.query_row(params![org, state], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()
        })
        .map_err(sql_error)?;
    stored
        .map(|(bytes, count)| Ok((tags_of_bytes(&bytes, state)?, count)))
        .transpose()
}

/// Writes every recorded change's rows, oldest first, each entry's count with them.
pub(super) fn write_pending(conn: &Connection) -> Result<(), StoreError> {
    while let Some(recorded) = pending::oldest(conn)? {
        let change = &recorded.pending;
        write_rows(
            conn,
            &recorded.org,
            &recorded.state,
            change.clear,
            &change.gone,
            change.instances.iter(),
        )?;
        pending::done(conn, recorded.seq)?;
    }
    Ok(())
}

/// One recorded change's rows: the state's all (or its gone resources') dropped, the new
/// ones added; and the entry's count of rows after (an entry removed since has none).
fn write_rows<'a>(
    conn: &Connection,
    org: &str,
    state: &str,
    clear: bool,
    gone: &[ResourceTag],
    instances: impl ExactSizeIterator<Item = &'a Instance>,
) -> Result<(), StoreError> {
    let before: u64 = conn
        .prepare_cached("SELECT instances FROM inventory_states WHERE org = ?1 AND state = ?2")
        .and_then(|mut s| {
            s.query_row(params![org, state], |row| row.get(0))
                .optional()
        })
        .map_err(sql_error)?
        .unwrap_or(0);
    let (text, mut count) = if clear {
        remove_rows(conn, org, state)?;
        (Text::caught_up(conn)?, 0)
    } else {
        let text = Text::for_change(conn, gone.len() + instances.len())?;
        let dropped = drop_resources(conn, org, state, gone, text)?;
        (text, before.saturating_sub(dropped))
    };
    for instance in instances {
        count += insert_row(conn, org, state, instance, text)?;
    }
    text.done(conn)?;
    conn.prepare_cached("UPDATE inventory_states SET instances = ?3 WHERE org = ?1 AND state = ?2")
        .and_then(|mut s| s.execute(params![org, state, count]))
        .map(drop)
        .map_err(sql_error)
}

/// Where a commit's row changes leave their addresses' trigrams. A small change (a save
/// that added or removed a few resources) leaves them behind: it lists the ids of the rows
/// it added or removed in `inventory_text_behind`, one small table, rather than writing the
/// trigram index, whose segments a single address's trigrams rewrite (about 8 of the 21 log
/// pages a one-resource commit wrote, and a sixth of its work). A search by text reads those
/// rows as well as what the index finds, and checks every one against the address, so it
/// answers as if the index were current; the commit that leaves more than [`BEHIND_MAX`] ids
/// behind brings it up to date in one batch ([`catch_up`]), much cheaper by the row than one
/// commit each. A large change writes the index itself, once caught up: the index may hold
/// a stale entry under a removed row's id, which a new row may have taken, and adding the
/// new row's text under that id before the stale entry is gone would keep both.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Text {
    /// The index has taken every row: each change writes it.
    Now,
    /// Each change lists its rows' ids for the index to take later.
    Behind,
}

/// Changes of at most this many resources removed and rows added leave their text behind.
const BEHIND_RESOURCES: usize = 16;

/// The most row ids left behind: the commit that leaves more brings the index up to date.
const BEHIND_MAX: i64 = 64;

impl Text {
    /// Writes the rows left behind into the index: from then on it holds every row.
    fn caught_up(conn: &Connection) -> Result<Self, StoreError> {
        catch_up(conn)?;
        Ok(Self::Now)
    }

    /// How a change removing and adding `size` resources and rows writes the text.
    fn for_change(conn: &Connection, size: usize) -> Result<Self, StoreError> {
        if size <= BEHIND_RESOURCES {
            Ok(Self::Behind)
        } else {
            Self::caught_up(conn)
        }
    }

    /// Once the change's rows are written: more than [`BEHIND_MAX`] rows behind are taken in.
    fn done(self, conn: &Connection) -> Result<(), StoreError> {
        if self == Self::Now {
            return Ok(());
        }
        let behind: i64 = conn
            .prepare_cached("SELECT count(*) FROM inventory_text_behind")
            .and_then(|mut s| s.query_row([], |row| row.get(0)))
            .map_err(sql_error)?;
        if behind > BEHIND_MAX {
            catch_up(conn)?;
        }
        Ok(())
    }

    /// Row `id`, holding `address`, was added.
    fn added(self, conn: &Connection, id: i64, address: &str) -> Result<(), StoreError> {
        match self {
            Self::Behind => leave_behind(conn, id),
            Self::Now => conn
                .prepare_cached("INSERT INTO inventory_text (rowid, address) VALUES (?1, ?2)")
                .and_then(|mut s| s.execute(params![id, address]))
                .map(drop)
                .map_err(sql_error),
        }
    }

    /// Row `id` was removed.
    fn removed(self, conn: &Connection, id: i64) -> Result<(), StoreError> {
        match self {
            Self::Behind => leave_behind(conn, id),
            Self::Now => conn
                .prepare_cached("DELETE FROM inventory_text WHERE rowid = ?1")
                .and_then(|mut s| s.execute(params![id]))
                .map(drop)
                .map_err(sql_error),
        }
    }
}

/// Lists row `id` among those the trigram index has still to take (or take out).
fn leave_behind(conn: &Connection, id: i64) -> Result<(), StoreError> {
    conn.prepare_cached("INSERT OR IGNORE INTO inventory_text_behind (id) VALUES (?1)")
        .and_then(|mut s| s.execute(params![id]))
        .map(drop)
        .map_err(sql_error)
}

/// What [`catch_up`] runs.
const CATCH_UP: [&str; 3] = [
    "DELETE FROM inventory_text WHERE rowid IN (SELECT id FROM inventory_text_behind)",
    // CROSS JOIN: the few ids behind first, each row found by its id. Left to choose, the
    // planner walked every row of `inventory` (it has no statistics to go by): on a catalog
    // of 150,000 rows a commit took 7.7 ms rather than 1.2.
    "INSERT INTO inventory_text (rowid, address)
       SELECT k.id, k.address FROM inventory_text_behind AS b
       CROSS JOIN inventory AS k ON k.id = b.id",
    "DELETE FROM inventory_text_behind",
];

/// Brings the trigram index up to date with the rows left behind: each one's entry (a
/// removed row's, or a stale one under a reused id) taken out, each that still has a row put
/// in with its address. Taking out an id the index does not hold changes nothing. Nothing
/// is written when none is behind, as after most commits that take this way.
fn catch_up(conn: &Connection) -> Result<(), StoreError> {
    let any: bool = conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM inventory_text_behind)")
        .and_then(|mut s| s.query_row([], |row| row.get(0)))
        .map_err(sql_error)?;
    if !any {
        return Ok(());
    }
    for sql in CATCH_UP {
        conn.prepare_cached(sql)
            .and_then(|mut s| s.execute([]))
            .map_err(sql_error)?;
    }
    Ok(())
}

/// Drops the rows of the resources of `gone` and their trigrams; says how many.
fn drop_resources(
    conn: &Connection,
    org: &str,
    state: &str,
    gone: &[ResourceTag],
    text: Text,
) -> Result<u64, StoreError> {
    let mut dropped = 0;
    for tag in TagSet::of(gone).iter() {
        let ids: Vec<i64> = conn
            .prepare_cached(
                "DELETE FROM inventory WHERE org = ?1 AND state = ?2 AND resource = ?3
                 RETURNING id",
            )
            .and_then(|mut s| {
                s.query_map(params![org, state, column(tag)], |row| row.get(0))?
                    .collect()
            })
            .map_err(sql_error)?;
        for id in &ids {
            text.removed(conn, *id)?;
        }
        dropped += ids.len() as u64;
    }
    Ok(dropped)
}

/// Adds one instance's row and its address's trigrams (as `text` says); 1, or 0 when a row
/// of another resource holds its address (only a malformed document names one address
/// twice; the row there stays).
fn insert_row(
    conn: &Connection,
    org: &str,
    state: &str,
    i: &Instance,
    text: Text,
) -> Result<u64, StoreError> {
    let added = conn
        .prepare_cached(
            "INSERT INTO inventory
               (org, state, address, module, mode, type, provider, digest, resource)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT (org, state, address) DO NOTHING",
        )
        .and_then(|mut s| {
            s.execute(params![
                org,
                state,
                i.address,
                i.module,
                mode_text(i.mode),
                i.resource_type,
                i.provider,
                i.digest,
                column(i.resource),
            ])
        })
        .map_err(sql_error)?;
    if added == 0 {
        return Ok(0);
    }
    text.added(conn, conn.last_insert_rowid(), &i.address)?;
    Ok(1)
}

/// Writes the state's entry: its version, whether indexed and its tags. Its count of rows
/// is left for [`write_rows`] to set (0 for a new entry until then).
fn put_entry(
    conn: &Connection,
    org: &str,
    state: &str,
    version: u64,
    indexed: bool,
    tags: Option<&[ResourceTag]>,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO inventory_states (org, state, version, indexed, instances, tags)
         VALUES (?1, ?2, ?3, ?4, 0, ?5)
         ON CONFLICT (org, state) DO UPDATE
           SET version = excluded.version, indexed = excluded.indexed, tags = excluded.tags",
    )
    .and_then(|mut s| {
        s.execute(params![
            org,
            state,
            version,
            indexed,
            tags.map(pending::tags_bytes)
        ])
    })
    .map_err(sql_error)?;
    Ok(())
}

/// A tag as its column holds it: SQLite's integers are signed, so the bits are kept as
/// they are, reinterpreted.
fn column(tag: ResourceTag) -> i64 {
    tag.0 as i64
}

/// The tags an entry's `tags` column holds.
fn tags_of_bytes(bytes: &[u8], state: &str) -> Result<Vec<ResourceTag>, StoreError> {
    pending::tags_of(bytes).ok_or_else(|| {
        StoreError::Corrupt(format!(
            "catalog: the inventory tags of state {state} are {} bytes, not a multiple of 8",
            bytes.len()
        ))
    })
}

/// A save that leaves the instances as they are: only the entry's version moves. An entry
/// missing or not indexed refuses it (`Conflict`): the save decides again, and sends the
/// whole entry (see [`InventoryChange::Keep`]).
fn keep_inventory(
    conn: &Connection,
    org: &str,
    state: &str,
    version: u64,
) -> Result<(), StoreError> {
    let moved = conn
        .prepare_cached(
            "UPDATE inventory_states SET version = ?3 WHERE org = ?1 AND state = ?2 AND indexed",
        )
        .and_then(|mut s| s.execute(params![org, state, version]))
        .map_err(sql_error)?;
    if moved == 0 {
        return Err(StoreError::Conflict);
    }
    Ok(())
}

/// The recorded rows of a change that adds none, for a schema step that records changes.
pub(super) fn no_rows() -> Vec<u8> {
    pending::no_rows()
}

/// A state's rows and their text.
fn remove_rows(conn: &Connection, org: &str, state: &str) -> Result<(), StoreError> {
    for sql in [
        "DELETE FROM inventory_text WHERE rowid IN
           (SELECT id FROM inventory WHERE org = ?1 AND state = ?2)",
        "DELETE FROM inventory WHERE org = ?1 AND state = ?2",
    ] {
        conn.prepare_cached(sql)
            .and_then(|mut s| s.execute(params![org, state]))
            .map_err(sql_error)?;
    }
    Ok(())
}

/// A state gone: its entry, and its rows to go.
fn remove_inventory(conn: &Connection, org: &str, state: &str) -> Result<(), StoreError> {
    pending::record(conn, org, state, true, &[], &[])?;
    conn.prepare_cached("DELETE FROM inventory_states WHERE org = ?1 AND state = ?2")
        .and_then(|mut s| s.execute(params![org, state]))
        .map_err(sql_error)?;
    Ok(())
}

fn mode_text(mode: Mode) -> &'static str {
    match mode {
        Mode::Managed => "managed",
        Mode::Data => "data",
    }
}

fn mode_of(text: &str) -> Result<Mode, StoreError> {
    match text {
        "managed" => Ok(Mode::Managed),
        "data" => Ok(Mode::Data),
        other => Err(StoreError::Corrupt(format!(
            "catalog: an inventory row's mode is {other:?}"
        ))),
    }
}

/// A row's columns, its version from its state's row (`s`) of `inventory_states`.
const ROW_COLUMNS: &str = "i.state, s.version, i.address, i.module, i.mode, i.type, i.provider";
/// The rows with their state's version: `i` an instance, `s` its state.
const ROWS: &str =
    "inventory AS i JOIN inventory_states AS s ON s.org = i.org AND s.state = i.state";

fn row_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<(ResourceRow, String)> {
    Ok((
        ResourceRow {
            state: row.get(0)?,
            version: row.get(1)?,
            address: row.get(2)?,
            module: row.get(3)?,
            mode: Mode::Managed,
            resource_type: row.get(5)?,
            provider: row.get(6)?,
        },
        row.get(4)?,
    ))
}

fn rows_of(
    stmt: &mut rusqlite::Statement<'_>,
    values: Vec<Value>,
) -> Result<Vec<ResourceRow>, StoreError> {
    let rows = stmt
        .query_map(params_from_iter(values), row_of)
        .map_err(sql_error)?;
    rows.map(|r| {
        let (mut row, mode) = r.map_err(sql_error)?;
        row.mode = mode_of(&mode)?;
        Ok(row)
    })
    .collect()
}

/// The org's distinct providers, one index seek each (a skip scan of the provider index):
/// a provider filter names one in three spellings, resolved here to the stored ones.
fn providers(conn: &Connection, org: &str) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "WITH RECURSIVE p(v) AS (
               SELECT min(provider) FROM inventory WHERE org = ?1
               UNION ALL
               SELECT (SELECT min(provider) FROM inventory WHERE org = ?1 AND provider > p.v)
               FROM p WHERE p.v IS NOT NULL)
             SELECT v FROM p WHERE v IS NOT NULL",
        )
        .map_err(sql_error)?;
    let rows = stmt
        .query_map(params![org], |row| row.get(0))
        .map_err(sql_error)?;
    rows.map(|r| r.map_err(sql_error)).collect()
}

fn search(
    conn: &Connection,
    org: &str,
    query: &ResourceQuery,
) -> Result<Vec<ResourceRow>, StoreError> {
    // The page's ids first, on the narrowest index that answers the filters (a substring
    // alone walks the keys' index, a quarter of the table's bytes), then its rows.
    let mut sql = "SELECT k.id FROM inventory AS k".to_owned();
    let mut values: Vec<Value> = Vec::new();
    // A query matching few addresses starts from them: walking the rows in order would read
    // every one of the org's to find them.
    if let Some(trigrams) = query.q.as_deref().and_then(trigram_query) {
        if few_match(conn, org, &trigrams)? {
            // With the rows the index has not yet taken: every row either way is checked
            // against the address below.
            let behind = if has_rows_behind_table(conn)? {
                " UNION SELECT id FROM inventory_text_behind"
            } else {
                ""
            };
            sql = format!(
                "SELECT k.id FROM
                   (SELECT rowid AS id FROM inventory_text WHERE inventory_text MATCH ?{behind})
                   AS t
                 CROSS JOIN inventory AS k ON k.id = t.id"
            );
            values.push(trigrams.into());
        }
    }
    sql.push_str(" WHERE k.org = ?");
    values.push(org.to_owned().into());
    let mut equal = |column: &str, value: &Option<String>| {
        if let Some(v) = value {
            sql.push_str(&format!(" AND k.{column} = ?"));
            values.push(v.clone().into());
        }
    };
    equal("state", &query.state);
    equal("type", &query.resource_type);
    equal("module", &query.module);
    if let Some(wanted) = &query.provider {
        let named: Vec<String> = providers(conn, org)?
            .into_iter()
            .filter(|p| provider_matches(wanted, p))
            .collect();
        if named.is_empty() {
            return Ok(Vec::new());
        }
        sql.push_str(&format!(
            " AND k.provider IN ({})",
            vec!["?"; named.len()].join(", ")
        ));
        values.extend(named.into_iter().map(Value::from));
    }
    if let Some((state, address)) = &query.after {
        sql.push_str(" AND (k.state, k.address) > (?, ?)");
        values.push(state.clone().into());
        values.push(address.clone().into());
    }
    if let Some(q) = &query.q {
        // LIKE folds ASCII case only, as the filter's other readings do, and compares
        // without making a lowered copy of each address. The trigram index folds more (all
        // of Unicode), so what it finds is a superset, which LIKE narrows to the answer.
        sql.push_str(" AND k.address LIKE ? ESCAPE '\\'");
        values.push(like_pattern(q).into());
    }
    sql.push_str(" ORDER BY k.state, k.address LIMIT ?");
    values.push(i64::try_from(query.limit).unwrap_or(i64::MAX).into());
    let sql = format!(
        "SELECT {ROW_COLUMNS} FROM {ROWS} WHERE i.id IN ({sql}) ORDER BY i.state, i.address"
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(sql_error)?;
    rows_of(&mut stmt, values)
}

/// Whether the catalog has `inventory_text_behind`: one at schema 10 that a full disk kept
/// from being brought up to date lacks it, and leaves no row behind.
fn has_rows_behind_table(conn: &Connection) -> Result<bool, StoreError> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = 'inventory_text_behind')",
    )
    .and_then(|mut s| s.query_row([], |row| row.get(0)))
    .map_err(sql_error)
}

/// A query of the trigram index that every address holding `q` matches: each distinct run
/// of three characters of `q`, all required. `None` when `q` is too short to have one (or
/// holds a NUL, which the index's query language cannot carry). At most [`TRIGRAMS`] of
/// them: fewer still match every address holding `q`, and bound the lookup's work.
fn trigram_query(q: &str) -> Option<String> {
    if q.contains('\0') {
        return None;
    }
    let chars: Vec<char> = q.chars().collect();
    let mut seen = std::collections::HashSet::new();
    let terms: Vec<String> = chars
        .windows(3)
        .map(|w| w.iter().collect::<String>())
        .filter(|t| seen.insert(t.clone()))
        .take(TRIGRAMS)
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect();
    (!terms.is_empty()).then(|| terms.join(" AND "))
}

/// The most trigrams of a query looked up.
const TRIGRAMS: usize = 32;

/// A query whose trigrams at most this many of the org's addresses have is answered from
/// them; one with more is common, and walking the org's rows in order meets a page of it
/// soon.
const FEW: i64 = 2000;

/// Whether at most [`FEW`] of `org`'s addresses have every trigram of `trigrams`. The org's
/// alone: how many addresses another org has that match must not choose how this one's
/// search runs.
fn few_match(conn: &Connection, org: &str, trigrams: &str) -> Result<bool, StoreError> {
    let found: i64 = conn
        .prepare_cached(
            "SELECT count(*) FROM
               (SELECT 1 FROM inventory_text AS t CROSS JOIN inventory AS k ON k.id = t.rowid
                WHERE inventory_text MATCH ?1 AND k.org = ?3 LIMIT ?2)",
        )
        .and_then(|mut s| s.query_row(params![trigrams, FEW + 1, org], |row| row.get(0)))
        .map_err(sql_error)?;
    Ok(found <= FEW)
}

/// A LIKE pattern matching any address holding `q`: its own `%`, `_` and `\` escaped.
fn like_pattern(q: &str) -> String {
    let mut pattern = String::with_capacity(q.len() + 2);
    pattern.push('%');
    for c in q.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

fn conflicts_in(
    conn: &Connection,
    org: &str,
    state: Option<&str>,
) -> Result<Vec<Vec<ResourceRow>>, StoreError> {
    // The digests in two or more states, found on the digest index alone; then their rows.
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {ROW_COLUMNS}, i.digest FROM {ROWS} WHERE i.org = ?1 AND i.digest IN (
               SELECT digest FROM inventory WHERE org = ?1 AND digest IS NOT NULL
                 AND (?2 IS NULL OR digest IN (
                   SELECT digest FROM inventory
                   WHERE org = ?1 AND state = ?2 AND digest IS NOT NULL))
               GROUP BY digest HAVING COUNT(DISTINCT state) > 1)"
        ))
        .map_err(sql_error)?;
    let rows = stmt
        .query_map(params![org, state], |row| {
            Ok((row_of(row)?, row.get::<_, String>(7)?))
        })
        .map_err(sql_error)?;
    let mut found = Vec::new();
    for r in rows {
        let ((mut row, mode), digest) = r.map_err(sql_error)?;
        row.mode = mode_of(&mode)?;
        found.push((digest, row));
    }
    Ok(conflict_groups(found, state))
}

/// Every state's entry of the org, in name order.
fn indexed_in(conn: &Connection, org: &str) -> Result<Vec<IndexedState>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT state, version, indexed, instances FROM inventory_states
             WHERE org = ?1 ORDER BY state",
        )
        .map_err(sql_error)?;
    let rows = stmt
        .query_map(params![org], |row| {
            Ok(IndexedState {
                state: row.get(0)?,
                version: row.get(1)?,
                indexed: row.get(2)?,
                instances: row.get(3)?,
            })
        })
        .map_err(sql_error)?;
    rows.map(|r| r.map_err(sql_error)).collect()
}

fn counts(conn: &Connection, org: &str) -> Result<InventoryCounts, StoreError> {
    let by = |column: &str| -> Result<Vec<(String, u64)>, StoreError> {
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {column}, COUNT(*) AS n FROM inventory WHERE org = ?1
                 GROUP BY {column} ORDER BY n DESC, {column}"
            ))
            .map_err(sql_error)?;
        let rows = stmt
            .query_map(params![org], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(sql_error)?;
        rows.map(|r| r.map_err(sql_error)).collect()
    };
    let by_provider = by("provider")?;
    Ok(InventoryCounts {
        instances: by_provider.iter().map(|(_, n)| n).sum(),
        by_provider,
        by_type: by("type")?,
    })
}

impl SqliteCatalog {
    /// Answers `f` as of one moment at which no recorded change waits, so as of every
    /// commit before it: on the inventory's own connection ([`SqliteCatalog::scan`]), in
    /// one read transaction that finds none waiting (most reads: one lookup more). A read
    /// that finds some writes them and looks again; after [`SETTLE_TRIES`] such turns
    /// (commits keep recording more), it answers on the writer, in the transaction that
    /// writes them, which holds other commits back meanwhile. A look for waiting changes
    /// and a read after it, as two transactions, let a commit land between them: the read
    /// then saw that commit's entry, its new version, over its state's old rows.
    async fn settled<T: Send + 'static>(
        &self,
        f: impl Fn(&Connection) -> Result<T, StoreError> + Send + Sync + 'static,
    ) -> Result<T, StoreError> {
        let f = Arc::new(f);
        for _ in 0..SETTLE_TRIES {
            let in_snapshot = f.clone();
            let answer = self
                .scan(move |conn| {
                    // Ended by its drop, a rollback, which is how a read ends.
                    let snapshot = conn.unchecked_transaction().map_err(sql_error)?;
                    if pending::any(&snapshot)? {
                        return Ok(None);
                    }
                    in_snapshot(&snapshot).map(Some)
                })
                .await?;
            if let Some(answer) = answer {
                return Ok(answer);
            }
            self.with(|conn| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(sql_error)?;
                write_pending(&tx)?;
                tx.commit().map_err(sql_error)
            })
            .await?;
        }
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            write_pending(&tx)?;
            let answer = f(&tx)?;
            tx.commit().map_err(sql_error)?;
            Ok(answer)
        })
        .await
    }
}

/// How many times a read writes the changes it found waiting and looks again before it
/// answers on the writer.
const SETTLE_TRIES: usize = 3;

#[async_trait]
impl InventoryCatalog for SqliteCatalog {
    async fn resources(
        &self,
        org: &str,
        query: &ResourceQuery,
    ) -> Result<Vec<ResourceRow>, StoreError> {
        let (org, query) = (org.to_owned(), query.clone());
        self.settled(move |conn| search(conn, &org, &query)).await
    }

    async fn conflicts(
        &self,
        org: &str,
        state: Option<&str>,
    ) -> Result<Vec<Vec<ResourceRow>>, StoreError> {
        let (org, state) = (org.to_owned(), state.map(str::to_owned));
        self.settled(move |conn| conflicts_in(conn, &org, state.as_deref()))
            .await
    }

    async fn indexed_states(&self, org: &str) -> Result<Vec<IndexedState>, StoreError> {
        let org = org.to_owned();
        self.settled(move |conn| indexed_in(conn, &org)).await
    }

    async fn inventory_summary(&self, org: &str) -> Result<InventorySummary, StoreError> {
        let org = org.to_owned();
        self.settled(move |conn| {
            Ok(InventorySummary {
                states: indexed_in(conn, &org)?,
                counts: counts(conn, &org)?,
                conflicts: conflicts_in(conn, &org, None)?.len() as u64,
            })
        })
        .await
    }

    async fn resource_tags(
        &self,
        org: &str,
        state: &str,
    ) -> Result<Option<Vec<ResourceTag>>, StoreError> {
        let (org, state) = (org.to_owned(), state.to_owned());
        self.read(move |conn| Ok(stored_tags(conn, &org, &state)?.map(|(tags, _)| tags)))
            .await
    }

    async fn holds_version(
        &self,
        org: &str,
        state: &str,
        version: u64,
    ) -> Result<bool, StoreError> {
        let (org, state) = (org.to_owned(), state.to_owned());
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM inventory_states
                                WHERE org = ?1 AND state = ?2 AND version = ?3 AND indexed)",
            )
            .and_then(|mut s| s.query_row(params![org, state, version], |row| row.get(0)))
            .map_err(sql_error)
        })
        .await
    }

    async fn put_inventory(
        &self,
        org: &str,
        state: &str,
        revision: u64,
        inventory: &StateInventory,
    ) -> Result<(), StoreError> {
        let (org, state, inventory) = (org.to_owned(), state.to_owned(), inventory.clone());
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            let record: Option<String> = tx
                .query_row(
                    "SELECT record FROM states WHERE org = ?1 AND name = ?2",
                    params![org, state],
                    |row| row.get(0),
                )
                .optional()
                .map_err(sql_error)?;
            let record: Option<StateRecord> = record.as_deref().map(from_json).transpose()?;
            let current = record.is_some_and(|r| {
                r.revision == revision
                    && r.latest.as_ref().map(|v| v.version) == Some(inventory.version)
            });
            if !current {
                return Err(StoreError::Conflict);
            }
            change_inventory(&tx, &org, &state, &InventoryChange::Replace(inventory))?;
            tx.commit().map_err(sql_error)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trigram_query_requires_each_distinct_run_of_three_characters() {
        assert_eq!(
            trigram_query("bucket").as_deref(),
            Some(r#""buc" AND "uck" AND "cke" AND "ket""#)
        );
        assert_eq!(trigram_query("aaaa").as_deref(), Some(r#""aaa""#));
        assert_eq!(
            trigram_query(r#"a"bc"#).as_deref(),
            Some(r#""a""b" AND """bc""#)
        );
        assert_eq!(
            trigram_query("ééé").as_deref(),
            Some(r#""ééé""#),
            "characters, not bytes"
        );
        assert_eq!(trigram_query("ab"), None);
        assert_eq!(trigram_query("abc\0def"), None);
        let long: String = ('a'..='z').chain('A'..='Z').collect();
        assert_eq!(
            trigram_query(&long).unwrap().matches(" AND ").count(),
            TRIGRAMS - 1
        );
    }

    /// The text index, with the rows it has not yet taken, holds a row id for every row and
    /// no other, through additions, changes, removals and a state's removal; a search by text
    /// finds a row a small change left behind and not one it removed; and a resource that
    /// did not change keeps its row.
    #[test]
    fn the_text_index_holds_every_row_and_no_other() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(super::super::tables::SCHEMA).unwrap();
        let ids = |sql: &str| -> Vec<i64> {
            let mut stmt = conn.prepare(sql).unwrap();
            let rows = stmt.query_map([], |r| r.get(0)).unwrap();
            rows.map(Result::unwrap).collect()
        };
        let replace = |rows: &[(&str, Option<&str>)]| {
            let inventory = entry(rows);
            change(&conn, &InventoryChange::Replace(inventory));
        };
        let behind = || ids("SELECT id FROM inventory_text_behind");
        // Once caught up, the index holds exactly the rows' ids.
        let agree = || {
            catch_up(&conn).unwrap();
            assert_eq!(
                ids("SELECT id FROM inventory ORDER BY id"),
                ids("SELECT rowid FROM inventory_text ORDER BY rowid")
            );
        };
        let found = |q: &str| found(&conn, q);
        let matching = |q: &str| {
            ids(&format!(
                "SELECT rowid FROM inventory_text WHERE inventory_text MATCH '{}'",
                trigram_query(q).unwrap().replace('\'', "''")
            ))
        };
        replace(&[
            ("aws_vpc.a", None),
            ("aws_vpc.b", None),
            ("aws_vpc.c", None),
        ]);
        assert!(behind().is_empty(), "a whole entry is written to the index");
        agree();
        let before = ids("SELECT id FROM inventory WHERE address = 'aws_vpc.c'");
        replace(&[
            ("aws_vpc.a", Some("d")),
            ("aws_vpc.c", None),
            ("aws_vpc.d", None),
        ]);
        assert_eq!(behind().len(), 4, "a and b removed, a and d added");
        assert!(matching("vpc.d").is_empty());
        assert_eq!(found("VPC.D"), ["aws_vpc.d"], "found while left behind");
        assert!(found("vpc.b").is_empty(), "a removed row is not found");
        assert_eq!(
            ids("SELECT id FROM inventory WHERE address = 'aws_vpc.c'"),
            before,
            "an unchanged resource keeps its row"
        );
        let digests: Vec<Option<String>> = conn
            .prepare("SELECT digest FROM inventory ORDER BY address")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(digests, [Some("d".to_owned()), None, None]);
        agree();
        assert!(behind().is_empty());
        assert!(matching("vpc.b").is_empty(), "a removed row's text is gone");
        assert_eq!(matching("VPC.D").len(), 1);
        change(&conn, &InventoryChange::Remove);
        agree();
        assert!(ids("SELECT rowid FROM inventory_text").is_empty());
    }

    /// A row removed by a small change leaves its text in the index until caught up; a new
    /// row that takes its id is found by its own address, not by the old one, and holds one
    /// entry once caught up.
    #[test]
    fn a_new_row_under_a_removed_rows_id_is_found_by_its_own_address() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(super::super::tables::SCHEMA).unwrap();
        let replace = |rows: &[(&str, Option<&str>)]| {
            let inventory = entry(rows);
            change(&conn, &InventoryChange::Replace(inventory));
        };
        let id_of = |address: &str| -> i64 {
            conn.query_row(
                "SELECT id FROM inventory WHERE address = ?1",
                params![address],
                |r| r.get(0),
            )
            .unwrap()
        };
        let found = |q: &str| found(&conn, q);
        replace(&[("aws_vpc.keep", None), ("aws_s3_bucket.old", None)]);
        let old = id_of("aws_s3_bucket.old");
        replace(&[("aws_vpc.keep", None), ("aws_sqs_queue.new", None)]);
        assert_eq!(
            id_of("aws_sqs_queue.new"),
            old,
            "SQLite reuses the largest id"
        );
        assert!(
            found("s3_bucket").is_empty(),
            "the stale entry finds no row"
        );
        assert_eq!(found("sqs_queue"), ["aws_sqs_queue.new"]);
        catch_up(&conn).unwrap();
        let entries = |q: &str| -> i64 {
            let sql = "SELECT count(*) FROM inventory_text WHERE inventory_text MATCH ?1";
            conn.query_row(sql, params![trigram_query(q).unwrap()], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(entries("s3_bucket"), 0);
        assert_eq!(entries("sqs_queue"), 1);
        assert_eq!(found("sqs_queue"), ["aws_sqs_queue.new"]);
    }

    /// A small change that leaves more than [`BEHIND_MAX`] rows behind brings the index up
    /// to date; a large one writes it directly.
    #[test]
    fn the_rows_left_behind_stay_few() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(super::super::tables::SCHEMA).unwrap();
        let behind = || -> i64 {
            conn.query_row("SELECT count(*) FROM inventory_text_behind", [], |r| {
                r.get(0)
            })
            .unwrap()
        };
        let names: Vec<String> = (0..40).map(|i| format!("aws_vpc.v{i}")).collect();
        let mut rows: Vec<(&str, Option<&str>)> =
            names.iter().map(|n| (n.as_str(), None)).collect();
        let change = |rows: &[(&str, Option<&str>)]| {
            let inventory = entry(rows);
            change(&conn, &InventoryChange::Replace(inventory));
        };
        change(&rows);
        let mut most = 0;
        for i in 0..40 {
            // One resource changed a save: two rows behind each time.
            rows[i].1 = Some("changed");
            change(&rows);
            most = most.max(behind());
        }
        assert!(most > 2 && most <= BEHIND_MAX, "{most}");
        let renamed: Vec<String> = (0..40).map(|i| format!("aws_vpc.w{i}")).collect();
        change(
            &renamed
                .iter()
                .map(|n| (n.as_str(), None))
                .collect::<Vec<_>>(),
        );
        assert_eq!(behind(), 0, "every resource changed: written directly");
    }

    /// Catching up reads the rows left behind by their ids: it never walks the rows, whose
    /// count grows with every state.
    #[test]
    fn catching_up_walks_only_the_rows_left_behind() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(super::super::tables::SCHEMA).unwrap();
        for sql in CATCH_UP {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let steps: Vec<String> = stmt
                .query_map([], |r| r.get(3))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            for step in &steps {
                assert!(
                    !(step.starts_with("SCAN") && step.contains(" k")),
                    "{sql}: {steps:?}"
                );
                assert!(!step.contains("SCAN inventory "), "{sql}: {steps:?}");
            }
        }
    }

    /// How many addresses another org has that match a query does not choose how the
    /// caller's search runs: the count is the caller's org's alone.
    #[test]
    fn the_few_matches_are_counted_in_the_callers_org() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(super::super::tables::SCHEMA).unwrap();
        let names: Vec<String> = (0..=FEW).map(|i| format!("aws_vpc.shared{i}")).collect();
        let rows: Vec<(&str, Option<&str>)> = names.iter().map(|n| (n.as_str(), None)).collect();
        change_inventory(
            &conn,
            "other",
            "net",
            &InventoryChange::Replace(entry(&rows)),
        )
        .unwrap();
        change(
            &conn,
            &InventoryChange::Replace(entry(&[("aws_vpc.shared", None)])),
        );
        let trigrams = trigram_query("vpc.shared").unwrap();
        assert!(!few_match(&conn, "other", &trigrams).unwrap());
        assert!(few_match(&conn, "acme", &trigrams).unwrap());
        assert_eq!(found(&conn, "vpc.shared"), ["aws_vpc.shared"]);
    }

    /// A catalog at schema 10 served as it is (a full disk kept it from being brought up to
    /// date) has no table of rows left behind: a search by text answers from the index.
    #[test]
    fn a_search_by_text_answers_without_the_table_of_rows_left_behind() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(super::super::tables::SCHEMA).unwrap();
        let inventory = entry(&[("aws_vpc.main", None), ("aws_s3_bucket.logs", None)]);
        change(&conn, &InventoryChange::Replace(inventory));
        conn.execute_batch("DROP TABLE inventory_text_behind")
            .unwrap();
        assert_eq!(found(&conn, "vpc.ma"), ["aws_vpc.main"]);
    }

    /// A commit records its change to the rows and writes none: they are written, with the
    /// entry's count, before a read; a change that clears the state's rows drops the ones
    /// recorded before it; and a removed state's rows go.
    #[test]
    fn a_commit_records_the_rows_that_a_read_then_finds_written() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(super::super::tables::SCHEMA).unwrap();
        let one = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        let rows = || one("SELECT count(*) FROM inventory");
        let recorded = || one("SELECT count(*) FROM inventory_pending");
        let entry_count = || one("SELECT instances FROM inventory_states");
        let replace = |rows: &[(&str, Option<&str>)]| {
            change_inventory(&conn, "acme", "net", &InventoryChange::Replace(entry(rows))).unwrap();
        };
        replace(&[("aws_vpc.a", None), ("aws_vpc.b", None)]);
        replace(&[("aws_vpc.a", None), ("aws_vpc.c", None)]);
        assert_eq!((rows(), recorded(), entry_count()), (0, 2, 0));
        assert_eq!(
            stored_tags(&conn, "acme", "net").unwrap().unwrap().0.len(),
            2
        );
        assert!(pending::any(&conn).unwrap());
        write_pending(&conn).unwrap();
        assert!(!pending::any(&conn).unwrap());
        assert_eq!((rows(), recorded(), entry_count()), (2, 0, 2));
        assert_eq!(found(&conn, "vpc.c"), ["aws_vpc.c"]);
        assert!(found(&conn, "vpc.b").is_empty());
        // Two patches, then a rename of every resource: only the last is written.
        replace(&[("aws_vpc.a", Some("x")), ("aws_vpc.c", None)]);
        replace(&[("aws_vpc.a", Some("y")), ("aws_vpc.c", None)]);
        assert_eq!(recorded(), 2);
        replace(&[
            ("aws_vpc.m", None),
            ("aws_vpc.n", None),
            ("aws_vpc.o", None),
        ]);
        assert_eq!(
            recorded(),
            1,
            "the changes before a clearing one are dropped"
        );
        write_pending(&conn).unwrap();
        assert_eq!((rows(), entry_count()), (3, 3));
        assert!(found(&conn, "vpc.a").is_empty());
        change_inventory(&conn, "acme", "net", &InventoryChange::Remove).unwrap();
        assert_eq!(one("SELECT count(*) FROM inventory_states"), 0);
        write_pending(&conn).unwrap();
        assert_eq!((rows(), recorded()), (0, 0));
    }

    /// The rows the recorded changes name stay at most [`PENDING_MAX`]: the commit that
    /// records more writes them.
    #[test]
    fn the_rows_waiting_to_be_written_stay_bounded() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(super::super::tables::SCHEMA).unwrap();
        let names: Vec<String> = (0..3000).map(|i| format!("aws_vpc.v{i}")).collect();
        let mut most = 0;
        for (n, state) in ["a", "b", "c", "d"].into_iter().enumerate() {
            let rows: Vec<(&str, Option<&str>)> =
                names.iter().map(|a| (a.as_str(), None)).collect();
            change_inventory(
                &conn,
                "acme",
                state,
                &InventoryChange::Replace(entry(&rows)),
            )
            .unwrap();
            let waiting = pending::size(&conn).unwrap();
            assert!(waiting <= PENDING_MAX, "after {state}: {waiting}");
            most = most.max(waiting);
            let written: i64 = conn
                .query_row("SELECT count(*) FROM inventory", [], |r| r.get(0))
                .unwrap();
            assert_eq!(written == 0, n < 2, "after {state}: {written} rows written");
        }
        assert_eq!(most, 6000);
    }

    #[test]
    fn a_change_of_more_rows_than_are_recorded_is_written_in_its_commit() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(super::super::tables::SCHEMA).unwrap();
        let small: Vec<String> = (0..10).map(|i| format!("aws_vpc.s{i}")).collect();
        let rows: Vec<(&str, Option<&str>)> = small.iter().map(|a| (a.as_str(), None)).collect();
        change_inventory(
            &conn,
            "acme",
            "small",
            &InventoryChange::Replace(entry(&rows)),
        )
        .unwrap();
        assert_eq!(pending::size(&conn).unwrap(), 10);
        let big: Vec<String> = (0..PENDING_MAX + 1)
            .map(|i| format!("aws_vpc.b{i}"))
            .collect();
        let rows: Vec<(&str, Option<&str>)> = big.iter().map(|a| (a.as_str(), None)).collect();
        change_inventory(
            &conn,
            "acme",
            "big",
            &InventoryChange::Replace(entry(&rows)),
        )
        .unwrap();
        // The change recorded before it was written first, and nothing is left recorded.
        assert_eq!(pending::size(&conn).unwrap(), 0);
        let count = |state: &str| -> (i64, i64) {
            conn.query_row(
                "SELECT (SELECT count(*) FROM inventory WHERE state = ?1),
                        (SELECT instances FROM inventory_states WHERE state = ?1)",
                [state],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
        };
        let n = PENDING_MAX as i64 + 1;
        assert_eq!(count("small"), (10, 10));
        assert_eq!(count("big"), (n, n));
        assert_eq!(found(&conn, "b8192"), ["aws_vpc.b8192"]);
    }

    /// Applies a change to acme's state `net` and writes its rows, as a read would.
    fn change(conn: &Connection, change: &InventoryChange) {
        change_inventory(conn, "acme", "net", change).unwrap();
        write_pending(conn).unwrap();
    }

    /// The addresses a search of acme's inventory for `q` finds.
    fn found(conn: &Connection, q: &str) -> Vec<String> {
        let query = ResourceQuery {
            q: Some(q.into()),
            limit: 10,
            ..ResourceQuery::default()
        };
        let rows = search(conn, "acme", &query).unwrap();
        rows.into_iter().map(|r| r.address).collect()
    }

    /// An entry of one resource an instance, its tag standing for its fields.
    fn entry(rows: &[(&str, Option<&str>)]) -> StateInventory {
        let tag = |row: &(&str, Option<&str>)| {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::hash::DefaultHasher::new();
            row.hash(&mut hasher);
            ResourceTag(hasher.finish())
        };
        let instances = rows
            .iter()
            .map(|row| Instance {
                address: row.0.into(),
                module: "".into(),
                mode: Mode::Managed,
                resource_type: row.0.split('.').next().unwrap().into(),
                provider: "registry.terraform.io/hashicorp/aws".into(),
                digest: row.1.map(str::to_owned),
                resource: tag(row),
            })
            .collect();
        StateInventory {
            version: 1,
            indexed: true,
            instances,
            tags: Some(rows.iter().map(tag).collect()),
        }
    }

    #[test]
    fn a_like_pattern_takes_the_wildcards_of_a_query_literally() {
        assert_eq!(like_pattern("bucket"), "%bucket%");
        assert_eq!(like_pattern("r1_0%"), "%r1\\_0\\%%");
        assert_eq!(like_pattern("a\\b"), "%a\\\\b%");
    }
}
