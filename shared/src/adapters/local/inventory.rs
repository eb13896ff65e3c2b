//! The inventory in SQLite: one row of `inventory` per instance, unique by (org, state,
//! address) so a search walks that key's index in the order it answers in and stops at its
//! limit, with indexes by type, provider and module in that same order beneath them, and by
//! digest for the conflicts; `inventory_text`, a trigram index of the addresses by row id,
//! from which a substring that few addresses hold is found without reading the others; one
//! row of `inventory_states` per state indexed, with its version. A commit writes the rows
//! of its state that changed inside its own transaction (`change_inventory`).

use async_trait::async_trait;

use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, TransactionBehavior};

use super::tables::{from_json, sql_error};
use super::SqliteCatalog;
use crate::domain::inventory::{Instance, Mode, StateInventory};
use crate::domain::record::StateRecord;
use crate::ports::{
    conflict_groups, provider_matches, IndexedState, InventoryCatalog, InventoryChange,
    InventoryCounts, ResourceQuery, ResourceRow, StoreError,
};

/// Replaces, keeps or removes one state's rows, on the commit's transaction. Only the rows that
/// differ are written: a save changes a few of a state's resources, if any, and a row holds
/// nothing that changes with the version (that is kept once, in `inventory_states`), so a
/// save of a big state that changed nothing indexed writes one row, not thousands.
pub(super) fn change_inventory(
    conn: &Connection,
    org: &str,
    state: &str,
    change: &InventoryChange,
) -> Result<(), StoreError> {
    let inventory = match change {
        InventoryChange::Replace(inventory) => inventory,
        InventoryChange::Keep { version } => return keep_inventory(conn, org, state, *version),
        InventoryChange::Remove => return remove_inventory(conn, org, state),
    };
    let diff = differences(conn, org, state, &inventory.instances)?;
    for (id, i) in diff.changed {
        conn.prepare_cached(
            "UPDATE inventory SET module = ?2, mode = ?3, type = ?4, provider = ?5, digest = ?6
             WHERE id = ?1",
        )
        .and_then(|mut s| {
            s.execute(params![
                id,
                i.module,
                mode_text(i.mode),
                i.resource_type,
                i.provider,
                i.digest
            ])
        })
        .map_err(sql_error)?;
    }
    for i in diff.added {
        conn.prepare_cached(
            "INSERT INTO inventory (org, state, address, module, mode, type, provider, digest)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
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
            ])
        })
        .map_err(sql_error)?;
        conn.prepare_cached("INSERT INTO inventory_text (rowid, address) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![conn.last_insert_rowid(), i.address]))
            .map_err(sql_error)?;
    }
    for id in diff.gone {
        for sql in [
            "DELETE FROM inventory WHERE id = ?1",
            "DELETE FROM inventory_text WHERE rowid = ?1",
        ] {
            conn.prepare_cached(sql)
                .and_then(|mut s| s.execute(params![id]))
                .map_err(sql_error)?;
        }
    }
    conn.prepare_cached(
        "INSERT OR REPLACE INTO inventory_states (org, state, version, indexed, instances)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .and_then(|mut s| {
        s.execute(params![
            org,
            state,
            inventory.version,
            inventory.indexed,
            inventory.instances.len() as u64
        ])
    })
    .map_err(sql_error)?;
    Ok(())
}

/// A save that leaves the instances as they are: only the entry's version moves. A missing
/// entry is put back as not indexed, with no instances, so the gap shows.
fn keep_inventory(
    conn: &Connection,
    org: &str,
    state: &str,
    version: u64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO inventory_states (org, state, version, indexed, instances)
         VALUES (?1, ?2, ?3, 0, 0)
         ON CONFLICT (org, state) DO UPDATE SET version = excluded.version",
    )
    .and_then(|mut s| s.execute(params![org, state, version]))
    .map_err(sql_error)?;
    Ok(())
}

/// A state gone: its rows, their text and its entry.
fn remove_inventory(conn: &Connection, org: &str, state: &str) -> Result<(), StoreError> {
    for sql in [
        "DELETE FROM inventory_text WHERE rowid IN
           (SELECT id FROM inventory WHERE org = ?1 AND state = ?2)",
        "DELETE FROM inventory WHERE org = ?1 AND state = ?2",
        "DELETE FROM inventory_states WHERE org = ?1 AND state = ?2",
    ] {
        conn.prepare_cached(sql)
            .and_then(|mut s| s.execute(params![org, state]))
            .map_err(sql_error)?;
    }
    Ok(())
}

/// How a state's stored rows differ from `instances`: rows whose address is kept but whose
/// other fields changed, instances whose address is new, and rows whose address is gone.
struct Differences<'a> {
    changed: Vec<(i64, &'a Instance)>,
    added: Vec<&'a Instance>,
    gone: Vec<i64>,
}

