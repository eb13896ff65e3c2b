//! The key services of one deployment: the one the settings choose wraps every new data key;
//! a version is opened by the service its recorded key id names (`platform:`, `kms:`,
//! `transit:<tag>:`; the longest prefix wins), not by today's setting, so versions written
//! before the setting changed stay readable as long as their key is still configured.

use std::sync::Arc;

use async_trait::async_trait;
use zeroize::Zeroizing;

use crate::ports::{DataKey, KeyContext, KeyError, KeyOpener, KeyService};

/// The wrapping service and, by key id prefix, the services that open versions.
pub struct KeyRing {
    wraps: Arc<dyn KeyService>,
    /// What the wrapping service is called, for a version no service opens.
    wraps_name: String,
    opens: Vec<(String, Arc<dyn KeyOpener>)>,
}

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
}

#[async_trait]
impl KeyService for KeyRing {
    async fn data_key(&self, context: &KeyContext<'_>) -> Result<DataKey, KeyError> {
        self.wraps.data_key(context).await
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
        // The longest prefix that matches: `transit:internal:` before a catch-all.
        let opener = self
            .opens
            .iter()
            .filter(|(prefix, _)| key_id.starts_with(prefix.as_str()))
            .max_by_key(|(prefix, _)| prefix.len());
        match opener {
            Some((_, service)) => service.unwrap_key(key_id, wrapped, context).await,
            None => Err(KeyError::WrongKey {
                stored: key_id.to_owned(),
                configured: self.wraps_name.clone(),
            }),
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
