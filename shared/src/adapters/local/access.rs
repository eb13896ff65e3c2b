//! Tokens and orgs in SQLite. A token is keyed by its hash (looked up on every request); an
//! org's allocation is compared and swapped in one transaction with its audit.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, TransactionBehavior};

use super::catalog::insert_audit;
use super::tables::{all_records, from_json, seconds, sql_error, to_json};
use super::SqliteCatalog;
use crate::domain::permission::Allocation;
use crate::domain::Timestamp;
use crate::ports::{
    AccessCatalog, AuditEntry, ExchangeMark, InventoryKey, OrgRecord, StoreError, TokenRecord,
};

/// Stores `token`: an upsert, not a replace, so a token keeps its place in listings when
/// revoked.
fn upsert_token(tx: &rusqlite::Transaction<'_>, token: &TokenRecord) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO tokens (hash, id, run, expires, record) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (hash) DO UPDATE SET record = excluded.record",
        params![
            token.hash,
            token.id,
            token.step.as_ref().map(|g| &g.run),
            token.expires_at.map(seconds),
            to_json(token)
        ],
    )
    .map_err(sql_error)?;
    Ok(())
}

#[async_trait]
impl AccessCatalog for SqliteCatalog {
    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        let hash = hash.to_owned();
        self.read(move |conn| {
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
            upsert_token(&tx, &token)?;
            insert_audit(&tx, &audit)?;
            tx.commit().map_err(sql_error)
        })
        .await
    }

    async fn put_session(
        &self,
        token: &TokenRecord,
        mark: &ExchangeMark,
        audit: &AuditEntry,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let (token, mark, audit) = (token.clone(), mark.clone(), audit.clone());
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            // A mark past its time is replaced; a live one refuses the second exchange.
            let marked = tx
                .execute(
                    "INSERT INTO exchanged_tokens (key, until) VALUES (?1, ?2)
                     ON CONFLICT (key) DO UPDATE SET until = excluded.until
                     WHERE exchanged_tokens.until < ?3",
                    params![mark.key, seconds(mark.until), seconds(now)],
                )
                .map_err(sql_error)?;
            if marked == 0 {
                return Err(StoreError::Conflict);
            }
            upsert_token(&tx, &token)?;
            insert_audit(&tx, &audit)?;
            tx.commit().map_err(sql_error)
        })
        .await
    }

    async fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        self.with(move |conn| all_records(conn, "SELECT record FROM tokens ORDER BY rowid"))
            .await
    }

    async fn orgs(&self) -> Result<Vec<String>, StoreError> {
        self.with(move |conn| {
            // A token's org is in its record only; an org is never empty.
            let mut stmt = conn
                .prepare_cached(
                    "SELECT org FROM states UNION SELECT org FROM deleted_states \
                     UNION SELECT org FROM apps UNION SELECT org FROM orgs \
                     UNION SELECT org FROM trust_policies UNION SELECT org FROM audit \
                     UNION SELECT json_extract(record, '$.org') FROM tokens ORDER BY 1",
                )
                .map_err(sql_error)?;
            let rows = stmt
                .query_map([], |row| row.get::<_, Option<String>>(0))
                .map_err(sql_error)?;
            let mut orgs = Vec::new();
            for org in rows {
                orgs.extend(org.map_err(sql_error)?.filter(|o| !o.is_empty()));
            }
            Ok(orgs)
        })
        .await
    }

    async fn set_allocation(
        &self,
        org: &str,
        expected: &Allocation,
        allocation: &Allocation,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let expected = *expected;
        let record = OrgRecord {
            inventory_key: None,
            org: org.to_owned(),
            allocation: *allocation,
            created_at: audit.at,
            protections: Vec::new(),
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
            let existing: Option<OrgRecord> = existing.as_deref().map(from_json).transpose()?;
            // The check and the write are one IMMEDIATE transaction: no other writer between.
            if existing.as_ref().map(|o| o.allocation).unwrap_or_default() != expected {
                return Err(StoreError::Conflict);
            }
            let stored = match existing {
                Some(existing) => OrgRecord {
                    allocation: record.allocation,
                    ..existing
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

    async fn put_inventory_key(
        &self,
        org: &str,
        expected: Option<&InventoryKey>,
        key: &InventoryKey,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        let (org, expected, key) = (org.to_owned(), expected.cloned(), key.clone());
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            let existing: Option<String> = tx
                .query_row(
                    "SELECT record FROM orgs WHERE org = ?1",
                    params![org],
                    |row| row.get(0),
                )
                .optional()
                .map_err(sql_error)?;
            let existing: Option<OrgRecord> = existing.as_deref().map(from_json).transpose()?;
            // The check and the write are one IMMEDIATE transaction: no other writer between.
            let mut stored = existing.unwrap_or_else(|| OrgRecord {
                org: org.clone(),
                allocation: Allocation::default(),
                created_at: at,
                protections: Vec::new(),
                inventory_key: None,
            });
            if stored.inventory_key != expected {
                return Err(StoreError::Conflict);
            }
            stored.inventory_key = Some(key);
            tx.execute(
                "INSERT OR REPLACE INTO orgs (org, record) VALUES (?1, ?2)",
                params![stored.org, to_json(&stored)],
            )
            .map_err(sql_error)?;
            tx.commit().map_err(sql_error)
        })
        .await
    }

    async fn org(&self, org: &str) -> Result<Option<OrgRecord>, StoreError> {
        let org = org.to_owned();
        self.read(move |conn| {
            let row: Option<(String, Option<String>)> = conn
                .query_row(
                    "SELECT record,
                       (SELECT json_group_array(json(record)) FROM protected_states WHERE org = ?1)
                     FROM orgs WHERE org = ?1",
                    params![org],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()
                .map_err(sql_error)?;
            match row {
                Some((record, rules)) => super::protection::settings(Some(record), rules),
                None => Ok(None),
            }
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
