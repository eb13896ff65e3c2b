//! State records, versions and audit in SQLite. A commit is one `BEGIN IMMEDIATE`
//! transaction that checks the state record's revision first, so two processes on one folder
//! never both win a compare-and-swap.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::catalog::{insert_audit, SqliteCatalog};
use super::inventory::change_inventory;
use super::tables::{from_json, seconds, sql_error, to_json};
use crate::domain::deleted::DeletedState;
use crate::domain::record::StateRecord;
use crate::domain::version::VersionRecord;
use crate::domain::Timestamp;
use crate::ports::{
    AuditEntry, AuditQuery, AuditRecord, Commit, DeletedChange, OrgAndState, OrgRecord, RunRecord,
    SlotChange, SlotOwner, StateCatalog, StepCheck, StoreError, TokenRecord,
};

impl SqliteCatalog {
    /// The org's settings and one state's record, and with `with_content` the latest
    /// version's inline content: one statement, a point read, so all of it comes from one
    /// snapshot of the catalog (the content found is the latest version's as that record
    /// names it).
    async fn org_and_state_rows(
        &self,
        org: &str,
        name: &str,
        with_content: bool,
    ) -> Result<OrgAndState, StoreError> {
        let (org, name) = (org.to_owned(), name.to_owned());
        self.read(move |conn| {
            let sql = if with_content {
                "SELECT (SELECT record FROM orgs WHERE org = ?1), s.record, c.sealed,
                   (SELECT json_group_array(json(record)) FROM protected_states WHERE org = ?1)
                 FROM (SELECT 1) LEFT JOIN states s ON s.org = ?1 AND s.name = ?2
                 LEFT JOIN contents c ON c.org = s.org
                   AND c.name = coalesce(json_extract(s.record, '$.home'), s.name)
                   AND c.incarnation = json_extract(s.record, '$.incarnation')
                   AND c.version = json_extract(s.record, '$.latest.version')"
            } else {
                "SELECT (SELECT record FROM orgs WHERE org = ?1), s.record, NULL,
                   (SELECT json_group_array(json(record)) FROM protected_states WHERE org = ?1)
                 FROM (SELECT 1) LEFT JOIN states s ON s.org = ?1 AND s.name = ?2"
            };
            // The org's protected-state rules come in the same statement as its settings, so
            // checking them costs the backend no read.
            type Row = (
                Option<String>,
                Option<String>,
                Option<Vec<u8>>,
                Option<String>,
            );
            let (settings, state, content, rules): Row = conn
                .prepare_cached(sql)
                .and_then(|mut stmt| {
                    stmt.query_row(params![org, name], |row| {
                        Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                    })
                })
                .map_err(sql_error)?;
            let state = state
                .map(|text| Ok::<_, StoreError>((from_json::<StateRecord>(&text)?, content)))
                .transpose()?;
            Ok((super::protection::settings(settings, rules)?, state))
        })
        .await
    }
}

/// [`StateCatalog::replace_key_slot`] in one transaction: the version's record and its
/// owner's are read and written under SQLite's one writer, so the slot compared is the one
/// replaced.
fn replace_key_slot_in(conn: &mut Connection, change: &SlotChange<'_>) -> Result<(), StoreError> {
    // Versions are stored as SQLite integers: a larger number names no version.
    let version = i64::try_from(change.version).map_err(|_| StoreError::Conflict)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_error)?;
    let stored: Option<String> = tx
        .query_row(
            "SELECT record FROM versions
             WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND version = ?4",
            params![change.org, change.home, change.incarnation, version],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql_error)?;
    let mut record: VersionRecord = from_json(&stored.ok_or(StoreError::Conflict)?)?;
    if record.slot() != *change.old {
        return Err(StoreError::Conflict);
    }
    record.set_slot(change.new);
    match change.owner {
        SlotOwner::State(name) => {
            let state: Option<String> = tx
                .query_row(
                    "SELECT record FROM states WHERE org = ?1 AND name = ?2",
                    params![change.org, name],
                    |row| row.get(0),
                )
                .optional()
                .map_err(sql_error)?;
            let state: StateRecord = from_json(&state.ok_or(StoreError::Conflict)?)?;
            if state.incarnation != change.incarnation {
                return Err(StoreError::Conflict);
            }
            let state = state.with_key_slot(record.version, change.new);
            tx.execute(
                "UPDATE states SET revision = ?3, record = ?4 WHERE org = ?1 AND name = ?2",
                params![change.org, name, state.revision, to_json(&state)],
            )
            .map_err(sql_error)?;
        }
        SlotOwner::Deleted(id) => {
            let deleted: Option<String> = tx
                .query_row(
                    "SELECT record FROM deleted_states WHERE org = ?1 AND id = ?2",
                    params![change.org, id],
                    |row| row.get(0),
                )
                .optional()
                .map_err(sql_error)?;
            let mut deleted: DeletedState = from_json(&deleted.ok_or(StoreError::Conflict)?)?;
            if deleted.record.incarnation != change.incarnation {
                return Err(StoreError::Conflict);
            }
            deleted.revision += 1;
            tx.execute(
                "UPDATE deleted_states SET revision = ?3, record = ?4 WHERE org = ?1 AND id = ?2",
                params![change.org, id, deleted.revision, to_json(&deleted)],
            )
            .map_err(sql_error)?;
        }
    }
    tx.execute(
        "UPDATE versions SET record = ?5
         WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND version = ?4",
        params![
            change.org,
            change.home,
            change.incarnation,
            version,
            to_json(&record)
        ],
    )
    .map_err(sql_error)?;
    tx.commit().map_err(sql_error)
}

