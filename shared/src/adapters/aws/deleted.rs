//! Deleted states in DynamoDB: an item each in the org's partition (`DELETED#<id>`), kept by
//! a delete's transaction and taken by a restore's (in `state`), listed, purged and stored as
//! a migration copies them here. The item's `rev` is what a restore and a purge are
//! conditioned on.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Delete, TransactWriteItem};

use super::items::*;
use super::DynamoCatalog;
use crate::domain::deleted::DeletedState;
use crate::domain::version::VersionRecord;
use crate::ports::{AuditEntry, DeletedCatalog, StoreError, VersionMark};

#[async_trait]
impl DeletedCatalog for DynamoCatalog {
    async fn deleted_states(
        &self,
        org: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeletedState>, StoreError> {
        self.org_records(org, deleted_sk(after.unwrap_or("")), "DELETED$", limit)
            .await
    }

    async fn deleted_state(&self, org: &str, id: &str) -> Result<Option<DeletedState>, StoreError> {
        self.get_record(key(org_pk(org), deleted_sk(id))).await
    }

    /// One transaction: the item's delete conditioned on its revision, the version mark,
    /// the audit entry.
    async fn purge_deleted(
        &self,
        deleted: &DeletedState,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let remove = Delete::builder()
            .table_name(&self.table)
            .set_key(Some(key(org_pk(&deleted.org), deleted_sk(&deleted.id))))
            .condition_expression(format!("{REV} = :revision"))
            .expression_attribute_values(":revision", n(deleted.revision))
            .build()
            .expect("table, key and condition are set");
        let record = &deleted.record;
        let mark = mark_item(
            &record.org,
            record.home(),
            &record.incarnation,
            VersionMark::ALL,
        );
        let items = vec![
            TransactWriteItem::builder().delete(remove).build(),
            self.put(mark, None),
            self.audit_put(audit),
        ];
        self.transact(items, None).await
    }

    /// One transaction: the version's item (with its sealed bytes when inline) and the blob's
    /// pending record gone.
    async fn put_deleted_version(
        &self,
        deleted: &DeletedState,
        version: &VersionRecord,
        sealed: Option<&[u8]>,
    ) -> Result<(), StoreError> {
        let record = &deleted.record;
        let pk = versions_pk(&record.org, record.home(), &record.incarnation);
        let mut items = vec![self.record_update(
            key(pk, number_sk(version.version)),
            to_json(version),
            None,
            sealed,
            version.inline,
            None,
        )];
        if !version.inline {
            items.push(self.delete(key(pending_pk(&version.blob), ONLY)));
        }
        self.transact(items, None).await
    }

    /// One transaction: the item, conditioned on there being none, and the audit entry.
    async fn put_deleted(
        &self,
        deleted: &DeletedState,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let items = vec![
            self.put(deleted_item(deleted), Some("attribute_not_exists(pk)")),
            self.audit_put(audit),
        ];
        self.transact(items, None).await
    }
}
