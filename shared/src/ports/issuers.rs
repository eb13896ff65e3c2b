//! The issuers ports: an OpenID Connect issuer's signing keys, fetched from where its
//! discovery document says (`jwks_uri`), and where a deployment of many processes keeps
//! what it fetched, so that all of them together fetch each issuer's keys at most once a
//! minute. Fetching and keeping only: which issuers may be fetched, how often and for how
//! long keys are believed are the service's to decide. No adapter, no I/O.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::StoreError;
use crate::domain::Timestamp;

/// Why an issuer's keys could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct IssuerError(pub String);

/// An issuer's JWK set as fetched, with how long the issuer says it may be kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedKeys {
    /// The JWK set, as text.
    pub jwks: String,
    /// The key set's `Cache-Control: max-age`, when it sends one (`no-store` and
    /// `no-cache` read as 0).
    pub max_age_seconds: Option<u64>,
}

#[async_trait]
pub trait IssuerKeys: Send + Sync {
    /// The issuer's JWK set, fetched now.
    ///
    /// # Errors
    /// When the discovery document or the key set cannot be fetched, the discovery
    /// document names another issuer, or either address is one the fetcher may not reach.
    async fn signing_keys(&self, issuer: &str) -> Result<FetchedKeys, IssuerError>;
}

/// What a deployment keeps of one issuer: the keys of its last fetch that worked, and when
/// a fetch was last started (worked or not), which every process reads before it fetches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptKeys {
    pub issuer: String,
    /// The JWK set of the last fetch that worked, and when it was fetched.
    pub jwks: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub keys_at: Option<Timestamp>,
    /// How long those keys are believed, from `keys_at`, in seconds.
    pub max_age_seconds: u64,
    /// When the last fetch was started: no process starts another within the minute.
    #[serde(with = "time::serde::rfc3339")]
    pub tried_at: Timestamp,
}

/// Where the issuers' keys are kept for every process of a deployment (the AWS table: a
/// flood that scales the exchange's function out still fetches once a minute). A deployment
/// of one process keeps them in its memory instead and has none.
#[async_trait]
pub trait IssuerKeyStore: Send + Sync {
    /// What is kept of `issuer`, read strongly consistently.
    async fn kept_keys(&self, issuer: &str) -> Result<Option<KeptKeys>, StoreError>;

    /// Stores `kept` on the condition that the stored record was last tried at
    /// `expected_tried_at` (`None`: there is none): a process claims the next fetch by
    /// writing its start, and stores the keys it fetched only while its claim stands.
    ///
    /// # Errors
    /// `Conflict` when another process's claim or keys came first: nothing is written.
    async fn put_kept_keys(
        &self,
        kept: &KeptKeys,
        expected_tried_at: Option<Timestamp>,
    ) -> Result<(), StoreError>;
}