/// Keeps or takes a deleted state's record in a commit's transaction.
fn change_deleted(tx: &Connection, org: &str, change: &DeletedChange) -> Result<(), StoreError> {
    match change {
        DeletedChange::Keep(deleted) => {
            tx.execute(
                "INSERT INTO deleted_states (org, id, deleted_at, revision, record)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    org,
                    deleted.id,
                    seconds(deleted.deleted_at),
                    deleted.revision,
                    to_json(&**deleted)
                ],
            )
            .map_err(sql_error)?;
        }
        DeletedChange::Take { id, revision } => {
            let taken = tx
                .execute(
                    "DELETE FROM deleted_states WHERE org = ?1 AND id = ?2 AND revision = ?3",
                    params![org, id, revision],
                )
                .map_err(sql_error)?;
            if taken == 0 {
                return Err(StoreError::Conflict);
            }
        }
    }
    Ok(())
}

/// Whether a step's lock may commit: its token unrevoked, its run not ended too early (read
/// inside the commit's transaction, which holds the write lock).
fn step_stands(tx: &Connection, check: &StepCheck) -> Result<bool, StoreError> {
    let token: Option<String> = tx
        .query_row(
            "SELECT record FROM tokens WHERE hash = ?1",
            params![check.token_hash],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql_error)?;
    let Some(token) = token else {
        return Ok(false);
    };
    if from_json::<TokenRecord>(&token)?.revoked {
        return Ok(false);
    }
    let run: Option<String> = tx
        .query_row(
            "SELECT record FROM runs WHERE run = ?1",
            params![check.run],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql_error)?;
    let ended = run
        .map(|r| from_json::<RunRecord>(&r))
        .transpose()?
        .and_then(|r| r.ended_at);
    Ok(ended.is_none_or(|at| at >= check.ended_not_before))
}

