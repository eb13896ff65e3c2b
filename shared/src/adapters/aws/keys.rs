//! Data keys from KMS (`HEGEMONY_TF_STATE_KEY_BACKEND=kms:<key id | arn | alias>`):
//! `GenerateDataKey` for each new version and `Decrypt` to open one, both under the
//! encryption context `{org, state}`. A version records the key ARN KMS answered with, so it
//! stays readable after the setting moves to another key, and `ReEncrypt` (same context)
//! moves it to the key in use when `keys rewrap` runs. A KMS failure is a transient fault
//! (503, clients retry): never a switch to another key.

use async_trait::async_trait;
use aws_sdk_kms::operation::decrypt::DecryptError;
use aws_sdk_kms::operation::re_encrypt::ReEncryptError;
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::DataKeySpec;
use aws_sdk_kms::Client;
use zeroize::Zeroizing;

use super::describe_failure;
use crate::crypto::PlatformKey;
use crate::key_template::KeyTemplate;
use crate::ports::{DataKey, KeyContext, KeyError, KeyOpener, KeyService, WrappedKey};

/// Data keys wrapped by KMS; a platform key, when one is also configured, still opens the
/// versions it wrapped before the move to KMS.
pub struct KmsKeys {
    opener: KmsOpener,
    template: KeyTemplate,
    platform: Option<PlatformKey>,
}

impl KmsKeys {
    pub fn new(client: Client, template: KeyTemplate, platform: Option<PlatformKey>) -> Self {
        Self {
            opener: KmsOpener { client },
            template,
            platform,
        }
    }
}

/// Opens the versions KMS wrapped (`Decrypt` under the ARN each records), wrapping nothing:
/// what keeps them readable after the setting moves from KMS to another backend.
pub struct KmsOpener {
    client: Client,
}

impl KmsOpener {
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

fn context_pairs(context: &KeyContext<'_>) -> [(String, String); 2] {
    [
        ("org".to_owned(), context.org.to_owned()),
        ("state".to_owned(), context.state.to_owned()),
    ]
}

#[async_trait]
impl KeyService for KmsKeys {
    async fn data_key(&self, context: &KeyContext<'_>) -> Result<DataKey, KeyError> {
        let key = self.template.for_org(context.org);
        let mut request = self
            .opener
            .client
            .generate_data_key()
            .key_id(&key)
            .key_spec(DataKeySpec::Aes256);
        for (name, value) in context_pairs(context) {
            request = request.encryption_context(name, value);
        }
        let output = request
            .send()
            .await
            .map_err(|e| KeyError::Unavailable(describe_failure("KMS GenerateDataKey", &e)))?;
        let incomplete = || {
            KeyError::Unavailable(format!(
                "KMS GenerateDataKey for {key} answered without a key"
            ))
        };
        let plaintext = output.plaintext.ok_or_else(incomplete)?;
        let wrapped = output.ciphertext_blob.ok_or_else(incomplete)?;
        let arn = output.key_id.ok_or_else(incomplete)?;
        let plaintext: [u8; 32] = plaintext.as_ref().try_into().map_err(|_| {
            KeyError::Unavailable(format!(
                "KMS GenerateDataKey for {key} gave a key that is not 32 bytes"
            ))
        })?;
        Ok(DataKey {
            plaintext: Zeroizing::new(plaintext),
            wrapped: wrapped.into_inner(),
            key_id: format!("kms:{arn}"),
        })
    }

    /// The ARN of the key the setting names for the org (an alias resolves to its key).
    /// KMS's own rotation keeps the ARN and every backing key, so a version needs a
    /// re-wrap only when the setting moves to another key.
    async fn current_key_id(&self, context: &KeyContext<'_>) -> Result<String, KeyError> {
        let key = self.template.for_org(context.org);
        let output = self
            .opener
            .client
            .describe_key()
            .key_id(&key)
            .send()
            .await
            .map_err(|e| KeyError::Unavailable(describe_failure("KMS DescribeKey", &e)))?;
        let arn = output.key_metadata.and_then(|m| m.arn).ok_or_else(|| {
            KeyError::Unavailable(format!("KMS DescribeKey for {key} answered without an ARN"))
        })?;
        Ok(format!("kms:{arn}"))
    }

