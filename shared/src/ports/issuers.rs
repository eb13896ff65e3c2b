//! The issuers port: an OpenID Connect issuer's signing keys, fetched from where its
//! discovery document says (`jwks_uri`). Fetching only: which issuers may be fetched, and how
//! often, is the service's to decide. No adapter, no I/O.

use async_trait::async_trait;

/// Why an issuer's keys could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct IssuerError(pub String);

#[async_trait]
pub trait IssuerKeys: Send + Sync {
    /// The issuer's JWK set, as text, fetched now.
    ///
    /// # Errors
    /// When the discovery document or the key set cannot be fetched, or the discovery
    /// document names another issuer.
    async fn signing_keys(&self, issuer: &str) -> Result<String, IssuerError>;
}
