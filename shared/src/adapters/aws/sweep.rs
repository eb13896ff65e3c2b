//! What the sweeper reads and tidies in DynamoDB: only the `sweep` index's sparse partitions
//! (marks, deleted states by purge date, pending and doomed blobs, expiring tokens, ended and
//! settled runs), never a scan.
//! The index is eventually consistent, so everything found there is checked against the
//! item itself before it is acted on, and every action is safe to repeat.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Delete, TransactWriteItem};

use super::describe_failure;
use super::items::*;
use super::DynamoCatalog;
use crate::domain::deleted::DeletedState;
use crate::domain::version::VersionRecord;
use crate::domain::Timestamp;
use crate::ports::{StoreError, SweepCatalog, TokenRecord};

/// Versions dropped per transaction: each is two items (the version, its doomed blob).
const VERSIONS_PER_TRANSACTION: usize = 25;

impl DynamoCatalog {
    /// Items of one sweep partition sorted below `below` (all of them with `None`), oldest
    /// first, at most `limit`.
    async fn sweep_items(
        &self,
        kind: &str,
        below: Option<String>,
        limit: usize,
    ) -> Result<Vec<Item>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut query = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(SWEEP_INDEX)
            .expression_attribute_names("#pk", SWEEP_PK)
            .expression_attribute_values(":kind", s(kind))
            .limit(i32::try_from(limit).unwrap_or(i32::MAX));
        query = match below {
            Some(below) => query
                .key_condition_expression("#pk = :kind AND #sk < :below")
                .expression_attribute_names("#sk", SWEEP_SK)
                .expression_attribute_values(":below", s(below)),
            None => query.key_condition_expression("#pk = :kind"),
        };
        self.query_all(query, Some(limit)).await
    }

    /// Blobs of a sweep partition older than `before` whose record still exists (the index
    /// may lag behind a commit that just removed a pending record).
    async fn blobs_older_than(
        &self,
        kind: &str,
        pk_of: fn(&str) -> String,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let mut blobs = Vec::new();
        for item in self
            .sweep_items(kind, Some(age_below(before)), limit)
            .await?
        {
            let blob = string(&item, "blob")?.to_owned();
            if self.get(key(pk_of(&blob), ONLY)).await?.is_some() {
                blobs.push(blob);
            }
        }
        Ok(blobs)
    }

    /// Drops up to `limit` versions below one mark; returns how many, and whether the mark
    /// has nothing left below it.
    async fn drop_below_mark(
        &self,
        mark: &Item,
        limit: usize,
        at: Timestamp,
    ) -> Result<(usize, bool), StoreError> {
        let (org, name, incarnation) = (
            string(mark, "org")?,
            string(mark, "name")?,
            string(mark, "incarnation")?,
        );
        let below = number(mark, "below")?;
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND sk < :below")
            .expression_attribute_values(":pk", s(versions_pk(org, name, incarnation)))
            .expression_attribute_values(":below", s(number_sk(below)))
            .projection_expression("#rec")
            .expression_attribute_names("#rec", REC)
            .consistent_read(true)
            .limit(i32::try_from(limit + 1).unwrap_or(i32::MAX));
        let found = self.query_all(query, Some(limit + 1)).await?;
        let spent = found.len() <= limit;
        let doomed: Vec<VersionRecord> = found
            .iter()
            .take(limit)
            .map(record)
            .collect::<Result<_, _>>()?;
        for chunk in doomed.chunks(VERSIONS_PER_TRANSACTION) {
            let mut items = Vec::new();
            for version in chunk {
                let delete = Delete::builder()
                    .table_name(&self.table)
                    .set_key(Some(key(
                        versions_pk(org, name, incarnation),
                        number_sk(version.version),
                    )))
                    .condition_expression("attribute_exists(pk)")
                    .build()
                    .expect("table and key are set");
                items.push(TransactWriteItem::builder().delete(delete).build());
                // Inline content goes with its item; only a blob is left to delete.
                if !version.inline {
                    items.push(self.put(doomed_item(&version.blob, at), None));
                }
            }
            match self.transact(items, None).await {
                // Another sweeper dropped some of these first: the next pass sees the rest.
                Err(StoreError::Conflict) => return Ok((0, false)),
                other => other?,
            }
        }
        Ok((doomed.len(), spent))
    }
}

