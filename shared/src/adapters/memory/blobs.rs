//! Blobs in memory: a map of bytes; a put is whole or not at all, so nothing is left over.

use async_trait::async_trait;

use super::MemoryStore;
use crate::domain::Timestamp;
use crate::ports::{BlobStore, StoreError, WriteObject};

#[async_trait]
impl BlobStore for MemoryStore {
    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        self.lock().blobs.insert(key.to_owned(), bytes);
        Ok(())
    }

    async fn put_written(&self, key: &str, write: WriteObject) -> Result<(), StoreError> {
        crate::adapters::put_gathered(self, key, write).await
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.lock().blobs.get(key).cloned())
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.lock().blobs.remove(key);
        Ok(())
    }

    async fn remove_leftovers(&self, _before: Timestamp) -> Result<usize, StoreError> {
        // A put here is one insert: it never leaves part of itself behind.
        Ok(0)
    }
}
