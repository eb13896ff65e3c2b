//! Runs in DynamoDB. A run's partition holds the run, its step tokens' hashes and the states
//! they locked, so a run's end or a step's gone report finds them with one strongly
//! consistent query.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;

use super::describe_failure;
use super::items::*;
use super::DynamoCatalog;
use crate::domain::Timestamp;
use crate::ports::{RunCatalog, RunItem, RunRecord, StoreError, TokenRecord};

fn run_item(run: &RunRecord) -> Item {
    record_item(run_pk(&run.run), RUN_SK, run)
}

impl DynamoCatalog {
    /// The items of a run's partition whose sort key starts with `prefix`: all of them, or
    /// up to `limit` (the sweeper's bounded pass).
    pub(super) async fn run_partition(
        &self,
        run: &str,
        prefix: &str,
        limit: Option<usize>,
    ) -> Result<Vec<Item>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
            .expression_attribute_values(":pk", s(run_pk(run)))
            .expression_attribute_values(":prefix", s(prefix))
            .consistent_read(true)
            .set_limit(limit.map(|n| i32::try_from(n).unwrap_or(i32::MAX)));
        self.query_all(query, limit).await
    }
}

#[async_trait]
impl RunCatalog for DynamoCatalog {
    async fn run(&self, run: &str) -> Result<Option<RunRecord>, StoreError> {
        self.get_record(key(run_pk(run), RUN_SK)).await
    }

    async fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        let items = self.scan(&[&run_pk("")], false).await?;
        items
            .iter()
            .filter(|item| string(item, SK).is_ok_and(|sk| sk == RUN_SK))
            .map(record)
            .collect()
    }

    async fn bind_run(&self, record: &RunRecord) -> Result<RunRecord, StoreError> {
        if self.put_new(run_item(record)).await? {
            return Ok(record.clone());
        }
        self.run(&record.run).await?.ok_or_else(|| {
            StoreError::Unavailable(format!("run {} vanished while binding", record.run))
        })
    }

    async fn end_run(
        &self,
        run: &str,
        at: Timestamp,
        status: Option<&str>,
    ) -> Result<RunRecord, StoreError> {
        // Read, then write the ended record on the revision read (the record's own JSON):
        // the first end wins, and a concurrent bind or end makes us read again.
        for _ in 0..8 {
            let stored = self.get(key(run_pk(run), RUN_SK)).await?;
            let current = stored.as_ref().map(record::<RunRecord>).transpose()?;
            if let Some(done) = current.as_ref().filter(|r| r.ended_at.is_some()) {
                return Ok(done.clone());
            }
            let ended = match current {
                Some(existing) => RunRecord {
                    ended_at: Some(at),
                    status: status.map(str::to_owned),
                    ..existing
                },
                None => RunRecord {
                    run: run.to_owned(),
                    org: String::new(),
                    created_at: at,
                    ended_at: Some(at),
                    status: status.map(str::to_owned),
                },
            };
            let mut item = run_item(&ended);
            item.insert(SWEEP_PK.into(), s(SWEEP_ENDED_RUN));
            item.insert(SWEEP_SK.into(), s(age_sk(at, run)));
            item.insert(ENDED.into(), nanos(at));
            let mut put = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item));
            put = match stored.as_ref().and_then(|i| i.get(REC)) {
                Some(AttributeValue::S(seen)) => put
                    .condition_expression("rec = :seen")
                    .expression_attribute_values(":seen", s(seen.clone())),
                _ => put.condition_expression("attribute_not_exists(pk)"),
            };
            match put.send().await {
                Ok(_) => return Ok(ended),
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
                {
                    continue
                }
                Err(e) => return Err(StoreError::Unavailable(describe_failure("PutItem", &e))),
            }
        }
        Err(StoreError::Conflict)
    }

    async fn run_items(&self, run: &str) -> Result<Vec<RunItem>, StoreError> {
        self.run_partition(run, RUN_ITEM_PREFIX, None)
            .await?
            .iter()
            .map(record)
            .collect()
    }

    async fn run_tokens(&self, run: &str) -> Result<Vec<TokenRecord>, StoreError> {
        let hashes = self
            .run_partition(run, RUN_TOKEN_PREFIX, None)
            .await?
            .iter()
            .map(|item| string(item, "hash").map(str::to_owned))
            .collect::<Result<Vec<_>, _>>()?;
        self.tokens_by_hash(&hashes).await
    }
}