    async fn wrap_key(
        &self,
        plaintext: &[u8; 32],
        context: &KeyContext<'_>,
    ) -> Result<WrappedKey, KeyError> {
        let key = self.template.for_org(context.org);
        let mut request = self
            .opener
            .client
            .encrypt()
            .key_id(&key)
            .plaintext(Blob::new(plaintext.to_vec()));
        for (name, value) in context_pairs(context) {
            request = request.encryption_context(name, value);
        }
        let output = request
            .send()
            .await
            .map_err(|e| KeyError::Unavailable(describe_failure("KMS Encrypt", &e)))?;
        wrapped_key(&key, "Encrypt", output.key_id, output.ciphertext_blob)
    }

    /// `ReEncrypt` for a version KMS wrapped (the data key never leaves KMS), under the same
    /// encryption context; a platform key's version is unwrapped here and encrypted.
    async fn rewrap_key(
        &self,
        key_id: &str,
        wrapped: &[u8],
        context: &KeyContext<'_>,
    ) -> Result<WrappedKey, KeyError> {
        let Some(arn) = key_id.strip_prefix("kms:") else {
            return self.rewrap_in_memory(key_id, wrapped, context).await;
        };
        let key = self.template.for_org(context.org);
        let mut request = self
            .opener
            .client
            .re_encrypt()
            .ciphertext_blob(Blob::new(wrapped))
            .source_key_id(arn)
            .destination_key_id(&key);
        for (name, value) in context_pairs(context) {
            request = request
                .source_encryption_context(name.clone(), value.clone())
                .destination_encryption_context(name, value);
        }
        let output = request
            .send()
            .await
            .map_err(|e| match e.as_service_error() {
                Some(ReEncryptError::InvalidCiphertextException(_))
                | Some(ReEncryptError::IncorrectKeyException(_)) => KeyError::Unwrap {
                    key_id: key_id.to_owned(),
                },
                _ => KeyError::Unavailable(describe_failure("KMS ReEncrypt", &e)),
            })?;
        wrapped_key(&key, "ReEncrypt", output.key_id, output.ciphertext_blob)
    }
}

/// The new key slot of an `Encrypt` or `ReEncrypt` answer.
fn wrapped_key(
    key: &str,
    call: &str,
    arn: Option<String>,
    ciphertext: Option<Blob>,
) -> Result<WrappedKey, KeyError> {
    match (arn, ciphertext) {
        (Some(arn), Some(ciphertext)) => Ok(WrappedKey {
            key_id: format!("kms:{arn}"),
            wrapped: ciphertext.into_inner(),
        }),
        _ => Err(KeyError::Unavailable(format!(
            "KMS {call} for {key} answered without a key or ciphertext"
        ))),
    }
}

#[async_trait]
impl KeyOpener for KmsKeys {
    async fn unwrap_key(
        &self,
        key_id: &str,
        wrapped: &[u8],
        context: &KeyContext<'_>,
    ) -> Result<Zeroizing<[u8; 32]>, KeyError> {
        if key_id.starts_with("kms:") {
            return self.opener.unwrap_key(key_id, wrapped, context).await;
        }
        match &self.platform {
            Some(platform) => platform.unwrap_key(key_id, wrapped, context).await,
            None => Err(KeyError::WrongKey {
                stored: key_id.to_owned(),
                configured: format!("kms:{}", self.template.as_str()),
            }),
        }
    }
}

#[async_trait]
impl KeyOpener for KmsOpener {
    async fn unwrap_key(
        &self,
        key_id: &str,
        wrapped: &[u8],
        context: &KeyContext<'_>,
    ) -> Result<Zeroizing<[u8; 32]>, KeyError> {
        let Some(arn) = key_id.strip_prefix("kms:") else {
            return Err(KeyError::WrongKey {
                stored: key_id.to_owned(),
                configured: "kms".to_owned(),
            });
        };
        let mut request = self
            .client
            .decrypt()
            .key_id(arn)
            .ciphertext_blob(Blob::new(wrapped));
        for (name, value) in context_pairs(context) {
            request = request.encryption_context(name, value);
        }
        let output = request
            .send()
            .await
            .map_err(|e| match e.as_service_error() {
                Some(DecryptError::InvalidCiphertextException(_))
                | Some(DecryptError::IncorrectKeyException(_)) => KeyError::Unwrap {
                    key_id: key_id.to_owned(),
                },
                _ => KeyError::Unavailable(describe_failure("KMS Decrypt", &e)),
            })?;
        let plaintext = output.plaintext.ok_or_else(|| KeyError::Unwrap {
            key_id: key_id.to_owned(),
        })?;
        let key: [u8; 32] = plaintext
            .as_ref()
            .try_into()
            .map_err(|_| KeyError::Unwrap {
                key_id: key_id.to_owned(),
            })?;
        Ok(Zeroizing::new(key))
    }
}
