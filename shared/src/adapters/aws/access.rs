//! Tokens and orgs in DynamoDB. A token is keyed by its hash (looked up on every request,
//! strongly consistently); an org's settings sit in its partition beside its states.

use async_trait::async_trait;
use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, Put, TransactWriteItem};

use super::describe_failure;
use super::items::*;
use super::DynamoCatalog;
use crate::domain::permission::Allocation;
use crate::domain::Timestamp;
use crate::ports::{
    AccessCatalog, AuditEntry, ExchangeMark, InventoryKey, OrgRecord, StoreError, TokenRecord,
};

/// How long after its expiry DynamoDB's TTL may remove a token on its own, should the
/// sweeper not have: a backstop, never what correctness relies on (expiry is checked on use).
const TOKEN_TTL_MARGIN_SECONDS: i64 = 86_400;

/// BatchGetItem's limit on keys per call.
const BATCH_GET_KEYS: usize = 100;

fn token_item(token: &TokenRecord) -> Item {
    let mut item = record_item(token_pk(&token.hash), ONLY, token);
    item.insert(LISTING_PK.into(), s(LISTING_TOKENS));
    item.insert(LISTING_SK.into(), s(age_sk(token.created_at, &token.hash)));
    if let Some(expires) = token.expires_at {
        item.insert(SWEEP_PK.into(), s(SWEEP_TOKEN));
        item.insert(SWEEP_SK.into(), s(age_sk(expires, &token.hash)));
        let ttl = expires.unix_timestamp() + TOKEN_TTL_MARGIN_SECONDS;
        item.insert(TTL.into(), n(ttl.max(0) as u64));
    }
    if token.revoked {
        item.insert(REVOKED.into(), AttributeValue::Bool(true));
    }
    item
}

