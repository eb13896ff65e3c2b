//! The key port: data keys made, unwrapped and re-wrapped by a key service (`KeyService`), or
//! only unwrapped (`KeyOpener`) by one kept to open old versions. No adapter, no I/O.

use async_trait::async_trait;
use zeroize::Zeroizing;

/// What a data key is bound to (KMS's encryption context).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyContext<'a> {
    pub org: &'a str,
    pub state: &'a str,
}

/// A fresh data key: its plaintext for this one seal, and its wrapped form to store.
pub struct DataKey {
    pub plaintext: Zeroizing<[u8; 32]>,
    pub wrapped: Vec<u8>,
    /// What wrapped it: `platform:<fingerprint>`, `kms:<key arn>` or
    /// `transit:<tag>:<key>:v<key version>`.
    pub key_id: String,
}

/// A data key wrapped anew (a re-wrap, a move between backends): a version's new key slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrappedKey {
    /// What wrapped it, as [`DataKey::key_id`].
    pub key_id: String,
    pub wrapped: Vec<u8>,
}

/// Which kind of key service a recorded key id names: `transit`, `kms` or `platform`, as
/// the versions list and the audit show it.
pub fn key_backend(key_id: &str) -> &str {
    key_id.split_once(':').map_or(key_id, |(kind, _)| kind)
}

/// Why a key operation failed.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The object was sealed under another key than the one configured.
    #[error("this version's data key was wrapped by {stored}, but the configured key is {configured}; configure the key it was written with")]
    WrongKey { stored: String, configured: String },
    /// The wrapped key does not open: damaged, or a different context.
    #[error("the data key does not unwrap under {key_id}: the stored key is damaged or belongs to another state")]
    Unwrap { key_id: String },
    /// The key service is down, throttled or refused: a transient fault.
    #[error("key service unavailable: {0}")]
    Unavailable(String),
}

/// Unwrapping stored data keys: what a service that only keeps old versions readable does.
#[async_trait]
pub trait KeyOpener: Send + Sync {
    async fn unwrap_key(
        &self,
        key_id: &str,
        wrapped: &[u8],
        context: &KeyContext<'_>,
    ) -> Result<Zeroizing<[u8; 32]>, KeyError>;
}

/// Data keys: a new one per version, unwrapping stored ones, and re-wrapping them.
#[async_trait]
pub trait KeyService: KeyOpener {
    async fn data_key(&self, context: &KeyContext<'_>) -> Result<DataKey, KeyError>;

    /// The kind of service that wraps new data keys (`platform`, `kms`, `transit`, as
    /// [`key_backend`] reads a key id), so a failed call can be counted against it before
    /// any key id says; `None` for a service that does not know (a test's double).
    fn wrapping_backend(&self) -> Option<&str> {
        None
    }

    /// The key id a data key made now for `context` records (the newest version of the
    /// key): where a re-wrap takes a version.
    async fn current_key_id(&self, context: &KeyContext<'_>) -> Result<String, KeyError>;

    /// Wraps a data key unwrapped elsewhere (a move from another backend) under the key
    /// [`current_key_id`](Self::current_key_id) names.
    async fn wrap_key(
        &self,
        plaintext: &[u8; 32],
        context: &KeyContext<'_>,
    ) -> Result<WrappedKey, KeyError>;

    /// Re-wraps a stored data key under the key [`current_key_id`](Self::current_key_id)
    /// names. Where the stored key is one the service holds, the data key never leaves it
    /// (Transit `rewrap`, KMS `ReEncrypt`); otherwise it is unwrapped and wrapped again here,
    /// in memory only ([`rewrap_in_memory`](Self::rewrap_in_memory), what a service that
    /// cannot re-wrap on its side, such as the platform key, does for every key). The
    /// content it seals is never touched.
    async fn rewrap_key(
        &self,
        key_id: &str,
        wrapped: &[u8],
        context: &KeyContext<'_>,
    ) -> Result<WrappedKey, KeyError> {
        self.rewrap_in_memory(key_id, wrapped, context).await
    }

    /// Unwraps a stored data key and wraps it again under the current key, in this process's
    /// memory only: the one fallback of [`rewrap_key`](Self::rewrap_key) for a key the
    /// service cannot re-wrap on its side.
    async fn rewrap_in_memory(
        &self,
        key_id: &str,
        wrapped: &[u8],
        context: &KeyContext<'_>,
    ) -> Result<WrappedKey, KeyError> {
        let plaintext = self.unwrap_key(key_id, wrapped, context).await?;
        self.wrap_key(&plaintext, context).await
    }
}
