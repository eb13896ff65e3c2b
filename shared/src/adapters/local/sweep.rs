//! What the sweeper reads and tidies in SQLite: version marks, deleted states due, pending
//! and doomed blobs, expiring tokens, ended and settled runs, each a small table of its own
//! (or an index), so a pass reads only what it tidies. Every action is safe to repeat.

use async_trait::async_trait;
use rusqlite::{params, Connection, TransactionBehavior};

use super::tables::{from_json, seconds, sql_error};
use super::SqliteCatalog;
use crate::domain::version::VersionRecord;
use crate::domain::Timestamp;
use crate::ports::{StoreError, SweepCatalog};

fn drop_marked_in(conn: &mut Connection, limit: usize, at: i64) -> Result<usize, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_error)?;
    let marks: Vec<(String, String, String, u64)> = {
        let mut stmt = tx
            .prepare_cached("SELECT org, name, incarnation, below FROM version_marks LIMIT ?1")
            .map_err(sql_error)?;
        let rows = stmt
            .query_map(params![limit as i64], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .map_err(sql_error)?;
        rows.collect::<Result<_, _>>().map_err(sql_error)?
    };
    let mut dropped = 0;
    for (org, name, incarnation, below) in marks {
        let doomed: Vec<(u64, String)> = {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT version, record FROM versions
                     WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND version < ?4
                     ORDER BY version LIMIT ?5",
                )
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(
                    params![org, name, incarnation, below, (limit - dropped) as i64],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(sql_error)?;
            rows.collect::<Result<_, _>>().map_err(sql_error)?
        };
        for (version, text) in &doomed {
            let record: VersionRecord = from_json(text)?;
            if record.inline {
                tx.execute(
                    "DELETE FROM contents
                     WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND version = ?4",
                    params![org, name, incarnation, version],
                )
                .map_err(sql_error)?;
            } else {
                tx.execute(
                    "INSERT OR IGNORE INTO doomed_blobs (blob, since) VALUES (?1, ?2)",
                    params![record.blob, at],
                )
                .map_err(sql_error)?;
            }
            tx.execute(
                "DELETE FROM versions WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND version = ?4",
                params![org, name, incarnation, version],
            )
            .map_err(sql_error)?;
        }
        dropped += doomed.len();
        if dropped == limit {
            break;
        }
        tx.execute(
            "DELETE FROM version_marks WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND below = ?4",
            params![org, name, incarnation, below],
        )
        .map_err(sql_error)?;
    }
    tx.commit().map_err(sql_error)?;
    Ok(dropped)
}

fn blobs_since(
    conn: &Connection,
    table: &'static str,
    before: i64,
    limit: usize,
) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT blob FROM {table} WHERE since < ?1 LIMIT ?2"
        ))
        .map_err(sql_error)?;
    let rows = stmt
        .query_map(params![before, limit as i64], |r| r.get::<_, String>(0))
        .map_err(sql_error)?;
    rows.collect::<Result<_, _>>().map_err(sql_error)
}

#[async_trait]
impl SweepCatalog for SqliteCatalog {
    async fn drop_marked_versions(&self, limit: usize, at: Timestamp) -> Result<usize, StoreError> {
        let at = seconds(at);
        self.with(move |conn| drop_marked_in(conn, limit, at)).await
    }

    async fn deleted_due(
        &self,
        deleted_before: Timestamp,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let before = seconds(deleted_before);
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT org, id FROM deleted_states WHERE deleted_at <= ?1
                     ORDER BY deleted_at LIMIT ?2",
                )
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(params![before, limit as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .map_err(sql_error)?;
            rows.collect::<Result<_, _>>().map_err(sql_error)
        })
        .await
    }

    async fn doomed_blobs(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let before = seconds(before);
        self.with(move |conn| blobs_since(conn, "doomed_blobs", before, limit))
            .await
    }

    async fn stale_pending_blobs(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let before = seconds(before);
        self.with(move |conn| blobs_since(conn, "pending_blobs", before, limit))
            .await
    }

    async fn drop_expired_tokens(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<usize, StoreError> {
        let before = seconds(before);
        self.with(move |conn| {
            let tokens = conn
                .execute(
                    "DELETE FROM tokens WHERE rowid IN
                     (SELECT rowid FROM tokens WHERE expires IS NOT NULL AND expires < ?1 LIMIT ?2)",
                    params![before, limit as i64],
                )
                .map_err(sql_error)?;
            // The marks go uncounted: the pass reports tokens.
            conn.execute(
                "DELETE FROM exchanged_tokens WHERE key IN
                 (SELECT key FROM exchanged_tokens WHERE until < ?1 LIMIT ?2)",
                params![before, limit as i64],
            )
            .map_err(sql_error)?;
            Ok(tokens)
        })
        .await
    }

    async fn ended_runs(&self, limit: usize) -> Result<Vec<String>, StoreError> {
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached("SELECT run FROM ended_runs ORDER BY since LIMIT ?1")
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(params![limit as i64], |r| r.get::<_, String>(0))
                .map_err(sql_error)?;
            rows.collect::<Result<_, _>>().map_err(sql_error)
        })
        .await
    }

    async fn settle_ended_run(&self, run: &str) -> Result<(), StoreError> {
        let run = run.to_owned();
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            // `since` is the run's end in both lists.
            tx.execute(
                "INSERT OR IGNORE INTO settled_runs (run, since)
                 SELECT run, since FROM ended_runs WHERE run = ?1",
                params![run],
            )
            .map_err(sql_error)?;
            tx.execute("DELETE FROM ended_runs WHERE run = ?1", params![run])
                .map_err(sql_error)?;
            tx.commit().map_err(sql_error)
        })
        .await
    }

    async fn settled_runs(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let before = seconds(before);
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT run FROM settled_runs WHERE since < ?1 ORDER BY since LIMIT ?2",
                )
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(params![before, limit as i64], |r| r.get::<_, String>(0))
                .map_err(sql_error)?;
            rows.collect::<Result<_, _>>().map_err(sql_error)
        })
        .await
    }

    async fn prune_run(&self, run: &str, limit: usize) -> Result<(usize, bool), StoreError> {
        let run = run.to_owned();
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            let deleted = tx
                .execute(
                    "DELETE FROM run_items WHERE (run, token_id, org, state) IN
                     (SELECT run, token_id, org, state FROM run_items WHERE run = ?1 LIMIT ?2)",
                    params![run, limit as i64],
                )
                .map_err(sql_error)?;
            let left: bool = tx
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM run_items WHERE run = ?1)",
                    params![run],
                    |r| r.get(0),
                )
                .map_err(sql_error)?;
            if !left {
                tx.execute("DELETE FROM settled_runs WHERE run = ?1", params![run])
                    .map_err(sql_error)?;
            }
            tx.commit().map_err(sql_error)?;
            Ok((deleted, !left))
        })
        .await
    }

    async fn forget_blobs(&self, blobs: &[String]) -> Result<(), StoreError> {
        let blobs = blobs.to_vec();
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            for blob in &blobs {
                tx.execute("DELETE FROM doomed_blobs WHERE blob = ?1", params![blob])
                    .map_err(sql_error)?;
                tx.execute("DELETE FROM pending_blobs WHERE blob = ?1", params![blob])
                    .map_err(sql_error)?;
            }
            tx.commit().map_err(sql_error)
        })
        .await
    }
}
