//! State records, versions and audit in DynamoDB. Every mutation of a state commits in one
//! `TransactWriteItems`, conditioned on the state record's revision and carrying a
//! `ClientRequestToken` derived from the commit, so a lost race is a `Conflict` the services
//! re-decide on, and a replay of the same commit is answered as a success.

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, KeysAndAttributes, Put, TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;
use sha2::{Digest, Sha256};

use super::describe_failure;
use super::items::*;
use crate::domain::record::StateRecord;
use crate::domain::version::{KeySlot, VersionRecord};
use crate::domain::Timestamp;
use crate::ports::{
    AuditEntry, AuditQuery, AuditRecord, Commit, OrgAndState, OrgRecord, StateCatalog, StepCheck,
    StoreError,
};

/// DynamoDB's limit on the items of one transaction.
const MAX_TRANSACTION_ITEMS: usize = 100;

/// The catalog in one DynamoDB table.
pub struct DynamoCatalog {
    pub(super) client: Client,
    pub(super) table: String,
    /// The last audit sequence number this process handed out, so its own entries are
    /// strictly ordered even within one microsecond.
    last_seq: AtomicU64,
}

impl DynamoCatalog {
    pub fn new(client: Client, table: &str) -> Self {
        Self {
            client,
            table: table.to_owned(),
            last_seq: AtomicU64::new(0),
        }
    }

    /// A fresh audit sequence number: wall-clock microseconds in the high bits, so entries
    /// from every process sort by when they were written, and random low bits, so two
    /// processes writing in the same microsecond do not collide.
    fn next_seq(&self) -> u64 {
        let micros = time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1000;
        let candidate = ((micros.max(0) as u64) << 12) | (u64::from(rand_u16()) & 0x7ff);
        let mut seen = self.last_seq.load(Ordering::Relaxed);
        loop {
            let next = candidate.max(seen + 1);
            match self.last_seq.compare_exchange_weak(
                seen,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return next,
                Err(actual) => seen = actual,
            }
        }
    }

    /// The item of an audit entry.
    pub(super) fn audit_put(&self, entry: &AuditEntry) -> TransactWriteItem {
        let mut item = record_item(audit_pk(&entry.org), number_sk(self.next_seq()), entry);
        item.insert("action".into(), s(entry.action.clone()));
        if let Some(state) = &entry.state {
            item.insert("state".into(), s(state.clone()));
        }
        self.put(item, None)
    }

    /// A transaction item that puts `item`, under `condition` if any.
    pub(super) fn put(&self, item: Item, condition: Option<&str>) -> TransactWriteItem {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .set_condition_expression(condition.map(str::to_owned))
            .build()
            .expect("table and item are set");
        TransactWriteItem::builder().put(put).build()
    }

