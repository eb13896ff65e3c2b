//! Trust policies in DynamoDB. Three kinds of item, written together in one transaction:
//! the policy in its org's trust partition (`TRUST#<org>`, by name: the admin's list), a copy
//! in its issuer's partition (`ISSUER#<issuer>`: the exchange's lookup, before it fetches
//! anything), and its (issuer, audience) pair's claim (`PAIR#...`), which names the org and
//! counts the org's policies that use it: another org may claim the pair only once that count
//! is zero. The claim is read first and put on the condition that it is still as read, in the
//! same transaction as the policy's write, so two orgs racing for a pair cannot both win.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};

use super::items::*;
use super::DynamoCatalog;
use crate::domain::trust::TrustPolicy;
use crate::ports::{AuditEntry, StoreError, TrustCatalog, TrustRecord, TrustWrite};

fn trust_pk(org: &str) -> String {
    format!("{TRUST_PREFIX}{org}")
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

    /// The pair's claim as stored: its org and how many of that org's policies use it.
    async fn pair(&self, policy: &TrustPolicy) -> Result<Option<(String, i64)>, StoreError> {
        let Some(item) = self.get(key(pair_pk(policy), ONLY)).await? else {
            return Ok(None);
        };
        let users = match item.get("users") {
            Some(AttributeValue::N(n)) => n.parse().map_err(|_| {
                StoreError::Corrupt(format!(
                    "the pair claim of {} has a bad count",
                    policy.issuer
                ))
            })?,
            _ => 0,
        };
        Ok(Some((string(&item, "org")?.to_owned(), users)))
    }

    /// The pair's claim with one more (`by` = 1) or one fewer (-1) of `org`'s policies on it,
    /// put on the condition that it is still as `seen` read it: a put, not an update, so
    /// the functions need no call beyond those of every other record.
    fn pair_put(
        &self,
        org: &str,
        policy: &TrustPolicy,
        seen: Option<&(String, i64)>,
        by: i64,
    ) -> TransactWriteItem {
        let users = match seen {
            Some((owner, users)) if owner == org => users + by,
            _ => by,
        };
        let mut item = key(pair_pk(policy), ONLY);
        item.insert("org".into(), s(org));
        item.insert("users".into(), AttributeValue::N(users.max(0).to_string()));
        let (condition, values) = match seen {
            Some((owner, users)) => (
                "#org = :org AND #users = :users".to_owned(),
                Some(HashMap::from([
                    (":org".to_owned(), s(owner.clone())),
                    (":users".to_owned(), AttributeValue::N(users.to_string())),
                ])),
            ),
            None => ("attribute_not_exists(pk)".to_owned(), None),
        };
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition)
            .set_expression_attribute_names(seen.map(|_| {
                HashMap::from([
                    ("#org".to_owned(), "org".to_owned()),
                    ("#users".to_owned(), "users".to_owned()),
                ])
            }))
            .set_expression_attribute_values(values)
            .build()
            .expect("table and item are set");
        TransactWriteItem::builder().put(put).build()
    }
}

impl DynamoCatalog {
    /// The records of every item in partition `pk`, read strongly consistently.
    async fn partition<T: serde::de::DeserializeOwned>(
        &self,
        pk: String,
    ) -> Result<Vec<T>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(pk));
        self.query_all(query, None)
            .await?
            .iter()
            .map(record)
            .collect()
    }
}

#[async_trait]
impl TrustCatalog for DynamoCatalog {
    async fn trust_policies(&self, org: &str) -> Result<Vec<TrustPolicy>, StoreError> {
        self.partition(trust_pk(org)).await
    }

    async fn trust_policy(&self, org: &str, name: &str) -> Result<Option<TrustPolicy>, StoreError> {
        self.get_record(key(trust_pk(org), name)).await
    }

    async fn trust_policies_of_issuer(&self, issuer: &str) -> Result<Vec<TrustRecord>, StoreError> {
        self.partition(issuer_pk(issuer)).await
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
        if expected.is_none_or(|old| !same_pair(old, policy)) {
            let seen = self.pair(policy).await?;
            if let Some((owner, users)) = &seen {
                if owner != org && *users > 0 {
                    return Ok(TrustWrite::PairTaken { org: owner.clone() });
                }
            }
            items.push(self.pair_put(org, policy, seen.as_ref(), 1));
            if let Some(old) = expected {
                let seen = self.pair(old).await?;
                items.push(self.pair_put(org, old, seen.as_ref(), -1));
            }
        }
        if let Some(old) = expected.filter(|old| old.issuer != policy.issuer) {
            items.push(self.delete(key(issuer_pk(&old.issuer), copy_sk.clone())));
        }
        self.transact(items, None).await?;
        Ok(TrustWrite::Written)
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
        let seen = self.pair(policy).await?;
        let items = vec![
            TransactWriteItem::builder().delete(delete).build(),
            self.delete(key(
                issuer_pk(&policy.issuer),
                format!("{org}/{}", policy.name),
            )),
            self.pair_put(org, policy, seen.as_ref(), -1),
            self.audit_put(audit),
        ];
        self.transact(items, None).await
    }
}
