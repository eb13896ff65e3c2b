//! The platform key: 32 bytes an operator keeps outside the database, which wraps each
//! version's data key with AES-256-GCM. Its fingerprint names it in every sealed object, so
//! a changed key gives a clear "wrong key" error instead of a decryption failure.

use aes_gcm::aead::rand_core::RngCore;
use aes_gcm::aead::{Aead, KeyInit, OsRng, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use async_trait::async_trait;
use base64::Engine;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use crate::ports::{DataKey, KeyContext, KeyError, KeyOpener, KeyService, WrappedKey};

const NONCE_SIZE: usize = 12;

/// The platform key and its fingerprint.
pub struct PlatformKey {
    key: Zeroizing<[u8; 32]>,
    key_id: String,
}

/// Shows the fingerprint only: the key itself never reaches a log.
impl std::fmt::Debug for PlatformKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlatformKey")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl PlatformKey {
    /// A key from its base64 text (`HEGEMONY_TF_STATE_ENCRYPTION_KEY`, or the key file).
    ///
    /// # Errors
    /// A message saying the text is not base64 of exactly 32 bytes.
    pub fn from_base64(text: &str) -> Result<Self, String> {
        let bytes = Zeroizing::new(
            base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .map_err(|_| "not valid base64".to_string())?,
        );
        let key: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
            format!(
                "must be base64 of exactly 32 bytes (openssl rand -base64 32); this is {} bytes",
                bytes.len()
            )
        })?;
        Ok(Self::from_bytes(key))
    }

    /// A new random key.
    pub fn generate() -> Self {
        let mut key = [0u8; 32];
        OsRng.fill_bytes(&mut key);
        Self::from_bytes(key)
    }

    fn from_bytes(key: [u8; 32]) -> Self {
        let digest = Sha256::new()
            .chain_update(b"hegemony-state platform key fingerprint v1\0")
            .chain_update(key)
            .finalize();
        let fingerprint: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        Self {
            key: Zeroizing::new(key),
            key_id: format!("platform:{fingerprint}"),
        }
    }

    /// The base64 text of the key, for writing a key file.
    pub fn to_base64(&self) -> Zeroizing<String> {
        Zeroizing::new(base64::engine::general_purpose::STANDARD.encode(*self.key))
    }

    /// `platform:<fingerprint>`, as versions record it.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    fn cipher(&self) -> Aes256Gcm {
        Aes256Gcm::new((&*self.key).into())
    }
}

/// Associated data of a wrapped key: the key is bound to its org and state.
fn wrap_aad(context: &KeyContext<'_>) -> Vec<u8> {
    let mut aad = b"hegemony-state data key v1\0".to_vec();
    aad.extend_from_slice(context.org.as_bytes());
    aad.push(0);
    aad.extend_from_slice(context.state.as_bytes());
    aad
}

impl PlatformKey {
    /// `plaintext` wrapped under this key for `context`: nonce || AES-256-GCM.
    fn wrap(&self, plaintext: &[u8; 32], context: &KeyContext<'_>) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_SIZE];
        OsRng.fill_bytes(&mut nonce);
        let aad = wrap_aad(context);
        // AES-GCM encryption of 32 bytes under a valid key cannot fail.
        let sealed = self
            .cipher()
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: &aad,
                },
            )
            .expect("wrapping a data key");
        let mut wrapped = nonce.to_vec();
        wrapped.extend_from_slice(&sealed);
        wrapped
    }
}

#[async_trait]
impl KeyService for PlatformKey {
    async fn data_key(&self, context: &KeyContext<'_>) -> Result<DataKey, KeyError> {
        let mut plaintext = Zeroizing::new([0u8; 32]);
        OsRng.fill_bytes(&mut *plaintext);
        let wrapped = self.wrap(&plaintext, context);
        Ok(DataKey {
            plaintext,
            wrapped,
            key_id: self.key_id.clone(),
        })
    }

    async fn current_key_id(&self, _context: &KeyContext<'_>) -> Result<String, KeyError> {
        Ok(self.key_id.clone())
    }

