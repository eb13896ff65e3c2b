//! The local catalog's [`LockCensus`]: the live locks and the holds of its states, read in
//! one statement on the reader connection. It reads every state's record (SQLite's JSON
//! functions pick out the lock and the hold), a scan that takes milliseconds for thousands
//! of states and runs once per scrape, never on a request.

use async_trait::async_trait;

use super::tables::{from_json, sql_error};
use super::SqliteCatalog;
use crate::domain::lock::Lock;
use crate::domain::Timestamp;
use crate::ports::{Census, LockCensus, StoreError};

#[async_trait]
impl LockCensus for SqliteCatalog {
    async fn census(&self, now: Timestamp) -> Result<Census, StoreError> {
        self.read(move |conn| {
            let mut statement = conn
                .prepare(
                    "SELECT json_extract(record, '$.lock'), json_extract(record, '$.hold') IS NOT NULL
                     FROM states
                     WHERE json_extract(record, '$.deleted_at') IS NULL
                       AND (json_extract(record, '$.lock') IS NOT NULL
                            OR json_extract(record, '$.hold') IS NOT NULL)",
                )
                .map_err(sql_error)?;
            let rows = statement
                .query_map([], |row| {
                    Ok((row.get::<_, Option<String>>(0)?, row.get::<_, bool>(1)?))
                })
                .map_err(sql_error)?;
            let mut census = Census::default();
            for row in rows {
                let (lock, held) = row.map_err(sql_error)?;
                census.holds += u64::from(held);
                let Some(lock) = lock else { continue };
                let lock: Lock = from_json(&lock)?;
                if lock.is_live(now) {
                    census.locks += 1;
                    census.oldest_lock_since = Some(
                        census
                            .oldest_lock_since
                            .map_or(lock.since, |oldest| oldest.min(lock.since)),
                    );
                }
            }
            Ok(census)
        })
        .await
    }
}
