//! The access port: tokens (stored by hash, never the token) and orgs' settings. No adapter,
//! no I/O.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{AuditEntry, StoreError};
use crate::domain::actor::{SessionGrant, StepGrant};
use crate::domain::permission::{Allocation, Role};
use crate::domain::protection::Protection;
use crate::domain::Timestamp;

/// What a token is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenKind {
    /// A person's or script's, bound to one org, user and role.
    #[default]
    Personal,
    /// The platform's: calls the runs API only, for any org.
    Platform,
    /// A step's: the backend routes of one state, for one attempt of one step of one run.
    Step,
    /// A workload's session (a CI job's, opened with its OpenID Connect ID token): the
    /// states of its trust policy, with the policy's role, until it ends.
    Session,
}

/// A token as stored: its SHA-256, never the token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// Hex SHA-256 of the token.
    pub hash: String,
    /// A short public id, to list and revoke it by.
    pub id: String,
    #[serde(default)]
    pub kind: TokenKind,
    pub org: String,
    pub user: String,
    pub role: Role,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: Timestamp,
    #[serde(with = "time::serde::rfc3339::option")]
    pub expires_at: Option<Timestamp>,
    pub revoked: bool,
    /// What a step token allows.
    #[serde(default)]
    pub step: Option<StepGrant>,
    /// What a workload session allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<Box<SessionGrant>>,
}

/// An org's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgRecord {
    pub org: String,
    pub allocation: Allocation,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: Timestamp,
    /// The org's protected-state rules, by pattern (`ports::ProtectionCatalog` writes them):
    /// read with the settings, so every backend request has them without another read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protections: Vec<Protection>,
    /// The key the inventory's digests are made under, wrapped by the org's key service
    /// ([`AccessCatalog::put_inventory_key`] sets it once): read with the settings, so a
    /// save has it without another read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory_key: Option<InventoryKey>,
}

/// An org's inventory key as stored: wrapped like a data key, under the context of the
/// org and [`InventoryKey::STATE`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct InventoryKey {
    /// What wrapped it, as [`super::DataKey::key_id`].
    pub key_id: String,
    #[serde(with = "base64_bytes")]
    pub wrapped: Vec<u8>,
}

/// Bytes as base64 text in the stored JSON, as a version's wrapped key is.
mod base64_bytes {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&B64.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        B64.decode(String::deserialize(d)?)
            .map_err(serde::de::Error::custom)
    }
}

impl InventoryKey {
    /// The state name of the key context the inventory key is wrapped under: no state can
    /// have it (a state name never starts with '.'), so no data key of a state opens as it
    /// and it opens as no state's.
    pub const STATE: &'static str = ".inventory";
}

/// The mark an exchanged ID token leaves, so it opens no second session: its key (a digest
/// of its issuer and `jti`, or of the whole token: `crypto::id_token::replay_key`) and when
/// the token stops being taken anyway (its `exp` plus the leeway). The sweeper removes it
/// after that.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExchangeMark {
    pub key: String,
    #[serde(with = "time::serde::rfc3339")]
    pub until: Timestamp,
}

/// Tokens and orgs.
#[async_trait]
pub trait AccessCatalog: Send + Sync {
    /// The token with this hash. Looked up on every request, never cached, so a revocation
    /// takes effect at once.
    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError>;

    /// Stores a new or revoked token and its audit entry together.
    async fn put_token(&self, token: &TokenRecord, audit: &AuditEntry) -> Result<(), StoreError>;

    /// Stores a new workload session's token and audit entry with the mark of the ID token
    /// it was exchanged for, in one transaction, on the condition that no live mark of that
    /// key exists (one whose `until` is before `now` is replaced): an ID token opens one
    /// session.
    ///
    /// # Errors
    /// `Conflict` when the ID token was exchanged already: nothing is written.
    async fn put_session(
        &self,
        token: &TokenRecord,
        mark: &ExchangeMark,
        audit: &AuditEntry,
        now: Timestamp,
    ) -> Result<(), StoreError>;

    /// Every token (hashes only: no token is ever stored), oldest first.
    async fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError>;

    /// Every org the store holds a record of (a state, a deleted state, an app state,
    /// settings, a trust policy, a token, an audit entry), sorted. It reads the whole store
    /// (a scan on DynamoDB): for a migration, never for a request.
    async fn orgs(&self) -> Result<Vec<String>, StoreError>;

    /// Replaces an org's allocation and records the change, together, if the stored one (the
    /// default for an org not created yet) is still `expected`: two admins changing it at
    /// once then cannot lose a change or audit the wrong old value.
    ///
    /// # Errors
    /// `Conflict` when the stored allocation is not `expected`; nothing is written.
    async fn set_allocation(
        &self,
        org: &str,
        expected: &Allocation,
        allocation: &Allocation,
        audit: &AuditEntry,
    ) -> Result<(), StoreError>;

    async fn org(&self, org: &str) -> Result<Option<OrgRecord>, StoreError>;

    /// Creates the org unless it exists; returns whether it was created.
    async fn create_org(&self, org: &OrgRecord) -> Result<bool, StoreError>;

    /// Sets the org's inventory key while its stored one is `expected` (`None`: it has none
    /// yet; then its settings are created, at the default allocation and created `at`, if it
    /// has none), keeping everything else of its settings. A first key is set so; a re-wrap
    /// replaces the key it read with the same key wrapped anew.
    ///
    /// # Errors
    /// `Conflict` when the stored key is not `expected` (another writer's came first):
    /// nothing is written; read the settings again and use the stored key.
    async fn put_inventory_key(
        &self,
        org: &str,
        expected: Option<&InventoryKey>,
        key: &InventoryKey,
        at: Timestamp,
    ) -> Result<(), StoreError>;
}
