//! The issuers' keys kept in DynamoDB for every process of the deployment: one item per
//! issuer (`ISSUERKEYS#<issuer>`), holding the last key set fetched and when the last fetch
//! started (`tried`, also an attribute of its own for the condition). A process claims the
//! next fetch by putting its start on the condition that `tried` is still what it read, so a
//! flood that scales the exchange's function out still fetches once a minute.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};

use super::items::*;
use super::DynamoCatalog;
use crate::domain::{rfc3339, Timestamp};
use crate::ports::{IssuerKeyStore, KeptKeys, StoreError};

const TRIED: &str = "tried";

#[async_trait]
impl IssuerKeyStore for DynamoCatalog {
    async fn kept_keys(&self, issuer: &str) -> Result<Option<KeptKeys>, StoreError> {
        self.get_record(key(issuer_keys_pk(issuer), ONLY)).await
    }

    async fn put_kept_keys(
        &self,
        kept: &KeptKeys,
        expected_tried_at: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        let mut item = record_item(issuer_keys_pk(&kept.issuer), ONLY, kept);
        item.insert(TRIED.into(), s(rfc3339(kept.tried_at)));
        let put = Put::builder().table_name(&self.table).set_item(Some(item));
        let put = match expected_tried_at {
            None => put.condition_expression("attribute_not_exists(pk)"),
            Some(at) => put
                .condition_expression("#tried = :tried")
                .expression_attribute_names("#tried", TRIED)
                .expression_attribute_values(":tried", s(rfc3339(at))),
        };
        let put = put.build().expect("table and item are set");
        // A transaction of one, as every other write of the functions is: no call beyond
        // those their roles already hold.
        self.transact(vec![TransactWriteItem::builder().put(put).build()], None)
            .await
    }
}