/// Walks the state's rows in address order (its unique index's order, bytewise as Rust
/// orders strings) beside `instances` in the same order, comparing each row where it lies:
/// no row is copied out, so a save of a big state that changed a few instances reads its
/// rows once and allocates for the few.
fn differences<'a>(
    conn: &Connection,
    org: &str,
    state: &str,
    instances: &'a [Instance],
) -> Result<Differences<'a>, StoreError> {
    let mut ordered: Vec<&Instance> = instances.iter().collect();
    // An entry is made in address order (`inventory_of`); one that is not is put in it.
    if !ordered.is_sorted_by(|a, b| a.address < b.address) {
        ordered.sort_by(|a, b| a.address.cmp(&b.address));
        ordered.dedup_by(|later, earlier| later.address == earlier.address);
    }
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, address, module, mode, type, provider, digest FROM inventory
             WHERE org = ?1 AND state = ?2 ORDER BY address",
        )
        .map_err(sql_error)?;
    let mut rows = stmt.query(params![org, state]).map_err(sql_error)?;
    let mut new = ordered.into_iter().peekable();
    let mut diff = Differences {
        changed: Vec::new(),
        added: Vec::new(),
        gone: Vec::new(),
    };
    while let Some(row) = rows.next().map_err(sql_error)? {
        let text = |n: usize| {
            row.get_ref(n)
                .and_then(|v| Ok(v.as_str()?))
                .map_err(sql_error)
        };
        let id: i64 = row.get(0).map_err(sql_error)?;
        let address = text(1)?;
        while let Some(i) = new.next_if(|i| i.address.as_str() < address) {
            diff.added.push(i);
        }
        let Some(i) = new.next_if(|i| i.address == address) else {
            diff.gone.push(id);
            continue;
        };
        let digest = row
            .get_ref(6)
            .and_then(|v| Ok(v.as_str_or_null()?))
            .map_err(sql_error)?;
        let same = text(2)? == i.module
            && mode_of(text(3)?)? == i.mode
            && text(4)? == i.resource_type
            && text(5)? == i.provider
            && digest == i.digest.as_deref();
        if !same {
            diff.changed.push((id, i));
        }
    }
    diff.added.extend(new);
    Ok(diff)
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
        if few_match(conn, &trigrams)? {
            sql = "SELECT k.id FROM
                     (SELECT rowid AS id FROM inventory_text WHERE inventory_text MATCH ?) AS t
                   CROSS JOIN inventory AS k ON k.id = t.id"
                .to_owned();
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

/// A query whose trigrams at most this many addresses (of every org) have is answered from
/// them; one with more is common, and walking the rows in order meets a page of it soon.
const FEW: i64 = 2000;

/// Whether at most [`FEW`] addresses have every trigram of `trigrams`.
fn few_match(conn: &Connection, trigrams: &str) -> Result<bool, StoreError> {
    let found: i64 = conn
        .prepare_cached(
            "SELECT count(*) FROM
               (SELECT 1 FROM inventory_text WHERE inventory_text MATCH ?1 LIMIT ?2)",
        )
        .and_then(|mut s| s.query_row(params![trigrams, FEW + 1], |row| row.get(0)))
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

#[async_trait]
impl InventoryCatalog for SqliteCatalog {
    async fn resources(
        &self,
        org: &str,
        query: &ResourceQuery,
    ) -> Result<Vec<ResourceRow>, StoreError> {
        let (org, query) = (org.to_owned(), query.clone());
        self.read(move |conn| search(conn, &org, &query)).await
    }

    async fn conflicts(
        &self,
        org: &str,
        state: Option<&str>,
    ) -> Result<Vec<Vec<ResourceRow>>, StoreError> {
        let (org, state) = (org.to_owned(), state.map(str::to_owned));
        self.read(move |conn| conflicts_in(conn, &org, state.as_deref()))
            .await
    }

    async fn indexed_states(&self, org: &str) -> Result<Vec<IndexedState>, StoreError> {
        let org = org.to_owned();
        self.read(move |conn| {
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
        })
        .await
    }

    async fn inventory_counts(&self, org: &str) -> Result<InventoryCounts, StoreError> {
        let org = org.to_owned();
        self.read(move |conn| counts(conn, &org)).await
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

    /// The text index holds a row id for every row and no other, through additions,
    /// changes in place, removals and a state's removal.
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
            let instances = rows
                .iter()
                .map(|(address, digest)| Instance {
                    address: (*address).into(),
                    module: String::new(),
                    mode: Mode::Managed,
                    resource_type: "aws_vpc".into(),
                    provider: "registry.terraform.io/hashicorp/aws".into(),
                    digest: digest.map(str::to_owned),
                })
                .collect();
            let inventory = StateInventory {
                version: 1,
                indexed: true,
                instances,
            };
            change_inventory(&conn, "acme", "net", &InventoryChange::Replace(inventory)).unwrap();
        };
        let agree = || {
            assert_eq!(
                ids("SELECT id FROM inventory ORDER BY id"),
                ids("SELECT rowid FROM inventory_text ORDER BY rowid")
            );
        };
        replace(&[
            ("aws_vpc.a", None),
            ("aws_vpc.b", None),
            ("aws_vpc.c", None),
        ]);
        agree();
        let before = ids("SELECT id FROM inventory WHERE address = 'aws_vpc.a'");
        replace(&[
            ("aws_vpc.a", Some("d")),
            ("aws_vpc.c", None),
            ("aws_vpc.d", None),
        ]);
        agree();
        assert_eq!(
            ids("SELECT id FROM inventory WHERE address = 'aws_vpc.a'"),
            before,
            "a changed row keeps its id"
        );
        let matching = |q: &str| {
            ids(&format!(
                "SELECT rowid FROM inventory_text WHERE inventory_text MATCH '{}'",
                trigram_query(q).unwrap().replace('\'', "''")
            ))
        };
        assert!(matching("vpc.b").is_empty(), "a removed row's text is gone");
        assert_eq!(matching("VPC.D").len(), 1);
        change_inventory(&conn, "acme", "net", &InventoryChange::Remove).unwrap();
        agree();
        assert!(ids("SELECT rowid FROM inventory_text").is_empty());
    }

    #[test]
    fn a_like_pattern_takes_the_wildcards_of_a_query_literally() {
        assert_eq!(like_pattern("bucket"), "%bucket%");
        assert_eq!(like_pattern("r1_0%"), "%r1\\_0\\%%");
        assert_eq!(like_pattern("a\\b"), "%a\\\\b%");
    }
}