    /// A transaction item that writes the record `rec` (and revision `rev`) of the item at
    /// `key`, creating it if need be, under `condition` if any. Its inline content is set to
    /// `body` when given, else kept while `inline` and removed when not: an update, not a
    /// put, so a commit that only closes a version or moves a lock keeps the content it does
    /// not carry.
    fn record_update(
        &self,
        key: Item,
        rec: String,
        rev: Option<u64>,
        body: Option<&[u8]>,
        inline: bool,
        condition: Option<(
            String,
            Option<std::collections::HashMap<String, AttributeValue>>,
        )>,
    ) -> TransactWriteItem {
        let mut set = vec!["#rec = :rec"];
        let mut names = std::collections::HashMap::from([("#rec".to_owned(), REC.to_owned())]);
        let (condition, mut values) = match condition {
            Some((expression, values)) => (Some(expression), values.unwrap_or_default()),
            None => (None, std::collections::HashMap::new()),
        };
        values.insert(":rec".into(), s(rec));
        if let Some(rev) = rev {
            set.push("#rev = :rev");
            names.insert("#rev".into(), REV.into());
            values.insert(":rev".into(), n(rev));
        }
        let expression = match body {
            Some(body) => {
                set.push("#body = :body");
                values.insert(":body".into(), AttributeValue::B(Blob::new(body)));
                format!("SET {}", set.join(", "))
            }
            None if inline => format!("SET {}", set.join(", ")),
            None => format!("SET {} REMOVE #body", set.join(", ")),
        };
        if body.is_some() || !inline {
            names.insert("#body".into(), BODY.into());
        }
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(key))
            .update_expression(expression)
            .set_condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .build()
            .expect("table, key and expression are set");
        TransactWriteItem::builder().update(update).build()
    }

    /// A transaction item that deletes the item at `key`.
    pub(super) fn delete(&self, key: Item) -> TransactWriteItem {
        let delete = Delete::builder()
            .table_name(&self.table)
            .set_key(Some(key))
            .build()
            .expect("table and key are set");
        TransactWriteItem::builder().delete(delete).build()
    }

    /// Runs one transaction. A failed condition or a conflict with another transaction is a
    /// lost race (`Conflict`); anything else is a transient fault.
    pub(super) async fn transact(
        &self,
        items: Vec<TransactWriteItem>,
        request_token: Option<String>,
    ) -> Result<(), StoreError> {
        if items.len() > MAX_TRANSACTION_ITEMS {
            return Err(StoreError::Unavailable(format!(
                "a commit of {} items exceeds DynamoDB's {MAX_TRANSACTION_ITEMS}-item transaction",
                items.len()
            )));
        }
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .set_client_request_token(request_token)
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(err) => Err(transaction_error(&err)),
        }
    }

    /// A page of an org's records of one kind, by name after `from` (its sort key; the item
    /// itself is skipped: BETWEEN is inclusive) up to `to`, the key that sorts right after
    /// every one of that kind (`STATE$` after every `STATE#<name>`). The record alone: a
    /// listing has no use for a latest version's content.
    pub(super) async fn org_records<T: serde::de::DeserializeOwned>(
        &self,
        org: &str,
        from: String,
        to: &str,
        limit: usize,
    ) -> Result<Vec<T>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND sk BETWEEN :from AND :to")
            .expression_attribute_values(":pk", s(org_pk(org)))
            .expression_attribute_values(":from", s(from.clone()))
            .expression_attribute_values(":to", s(to))
            .projection_expression("#sk, #rec")
            .expression_attribute_names("#sk", SK)
            .expression_attribute_names("#rec", REC)
            .consistent_read(true)
            .limit(i32::try_from(limit.saturating_add(1)).unwrap_or(i32::MAX));
        let items = self.query_all(query, Some(limit.saturating_add(1))).await?;
        items
            .iter()
            .filter(|item| string(item, SK).is_ok_and(|sk| sk != from))
            .take(limit)
            .map(record)
            .collect()
    }

    /// Reads every item of a query, page by page, up to `limit` items (`None`: all).
    pub(super) async fn query_all(
        &self,
        query: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
        limit: Option<usize>,
    ) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let page = query
                .clone()
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| StoreError::Unavailable(describe_failure("Query", &e)))?;
            items.extend(page.items.unwrap_or_default());
            if limit.is_some_and(|l| items.len() >= l) {
                items.truncate(limit.unwrap_or(usize::MAX));
                return Ok(items);
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(items),
            }
        }
    }

    /// The record an item holds, read strongly consistently. Only the key and the record
    /// travel: a state or version item may hold inline content too, which a lock, an
    /// unlock or a save's snapshot has no use for.
    pub(super) async fn get_record<T: serde::de::DeserializeOwned>(
        &self,
        key: Item,
    ) -> Result<Option<T>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .consistent_read(true)
            .projection_expression("#pk, #sk, #rec")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_names("#rec", REC)
            .send()
            .await
            .map_err(|e| StoreError::Unavailable(describe_failure("GetItem", &e)))?;
        output.item.map(|item| record(&item)).transpose()
    }

    /// Puts `item` unless an item with its key exists; returns whether it was put.
    pub(super) async fn put_new(&self, item: Item) -> Result<bool, StoreError> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(e) => Err(StoreError::Unavailable(describe_failure("PutItem", &e))),
        }
    }

    /// One item, read strongly consistently.
    pub(super) async fn get(&self, key: Item) -> Result<Option<Item>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::Unavailable(describe_failure("GetItem", &e)))?;
        Ok(output.item)
    }

    /// The items at `keys` that exist, read strongly consistently in one `BatchGetItem`
    /// (and again for any keys DynamoDB leaves unprocessed when throttled, a bounded number
    /// of times, after which it is a transient fault). Only the key and the record travel,
    /// and the inline content when `with_body`.
    pub(super) async fn get_many(
        &self,
        keys: Vec<Item>,
        with_body: bool,
    ) -> Result<Vec<Item>, StoreError> {
        const ROUNDS: usize = 5;
        let mut wanted = KeysAndAttributes::builder()
            .set_keys(Some(keys))
            .consistent_read(true)
            .projection_expression(if with_body {
                "#pk, #sk, #rec, #body"
            } else {
                "#pk, #sk, #rec"
            })
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_names("#rec", REC);
        if with_body {
            wanted = wanted.expression_attribute_names("#body", BODY);
        }
        let mut wanted = wanted.build().expect("keys are set");
        let mut found = Vec::new();
        for _ in 0..ROUNDS {
            let output = self
                .client
                .batch_get_item()
                .request_items(&self.table, wanted)
                .send()
                .await
                .map_err(|e| StoreError::Unavailable(describe_failure("BatchGetItem", &e)))?;
            found.extend(
                output
                    .responses
                    .and_then(|mut tables| tables.remove(&self.table))
                    .unwrap_or_default(),
            );
            match output
                .unprocessed_keys
                .and_then(|mut tables| tables.remove(&self.table))
            {
                Some(rest) if !rest.keys.is_empty() => wanted = rest,
                _ => return Ok(found),
            }
        }
        Err(StoreError::Unavailable(format!(
            "BatchGetItem left keys unprocessed {ROUNDS} times: the table is throttled"
        )))
    }

    /// The org's settings and one state's record, in one `BatchGetItem`; with the latest
    /// version's inline content when `with_body` and that version is inline (the state item
    /// holds it beside the record).
    async fn org_and_state_items(
        &self,
        org: &str,
        name: &str,
        with_body: bool,
    ) -> Result<OrgAndState, StoreError> {
        let state = state_sk(name);
        let items = self
            .get_many(
                vec![
                    key(org_pk(org), SETTINGS_SK),
                    key(org_pk(org), state.clone()),
                ],
                with_body,
            )
            .await?;
        let find = |sk: &str| {
            items
                .iter()
                .find(|item| string(item, SK).is_ok_and(|s| s == sk))
        };
        let settings = find(SETTINGS_SK).map(record).transpose()?;
        let state = find(&state)
            .map(|item| {
                let record: StateRecord = record(item)?;
                let content = record
                    .latest
                    .as_ref()
                    .filter(|l| with_body && l.inline)
                    .and_then(|_| binary(item, BODY));
                Ok::<_, StoreError>((record, content))
            })
            .transpose()?;
        Ok((settings, state))
    }
}

