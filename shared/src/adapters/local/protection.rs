//! Protected-state rules in SQLite: one row of `protected_states` per (org, pattern). The
//! reads of an org's settings bring its rules in the same statement (a subquery beside the
//! settings row's), as the AWS store's settings item holds them. A write compares and swaps its rule in one
//! IMMEDIATE transaction, creating the org's settings row when the org has none yet.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, TransactionBehavior};

use super::catalog::insert_audit;
use super::tables::{from_json, sql_error, to_json};
use super::SqliteCatalog;
use crate::domain::permission::Allocation;
use crate::domain::protection::Protection;
use crate::ports::{AuditEntry, OrgRecord, ProtectionCatalog, StoreError};

/// An org's settings as a read found them: its settings row's JSON and its rules as one JSON
/// array (`json_group_array`, `[]` for none).
pub(super) fn settings(
    record: Option<String>,
    rules: Option<String>,
) -> Result<Option<OrgRecord>, StoreError> {
    let Some(record) = record else {
        return Ok(None);
    };
    let mut org: OrgRecord = from_json(&record)?;
    let mut protections: Vec<Protection> = rules
        .as_deref()
        .map(from_json)
        .transpose()?
        .unwrap_or_default();
    protections.sort_by(|a, b| a.pattern.cmp(&b.pattern));
    org.protections = protections;
    Ok(Some(org))
}

impl SqliteCatalog {
    async fn swap_protection(
        &self,
        org: &str,
        expected: Option<&Protection>,
        new: Option<&Protection>,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let (org, expected, new, audit) = (
            org.to_owned(),
            expected.cloned(),
            new.cloned(),
            audit.clone(),
        );
        self.with(move |conn| {
            let pattern = new
                .as_ref()
                .or(expected.as_ref())
                .expect("a rule to write or remove")
                .pattern
                .clone();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            let text: Option<String> = tx
                .query_row(
                    "SELECT record FROM protected_states WHERE org = ?1 AND pattern = ?2",
                    params![org, pattern],
                    |row| row.get(0),
                )
                .optional()
                .map_err(sql_error)?;
            let stored: Option<Protection> = text.as_deref().map(from_json).transpose()?;
            if stored != expected {
                return Err(StoreError::Conflict);
            }
            let settings = OrgRecord {
                inventory_key: None,
                org: org.clone(),
                allocation: Allocation::default(),
                created_at: audit.at,
                protections: Vec::new(),
            };
            tx.execute(
                "INSERT OR IGNORE INTO orgs (org, record) VALUES (?1, ?2)",
                params![org, to_json(&settings)],
            )
            .map_err(sql_error)?;
            match &new {
                Some(rule) => tx.execute(
                    "INSERT OR REPLACE INTO protected_states (org, pattern, record) VALUES (?1, ?2, ?3)",
                    params![org, pattern, to_json(rule)],
                ),
                None => tx.execute(
                    "DELETE FROM protected_states WHERE org = ?1 AND pattern = ?2",
                    params![org, pattern],
                ),
            }
            .map_err(sql_error)?;
            insert_audit(&tx, &audit)?;
            tx.commit().map_err(sql_error)
        })
        .await
    }
}

#[async_trait]
impl ProtectionCatalog for SqliteCatalog {
    async fn put_protection(
        &self,
        org: &str,
        expected: Option<&Protection>,
        protection: &Protection,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        self.swap_protection(org, expected, Some(protection), audit)
            .await
    }

    async fn delete_protection(
        &self,
        org: &str,
        protection: &Protection,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        self.swap_protection(org, Some(protection), None, audit)
            .await
    }
}