fn commit_in(conn: &mut Connection, commit: Commit) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_error)?;
    let current: u64 = tx
        .query_row(
            "SELECT revision FROM states WHERE org = ?1 AND name = ?2",
            params![commit.org, commit.name],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql_error)?
        .unwrap_or(0);
    if current != commit.expected_revision {
        return Err(StoreError::Conflict);
    }
    if let Some(check) = &commit.step {
        if !step_stands(&tx, check)? {
            return Err(StoreError::Conflict);
        }
    }
    if let Some(change) = &commit.deleted {
        change_deleted(&tx, &commit.org, change)?;
    }
    match &commit.state {
        Some(record) => {
            tx.execute(
                "INSERT OR REPLACE INTO states (org, name, revision, record) VALUES (?1, ?2, ?3, ?4)",
                params![commit.org, commit.name, record.revision, to_json(record)],
            )
            .map_err(sql_error)?;
            for v in &commit.versions {
                let key = params![commit.org, commit.home, record.incarnation, v.version];
                tx.execute(
                    "INSERT OR REPLACE INTO versions (org, name, incarnation, version, record)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        commit.org,
                        commit.home,
                        record.incarnation,
                        v.version,
                        to_json(v)
                    ],
                )
                .map_err(sql_error)?;
                if let Some(sealed) = commit.content_of(v.version) {
                    tx.execute(
                        "INSERT OR REPLACE INTO contents (org, name, incarnation, version, sealed)
                         VALUES (?1, ?2, ?3, ?4, ?5)",
                        params![
                            commit.org,
                            commit.home,
                            record.incarnation,
                            v.version,
                            sealed.as_slice()
                        ],
                    )
                    .map_err(sql_error)?;
                } else if !v.inline {
                    // A version whose content moved to a blob (a replacing save too large to
                    // be inline) leaves none behind.
                    tx.execute(
                        "DELETE FROM contents
                         WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND version = ?4",
                        key,
                    )
                    .map_err(sql_error)?;
                }
            }
        }
        None => {
            tx.execute(
                "DELETE FROM states WHERE org = ?1 AND name = ?2",
                params![commit.org, commit.name],
            )
            .map_err(sql_error)?;
        }
    }
    if let Some(change) = &commit.inventory {
        change_inventory(&tx, &commit.org, &commit.name, change)?;
    }
    for blob in &commit.committed_blobs {
        tx.execute("DELETE FROM pending_blobs WHERE blob = ?1", params![blob])
            .map_err(sql_error)?;
    }
    let now = seconds(commit.at);
    for blob in &commit.doomed_blobs {
        tx.execute(
            "INSERT OR IGNORE INTO doomed_blobs (blob, since) VALUES (?1, ?2)",
            params![blob, now],
        )
        .map_err(sql_error)?;
    }
    for item in &commit.run_items {
        tx.execute(
            "INSERT OR IGNORE INTO run_items (run, token_id, org, state) VALUES (?1, ?2, ?3, ?4)",
            params![item.run, item.token_id, item.org, item.state],
        )
        .map_err(sql_error)?;
    }
    for mark in &commit.version_marks {
        tx.execute(
            "INSERT INTO version_marks (org, name, incarnation, below) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (org, name, incarnation) DO UPDATE SET below = max(below, excluded.below)",
            params![commit.org, commit.home, mark.incarnation, mark.below],
        )
        .map_err(sql_error)?;
    }
    for entry in &commit.audit {
        insert_audit(&tx, entry)?;
    }
    tx.commit().map_err(sql_error)
}

#[async_trait]
impl StateCatalog for SqliteCatalog {
    async fn state(&self, org: &str, name: &str) -> Result<Option<StateRecord>, StoreError> {
        let (org, name) = (org.to_owned(), name.to_owned());
        self.read(move |conn| {
            let text: Option<String> = conn
                .prepare_cached("SELECT record FROM states WHERE org = ?1 AND name = ?2")
                .and_then(|mut stmt| stmt.query_row(params![org, name], |row| row.get(0)))
                .optional()
                .map_err(sql_error)?;
            text.as_deref().map(from_json).transpose()
        })
        .await
    }

    async fn org_and_state(
        &self,
        org: &str,
        name: &str,
    ) -> Result<(Option<OrgRecord>, Option<StateRecord>), StoreError> {
        let (org, state) = self.org_and_state_rows(org, name, false).await?;
        Ok((org, state.map(|(state, _)| state)))
    }

    async fn org_and_state_with_content(
        &self,
        org: &str,
        name: &str,
    ) -> Result<OrgAndState, StoreError> {
        self.org_and_state_rows(org, name, true).await
    }

