//! A Vault or OpenBao Transit engine as configured: a named backend
//! (`HEGEMONY_TF_STATE_KEY_BACKEND=<tag>` or `transit:<tag>`, settings
//! `HEGEMONY_TRANSIT_<TAG>_*`) or the internal OpenBao (`HEGEMONY_OPENBAO_*`). A leaf module
//! (no imports from the crate), so the settings parse it and the Transit adapter uses it
//! without adapters reaching into the settings.

use std::path::PathBuf;

/// The tag the internal OpenBao's versions record (`transit:internal:...`); a named backend
/// may not take it.
pub const INTERNAL_TAG: &str = "internal";

/// How the service logs in to the engine. Credentials are read from files, so they never sit
/// in the process environment, and a file an agent rewrites is read again after a refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransitAuth {
    /// A token, the file's content.
    Token { file: PathBuf },
    /// AppRole: a role id and secret id, exchanged for a token at `auth/<mount>/login`.
    AppRole {
        mount: String,
        role_id_file: PathBuf,
        secret_id_file: PathBuf,
    },
}

/// One Transit engine and how each org's key is named on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransitSettings {
    /// `internal`, or the named backend's tag: what each version's key id records, so a
    /// version names the engine that opens it.
    pub tag: String,
    /// The server's base URL, e.g. `https://bao.example.com:8200`.
    pub addr: String,
    pub auth: TransitAuth,
    /// Where the engine is mounted (`transit` unless set).
    pub mount: String,
    /// The key's name, `{org}` standing for the org's slug.
    pub key: String,
    /// `X-Vault-Namespace`, for Vault Enterprise and OpenBao namespaces.
    pub namespace: Option<String>,
    /// PEM certificates trusted for the server, besides the system's roots.
    pub ca_pem: Option<Vec<u8>>,
    /// Whether a missing key is created (the internal OpenBao) or refused (a named backend,
    /// whose keys its operator manages).
    pub create_keys: bool,
}

impl TransitSettings {
    /// The key that wraps `org`'s data keys.
    pub fn key_for(&self, org: &str) -> String {
        self.key.replace("{org}", org)
    }

    /// `transit:<tag>`, as the configuration names it and errors show it.
    pub fn name(&self) -> String {
        format!("transit:{}", self.tag)
    }
}