#[async_trait]
impl SweepCatalog for DynamoCatalog {
    async fn drop_marked_versions(&self, limit: usize, at: Timestamp) -> Result<usize, StoreError> {
        let mut dropped = 0;
        for listed in self.sweep_items(SWEEP_MARK, None, limit.max(1)).await? {
            if dropped >= limit {
                break;
            }
            let Some(mark) = self.get(key(string(&listed, PK)?.to_owned(), ONLY)).await? else {
                continue;
            };
            let (count, spent) = self.drop_below_mark(&mark, limit - dropped, at).await?;
            dropped += count;
            if spent {
                // Only the mark as read goes: a commit that raised it meanwhile keeps it.
                let delete = Delete::builder()
                    .table_name(&self.table)
                    .set_key(Some(key(string(&mark, PK)?.to_owned(), ONLY)))
                    .condition_expression("below = :below")
                    .expression_attribute_values(":below", n(number(&mark, "below")?))
                    .build()
                    .expect("table, key and condition are set");
                match self
                    .transact(
                        vec![TransactWriteItem::builder().delete(delete).build()],
                        None,
                    )
                    .await
                {
                    Ok(()) | Err(StoreError::Conflict) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(dropped)
    }

    async fn deleted_due(
        &self,
        deleted_before: Timestamp,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        // Below the next second: every delete time in this second or before.
        let below = age_below(deleted_before + time::Duration::seconds(1));
        let mut due = Vec::new();
        for item in self.sweep_items(SWEEP_DELETED, Some(below), limit).await? {
            let deleted: DeletedState = record(&item)?;
            due.push((deleted.deleted_at, deleted.org, deleted.id));
        }
        // Those an older build keyed by purge date are few (deleted within its retention)
        // and leave as they are purged or restored: read whole, due by their delete time.
        let older = self
            .sweep_items(SWEEP_DELETED_BY_PURGE, None, limit)
            .await?;
        for item in older {
            let deleted: DeletedState = record(&item)?;
            if deleted.deleted_at <= deleted_before {
                due.push((deleted.deleted_at, deleted.org, deleted.id));
            }
        }
        due.sort();
        Ok(due
            .into_iter()
            .take(limit)
            .map(|(_, org, id)| (org, id))
            .collect())
    }

    async fn doomed_blobs(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.blobs_older_than(SWEEP_DOOMED, doomed_pk, before, limit)
            .await
    }

    async fn stale_pending_blobs(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.blobs_older_than(SWEEP_PENDING, pending_pk, before, limit)
            .await
    }

    async fn forget_blobs(&self, blobs: &[String]) -> Result<(), StoreError> {
        for chunk in blobs.chunks(50) {
            let mut items = Vec::new();
            for blob in chunk {
                items.push(self.delete(key(doomed_pk(blob), ONLY)));
                items.push(self.delete(key(pending_pk(blob), ONLY)));
            }
            self.transact(items, None).await?;
        }
        Ok(())
    }

    async fn drop_expired_tokens(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<usize, StoreError> {
        let mut dropped = 0;
        for listed in self
            .sweep_items(SWEEP_TOKEN, Some(age_below(before)), limit)
            .await?
        {
            let Some(item) = self.get(key(string(&listed, PK)?.to_owned(), ONLY)).await? else {
                continue;
            };
            let token: TokenRecord = record(&item)?;
            if token.expires_at.is_none_or(|at| at >= before) {
                continue;
            }
            let mut items = vec![self.delete(key(token_pk(&token.hash), ONLY))];
            if let Some(step) = &token.step {
                items.push(self.delete(key(
                    run_pk(&step.run),
                    format!("{RUN_TOKEN_PREFIX}{}", token.hash),
                )));
            }
            self.transact(items, None).await?;
            dropped += 1;
        }
        Ok(dropped)
    }

    async fn ended_runs(&self, limit: usize) -> Result<Vec<String>, StoreError> {
        self.sweep_items(SWEEP_ENDED_RUN, None, limit)
            .await?
            .iter()
            .map(|item| string(item, PK).map(|pk| pk.trim_start_matches("RUN#").to_owned()))
            .collect()
    }

    async fn settle_ended_run(&self, run: &str) -> Result<(), StoreError> {
        // The sort key (the end's age) stays: the settled list is sorted by the end too.
        self.move_run(run, SWEEP_ENDED_RUN, Some(SWEEP_SETTLED_RUN))
            .await
    }

    async fn settled_runs(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.sweep_items(SWEEP_SETTLED_RUN, Some(age_below(before)), limit)
            .await?
            .iter()
            .map(|item| string(item, PK).map(|pk| pk.trim_start_matches("RUN#").to_owned()))
            .collect()
    }

    async fn prune_run(&self, run: &str, limit: usize) -> Result<(usize, bool), StoreError> {
        let items = self
            .run_partition(run, RUN_ITEM_PREFIX, Some(limit + 1))
            .await?;
        let mut doomed: Vec<Item> = items.iter().take(limit).cloned().collect();
        let mut left = items.len() > limit;
        // A run's links to its tokens go with the tokens when they expire; one whose token
        // DynamoDB's TTL removed first would stay for ever.
        let links = self
            .run_partition(run, RUN_TOKEN_PREFIX, Some(limit + 1))
            .await?;
        left |= links.len() > limit;
        let hashes = links
            .iter()
            .take(limit)
            .map(|link| string(link, "hash").map(str::to_owned))
            .collect::<Result<Vec<_>, _>>()?;
        let stored = self.tokens_by_hash(&hashes).await?;
        for (link, hash) in links.iter().zip(&hashes) {
            if stored.iter().any(|t| t.hash == *hash) {
                left = true;
            } else {
                doomed.push(link.clone());
            }
        }
        let deleted = items.len().min(limit);
        for chunk in doomed.chunks(50) {
            let items = chunk
                .iter()
                .map(|item| {
                    let (pk, sk) = (string(item, PK)?, string(item, SK)?);
                    Ok(self.delete(key(pk.to_owned(), sk)))
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            self.transact(items, None).await?;
        }
        if !left {
            self.move_run(run, SWEEP_SETTLED_RUN, None).await?;
        }
        Ok((deleted, !left))
    }
}

impl DynamoCatalog {
    /// Moves a run's record from one sweep list to another (`None`: off every list); a run
    /// not on `from` any more (another sweeper moved it) is left as it is.
    async fn move_run(&self, run: &str, from: &str, to: Option<&str>) -> Result<(), StoreError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(run_pk(run), RUN_SK)))
            .condition_expression("#pk = :from")
            .expression_attribute_names("#pk", SWEEP_PK)
            .expression_attribute_values(":from", s(from));
        let update = match to {
            Some(to) => update
                .update_expression("SET #pk = :to")
                .expression_attribute_values(":to", s(to)),
            None => update
                .update_expression("REMOVE #pk, #sk")
                .expression_attribute_names("#sk", SWEEP_SK),
        };
        update.send().await.map(|_| ()).or_else(|e| {
            if e.as_service_error()
                .is_some_and(|e| e.is_conditional_check_failed_exception())
            {
                Ok(())
            } else {
                Err(StoreError::Unavailable(describe_failure("UpdateItem", &e)))
            }
        })
    }
}
