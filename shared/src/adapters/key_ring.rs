//! The key services of one deployment: the one the settings choose wraps every new data key;
//! a version is opened by the service its recorded key id names (`platform:`, `kms:`,
//! `transit:<tag>:`; the longest prefix wins), not by today's setting, so versions written
//! before the setting changed stay readable as long as their key is still configured. A
//! re-wrap goes to the wrapping service's current key: inside that service when it opens the
//! version itself, else unwrapped by the service that opens it and wrapped by the wrapping
//! one (a move between backends, a retired platform key).

use std::sync::Arc;

use async_trait::async_trait;
use zeroize::Zeroizing;

use crate::ports::{key_backend, DataKey, KeyContext, KeyError, KeyOpener, KeyService, WrappedKey};

/// The wrapping service and, by key id prefix, the services that open versions.
pub struct KeyRing {
    wraps: Arc<dyn KeyService>,
    /// What the wrapping service is called, for a version no service opens.
    wraps_name: String,
    opens: Vec<(String, Arc<dyn KeyOpener>)>,
}

/// Index in `opens` of the wrapping service's own prefix.
const WRAPPING: usize = 0;

impl KeyRing {
    /// `wraps` makes every new data key and opens the key ids beginning with `prefix`.
    pub fn new(wraps: Arc<dyn KeyService>, name: &str, prefix: &str) -> Self {
        Self {
            opens: vec![(prefix.to_owned(), wraps.clone() as Arc<dyn KeyOpener>)],
            wraps,
            wraps_name: name.to_owned(),
        }
    }

    /// Also opens (never wraps) the key ids beginning with `prefix` by `service`.
    #[must_use]
    pub fn opening(mut self, prefix: &str, service: Arc<dyn KeyOpener>) -> Self {
        self.opens.push((prefix.to_owned(), service));
        self
    }

    /// Which of `opens` opens `key_id`: the longest prefix that matches, so
    /// `transit:internal:` wins over a catch-all.
    fn opener_of(&self, key_id: &str) -> Option<usize> {
        self.opens
            .iter()
            .enumerate()
            .filter(|(_, (prefix, _))| key_id.starts_with(prefix.as_str()))
            .max_by_key(|(_, (prefix, _))| prefix.len())
            .map(|(at, _)| at)
    }

    fn wrong_key(&self, key_id: &str) -> KeyError {
        KeyError::WrongKey {
            stored: key_id.to_owned(),
            configured: self.wraps_name.clone(),
        }
    }
}

#[async_trait]
impl KeyService for KeyRing {
    async fn data_key(&self, context: &KeyContext<'_>) -> Result<DataKey, KeyError> {
        self.wraps.data_key(context).await
    }

    fn wrapping_backend(&self) -> Option<&str> {
        Some(key_backend(&self.wraps_name))
    }

    async fn current_key_id(&self, context: &KeyContext<'_>) -> Result<String, KeyError> {
        self.wraps.current_key_id(context).await
    }

    async fn wrap_key(
        &self,
        plaintext: &[u8; 32],
        context: &KeyContext<'_>,
    ) -> Result<WrappedKey, KeyError> {
        self.wraps.wrap_key(plaintext, context).await
    }

    async fn rewrap_key(
        &self,
        key_id: &str,
        wrapped: &[u8],
        context: &KeyContext<'_>,
    ) -> Result<WrappedKey, KeyError> {
        match self.opener_of(key_id) {
            Some(WRAPPING) => self.wraps.rewrap_key(key_id, wrapped, context).await,
            Some(at) => {
                let plaintext = self.opens[at]
                    .1
                    .unwrap_key(key_id, wrapped, context)
                    .await?;
                self.wraps.wrap_key(&plaintext, context).await
            }
            None => Err(self.wrong_key(key_id)),
        }
    }
}

#[async_trait]
impl KeyOpener for KeyRing {
    async fn unwrap_key(
        &self,
        key_id: &str,
        wrapped: &[u8],
        context: &KeyContext<'_>,
    ) -> Result<Zeroizing<[u8; 32]>, KeyError> {
        match self.opener_of(key_id) {
            Some(at) => self.opens[at].1.unwrap_key(key_id, wrapped, context).await,
            None => Err(self.wrong_key(key_id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::PlatformKey;

    const CTX: KeyContext<'static> = KeyContext {
        org: "acme",
        state: "net",
    };

    #[tokio::test]
    async fn a_version_opens_by_its_recorded_key_not_by_the_wrapping_one() {
        let old = Arc::new(PlatformKey::generate());
        let new = Arc::new(PlatformKey::generate());
        let written = old.data_key(&CTX).await.unwrap();
        let ring = KeyRing::new(new.clone(), new.key_id(), new.key_id())
            .opening(old.key_id(), old.clone());
        let back = ring
            .unwrap_key(&written.key_id, &written.wrapped, &CTX)
            .await
            .unwrap();
        assert_eq!(*back, *written.plaintext);
        assert_eq!(ring.data_key(&CTX).await.unwrap().key_id, new.key_id());
        let alone = KeyRing::new(new.clone(), new.key_id(), new.key_id());
        let err = alone
            .unwrap_key(&written.key_id, &written.wrapped, &CTX)
            .await
            .unwrap_err();
        assert!(matches!(err, KeyError::WrongKey { ref stored, .. } if stored == old.key_id()));
    }

    /// A retired platform key opens its versions, and a re-wrap moves each to the current
    /// key: once the retired key is gone, the re-wrapped slot still opens.
    #[tokio::test]
    async fn a_rewrap_moves_a_retired_keys_version_to_the_wrapping_key() {
        let (old, new) = (
            Arc::new(PlatformKey::generate()),
            Arc::new(PlatformKey::generate()),
        );
        let written = old.data_key(&CTX).await.unwrap();
        let ring =
            KeyRing::new(new.clone(), new.key_id(), "platform:").opening(old.key_id(), old.clone());
        let moved = ring
            .rewrap_key(&written.key_id, &written.wrapped, &CTX)
            .await
            .unwrap();
        assert_eq!(moved.key_id, new.key_id());
        assert_eq!(ring.current_key_id(&CTX).await.unwrap(), new.key_id());
        let alone = KeyRing::new(new.clone(), new.key_id(), "platform:");
        let back = alone.unwrap_key(&moved.key_id, &moved.wrapped, &CTX).await;
        assert_eq!(*back.unwrap(), *written.plaintext);
    }

    #[tokio::test]
    async fn the_longest_matching_prefix_opens() {
        let (catch_all, specific) = (
            Arc::new(PlatformKey::generate()),
            Arc::new(PlatformKey::generate()),
        );
        let written = specific.data_key(&CTX).await.unwrap();
        let ring = KeyRing::new(catch_all.clone(), "kms:x", "")
            .opening(specific.key_id(), specific.clone());
        let back = ring
            .unwrap_key(&written.key_id, &written.wrapped, &CTX)
            .await
            .unwrap();
        assert_eq!(*back, *written.plaintext);
    }
}
