//! The inventory in SQLite: one row of `inventory` per instance, keyed (org, state, address)
//! so a search walks it in the order it answers in and stops at its limit, with indexes by
//! type, provider and module in that same order beneath them, one of the keys alone (what a
//! substring search reads, a quarter of the rows' bytes), and by digest for the conflicts;
//! one row of `inventory_states` per state indexed, with its version. A commit writes the
//! rows of its state that changed inside its own transaction (`change_inventory`).

use async_trait::async_trait;
use std::collections::HashMap;

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

/// Replaces (or removes) one state's rows, on the commit's transaction. Only the rows that
/// differ are written: a save changes a few of a state's resources, if any, and a row holds
/// nothing that changes with the version (that is kept once, in `inventory_states`), so a
/// save of a big state that changed nothing indexed writes one row, not thousands.
pub(super) fn change_inventory(
    conn: &Connection,
    org: &str,
    state: &str,
    change: &InventoryChange,
) -> Result<(), StoreError> {
    let InventoryChange::Replace(inventory) = change else {
        conn.prepare_cached("DELETE FROM inventory WHERE org = ?1 AND state = ?2")
            .and_then(|mut s| s.execute(params![org, state]))
            .map_err(sql_error)?;
        conn.prepare_cached("DELETE FROM inventory_states WHERE org = ?1 AND state = ?2")
            .and_then(|mut s| s.execute(params![org, state]))
            .map_err(sql_error)?;
        return Ok(());
    };
    let mut stored: HashMap<String, Instance> = {
        let mut stmt = conn
            .prepare_cached(
                "SELECT address, module, mode, type, provider, digest FROM inventory
                 WHERE org = ?1 AND state = ?2",
            )
            .map_err(sql_error)?;
        let rows = stmt
            .query_map(params![org, state], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, String>(4)?,
                    row.get::<_, Option<String>>(5)?,
                ))
            })
            .map_err(sql_error)?;
        let mut stored = HashMap::new();
        for r in rows {
            let (address, module, mode, resource_type, provider, digest) = r.map_err(sql_error)?;
            let instance = Instance {
                address: address.clone(),
                module,
                mode: mode_of(&mode)?,
                resource_type,
                provider,
                digest,
            };
            stored.insert(address, instance);
        }
        stored
    };
    let mut insert = conn
        .prepare_cached(
            "INSERT OR REPLACE INTO inventory
               (org, state, address, module, mode, type, provider, digest)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .map_err(sql_error)?;
    for i in &inventory.instances {
        if stored.remove(&i.address).as_ref() == Some(i) {
            continue;
        }
        insert
            .execute(params![
                org,
                state,
                i.address,
                i.module,
                mode_text(i.mode),
                i.resource_type,
                i.provider,
                i.digest,
            ])
            .map_err(sql_error)?;
    }
    let mut delete = conn
        .prepare_cached("DELETE FROM inventory WHERE org = ?1 AND state = ?2 AND address = ?3")
        .map_err(sql_error)?;
    for gone in stored.keys() {
        delete
            .execute(params![org, state, gone])
            .map_err(sql_error)?;
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
    // The page's keys first, on the narrowest index that answers the filters (a substring
    // alone walks `inventory_by_address`, a quarter of the table's bytes), then its rows.
    let mut sql = "SELECT org, state, address FROM inventory WHERE org = ?".to_owned();
    let mut values: Vec<Value> = vec![org.to_owned().into()];
    let mut equal = |column: &str, value: &Option<String>| {
        if let Some(v) = value {
            sql.push_str(&format!(" AND {column} = ?"));
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
            " AND provider IN ({})",
            vec!["?"; named.len()].join(", ")
        ));
        values.extend(named.into_iter().map(Value::from));
    }
    if let Some((state, address)) = &query.after {
        sql.push_str(" AND (state, address) > (?, ?)");
        values.push(state.clone().into());
        values.push(address.clone().into());
    }
    if let Some(q) = &query.q {
        // LIKE folds ASCII case only, as the filter's other readings do, and compares
        // without making a lowered copy of each address: a search that matches few rows
        // reads every one of the org's.
        sql.push_str(" AND address LIKE ? ESCAPE '\\'");
        values.push(like_pattern(q).into());
    }
    sql.push_str(" ORDER BY state, address LIMIT ?");
    values.push(i64::try_from(query.limit).unwrap_or(i64::MAX).into());
    let sql = format!(
        "SELECT {ROW_COLUMNS} FROM {ROWS} WHERE (i.org, i.state, i.address) IN ({sql})
         ORDER BY i.state, i.address"
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(sql_error)?;
    rows_of(&mut stmt, values)
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
    use super::like_pattern;

    #[test]
    fn a_like_pattern_takes_the_wildcards_of_a_query_literally() {
        assert_eq!(like_pattern("bucket"), "%bucket%");
        assert_eq!(like_pattern("r1_0%"), "%r1\\_0\\%%");
        assert_eq!(like_pattern("a\\b"), "%a\\\\b%");
    }
}
