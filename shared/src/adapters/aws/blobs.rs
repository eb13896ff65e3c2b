//! Sealed blobs in S3, one object per version content. Objects are only ever created (never
//! overwritten: `If-None-Match: *`), read and deleted; keys are made of ids.

use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;

use super::describe_failure;
use crate::domain::Timestamp;
use crate::ports::{BlobStore, StoreError, WriteObject};

/// How many times a put is tried again after S3's 409 ConditionalRequestConflict (another
/// conditional write to the key in flight: with keys of random ids, only our own retry).
const PUT_ATTEMPTS: usize = 3;

/// The blob store in one S3 bucket.
pub struct S3Blobs {
    client: Client,
    bucket: String,
}

impl S3Blobs {
    pub fn new(client: Client, bucket: &str) -> Self {
        Self {
            client,
            bucket: bucket.to_owned(),
        }
    }
}

#[async_trait]
impl BlobStore for S3Blobs {
    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        let body = bytes::Bytes::from(bytes);
        let mut last = String::new();
        for _ in 0..PUT_ATTEMPTS {
            let result = self
                .client
                .put_object()
                .bucket(&self.bucket)
                .key(key)
                .if_none_match("*")
                .body(ByteStream::from(body.clone()))
                .send()
                .await;
            let Err(err) = result else {
                return Ok(());
            };
            match err.raw_response().map(|r| r.status().as_u16()) {
                // The object exists: keys are fresh random ids, so it is this very put,
                // landed by an earlier attempt whose answer was lost.
                Some(412) => return Ok(()),
                Some(409) => last = describe_failure("PutObject", &err),
                _ => return Err(StoreError::Unavailable(describe_failure("PutObject", &err))),
            }
        }
        Err(StoreError::Unavailable(last))
    }

    /// S3 takes an object whole (a multipart upload would cost a call per 5 MiB part and
    /// a sweep of the ones a crash abandons), so it is gathered first.
    async fn put_written(&self, key: &str, write: WriteObject) -> Result<(), StoreError> {
        crate::adapters::put_gathered(self, key, write).await
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let result = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await;
        let output = match result {
            Ok(output) => output,
            Err(err) if err.as_service_error().is_some_and(|e| e.is_no_such_key()) => {
                return Ok(None)
            }
            Err(err) => return Err(StoreError::Unavailable(describe_failure("GetObject", &err))),
        };
        let expected = output
            .content_length()
            .and_then(|l| usize::try_from(l).ok())
            .unwrap_or(0);
        let mut bytes = Vec::with_capacity(expected);
        let mut body = output.body;
        while let Some(chunk) = body.try_next().await.map_err(|e| {
            StoreError::Unavailable(format!("reading object {key} from S3 failed: {e}"))
        })? {
            bytes.extend_from_slice(&chunk);
        }
        Ok(Some(bytes))
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| StoreError::Unavailable(describe_failure("DeleteObject", &e)))?;
        Ok(())
    }

    async fn remove_leftovers(&self, _before: Timestamp) -> Result<usize, StoreError> {
        // A put is one PutObject, which S3 stores whole or not at all; the bucket's lifecycle
        // rule aborts any incomplete multipart upload.
        Ok(0)
    }
}