    async fn states(
        &self,
        org: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<StateRecord>, StoreError> {
        let (org, after) = (org.to_owned(), after.unwrap_or("").to_owned());
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT record FROM states WHERE org = ?1 AND name > ?2 ORDER BY name LIMIT ?3",
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

    async fn version(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
        version: u64,
    ) -> Result<Option<VersionRecord>, StoreError> {
        // Versions are stored as SQLite integers, which stop at 2^63-1: a larger number
        // (only a request can carry one) names no version.
        let Ok(version) = i64::try_from(version) else {
            return Ok(None);
        };
        let key = (org.to_owned(), name.to_owned(), incarnation.to_owned());
        self.read(move |conn| {
            let text: Option<String> = conn
                .query_row(
                    "SELECT record FROM versions
                     WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND version = ?4",
                    params![key.0, key.1, key.2, version],
                    |row| row.get(0),
                )
                .optional()
                .map_err(sql_error)?;
            text.as_deref().map(from_json).transpose()
        })
        .await
    }

    async fn content(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
        version: u64,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        // As for `version`: a number past SQLite's integers names nothing.
        let Ok(version) = i64::try_from(version) else {
            return Ok(None);
        };
        let key = (org.to_owned(), name.to_owned(), incarnation.to_owned());
        self.read(move |conn| {
            conn.query_row(
                "SELECT sealed FROM contents
                 WHERE org = ?1 AND name = ?2 AND incarnation = ?3 AND version = ?4",
                params![key.0, key.1, key.2, version],
                |row| row.get(0),
            )
            .optional()
            .map_err(sql_error)
        })
        .await
    }

    async fn versions(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
    ) -> Result<Vec<VersionRecord>, StoreError> {
        let key = (org.to_owned(), name.to_owned(), incarnation.to_owned());
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT record FROM versions WHERE org = ?1 AND name = ?2 AND incarnation = ?3
                     ORDER BY version DESC",
                )
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(params![key.0, key.1, key.2], |row| row.get::<_, String>(0))
                .map_err(sql_error)?;
            rows.map(|r| from_json(&r.map_err(sql_error)?)).collect()
        })
        .await
    }

    async fn add_pending_blob(&self, blob: &str, at: Timestamp) -> Result<(), StoreError> {
        let (blob, since) = (blob.to_owned(), seconds(at));
        self.with(move |conn| {
            conn.execute(
                "INSERT OR IGNORE INTO pending_blobs (blob, since) VALUES (?1, ?2)",
                params![blob, since],
            )
            .map_err(sql_error)?;
            Ok(())
        })
        .await
    }

    async fn commit(&self, commit: Commit) -> Result<(), StoreError> {
        self.with(move |conn| commit_in(conn, commit)).await
    }

    async fn replace_key_slot(&self, change: &SlotChange<'_>) -> Result<(), StoreError> {
        let (org, home, incarnation) = (
            change.org.to_owned(),
            change.home.to_owned(),
            change.incarnation.to_owned(),
        );
        // The owner's name or id, owned for the catalog's thread; its kind is kept by
        // `rebuild`.
        let (owner, rebuild): (String, fn(&str) -> SlotOwner<'_>) = match change.owner {
            SlotOwner::State(name) => (name.to_owned(), |n| SlotOwner::State(n)),
            SlotOwner::Deleted(id) => (id.to_owned(), |id| SlotOwner::Deleted(id)),
        };
        let (version, old, new) = (change.version, change.old.clone(), change.new.clone());
        self.with(move |conn| {
            let owner = rebuild(&owner);
            let change = SlotChange {
                org: &org,
                owner,
                home: &home,
                incarnation: &incarnation,
                version,
                old: &old,
                new: &new,
            };
            replace_key_slot_in(conn, &change)
        })
        .await
    }

    async fn append_audit(&self, entry: &AuditEntry) -> Result<(), StoreError> {
        let entry = entry.clone();
        self.with(move |conn| insert_audit(conn, &entry)).await
    }

    async fn audit(&self, org: &str, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        let (org, query) = (org.to_owned(), query.clone());
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, entry FROM audit
                     WHERE org = ?1 AND (?2 IS NULL OR state = ?2) AND (?3 IS NULL OR action = ?3)
                       AND (?4 IS NULL OR id < ?4)
                     ORDER BY id DESC LIMIT ?5",
                )
                .map_err(sql_error)?;
            let rows = stmt
                .query_map(
                    params![
                        org,
                        query.state,
                        query.action,
                        // Ids are SQLite integers, which stop at 2^63-1: a cursor past that
                        // is older than nothing, so it reads from the newest entry.
                        query.before.map(|b| i64::try_from(b).unwrap_or(i64::MAX)),
                        query.limit as i64
                    ],
                    |row| Ok((row.get::<_, u64>(0)?, row.get::<_, String>(1)?)),
                )
                .map_err(sql_error)?;
            rows.map(|r| {
                let (seq, text) = r.map_err(sql_error)?;
                Ok(AuditRecord {
                    seq,
                    entry: from_json(&text)?,
                })
            })
            .collect()
        })
        .await
    }
}
