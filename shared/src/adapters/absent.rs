//! Stand-ins for the parts a Lambda function is built without: a function whose routes need
//! no blob builds no S3 client, and one whose routes open, seal and report no key builds no
//! key service's client (KMS, Transit). No route of such a function calls them; a call that
//! still arrives is a defect of the deployment or of a row's `needs`, refused as a fault an
//! operator must look at, never a panic.

use async_trait::async_trait;
use zeroize::Zeroizing;

use crate::domain::Timestamp;
use crate::ports::{
    BlobStore, DataKey, KeyContext, KeyError, KeyOpener, KeyService, OpenedBlob, StoreError,
    WrappedKey, WriteObject,
};

/// The blob store of a function whose routes read and write no blob.
pub struct NoBlobs {
    pub function: &'static str,
}

impl NoBlobs {
    fn refuse(&self) -> StoreError {
        StoreError::Unavailable(format!(
            "the {} function is built without a blob store: a route that needs one is served by the wrong function, or its row's needs omit GetBlob or PutBlob",
            self.function
        ))
    }
}

#[async_trait]
impl BlobStore for NoBlobs {
    async fn put(&self, _: &str, _: Vec<u8>) -> Result<(), StoreError> {
        Err(self.refuse())
    }

    async fn put_written(&self, _: &str, _: WriteObject) -> Result<(), StoreError> {
        Err(self.refuse())
    }

    async fn get(&self, _: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Err(self.refuse())
    }

    async fn open(&self, _: &str, _: usize) -> Result<Option<OpenedBlob>, StoreError> {
        Err(self.refuse())
    }

    async fn delete(&self, _: &str) -> Result<(), StoreError> {
        Err(self.refuse())
    }

    async fn remove_leftovers(&self, _: Timestamp) -> Result<usize, StoreError> {
        Err(self.refuse())
    }
}

/// The key service of a function whose routes need none, in a deployment that configures
/// one: its routes check that a key is configured (every state route answers 503 without
/// one), and never call it.
pub struct NoKeys {
    pub function: &'static str,
}

impl NoKeys {
    fn refuse(&self) -> KeyError {
        KeyError::Unavailable(format!(
            "the {} function is built without a key service: a route that needs one is served by the wrong function, or its row's needs omit a key call",
            self.function
        ))
    }
}

#[async_trait]
impl KeyOpener for NoKeys {
    async fn unwrap_key(
        &self,
        _: &str,
        _: &[u8],
        _: &KeyContext<'_>,
    ) -> Result<Zeroizing<[u8; 32]>, KeyError> {
        Err(self.refuse())
    }
}

#[async_trait]
impl KeyService for NoKeys {
    async fn data_key(&self, _: &KeyContext<'_>) -> Result<DataKey, KeyError> {
        Err(self.refuse())
    }

    async fn current_key_id(&self, _: &KeyContext<'_>) -> Result<String, KeyError> {
        Err(self.refuse())
    }

    async fn wrap_key(&self, _: &[u8; 32], _: &KeyContext<'_>) -> Result<WrappedKey, KeyError> {
        Err(self.refuse())
    }

    async fn rewrap_key(
        &self,
        _: &str,
        _: &[u8],
        _: &KeyContext<'_>,
    ) -> Result<WrappedKey, KeyError> {
        Err(self.refuse())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_call_is_refused_naming_the_function() {
        let blobs = NoBlobs { function: "lock" };
        match blobs.get("b").await {
            Err(StoreError::Unavailable(why)) => assert!(why.contains("lock function"), "{why}"),
            other => panic!("{other:?}"),
        }
        let keys = NoKeys { function: "list" };
        let context = KeyContext {
            org: "acme",
            state: "net",
        };
        match keys.data_key(&context).await {
            Err(KeyError::Unavailable(why)) => assert!(why.contains("list function"), "{why}"),
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("a data key from no key service"),
        }
    }
}