/// A random 16-bit number from the operating system.
fn rand_u16() -> u16 {
    use aes_gcm::aead::rand_core::RngCore;
    (aes_gcm::aead::OsRng.next_u32() & 0xffff) as u16
}

/// What a failed transaction means.
fn transaction_error(
    err: &aws_sdk_dynamodb::error::SdkError<
        TransactWriteItemsError,
        aws_sdk_dynamodb::config::http::HttpResponse,
    >,
) -> StoreError {
    match err.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => {
            let codes: Vec<&str> = cancelled
                .cancellation_reasons()
                .iter()
                .filter_map(|r| r.code())
                .filter(|c| *c != "None")
                .collect();
            if codes
                .iter()
                .any(|c| *c == "ConditionalCheckFailed" || *c == "TransactionConflict")
            {
                StoreError::Conflict
            } else {
                StoreError::Unavailable(format!(
                    "TransactWriteItems was cancelled: {}",
                    codes.join(", ")
                ))
            }
        }
        // The same request token with other content, or the first attempt still running:
        // both mean the record is moving under us; re-read and decide again.
        Some(TransactWriteItemsError::IdempotentParameterMismatchException(_))
        | Some(TransactWriteItemsError::TransactionInProgressException(_)) => StoreError::Conflict,
        _ => StoreError::Unavailable(describe_failure("TransactWriteItems", err)),
    }
}

