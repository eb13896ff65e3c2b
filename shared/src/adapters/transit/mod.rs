//! Data keys from a Vault or OpenBao Transit engine: a named backend
//! (`HEGEMONY_TF_STATE_KEY_BACKEND=transit:<tag>`) or the internal OpenBao, whose keys (one
//! per org) are created on first use. `datakey/plaintext` makes each version's data key and
//! `decrypt` opens it, both under a derived key with a context binding org and state, so a
//! wrapped key copied to another state does not open. Each version records
//! `transit:<tag>:<key>:v<key version>`: the engine, the key and the key version that wrapped
//! it (what `keys rewrap` moves to the key's newest version with Transit's `rewrap`; a move
//! from another backend wraps with `encrypt`). A failure of the engine (sealed, unreachable,
//! refused, throttled) is a transient fault: never a switch to another key.

mod engine;

use std::collections::HashSet;

use async_trait::async_trait;
use base64::Engine as _;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::sync::Mutex;
use zeroize::Zeroizing;

use crate::ports::{DataKey, KeyContext, KeyError, KeyOpener, KeyService, WrappedKey};
use crate::transit_settings::TransitSettings;
use engine::{Engine, Fault};

/// The key types Transit derives per context and makes data keys with.
const DERIVABLE_TYPES: [&str; 3] = ["aes256-gcm96", "aes128-gcm96", "chacha20-poly1305"];

/// One Transit engine as a key service.
pub struct TransitKeys {
    engine: Engine,
    /// Keys already found (or made) derived, so each is checked once per process: whether a
    /// key is derived is fixed when it is created.
    ready: Mutex<HashSet<String>>,
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

/// The derivation context: the same bytes the platform key binds a wrapped key to.
fn context_b64(context: &KeyContext<'_>) -> String {
    let mut bytes = b"hegemony-state data key v1\0".to_vec();
    bytes.extend_from_slice(context.org.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(context.state.as_bytes());
    b64().encode(bytes)
}

/// The key version in a Transit ciphertext (`vault:v<N>:...`).
fn key_version(ciphertext: &str) -> Option<u64> {
    ciphertext
        .strip_prefix("vault:v")?
        .split_once(':')?
        .0
        .parse()
        .ok()
}

impl TransitKeys {
    /// # Errors
    /// A CA file reqwest does not accept.
    pub fn new(settings: TransitSettings) -> Result<Self, String> {
        Ok(Self {
            engine: Engine::new(settings)?,
            ready: Mutex::new(HashSet::new()),
        })
    }

    /// What the key ids of the versions this engine wrapped begin with.
    pub fn key_id_prefix(&self) -> String {
        format!("{}:", self.engine.settings.name())
    }

    fn name(&self) -> String {
        self.engine.settings.name()
    }

    fn unavailable(&self, call: &str) -> impl Fn(Fault) -> KeyError + '_ {
        let call = call.to_owned();
        move |fault| KeyError::Unavailable(fault.describe(&self.name(), &call))
    }

    /// Checks once that `key` exists and is derived, creating it first where this engine
    /// creates keys. Creating is an upsert on Transit, so two servers creating the same key
    /// at once both end with the one key.
    async fn ensure_key(&self, key: &str) -> Result<(), KeyError> {
        if self.ready.lock().await.contains(key) {
            return Ok(());
        }
        let mount = &self.engine.settings.mount;
        let path = format!("{mount}/keys/{key}");
        let read = format!("read key {key}");
        let mut info = self
            .engine
            .call(Method::GET, &path, None)
            .await
            .map_err(self.unavailable(&read))?;
        if info.is_none() && self.engine.settings.create_keys {
            let spec = json!({"type": "aes256-gcm96", "derived": true});
            self.engine
                .call(Method::POST, &path, Some(&spec))
                .await
                .map_err(self.unavailable(&format!("create key {key}")))?;
            info = self
                .engine
                .call(Method::GET, &path, None)
                .await
                .map_err(self.unavailable(&read))?;
        }
        let Some(info) = info else {
            return Err(KeyError::Unavailable(format!(
                "{}: the key {key} does not exist on the mount {mount} (or no Transit engine is enabled there): create it (bao write {mount}/keys/{key} type=aes256-gcm96 derived=true)",
                self.name()
            )));
        };
        let data = &info["data"];
        let kind = data["type"].as_str().unwrap_or("unknown");
        if data["derived"] != Value::Bool(true) || !DERIVABLE_TYPES.contains(&kind) {
            return Err(KeyError::Unavailable(format!(
                "{}: the key {key} is a {kind} key{}: it must be a derived key (derived=true) of type aes256-gcm96, aes128-gcm96 or chacha20-poly1305, so each data key is bound to its org and state",
                self.name(),
                if data["derived"] == Value::Bool(true) { "" } else { " without derivation" },
            )));
        }
        self.ready.lock().await.insert(key.to_owned());
        Ok(())
    }
}

impl TransitKeys {
    /// The key name of a key id this engine recorded.
    fn key_of<'a>(&self, key_id: &'a str) -> Result<&'a str, KeyError> {
        key_id
            .strip_prefix(&self.key_id_prefix())
            .and_then(|rest| rest.rsplit_once(":v"))
            .map(|(key, _)| key)
            .ok_or_else(|| KeyError::WrongKey {
                stored: key_id.to_owned(),
                configured: self.name(),
            })
    }

    /// The ciphertext `call` answered under `key`, with the key id naming its key version.
    fn key_id_of(
        &self,
        key: &str,
        call: &str,
        answer: Option<&Value>,
    ) -> Result<WrappedKey, KeyError> {
        let ciphertext = answer.and_then(|a| a["data"]["ciphertext"].as_str());
        match ciphertext.and_then(|c| Some((c, key_version(c)?))) {
            Some((ciphertext, version)) => Ok(WrappedKey {
                key_id: format!("{}{key}:v{version}", self.key_id_prefix()),
                wrapped: ciphertext.as_bytes().to_vec(),
            }),
            None => Err(KeyError::Unavailable(format!(
                "{} {call}: the answer holds no ciphertext",
                self.name()
            ))),
        }
    }
}

