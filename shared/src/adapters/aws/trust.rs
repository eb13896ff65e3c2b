//! Trust policies in DynamoDB. Three kinds of item, written together in one transaction:
//! the policy in its org's trust partition (`TRUST#<org>`, by name: the admin's list), a copy
//! in its issuer's partition (`ISSUER#<issuer>`: the exchange's lookup, before it fetches
//! anything), and its (issuer, audience) pair's claim (`PAIR#...`), which names the org and
//! counts the org's policies that use it: another org may claim the pair only once that count
//! is zero, a condition DynamoDB checks in the same transaction as the policy's write.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};

use super::items::*;
use super::DynamoCatalog;
use crate::domain::trust::TrustPolicy;
use crate::ports::{AuditEntry, StoreError, TrustCatalog, TrustRecord, TrustWrite};

fn trust_pk(org: &str) -> String {
    format!("TRUST#{org}")
}

fn issuer_pk(issuer: &str) -> String {
    format!("ISSUER#{issuer}")
}

/// The pair's key: the issuer's length first, so no issuer and audience can be read as
/// another pair's (both may hold any character).
fn pair_pk(policy: &TrustPolicy) -> String {
    format!(
        "PAIR#{}#{}#{}",
        policy.issuer.len(),
        policy.issuer,
        policy.audience
    )
}

fn same_pair(a: &TrustPolicy, b: &TrustPolicy) -> bool {
    (&a.issuer, &a.audience) == (&b.issuer, &b.audience)
}

impl DynamoCatalog {
    /// The policy's own item, put on the condition that the stored one is `expected`
    /// exactly (its JSON as written) or, for a new policy, that there is none.
    fn policy_put(
        &self,
        org: &str,
        expected: Option<&TrustPolicy>,
        policy: &TrustPolicy,
    ) -> TransactWriteItem {
        let (condition, values) = match expected {
            Some(expected) => (
                format!("{REC} = :read"),
                Some(HashMap::from([(":read".to_owned(), s(to_json(expected)))])),
            ),
            None => ("attribute_not_exists(pk)".to_owned(), None),
        };
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(record_item(trust_pk(org), &policy.name, policy)))
            .condition_expression(condition)
            .set_expression_attribute_values(values)
            .build()
            .expect("table and item are set");
        TransactWriteItem::builder().put(put).build()
    }

    /// One more (or one fewer, `by` = -1) of `org`'s policies uses `policy`'s pair. Taking
    /// one is conditioned on the pair being free or the org's already.
    fn pair_count(&self, org: &str, policy: &TrustPolicy, by: i64) -> TransactWriteItem {
        let mut values = HashMap::from([(":by".to_owned(), AttributeValue::N(by.to_string()))]);
        let mut names = HashMap::from([("#users".to_owned(), "users".to_owned())]);
        let (expression, condition) = if by > 0 {
            values.insert(":org".into(), s(org));
            values.insert(":zero".into(), AttributeValue::N("0".into()));
            names.insert("#org".into(), "org".into());
            (
                "SET #org = :org ADD #users :by",
                Some("attribute_not_exists(pk) OR #org = :org OR #users <= :zero"),
            )
        } else {
            ("ADD #users :by", None)
        };
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(key(pair_pk(policy), ONLY)))
            .update_expression(expression)
            .set_condition_expression(condition.map(str::to_owned))
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .build()
            .expect("table, key and expression are set");
        TransactWriteItem::builder().update(update).build()
    }

    /// The org whose policies use `policy`'s pair, when it is not `org` (a transaction lost
    /// on the pair's condition reads it to say whose it is).
    async fn pair_owner(
        &self,
        org: &str,
        policy: &TrustPolicy,
    ) -> Result<Option<String>, StoreError> {
        let Some(item) = self.get(key(pair_pk(policy), ONLY)).await? else {
            return Ok(None);
        };
        let owner = string(&item, "org")?.to_owned();
        // A count that went below zero (it never should) frees the pair as zero does.
        let users: i64 = match item.get("users") {
            Some(AttributeValue::N(n)) => n.parse().unwrap_or(0),
            _ => 0,
        };
        Ok((owner != org && users > 0).then_some(owner))
    }
}

#[async_trait]
impl TrustCatalog for DynamoCatalog {
    async fn trust_policies(&self, org: &str) -> Result<Vec<TrustPolicy>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(trust_pk(org)));
        self.query_all(query, None)
            .await?
            .iter()
            .map(record)
            .collect()
    }

    async fn trust_policies_of_issuer(&self, issuer: &str) -> Result<Vec<TrustRecord>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(issuer_pk(issuer)));
        self.query_all(query, None)
            .await?
            .iter()
            .map(record)
            .collect()
    }

    async fn put_trust_policy(
        &self,
        org: &str,
        expected: Option<&TrustPolicy>,
        policy: &TrustPolicy,
        audit: &AuditEntry,
    ) -> Result<TrustWrite, StoreError> {
        let copy = TrustRecord {
            org: org.to_owned(),
            policy: policy.clone(),
        };
        let copy_sk = format!("{org}/{}", policy.name);
        let mut items = vec![
            self.policy_put(org, expected, policy),
            self.put(
                record_item(issuer_pk(&policy.issuer), &copy_sk, &copy),
                None,
            ),
            self.audit_put(audit),
        ];
        match expected {
            Some(old) if same_pair(old, policy) => {}
            Some(old) => {
                items.push(self.pair_count(org, old, -1));
                items.push(self.pair_count(org, policy, 1));
            }
            None => items.push(self.pair_count(org, policy, 1)),
        }
        if let Some(old) = expected.filter(|old| old.issuer != policy.issuer) {
            items.push(self.delete(key(issuer_pk(&old.issuer), copy_sk.clone())));
        }
        match self.transact(items, None).await {
            Ok(()) => Ok(TrustWrite::Written),
            Err(StoreError::Conflict) => match self.pair_owner(org, policy).await? {
                Some(other) => Ok(TrustWrite::PairTaken { org: other }),
                None => Err(StoreError::Conflict),
            },
            Err(e) => Err(e),
        }
    }

    async fn delete_trust_policy(
        &self,
        org: &str,
        policy: &TrustPolicy,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let delete = Delete::builder()
            .table_name(&self.table)
            .set_key(Some(key(trust_pk(org), &policy.name)))
            .condition_expression(format!("{REC} = :read"))
            .expression_attribute_values(":read", s(to_json(policy)))
            .build()
            .expect("table and key are set");
        let items = vec![
            TransactWriteItem::builder().delete(delete).build(),
            self.delete(key(
                issuer_pk(&policy.issuer),
                format!("{org}/{}", policy.name),
            )),
            self.pair_count(org, policy, -1),
            self.audit_put(audit),
        ];
        self.transact(items, None).await
    }
}
