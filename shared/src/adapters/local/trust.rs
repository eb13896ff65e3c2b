//! Trust policies in SQLite: one row per (org, name), with the issuer and audience as
//! columns so the exchange finds an issuer's policies and a write finds another org's use of
//! its pair by index. The pair check and the write are one IMMEDIATE transaction.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use super::catalog::insert_audit;
use super::tables::{from_json, sql_error, to_json};
use super::SqliteCatalog;
use crate::domain::trust::TrustPolicy;
use crate::ports::{AuditEntry, StoreError, TrustCatalog, TrustRecord, TrustWrite};

/// The stored policy `name` of `org`.
fn stored(conn: &Connection, org: &str, name: &str) -> Result<Option<TrustPolicy>, StoreError> {
    let text: Option<String> = conn
        .query_row(
            "SELECT record FROM trust_policies WHERE org = ?1 AND name = ?2",
            params![org, name],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql_error)?;
    text.as_deref().map(from_json).transpose()
}

/// Whether the stored policy `name` of `org` is exactly `expected` (or absent, for `None`).
fn stored_is(
    tx: &Transaction<'_>,
    org: &str,
    name: &str,
    expected: Option<&TrustPolicy>,
) -> Result<bool, StoreError> {
    Ok(stored(tx, org, name)?.as_ref() == expected)
}

#[async_trait]
impl TrustCatalog for SqliteCatalog {
    async fn trust_policies(&self, org: &str) -> Result<Vec<TrustPolicy>, StoreError> {
        let org = org.to_owned();
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached("SELECT record FROM trust_policies WHERE org = ?1 ORDER BY name")
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(params![org], |row| row.get::<_, String>(0))
                .map_err(sql_error)?;
            rows.map(|r| from_json(&r.map_err(sql_error)?)).collect()
        })
        .await
    }

    async fn trust_policy(&self, org: &str, name: &str) -> Result<Option<TrustPolicy>, StoreError> {
        let (org, name) = (org.to_owned(), name.to_owned());
        self.read(move |conn| stored(conn, &org, &name)).await
    }

    async fn trust_policies_of_issuer(&self, issuer: &str) -> Result<Vec<TrustRecord>, StoreError> {
        let issuer = issuer.to_owned();
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT org, record FROM trust_policies WHERE issuer = ?1 ORDER BY org, name",
                )
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(params![issuer], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
                })
                .map_err(sql_error)?;
            rows.map(|r| {
                let (org, text) = r.map_err(sql_error)?;
                Ok(TrustRecord {
                    org,
                    policy: from_json(&text)?,
                })
            })
            .collect()
        })
        .await
    }

    async fn put_trust_policy(
        &self,
        org: &str,
        expected: Option<&TrustPolicy>,
        policy: &TrustPolicy,
        audit: &AuditEntry,
    ) -> Result<TrustWrite, StoreError> {
        let (org, expected, policy, audit) = (
            org.to_owned(),
            expected.cloned(),
            policy.clone(),
            audit.clone(),
        );
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            if !stored_is(&tx, &org, &policy.name, expected.as_ref())? {
                return Err(StoreError::Conflict);
            }
            let other: Option<String> = tx
                .query_row(
                    "SELECT org FROM trust_policies WHERE issuer = ?1 AND audience = ?2 AND org <> ?3 LIMIT 1",
                    params![policy.issuer, policy.audience, org],
                    |row| row.get(0),
                )
                .optional()
                .map_err(sql_error)?;
            if let Some(other) = other {
                return Ok(TrustWrite::PairTaken { org: other });
            }
            tx.execute(
                "INSERT OR REPLACE INTO trust_policies (org, name, issuer, audience, record)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![org, policy.name, policy.issuer, policy.audience, to_json(&policy)],
            )
            .map_err(sql_error)?;
            insert_audit(&tx, &audit)?;
            tx.commit().map_err(sql_error)?;
            Ok(TrustWrite::Written)
        })
        .await
    }

    async fn delete_trust_policy(
        &self,
        org: &str,
        policy: &TrustPolicy,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let (org, policy, audit) = (org.to_owned(), policy.clone(), audit.clone());
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            if !stored_is(&tx, &org, &policy.name, Some(&policy))? {
                return Err(StoreError::Conflict);
            }
            tx.execute(
                "DELETE FROM trust_policies WHERE org = ?1 AND name = ?2",
                params![org, policy.name],
            )
            .map_err(sql_error)?;
            insert_audit(&tx, &audit)?;
            tx.commit().map_err(sql_error)
        })
        .await
    }
}
