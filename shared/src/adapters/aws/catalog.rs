//! The catalog's table and the DynamoDB primitives every port's impl is written in: strongly
//! consistent reads (one item, a record, a batch, a query page by page), the transaction
//! items (put, update of a record keeping its inline content, delete, an audit entry) and the
//! one call that runs a transaction and tells a lost race (`Conflict`) from a fault. Item
//! keys and codecs are `items`; what a port's call does with them is its own file (`state`,
//! `access`, `apps`, `sweep`). Nothing here knows a port's rules.

use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeValue, Delete, KeysAndAttributes, Put, TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;

use super::describe_failure;
use super::items::*;
use crate::paging::{self, Page};
use crate::ports::{AuditEntry, StoreError};

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
    pub(super) fn record_update(
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

    /// Every item of the table whose partition key starts with one of `prefixes` (with
    /// `keys_only`, their keys alone), page by page: a scan of the whole table, for a
    /// migration's survey.
    pub(super) async fn scan(
        &self,
        prefixes: &[&str],
        keys_only: bool,
    ) -> Result<Vec<Item>, StoreError> {
        let filter: Vec<String> = (0..prefixes.len())
            .map(|i| format!("begins_with(#pk, :p{i})"))
            .collect();
        let mut scan = self
            .client
            .scan()
            .table_name(&self.table)
            .consistent_read(true)
            .filter_expression(filter.join(" OR "))
            .expression_attribute_names("#pk", PK);
        if keys_only {
            scan = scan
                .projection_expression("#pk, #sk")
                .expression_attribute_names("#sk", SK);
        }
        for (i, prefix) in prefixes.iter().enumerate() {
            scan = scan.expression_attribute_values(format!(":p{i}"), s(*prefix));
        }
        let mut items = Vec::new();
        paging::walk(
            |start| {
                let scan = scan.clone();
                async move {
                    let page = scan
                        .set_exclusive_start_key(start)
                        .send()
                        .await
                        .map_err(|e| StoreError::Unavailable(describe_failure("Scan", &e)))?;
                    Ok::<_, StoreError>(Page {
                        items: page.items.unwrap_or_default(),
                        next: page.last_evaluated_key.filter(|key| !key.is_empty()),
                    })
                }
            },
            |page| {
                items.extend(page);
                None::<()>
            },
        )
        .await?;
        Ok(items)
    }

    /// Reads every item of a query, page by page, up to `limit` items (`None`: all).
    pub(super) async fn query_all(
        &self,
        query: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
        limit: Option<usize>,
    ) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        paging::walk(
            |start| {
                let query = query.clone();
                async move {
                    let page = query
                        .set_exclusive_start_key(start)
                        .send()
                        .await
                        .map_err(|e| StoreError::Unavailable(describe_failure("Query", &e)))?;
                    Ok::<_, StoreError>(Page {
                        items: page.items.unwrap_or_default(),
                        next: page.last_evaluated_key.filter(|key| !key.is_empty()),
                    })
                }
            },
            // Enough once `limit` items are in.
            |page| {
                items.extend(page);
                limit.filter(|limit| items.len() >= *limit).map(|_| ())
            },
        )
        .await?;
        items.truncate(limit.unwrap_or(usize::MAX));
        Ok(items)
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
