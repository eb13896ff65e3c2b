//! The configured KMS key (`HEGEMONY_TF_STATE_KEY_BACKEND=kms:<key>`) and how it names each
//! org's key. A leaf module (no imports from the crate), so the settings parse it and the KMS
//! adapter uses it without adapters reaching into the settings.

/// The configured KMS key: an id, an ARN or an alias, where `{org}` stands for the org's
/// slug (one key per organization, e.g. `alias/hegemony-{org}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyTemplate(String);

impl KeyTemplate {
    /// Parses the part after `kms:`.
    ///
    /// # Errors
    /// An empty key, or `{org}` anywhere but in an alias or alias ARN.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("kms: needs a key id, ARN or alias, e.g. kms:alias/hegemony-state".into());
        }
        if text.contains("{org}") && !text.contains("alias/") {
            return Err(format!(
                "{text:?}: {{org}} selects a key per organization by alias only (alias/...-{{org}})"
            ));
        }
        Ok(Self(text.to_owned()))
    }

    /// The key to ask KMS for when sealing a version of `org`'s state.
    pub fn for_org(&self, org: &str) -> String {
        self.0.replace("{org}", org)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}