    /// Only this key's own wrapped keys (a ring holding retired keys opens the others).
    async fn wrap_key(
        &self,
        plaintext: &[u8; 32],
        context: &KeyContext<'_>,
    ) -> Result<WrappedKey, KeyError> {
        Ok(WrappedKey {
            key_id: self.key_id.clone(),
            wrapped: self.wrap(plaintext, context),
        })
    }
}

#[async_trait]
impl KeyOpener for PlatformKey {
    async fn unwrap_key(
        &self,
        key_id: &str,
        wrapped: &[u8],
        context: &KeyContext<'_>,
    ) -> Result<Zeroizing<[u8; 32]>, KeyError> {
        if key_id != self.key_id {
            return Err(KeyError::WrongKey {
                stored: key_id.to_owned(),
                configured: self.key_id.clone(),
            });
        }
        let unwrap_failed = || KeyError::Unwrap {
            key_id: key_id.to_owned(),
        };
        if wrapped.len() < NONCE_SIZE {
            return Err(unwrap_failed());
        }
        let (nonce, sealed) = wrapped.split_at(NONCE_SIZE);
        let aad = wrap_aad(context);
        let plain = Zeroizing::new(
            self.cipher()
                .decrypt(
                    Nonce::from_slice(nonce),
                    Payload {
                        msg: sealed,
                        aad: &aad,
                    },
                )
                .map_err(|_| unwrap_failed())?,
        );
        let key: [u8; 32] = plain.as_slice().try_into().map_err(|_| unwrap_failed())?;
        Ok(Zeroizing::new(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CTX: KeyContext<'static> = KeyContext {
        org: "acme",
        state: "net",
    };

    #[tokio::test]
    async fn a_wrapped_key_unwraps_under_the_same_key_and_context() {
        let key = PlatformKey::generate();
        let dk = key.data_key(&CTX).await.unwrap();
        assert!(dk.key_id.starts_with("platform:"));
        let back = key.unwrap_key(&dk.key_id, &dk.wrapped, &CTX).await.unwrap();
        assert_eq!(*back, *dk.plaintext);
        let other = KeyContext {
            org: "acme",
            state: "other",
        };
        assert!(matches!(
            key.unwrap_key(&dk.key_id, &dk.wrapped, &other).await,
            Err(KeyError::Unwrap { .. })
        ));
    }

    /// A re-wrap gives the same data key under a fresh nonce; the context still binds it.
    #[tokio::test]
    async fn a_rewrapped_key_is_the_same_data_key() {
        let key = PlatformKey::generate();
        let dk = key.data_key(&CTX).await.unwrap();
        let again = key.rewrap_key(&dk.key_id, &dk.wrapped, &CTX).await.unwrap();
        assert_ne!(again.wrapped, dk.wrapped);
        let back = key.unwrap_key(&again.key_id, &again.wrapped, &CTX).await;
        assert_eq!(*back.unwrap(), *dk.plaintext);
    }

    #[tokio::test]
    async fn another_platform_key_is_named_as_the_wrong_key() {
        let old = PlatformKey::generate();
        let new = PlatformKey::generate();
        let dk = old.data_key(&CTX).await.unwrap();
        let err = new
            .unwrap_key(&dk.key_id, &dk.wrapped, &CTX)
            .await
            .unwrap_err();
        assert!(matches!(err, KeyError::WrongKey { ref stored, .. } if stored == old.key_id()));
        assert!(err
            .to_string()
            .contains("configure the key it was written with"));
    }

    #[test]
    fn keys_parse_from_base64_of_32_bytes_only() {
        let key = PlatformKey::generate();
        let again = PlatformKey::from_base64(&key.to_base64()).unwrap();
        assert_eq!(again.key_id(), key.key_id());
        assert!(PlatformKey::from_base64("not base64!").is_err());
        assert!(PlatformKey::from_base64("AAAA")
            .unwrap_err()
            .contains("32 bytes"));
    }
}
