//! Deleted states in SQLite: a row each in `deleted_states`, kept by a delete's commit and
//! taken by a restore's (in `state`), listed, purged and stored as a migration copies them
//! here.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, TransactionBehavior};

use super::catalog::{insert_audit, SqliteCatalog};
use super::tables::{from_json, seconds, sql_error, to_json};
use crate::domain::deleted::DeletedState;
use crate::domain::version::VersionRecord;
use crate::ports::{AuditEntry, DeletedCatalog, StoreError, VersionMark};

#[async_trait]
impl DeletedCatalog for SqliteCatalog {
    async fn deleted_states(
        &self,
        org: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeletedState>, StoreError> {
        let (org, after) = (org.to_owned(), after.unwrap_or("").to_owned());
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT record FROM deleted_states WHERE org = ?1 AND id > ?2
                     ORDER BY id LIMIT ?3",
                )
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(params![org, after, limit as i64], |row| {
                    row.get::<_, String>(0)
                })
                .map_err(sql_error)?;
            rows.map(|r| from_json(&r.map_err(sql_error)?)).collect()
        })
        .await
    }

    async fn deleted_state(&self, org: &str, id: &str) -> Result<Option<DeletedState>, StoreError> {
        let (org, id) = (org.to_owned(), id.to_owned());
        self.read(move |conn| {
            let text: Option<String> = conn
                .query_row(
                    "SELECT record FROM deleted_states WHERE org = ?1 AND id = ?2",
                    params![org, id],
                    |row| row.get(0),
                )
                .optional()
                .map_err(sql_error)?;
            text.as_deref().map(from_json).transpose()
        })
        .await
    }

    async fn purge_deleted(
        &self,
        deleted: &DeletedState,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let (deleted, audit) = (deleted.clone(), audit.clone());
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            let purged = tx
                .execute(
                    "DELETE FROM deleted_states WHERE org = ?1 AND id = ?2 AND revision = ?3",
                    params![deleted.org, deleted.id, deleted.revision],
                )
                .map_err(sql_error)?;
            if purged == 0 {
                return Err(StoreError::Conflict);
            }
            let record = &deleted.record;
            tx.execute(
                "INSERT INTO version_marks (org, name, incarnation, below) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (org, name, incarnation) DO UPDATE SET below = excluded.below",
                params![
                    record.org,
                    record.home(),
                    record.incarnation,
                    VersionMark::ALL
                ],
            )
            .map_err(sql_error)?;
            insert_audit(&tx, &audit)?;
            tx.commit().map_err(sql_error)
        })
        .await
    }

    async fn put_deleted_version(
        &self,
        deleted: &DeletedState,
        version: &VersionRecord,
        sealed: Option<&[u8]>,
    ) -> Result<(), StoreError> {
        let record = &deleted.record;
        let (org, home, incarnation) = (
            record.org.clone(),
            record.home().to_owned(),
            record.incarnation.clone(),
        );
        let (version, sealed) = (version.clone(), sealed.map(<[u8]>::to_vec));
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            let key = params![org, home, incarnation, version.version];
            tx.execute(
                "INSERT OR REPLACE INTO versions (org, name, incarnation, version, record)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![org, home, incarnation, version.version, to_json(&version)],
            )
            .map_err(sql_error)?;
            match &sealed {
                Some(sealed) => tx.execute(
                    "INSERT OR REPLACE INTO contents (org, name, incarnation, version, sealed)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![org, home, incarnation, version.version, sealed.as_slice()],
                ),
                None => tx.execute(
                    "DELETE FROM contents
                     WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND version = ?4",
                    key,
                ),
            }
            .map_err(sql_error)?;
            if !version.inline {
                tx.execute(
                    "DELETE FROM pending_blobs WHERE blob = ?1",
                    params![version.blob],
                )
                .map_err(sql_error)?;
            }
            tx.commit().map_err(sql_error)
        })
        .await
    }

    async fn put_deleted(
        &self,
        deleted: &DeletedState,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let (deleted, audit) = (deleted.clone(), audit.clone());
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            let stored = tx
                .execute(
                    "INSERT OR IGNORE INTO deleted_states (org, id, deleted_at, revision, record)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        deleted.org,
                        deleted.id,
                        seconds(deleted.deleted_at),
                        deleted.revision,
                        to_json(&deleted)
                    ],
                )
                .map_err(sql_error)?;
            if stored == 0 {
                return Err(StoreError::Conflict);
            }
            insert_audit(&tx, &audit)?;
            tx.commit().map_err(sql_error)
        })
        .await
    }
}
