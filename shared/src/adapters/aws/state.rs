//! State records, versions and audit in DynamoDB. Every mutation of a state commits in one
//! `TransactWriteItems`, conditioned on the state record's revision and carrying a
//! `ClientRequestToken` derived from the commit, so a lost race is a `Conflict` the services
//! re-decide on, and a replay of the same commit is answered as a success.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{ConditionCheck, Delete, TransactWriteItem};
use sha2::{Digest, Sha256};

use super::catalog::DynamoCatalog;
use super::describe_failure;
use super::items::*;
use crate::domain::deleted::DeletedState;
use crate::domain::record::StateRecord;
use crate::domain::version::VersionRecord;
use crate::domain::Timestamp;
use crate::ports::{
    AuditEntry, AuditQuery, AuditRecord, Commit, DeletedChange, OrgAndState, OrgRecord, SlotChange,
    SlotOwner, StateCatalog, StepCheck, StoreError,
};

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
    /// An update of a record that bumps its revision to `revision`, conditioned on the one
    /// before; its inline content (`keep_body`) stays.
    fn revised(&self, at: Item, rec: String, revision: u64, keep_body: bool) -> TransactWriteItem {
        self.record_update(
            at,
            rec,
            Some(revision),
            None,
            keep_body,
            Some((
                format!("{REV} = :expected"),
                Some(std::collections::HashMap::from([(
                    ":expected".to_owned(),
                    n(revision - 1),
                )])),
            )),
        )
    }

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
                    let pk = versions_pk(&commit.org, &commit.home, &record.incarnation);
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
            let item = mark_item(&commit.org, &commit.home, &mark.incarnation, mark.below);
            items.push(self.put(item, None));
        }
        match &commit.deleted {
            Some(DeletedChange::Keep(deleted)) => {
                items.push(self.put(deleted_item(deleted), Some("attribute_not_exists(pk)")));
            }
            Some(DeletedChange::Take { id, revision }) => {
                let delete = Delete::builder()
                    .table_name(&self.table)
                    .set_key(Some(key(org_pk(&commit.org), deleted_sk(id))))
                    .condition_expression(format!("{REV} = :revision"))
                    .expression_attribute_values(":revision", n(*revision))
                    .build()
                    .expect("table, key and condition are set");
                items.push(TransactWriteItem::builder().delete(delete).build());
            }
            None => {}
        }
        if let Some(change) = &commit.inventory {
            items.extend(self.inventory_items(&commit.org, &commit.name, change));
        }
        for entry in &commit.audit {
            items.push(self.audit_put(entry));
        }
        items
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

    /// Both items are read, then written in one transaction conditioned on the owner's
    /// revision and on the version item holding exactly the record read, so a slot changed
    /// in between (another re-wrap, a commit) is a `Conflict`.
    async fn replace_key_slot(&self, change: &SlotChange<'_>) -> Result<(), StoreError> {
        let pk = versions_pk(change.org, change.home, change.incarnation);
        let version_item = self.get(key(pk.clone(), number_sk(change.version))).await?;
        let Some(version_item) = version_item else {
            return Err(StoreError::Conflict);
        };
        let mut stored: VersionRecord = record(&version_item)?;
        if stored.slot() != *change.old {
            return Err(StoreError::Conflict);
        }
        stored.set_slot(change.new);
        let old_text = string(&version_item, REC)?.to_owned();
        // Updates, not puts: an inline version's content, on its item and (for the latest)
        // the state's, stays as it is; a re-wrap changes only the slot.
        let update_version = self.record_update(
            key(pk, number_sk(change.version)),
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
        let update_owner = match change.owner {
            SlotOwner::State(name) => {
                let state_key = key(org_pk(change.org), state_sk(name));
                let state: StateRecord = self
                    .get_record(state_key.clone())
                    .await?
                    .ok_or(StoreError::Conflict)?;
                if state.incarnation != change.incarnation {
                    return Err(StoreError::Conflict);
                }
                let state = state.with_key_slot(change.version, change.new);
                let inline = state.latest.as_ref().is_some_and(|l| l.inline);
                self.revised(state_key, to_json(&state), state.revision, inline)
            }
            SlotOwner::Deleted(id) => {
                let deleted_key = key(org_pk(change.org), deleted_sk(id));
                let mut deleted: DeletedState = self
                    .get_record(deleted_key.clone())
                    .await?
                    .ok_or(StoreError::Conflict)?;
                if deleted.record.incarnation != change.incarnation {
                    return Err(StoreError::Conflict);
                }
                deleted.revision += 1;
                self.revised(deleted_key, to_json(&deleted), deleted.revision, true)
            }
        };
        self.transact(vec![update_version, update_owner], None)
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
