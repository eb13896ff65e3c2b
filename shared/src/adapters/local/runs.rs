//! Runs in SQLite. A run's states and step tokens are found by the run's id, so a run's end
//! or a step's gone report finds them with one query each.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::tables::{all_records, from_json, seconds, sql_error, to_json};
use super::SqliteCatalog;
use crate::domain::Timestamp;
use crate::ports::{RunCatalog, RunItem, RunRecord, StoreError, TokenRecord};

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

    async fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.with(move |conn| all_records(conn, "SELECT record FROM runs"))
            .await
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
