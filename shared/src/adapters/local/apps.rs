//! App states and their archives in SQLite. A change is one `BEGIN IMMEDIATE` transaction
//! that checks the app state's revision first, then stores its record, the archive it seals
//! or deletes, and its blob bookkeeping and audit, as a state's commit does.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::catalog::{insert_audit, SqliteCatalog};
use super::tables::{from_json, seconds, sql_error, to_json};
use crate::domain::app::{AppRecord, ArchiveRecord};
use crate::ports::{AppCatalog, AppCommit, StoreError};

fn commit_in(conn: &mut Connection, commit: AppCommit) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_error)?;
    let (org, name) = (&commit.app.org, &commit.app.name);
    let current: u64 = tx
        .query_row(
            "SELECT revision FROM apps WHERE org = ?1 AND name = ?2",
            params![org, name],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql_error)?
        .unwrap_or(0);
    if current != commit.expected_revision {
        return Err(StoreError::Conflict);
    }
    tx.execute(
        "INSERT OR REPLACE INTO apps (org, name, revision, record) VALUES (?1, ?2, ?3, ?4)",
        params![org, name, commit.app.revision, to_json(&commit.app)],
    )
    .map_err(sql_error)?;
    if let Some(archive) = &commit.sealed {
        tx.execute(
            "INSERT OR REPLACE INTO archives (org, name, commit_id, record) VALUES (?1, ?2, ?3, ?4)",
            params![org, name, archive.commit_id, to_json(archive)],
        )
        .map_err(sql_error)?;
    }
    if let Some(commit_id) = &commit.deleted {
        tx.execute(
            "DELETE FROM archives WHERE org = ?1 AND name = ?2 AND commit_id = ?3",
            params![org, name, commit_id],
        )
        .map_err(sql_error)?;
    }
    for blob in &commit.committed_blobs {
        tx.execute("DELETE FROM pending_blobs WHERE blob = ?1", params![blob])
            .map_err(sql_error)?;
    }
    for blob in &commit.doomed_blobs {
        tx.execute(
            "INSERT OR IGNORE INTO doomed_blobs (blob, since) VALUES (?1, ?2)",
            params![blob, seconds(commit.at)],
        )
        .map_err(sql_error)?;
    }
    for entry in &commit.audit {
        insert_audit(&tx, entry)?;
    }
    tx.commit().map_err(sql_error)
}

/// The records one query finds, decoded.
fn records<T: serde::de::DeserializeOwned>(
    conn: &Connection,
    sql: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = conn.prepare_cached(sql).map_err(sql_error)?;
    let rows = stmt
        .query_map(args, |row| row.get::<_, String>(0))
        .map_err(sql_error)?;
    rows.map(|r| from_json(&r.map_err(sql_error)?)).collect()
}

#[async_trait]
impl AppCatalog for SqliteCatalog {
    async fn app(&self, org: &str, name: &str) -> Result<Option<AppRecord>, StoreError> {
        let (org, name) = (org.to_owned(), name.to_owned());
        self.with(move |conn| {
            let found: Vec<AppRecord> = records(
                conn,
                "SELECT record FROM apps WHERE org = ?1 AND name = ?2",
                params![org, name],
            )?;
            Ok(found.into_iter().next())
        })
        .await
    }

    async fn apps(
        &self,
        org: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AppRecord>, StoreError> {
        let (org, after) = (org.to_owned(), after.unwrap_or("").to_owned());
        self.with(move |conn| {
            records(
                conn,
                "SELECT record FROM apps WHERE org = ?1 AND name > ?2 ORDER BY name LIMIT ?3",
                params![org, after, limit as i64],
            )
        })
        .await
    }

    async fn archive(
        &self,
        org: &str,
        name: &str,
        commit_id: &str,
    ) -> Result<Option<ArchiveRecord>, StoreError> {
        let key = (org.to_owned(), name.to_owned(), commit_id.to_owned());
        self.with(move |conn| {
            let found: Vec<ArchiveRecord> = records(
                conn,
                "SELECT record FROM archives WHERE org = ?1 AND name = ?2 AND commit_id = ?3",
                params![key.0, key.1, key.2],
            )?;
            Ok(found.into_iter().next())
        })
        .await
    }

    async fn archives(
        &self,
        org: &str,
        name: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ArchiveRecord>, StoreError> {
        let key = (org.to_owned(), name.to_owned(), before.map(str::to_owned));
        self.with(move |conn| {
            records(
                conn,
                "SELECT record FROM archives WHERE org = ?1 AND name = ?2
                   AND (?3 IS NULL OR commit_id < ?3)
                 ORDER BY commit_id DESC LIMIT ?4",
                params![key.0, key.1, key.2, limit as i64],
            )
        })
        .await
    }

    async fn archive_after(
        &self,
        org: &str,
        name: &str,
        after: &str,
    ) -> Result<Option<ArchiveRecord>, StoreError> {
        let key = (org.to_owned(), name.to_owned(), after.to_owned());
        self.with(move |conn| {
            let found: Vec<ArchiveRecord> = records(
                conn,
                "SELECT record FROM archives WHERE org = ?1 AND name = ?2 AND commit_id > ?3
                 ORDER BY commit_id LIMIT 1",
                params![key.0, key.1, key.2],
            )?;
            Ok(found.into_iter().next())
        })
        .await
    }

    async fn commit_app(&self, commit: AppCommit) -> Result<(), StoreError> {
        self.with(move |conn| commit_in(conn, commit)).await
    }
}