/// The request token of a commit: the same commit replayed (an SDK retry after a lost
/// response) is recognised by DynamoDB and succeeds without applying twice.
fn request_token(commit: &Commit) -> String {
    let mut hash = Sha256::new();
    hash.update(commit.org.as_bytes());
    hash.update([0]);
    hash.update(commit.name.as_bytes());
    hash.update(commit.expected_revision.to_be_bytes());
    match &commit.state {
        Some(record) => hash.update(to_json(record).as_bytes()),
        None => hash.update(b"\0removed"),
    }
    let digest = hash.finalize();
    crate::ids::hex(&digest[..16])
}

impl DynamoCatalog {
    /// The condition checks of a step's lock: its token's item not revoked, and its run's item
    /// (in the run's partition, beside the items a run's end reads) not ended too early.
    fn step_checks(&self, check: &StepCheck) -> [TransactWriteItem; 2] {
        let token = ConditionCheck::builder()
            .table_name(&self.table)
            .set_key(Some(key(token_pk(&check.token_hash), ONLY)))
            .condition_expression("attribute_exists(pk) AND attribute_not_exists(#revoked)")
            .expression_attribute_names("#revoked", REVOKED)
            .build()
            .expect("table, key and condition are set");
        let run = ConditionCheck::builder()
            .table_name(&self.table)
            .set_key(Some(key(run_pk(&check.run), RUN_SK)))
            .condition_expression("attribute_not_exists(#ended) OR #ended >= :not_before")
            .expression_attribute_names("#ended", ENDED)
            .expression_attribute_values(":not_before", nanos(check.ended_not_before))
            .build()
            .expect("table, key and condition are set");
        [token, run].map(|c| TransactWriteItem::builder().condition_check(c).build())
    }

    /// The transaction items of a commit.
    fn commit_items(&self, commit: &Commit) -> Vec<TransactWriteItem> {
        let mut items = Vec::new();
        let state_key = key(org_pk(&commit.org), state_sk(&commit.name));
        let expected = commit.expected_revision;
        let condition = if expected == 0 {
            "attribute_not_exists(pk)".to_owned()
        } else {
            format!("{REV} = :expected")
        };
        let values = (expected != 0)
            .then(|| std::collections::HashMap::from([(":expected".to_owned(), n(expected))]));
        match &commit.state {
            Some(record) => {
                // The state item holds the latest version's inline content too, so that a
                // read of the state is one GetItem.
                let latest = record.latest.as_ref();
                items.push(
                    self.record_update(
                        state_key,
                        to_json(record),
                        Some(record.revision),
                        latest
                            .and_then(|l| commit.content_of(l.version))
                            .map(|c| c.as_slice()),
                        latest.is_some_and(|l| l.inline),
                        Some((condition, values)),
                    ),
                );
                for version in &commit.versions {
                    let pk = versions_pk(&commit.org, &commit.name, &record.incarnation);
                    items.push(self.record_update(
                        key(pk, number_sk(version.version)),
                        to_json(version),
                        None,
                        commit.content_of(version.version).map(|c| c.as_slice()),
                        version.inline,
                        None,
                    ));
                }
            }
            None => {
                let delete = Delete::builder()
                    .table_name(&self.table)
                    .set_key(Some(state_key))
                    .condition_expression(condition)
                    .set_expression_attribute_values(values)
                    .build()
                    .expect("table and key are set");
                items.push(TransactWriteItem::builder().delete(delete).build());
            }
        }
        for blob in &commit.committed_blobs {
            items.push(self.delete(key(pending_pk(blob), ONLY)));
        }
        for blob in &commit.doomed_blobs {
            items.push(self.put(doomed_item(blob, commit.at), None));
        }
        if let Some(check) = &commit.step {
            items.extend(self.step_checks(check));
        }
        for run_item in &commit.run_items {
            let sk = format!(
                "{RUN_ITEM_PREFIX}{}#{}/{}",
                run_item.token_id, run_item.org, run_item.state
            );
            items.push(self.put(record_item(run_pk(&run_item.run), sk, run_item), None));
        }
        for mark in &commit.version_marks {
            // Marks of one state only ever rise: each comes from a commit on a newer
            // revision, so the latest one written is the highest.
            let mut item = key(mark_pk(&commit.org, &commit.name, &mark.incarnation), ONLY);
            item.insert("org".into(), s(commit.org.clone()));
            item.insert("name".into(), s(commit.name.clone()));
            item.insert("incarnation".into(), s(mark.incarnation.clone()));
            item.insert("below".into(), n(mark.below));
            item.insert(SWEEP_PK.into(), s(SWEEP_MARK));
            item.insert(
                SWEEP_SK.into(),
                s(mark_pk(&commit.org, &commit.name, &mark.incarnation)),
            );
            items.push(self.put(item, None));
        }
        for entry in &commit.audit {
            items.push(self.audit_put(entry));
        }
        items
    }
}

