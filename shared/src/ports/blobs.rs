//! The blob port: sealed content by blob key, written whole or as it is made, read whole or as
//! it is sent. No adapter, no I/O.

use async_trait::async_trait;

use super::StoreError;
use crate::domain::Timestamp;

/// A stored object as [`BlobStore::open`] gives it.
pub enum OpenedBlob {
    /// All of its bytes.
    Whole(Vec<u8>),
    /// Its first bytes and a reader of the ones after them, `len` bytes in all: an object
    /// read as it is sent, so a read holds a segment of it and not all of it.
    Reading {
        head: Vec<u8>,
        rest: Box<dyn std::io::Read + Send>,
        len: u64,
    },
}

/// What writes a new object's bytes, in order, to the writer it is given: a large state
/// sealed as it is made. It runs off the async threads.
pub type WriteObject = Box<dyn FnOnce(&mut dyn std::io::Write) -> std::io::Result<()> + Send>;

/// Sealed state content by blob key. Keys are made of ids, never of state names.
#[async_trait]
pub trait BlobStore: Send + Sync {
    /// Stores a new object durably before returning.
    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), StoreError>;
    /// Stores the new object `write` writes, as durably as [`BlobStore::put`]. A store that
    /// can write an object as it is made never holds it whole; one whose writes take the
    /// whole object gathers it first. A `write` that fails stores nothing.
    async fn put_written(&self, key: &str, write: WriteObject) -> Result<(), StoreError>;
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// The object to read from its start, with at least its first `head` bytes (all of them
    /// when it is shorter) at hand. A store that can read an object as it goes gives a
    /// reader; one that cannot, or whose callers gather the whole object anyway (a Lambda
    /// function answers with one payload, built in the object's own buffer), gives it whole.
    async fn open(&self, key: &str, head: usize) -> Result<Option<OpenedBlob>, StoreError> {
        let _ = head;
        Ok(self.get(key).await?.map(OpenedBlob::Whole))
    }
    async fn delete(&self, key: &str) -> Result<(), StoreError>;
    /// Removes what puts that died part way left behind before `before` (never a put under
    /// way); returns how many. Only a store whose put leaves something has anything to do.
    async fn remove_leftovers(&self, before: Timestamp) -> Result<usize, StoreError>;
}
