//! App states and their archives in DynamoDB. An app state's record sits beside the org's
//! states (`ORG#<org>` / `APP#<name>`), its archives in a partition of their own keyed by
//! commit ID (`APPARC#<org>/<name>` / `<commit id>`), so they list newest first with one
//! query. A change commits in one `TransactWriteItems` conditioned on the record's revision.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use sha2::{Digest, Sha256};

use super::catalog::DynamoCatalog;
use super::items::*;
use crate::domain::app::{AppRecord, ArchiveRecord};
use crate::ports::{AppCatalog, AppCommit, StoreError};

fn app_sk(name: &str) -> String {
    format!("APP#{name}")
}

fn archives_pk(org: &str, name: &str) -> String {
    format!("APPARC#{org}/{name}")
}

/// The request token of a change: a replay of the same commit succeeds without applying
/// twice, as a state's commit does.
fn request_token(commit: &AppCommit) -> String {
    let mut hash = Sha256::new();
    hash.update(b"app\0");
    hash.update(commit.expected_revision.to_be_bytes());
    hash.update(to_json(&commit.app).as_bytes());
    hash.update(commit.deleted.as_deref().unwrap_or("").as_bytes());
    let digest = hash.finalize();
    crate::ids::hex(&digest[..16])
}

impl DynamoCatalog {
    fn app_commit_items(&self, commit: &AppCommit) -> Vec<TransactWriteItem> {
        let (org, name) = (&commit.app.org, &commit.app.name);
        let expected = commit.expected_revision;
        let condition = if expected == 0 {
            "attribute_not_exists(pk)".to_owned()
        } else {
            format!("{REV} = :expected")
        };
        let values = (expected != 0)
            .then(|| std::collections::HashMap::from([(":expected".to_owned(), n(expected))]));
        let mut item = record_item(org_pk(org), app_sk(name), &commit.app);
        item.insert(REV.into(), n(commit.app.revision));
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition)
            .set_expression_attribute_values(values)
            .build()
            .expect("table and item are set");
        let mut items = vec![TransactWriteItem::builder().put(put).build()];
        if let Some(archive) = &commit.sealed {
            let item = record_item(archives_pk(org, name), archive.commit_id.clone(), archive);
            items.push(self.put(item, None));
        }
        if let Some(commit_id) = &commit.deleted {
            items.push(self.delete(key(archives_pk(org, name), commit_id.clone())));
        }
        for blob in &commit.committed_blobs {
            items.push(self.delete(key(pending_pk(blob), ONLY)));
        }
        for blob in &commit.doomed_blobs {
            items.push(self.put(doomed_item(blob, commit.at), None));
        }
        for entry in &commit.audit {
            items.push(self.audit_put(entry));
        }
        items
    }

    /// Archives of one app state in commit ID order (`forward`) or newest first, those whose
    /// commit ID stands in `bound`'s relation (`<`, `>`) to its commit ID when one is given.
    async fn query_archives(
        &self,
        org: &str,
        name: &str,
        bound: Option<(&str, &str)>,
        forward: bool,
        limit: usize,
    ) -> Result<Vec<ArchiveRecord>, StoreError> {
        let mut query = self
            .client
            .query()
            .table_name(&self.table)
            .expression_attribute_values(":pk", s(archives_pk(org, name)))
            .scan_index_forward(forward)
            .consistent_read(true)
            .limit(i32::try_from(limit).unwrap_or(i32::MAX));
        query = match bound {
            Some((op, commit_id)) => query
                .key_condition_expression(format!("pk = :pk AND sk {op} :bound"))
                .expression_attribute_values(":bound", s(commit_id)),
            None => query.key_condition_expression("pk = :pk"),
        };
        self.query_all(query, Some(limit))
            .await?
            .iter()
            .map(record)
            .collect()
    }
}

#[async_trait]
impl AppCatalog for DynamoCatalog {
    async fn app(&self, org: &str, name: &str) -> Result<Option<AppRecord>, StoreError> {
        self.get_record(key(org_pk(org), app_sk(name))).await
    }

    async fn apps(
        &self,
        org: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AppRecord>, StoreError> {
        self.org_records(org, app_sk(after.unwrap_or("")), "APP$", limit)
            .await
    }

    async fn archive(
        &self,
        org: &str,
        name: &str,
        commit_id: &str,
    ) -> Result<Option<ArchiveRecord>, StoreError> {
        self.get_record(key(archives_pk(org, name), commit_id))
            .await
    }

    async fn archives(
        &self,
        org: &str,
        name: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ArchiveRecord>, StoreError> {
        let bound = before.map(|b| ("<", b));
        self.query_archives(org, name, bound, false, limit).await
    }

    async fn archive_after(
        &self,
        org: &str,
        name: &str,
        after: &str,
    ) -> Result<Option<ArchiveRecord>, StoreError> {
        let found = self
            .query_archives(org, name, Some((">", after)), true, 1)
            .await?;
        Ok(found.into_iter().next())
    }

    async fn commit_app(&self, commit: AppCommit) -> Result<(), StoreError> {
        let token = request_token(&commit);
        self.transact(self.app_commit_items(&commit), Some(token))
            .await
    }
}
