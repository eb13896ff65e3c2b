//! Tokens, orgs and runs in SQLite. A token is keyed by its hash (looked up on every
//! request); a run's states and step tokens are found by the run's id, so a run's end or a
//! step's gone report finds them with one query each.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::catalog::insert_audit;
use super::tables::{from_json, seconds, sql_error, to_json};
use super::SqliteCatalog;
use crate::domain::permission::Allocation;
use crate::domain::Timestamp;
use crate::ports::{
    AccessCatalog, AuditEntry, OrgRecord, RunCatalog, RunItem, RunRecord, StoreError, TokenRecord,
};

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
            tx.execute(
                // An upsert, not a replace: a token keeps its place in listings when revoked.
                "INSERT INTO tokens (hash, id, run, expires, record) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (hash) DO UPDATE SET record = excluded.record",
                params![
                    token.hash,
                    token.id,
                    token.step.as_ref().map(|g| &g.run),
                    token.expires_at.map(seconds),
                    to_json(&token)
                ],
            )
            .map_err(sql_error)?;
            insert_audit(&tx, &audit)?;
            tx.commit().map_err(sql_error)
        })
        .await
    }

    async fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached("SELECT record FROM tokens ORDER BY rowid")
                .map_err(sql_error)?;
            let rows = stmt
                .query_map([], |row| row.get::<_, String>(0))
                .map_err(sql_error)?;
            rows.map(|r| from_json(&r.map_err(sql_error)?)).collect()
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
            org: org.to_owned(),
            allocation: *allocation,
            created_at: audit.at,
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

    async fn org(&self, org: &str) -> Result<Option<OrgRecord>, StoreError> {
        let org = org.to_owned();
        self.read(move |conn| {
            let text: Option<String> = conn
                .query_row(
                    "SELECT record FROM orgs WHERE org = ?1",
                    params![org],
                    |row| row.get(0),
                )
                .optional()
                .map_err(sql_error)?;
            text.as_deref().map(from_json).transpose()
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

fn run_in(conn: &Connection, run: &str) -> Result<Option<RunRecord>, StoreError> {
    let text: Option<String> = conn
        .query_row(
            "SELECT record FROM runs WHERE run = ?1",
            params![run],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql_error)?;
    text.as_deref().map(from_json).transpose()
}

#[async_trait]
impl RunCatalog for SqliteCatalog {
    async fn run(&self, run: &str) -> Result<Option<RunRecord>, StoreError> {
        let run = run.to_owned();
        self.with(move |conn| run_in(conn, &run)).await
    }

    async fn bind_run(&self, record: &RunRecord) -> Result<RunRecord, StoreError> {
        let record = record.clone();
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            let stored = match run_in(&tx, &record.run)? {
                Some(existing) => existing,
                None => {
                    tx.execute(
                        "INSERT INTO runs (run, record) VALUES (?1, ?2)",
                        params![record.run, to_json(&record)],
                    )
                    .map_err(sql_error)?;
                    record
                }
            };
            tx.commit().map_err(sql_error)?;
            Ok(stored)
        })
        .await
    }

    async fn end_run(
        &self,
        run: &str,
        at: Timestamp,
        status: Option<&str>,
    ) -> Result<RunRecord, StoreError> {
        let (run, status) = (run.to_owned(), status.map(str::to_owned));
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            let mut record = run_in(&tx, &run)?.unwrap_or(RunRecord {
                run: run.clone(),
                org: String::new(),
                created_at: at,
                ended_at: None,
                status: None,
            });
            if record.ended_at.is_none() {
                record.ended_at = Some(at);
                record.status = status;
                tx.execute(
                    "INSERT OR REPLACE INTO runs (run, record) VALUES (?1, ?2)",
                    params![run, to_json(&record)],
                )
                .map_err(sql_error)?;
                // A sparse record: the sweeper tidies the run's dead locks from here.
                tx.execute(
                    "INSERT OR IGNORE INTO ended_runs (run, since) VALUES (?1, ?2)",
                    params![run, seconds(at)],
                )
                .map_err(sql_error)?;
            }
            tx.commit().map_err(sql_error)?;
            Ok(record)
        })
        .await
    }

    async fn run_items(&self, run: &str) -> Result<Vec<RunItem>, StoreError> {
        let run = run.to_owned();
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached("SELECT token_id, org, state FROM run_items WHERE run = ?1")
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(params![run], |r| {
                    Ok(RunItem {
                        run: run.clone(),
                        token_id: r.get(0)?,
                        org: r.get(1)?,
                        state: r.get(2)?,
                    })
                })
                .map_err(sql_error)?;
            rows.collect::<Result<_, _>>().map_err(sql_error)
        })
        .await
    }

    async fn run_tokens(&self, run: &str) -> Result<Vec<TokenRecord>, StoreError> {
        let run = run.to_owned();
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached("SELECT record FROM tokens WHERE run = ?1 ORDER BY rowid")
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(params![run], |r| r.get::<_, String>(0))
                .map_err(sql_error)?;
            rows.map(|r| from_json(&r.map_err(sql_error)?)).collect()
        })
        .await
    }
}
