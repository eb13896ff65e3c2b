//! Protected-state rules in DynamoDB: inside the org's settings item (`ORG#<org>` /
//! settings), so the backend's read of the settings, batched with the state's item, brings
//! them at no further call. A rule's write compares and swaps the whole settings record, as
//! an allocation's change does, so neither can lose the other.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};

use super::items::*;
use super::DynamoCatalog;
use crate::domain::permission::Allocation;
use crate::domain::protection::Protection;
use crate::ports::{AuditEntry, OrgRecord, ProtectionCatalog, StoreError};

impl DynamoCatalog {
    async fn swap_protection(
        &self,
        org: &str,
        expected: Option<&Protection>,
        new: Option<&Protection>,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let pattern = &new.or(expected).expect("a rule to write or remove").pattern;
        let stored = self.get(key(org_pk(org), SETTINGS_SK)).await?;
        let existing: Option<OrgRecord> = stored.as_ref().map(record).transpose()?;
        let mut settings = existing.unwrap_or_else(|| OrgRecord {
            inventory_key: None,
            org: org.to_owned(),
            allocation: Allocation::default(),
            created_at: audit.at,
            protections: Vec::new(),
        });
        if settings.protections.iter().find(|p| &p.pattern == pattern) != expected {
            return Err(StoreError::Conflict);
        }
        settings.protections.retain(|p| &p.pattern != pattern);
        settings.protections.extend(new.cloned());
        settings
            .protections
            .sort_by(|a, b| a.pattern.cmp(&b.pattern));
        // Conditioned on the item being as read (or still absent), its JSON exactly: a change
        // of the allocation or of another rule in between fails the transaction.
        let (condition, values) = match stored.as_ref().and_then(|i| i.get(REC)) {
            Some(seen) => (
                format!("{REC} = :read"),
                Some(HashMap::from([(":read".to_owned(), seen.clone())])),
            ),
            None => ("attribute_not_exists(pk)".to_owned(), None),
        };
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(record_item(org_pk(org), SETTINGS_SK, &settings)))
            .condition_expression(condition)
            .set_expression_attribute_values(values)
            .build()
            .expect("table and item are set");
        let settings = TransactWriteItem::builder().put(put).build();
        self.transact(vec![settings, self.audit_put(audit)], None)
            .await
    }
}

#[async_trait]
impl ProtectionCatalog for DynamoCatalog {
    async fn put_protection(
        &self,
        org: &str,
        expected: Option<&Protection>,
        protection: &Protection,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        self.swap_protection(org, expected, Some(protection), audit)
            .await
    }

    async fn delete_protection(
        &self,
        org: &str,
        protection: &Protection,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        self.swap_protection(org, Some(protection), None, audit)
            .await
    }
}