#[async_trait]
impl AccessCatalog for DynamoCatalog {
    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        self.get_record(key(token_pk(hash), ONLY)).await
    }

    async fn put_token(&self, token: &TokenRecord, audit: &AuditEntry) -> Result<(), StoreError> {
        let mut items = vec![self.put(token_item(token), None), self.audit_put(audit)];
        if let Some(step) = &token.step {
            let mut link = key(
                run_pk(&step.run),
                format!("{RUN_TOKEN_PREFIX}{}", token.hash),
            );
            link.insert("hash".into(), s(token.hash.clone()));
            items.push(self.put(link, None));
        }
        self.transact(items, None).await
    }

    async fn put_session(
        &self,
        token: &TokenRecord,
        mark: &ExchangeMark,
        audit: &AuditEntry,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut item = key(exchanged_pk(&mark.key), ONLY);
        item.insert("until".into(), n(mark.until.unix_timestamp().max(0) as u64));
        // DynamoDB's TTL removes the mark once the token could not be taken anyway; until
        // then the condition keeps a replay out, and a mark past its time is replaced.
        let ttl = mark.until.unix_timestamp() + TOKEN_TTL_MARGIN_SECONDS;
        item.insert(TTL.into(), n(ttl.max(0) as u64));
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk) OR #until < :now")
            .expression_attribute_names("#until", "until")
            .expression_attribute_values(":now", n(now.unix_timestamp().max(0) as u64))
            .build()
            .expect("table and item are set");
        let items = vec![
            TransactWriteItem::builder().put(put).build(),
            self.put(token_item(token), None),
            self.audit_put(audit),
        ];
        self.transact(items, None).await
    }

    async fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(LISTING_INDEX)
            .key_condition_expression("#pk = :pk")
            .expression_attribute_names("#pk", LISTING_PK)
            .expression_attribute_values(":pk", s(LISTING_TOKENS));
        self.query_all(query, None)
            .await?
            .iter()
            .map(record)
            .collect()
    }

    async fn orgs(&self) -> Result<Vec<String>, StoreError> {
        // States, deleted states, app states and settings live in the org's partition; its
        // policies and its log in partitions of their own; a token's org is in its record.
        let prefixes = [org_pk(""), audit_pk(""), TRUST_PREFIX.to_owned()];
        let prefixes: Vec<&str> = prefixes.iter().map(String::as_str).collect();
        let mut orgs = std::collections::BTreeSet::new();
        for item in self.scan(&prefixes, true).await? {
            let pk = string(&item, PK)?;
            if let Some(org) = prefixes.iter().find_map(|p| pk.strip_prefix(p)) {
                orgs.insert(org.to_owned());
            }
        }
        orgs.extend(self.tokens().await?.into_iter().map(|t| t.org));
        orgs.remove("");
        Ok(orgs.into_iter().collect())
    }

    async fn set_allocation(
        &self,
        org: &str,
        expected: &Allocation,
        allocation: &Allocation,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let stored = self.get(key(org_pk(org), SETTINGS_SK)).await?;
        let existing: Option<OrgRecord> = stored.as_ref().map(record).transpose()?;
        if existing.as_ref().map(|o| o.allocation).unwrap_or_default() != *expected {
            return Err(StoreError::Conflict);
        }
        // The write is conditioned on the item read being the one stored, its JSON exactly as
        // read (or still absent), so a change that came in between fails the transaction
        // instead of being lost.
        let (record, condition, values) = match (existing, stored.as_ref().and_then(|i| i.get(REC)))
        {
            (Some(existing), Some(seen)) => (
                OrgRecord {
                    allocation: *allocation,
                    ..existing
                },
                format!("{REC} = :read"),
                Some(HashMap::from([(":read".to_owned(), seen.clone())])),
            ),
            _ => (
                OrgRecord {
                    inventory_key: None,
                    org: org.to_owned(),
                    allocation: *allocation,
                    created_at: audit.at,
                    protections: Vec::new(),
                },
                "attribute_not_exists(pk)".to_owned(),
                None,
            ),
        };
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(record_item(org_pk(org), SETTINGS_SK, &record)))
            .condition_expression(condition)
            .set_expression_attribute_values(values)
            .build()
            .expect("table and item are set");
        let settings = TransactWriteItem::builder().put(put).build();
        self.transact(vec![settings, self.audit_put(audit)], None)
            .await
    }

    async fn put_inventory_key(
        &self,
        org: &str,
        expected: Option<&InventoryKey>,
        inventory_key: &InventoryKey,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        let stored = self.get(key(org_pk(org), SETTINGS_SK)).await?;
        let existing: Option<OrgRecord> = stored.as_ref().map(record).transpose()?;
        if existing.as_ref().and_then(|o| o.inventory_key.as_ref()) != expected {
            return Err(StoreError::Conflict);
        }
        // Conditioned on the settings item being as read (or still absent), as an
        // allocation's change is: another writer's key, or any change in between, fails
        // this one.
        let (settings, condition, values) =
            match (existing, stored.as_ref().and_then(|i| i.get(REC))) {
                (Some(existing), Some(seen)) => (
                    OrgRecord {
                        inventory_key: Some(inventory_key.clone()),
                        ..existing
                    },
                    format!("{REC} = :read"),
                    Some(HashMap::from([(":read".to_owned(), seen.clone())])),
                ),
                _ => (
                    OrgRecord {
                        org: org.to_owned(),
                        allocation: Allocation::default(),
                        created_at: at,
                        protections: Vec::new(),
                        inventory_key: Some(inventory_key.clone()),
                    },
                    "attribute_not_exists(pk)".to_owned(),
                    None,
                ),
            };
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(record_item(org_pk(org), SETTINGS_SK, &settings)))
            .condition_expression(condition)
            .set_expression_attribute_values(values)
            .build()
            .expect("table and item are set");
        self.transact(vec![TransactWriteItem::builder().put(put).build()], None)
            .await
    }

    async fn org(&self, org: &str) -> Result<Option<OrgRecord>, StoreError> {
        self.get_record(key(org_pk(org), SETTINGS_SK)).await
    }

    async fn create_org(&self, org: &OrgRecord) -> Result<bool, StoreError> {
        self.put_new(record_item(org_pk(&org.org), SETTINGS_SK, org))
            .await
    }
}

impl DynamoCatalog {
    /// Tokens by hash, strongly consistently; hashes with no token any more are skipped.
    pub(super) async fn tokens_by_hash(
        &self,
        hashes: &[String],
    ) -> Result<Vec<TokenRecord>, StoreError> {
        let mut found = Vec::new();
        for chunk in hashes.chunks(BATCH_GET_KEYS) {
            let mut keys: Vec<Item> = chunk.iter().map(|hash| key(token_pk(hash), ONLY)).collect();
            // Unprocessed keys (throttling) are asked again, a bounded number of times.
            for _ in 0..8 {
                if keys.is_empty() {
                    break;
                }
                let request = KeysAndAttributes::builder()
                    .set_keys(Some(std::mem::take(&mut keys)))
                    .consistent_read(true)
                    .build()
                    .map_err(|e| StoreError::Unavailable(e.to_string()))?;
                let output = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, request)
                    .send()
                    .await
                    .map_err(|e| StoreError::Unavailable(describe_failure("BatchGetItem", &e)))?;
                let mut responses = output.responses.unwrap_or_default();
                for item in responses.remove(&self.table).unwrap_or_default() {
                    found.push(record::<TokenRecord>(&item)?);
                }
                keys = output
                    .unprocessed_keys
                    .and_then(|mut u| u.remove(&self.table))
                    .map(|k| k.keys)
                    .unwrap_or_default();
            }
            if !keys.is_empty() {
                return Err(StoreError::Unavailable(
                    "BatchGetItem left tokens unread after retries (throttled)".into(),
                ));
            }
        }
        found.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(found)
    }
}