/// The record of a blob listed for deletion at `at`.
pub(super) fn doomed_item(blob: &str, at: Timestamp) -> Item {
    let mut item = key(doomed_pk(blob), ONLY);
    item.insert("blob".into(), s(blob));
    item.insert(SWEEP_PK.into(), s(SWEEP_DOOMED));
    item.insert(SWEEP_SK.into(), s(age_sk(at, blob)));
    item
}

#[async_trait]
impl StateCatalog for DynamoCatalog {
    async fn state(&self, org: &str, name: &str) -> Result<Option<StateRecord>, StoreError> {
        self.get_record(key(org_pk(org), state_sk(name))).await
    }

    async fn org_and_state(
        &self,
        org: &str,
        name: &str,
    ) -> Result<(Option<OrgRecord>, Option<StateRecord>), StoreError> {
        let (org, state) = self.org_and_state_items(org, name, false).await?;
        Ok((org, state.map(|(state, _)| state)))
    }

    async fn org_and_state_with_content(
        &self,
        org: &str,
        name: &str,
    ) -> Result<OrgAndState, StoreError> {
        self.org_and_state_items(org, name, true).await
    }

    async fn states(
        &self,
        org: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<StateRecord>, StoreError> {
        self.org_records(org, state_sk(after.unwrap_or("")), "STATE$", limit)
            .await
    }

    async fn version(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
        version: u64,
    ) -> Result<Option<VersionRecord>, StoreError> {
        self.get_record(key(versions_pk(org, name, incarnation), number_sk(version)))
            .await
    }

    async fn content(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
        version: u64,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let item = self
            .get(key(versions_pk(org, name, incarnation), number_sk(version)))
            .await?;
        Ok(item.and_then(|item| binary(&item, BODY)))
    }

    async fn versions(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
    ) -> Result<Vec<VersionRecord>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(versions_pk(org, name, incarnation)))
            .projection_expression("#rec")
            .expression_attribute_names("#rec", REC)
            .scan_index_forward(false)
            .consistent_read(true);
        self.query_all(query, None)
            .await?
            .iter()
            .map(record)
            .collect()
    }

    async fn add_pending_blob(&self, blob: &str, at: Timestamp) -> Result<(), StoreError> {
        let mut item = key(pending_pk(blob), ONLY);
        item.insert("blob".into(), s(blob));
        item.insert(SWEEP_PK.into(), s(SWEEP_PENDING));
        item.insert(SWEEP_SK.into(), s(age_sk(at, blob)));
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| StoreError::Unavailable(describe_failure("PutItem", &e)))?;
        Ok(())
    }

    async fn commit(&self, commit: Commit) -> Result<(), StoreError> {
        let token = request_token(&commit);
        self.transact(self.commit_items(&commit), Some(token)).await
    }

    /// Both items are read, then written in one transaction conditioned on the state's
    /// revision and on the version item holding exactly the record read, so a slot changed
    /// in between (another re-wrap, a commit) is a `Conflict`.
    async fn replace_key_slot(
        &self,
        org: &str,
        name: &str,
        incarnation: &str,
        version: u64,
        old: &KeySlot,
        new: &KeySlot,
    ) -> Result<(), StoreError> {
        let state_item = self.get(key(org_pk(org), state_sk(name))).await?;
        let state: StateRecord = state_item
            .as_ref()
            .map(record)
            .transpose()?
            .ok_or(StoreError::Conflict)?;
        let pk = versions_pk(org, name, incarnation);
        let version_item = self.get(key(pk.clone(), number_sk(version))).await?;
        let Some(version_item) = version_item else {
            return Err(StoreError::Conflict);
        };
        let mut stored: VersionRecord = record(&version_item)?;
        if state.incarnation != incarnation || stored.slot() != *old {
            return Err(StoreError::Conflict);
        }
        stored.set_slot(new);
        let state = state.with_key_slot(version, new);
        let old_text = string(&version_item, REC)?.to_owned();
        // Updates, not puts: an inline version's content, on its item and (for the latest)
        // the state's, stays as it is; a re-wrap changes only the slot.
        let update_version = self.record_update(
            key(pk, number_sk(version)),
            to_json(&stored),
            None,
            None,
            stored.inline,
            Some((
                format!("{REC} = :old"),
                Some(std::collections::HashMap::from([(
                    ":old".to_owned(),
                    s(old_text),
                )])),
            )),
        );
        let update_state = self.record_update(
            key(org_pk(org), state_sk(name)),
            to_json(&state),
            Some(state.revision),
            None,
            state.latest.as_ref().is_some_and(|l| l.inline),
            Some((
                format!("{REV} = :expected"),
                Some(std::collections::HashMap::from([(
                    ":expected".to_owned(),
                    n(state.revision - 1),
                )])),
            )),
        );
        self.transact(vec![update_version, update_state], None)
            .await
    }

    async fn append_audit(&self, entry: &AuditEntry) -> Result<(), StoreError> {
        self.transact(vec![self.audit_put(entry)], None).await
    }

    async fn audit(&self, org: &str, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        if query.limit == 0 {
            return Ok(Vec::new());
        }
        let mut request = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND sk < :before")
            .expression_attribute_values(":pk", s(audit_pk(org)))
            .expression_attribute_values(":before", s(number_sk(query.before.unwrap_or(u64::MAX))))
            .scan_index_forward(false)
            .consistent_read(true);
        let mut filters = Vec::new();
        if let Some(state) = &query.state {
            filters.push("#state = :state");
            request = request
                .expression_attribute_names("#state", "state")
                .expression_attribute_values(":state", s(state.clone()));
        }
        if let Some(action) = &query.action {
            filters.push("#action = :action");
            request = request
                .expression_attribute_names("#action", "action")
                .expression_attribute_values(":action", s(action.clone()));
        }
        if filters.is_empty() {
            request = request.limit(i32::try_from(query.limit).unwrap_or(i32::MAX));
        } else {
            request = request.filter_expression(filters.join(" AND "));
        }
        let items = self.query_all(request, Some(query.limit)).await?;
        items
            .iter()
            .map(|item| {
                let seq = string(item, SK)?.parse().map_err(|_| {
                    StoreError::Corrupt(format!("an audit entry of {org} has a bad sequence"))
                })?;
                Ok(AuditRecord {
                    seq,
                    entry: record(item)?,
                })
            })
            .collect()
    }
}