fn plaintext_key(data: &Value) -> Option<Zeroizing<[u8; 32]>> {
    let bytes = Zeroizing::new(b64().decode(data["plaintext"].as_str()?).ok()?);
    let key: [u8; 32] = bytes.as_slice().try_into().ok()?;
    Some(Zeroizing::new(key))
}

#[async_trait]
impl KeyService for TransitKeys {
    async fn data_key(&self, context: &KeyContext<'_>) -> Result<DataKey, KeyError> {
        let key = self.engine.settings.key_for(context.org);
        self.ensure_key(&key).await?;
        let call = format!("datakey {key}");
        let answer = self
            .engine
            .call(
                Method::POST,
                &format!("{}/datakey/plaintext/{key}", self.engine.settings.mount),
                Some(&json!({"context": context_b64(context), "bits": 256})),
            )
            .await
            .map_err(self.unavailable(&call))?;
        let incomplete = || {
            KeyError::Unavailable(format!(
                "{} {call}: the answer holds no 256-bit key and ciphertext",
                self.name()
            ))
        };
        let data = answer.as_ref().map(|a| &a["data"]).ok_or_else(incomplete)?;
        let plaintext = plaintext_key(data).ok_or_else(incomplete)?;
        let ciphertext = data["ciphertext"].as_str().ok_or_else(incomplete)?;
        let version = key_version(ciphertext).ok_or_else(incomplete)?;
        Ok(DataKey {
            plaintext,
            wrapped: ciphertext.as_bytes().to_vec(),
            key_id: format!("{}{key}:v{version}", self.key_id_prefix()),
        })
    }

    async fn current_key_id(&self, context: &KeyContext<'_>) -> Result<String, KeyError> {
        let key = self.engine.settings.key_for(context.org);
        self.ensure_key(&key).await?;
        let call = format!("read key {key}");
        let info = self
            .engine
            .call(
                Method::GET,
                &format!("{}/keys/{key}", self.engine.settings.mount),
                None,
            )
            .await
            .map_err(self.unavailable(&call))?;
        let latest = info
            .as_ref()
            .and_then(|i| i["data"]["latest_version"].as_u64())
            .ok_or_else(|| {
                KeyError::Unavailable(format!(
                    "{} {call}: the answer has no latest_version",
                    self.name()
                ))
            })?;
        Ok(format!("{}{key}:v{latest}", self.key_id_prefix()))
    }

    async fn wrap_key(
        &self,
        plaintext: &[u8; 32],
        context: &KeyContext<'_>,
    ) -> Result<WrappedKey, KeyError> {
        let key = self.engine.settings.key_for(context.org);
        self.ensure_key(&key).await?;
        let call = format!("encrypt {key}");
        let body = json!({"plaintext": b64().encode(plaintext), "context": context_b64(context)});
        let answer = self
            .engine
            .call(
                Method::POST,
                &format!("{}/encrypt/{key}", self.engine.settings.mount),
                Some(&body),
            )
            .await
            .map_err(self.unavailable(&call))?;
        self.key_id_of(&key, &call, answer.as_ref())
    }

    /// Transit's `rewrap` when the version's key is the one new data keys get (a rotation):
    /// the data key never leaves the engine. A version of another key of this engine (the
    /// key name setting changed) is decrypted and encrypted under the current one.
    async fn rewrap_key(
        &self,
        key_id: &str,
        wrapped: &[u8],
        context: &KeyContext<'_>,
    ) -> Result<WrappedKey, KeyError> {
        let key = self.key_of(key_id)?;
        if key != self.engine.settings.key_for(context.org) {
            return self.rewrap_in_memory(key_id, wrapped, context).await;
        }
        let ciphertext = std::str::from_utf8(wrapped).map_err(|_| KeyError::Unwrap {
            key_id: key_id.to_owned(),
        })?;
        let call = format!("rewrap {key}");
        let answer = self
            .engine
            .call(
                Method::POST,
                &format!("{}/rewrap/{key}", self.engine.settings.mount),
                Some(&json!({"ciphertext": ciphertext, "context": context_b64(context)})),
            )
            .await
            .map_err(|fault| match fault {
                Fault::Status(StatusCode::BAD_REQUEST, ref why) if !why.contains("not found") => {
                    KeyError::Unwrap {
                        key_id: key_id.to_owned(),
                    }
                }
                other => self.unavailable(&call)(other),
            })?;
        self.key_id_of(key, &call, answer.as_ref())
    }
}

#[async_trait]
impl KeyOpener for TransitKeys {
    async fn unwrap_key(
        &self,
        key_id: &str,
        wrapped: &[u8],
        context: &KeyContext<'_>,
    ) -> Result<Zeroizing<[u8; 32]>, KeyError> {
        let key = self.key_of(key_id)?;
        let unwrap_failed = || KeyError::Unwrap {
            key_id: key_id.to_owned(),
        };
        let ciphertext = std::str::from_utf8(wrapped).map_err(|_| unwrap_failed())?;
        let answer = self
            .engine
            .call(
                Method::POST,
                &format!("{}/decrypt/{key}", self.engine.settings.mount),
                Some(&json!({"ciphertext": ciphertext, "context": context_b64(context)})),
            )
            .await
            .map_err(|fault| match fault {
                // A missing key is no damage of the version: the key must come back.
                Fault::Status(StatusCode::BAD_REQUEST, ref why) if !why.contains("not found") => {
                    unwrap_failed()
                }
                other => self.unavailable(&format!("decrypt {key}"))(other),
            })?;
        answer
            .as_ref()
            .and_then(|a| plaintext_key(&a["data"]))
            .ok_or_else(unwrap_failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_version_is_read_from_the_ciphertext() {
        assert_eq!(key_version("vault:v1:abc"), Some(1));
        assert_eq!(key_version("vault:v12:abc"), Some(12));
        assert_eq!(key_version("vault:x1:abc"), None);
        assert_eq!(key_version("v1:abc"), None);
    }

    #[test]
    fn the_context_binds_org_and_state_apart() {
        let a = context_b64(&KeyContext {
            org: "ab",
            state: "c",
        });
        let b = context_b64(&KeyContext {
            org: "a",
            state: "bc",
        });
        assert_ne!(a, b);
    }
}
