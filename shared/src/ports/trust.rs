//! The trust port: orgs' trust policies for OpenID Connect workloads, found by org (the
//! admin's list) and by issuer (the exchange, before it fetches anything). An issuer and
//! audience pair belongs to one org at a time, which the store holds atomically with the
//! policy's write. No adapter, no I/O.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{AuditEntry, StoreError};
use crate::domain::trust::TrustPolicy;

/// A policy as stored: its org beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustRecord {
    pub org: String,
    pub policy: TrustPolicy,
}

/// What a policy write found in its way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustWrite {
    Written,
    /// Another org's policies use the same issuer and audience: nothing was written.
    PairTaken {
        org: String,
    },
}

/// Trust policies.
#[async_trait]
pub trait TrustCatalog: Send + Sync {
    /// The org's policies, by name.
    async fn trust_policies(&self, org: &str) -> Result<Vec<TrustPolicy>, StoreError>;

    /// The org's policy `name`, read by its key strongly consistently (a session checks
    /// the policy that opened it).
    async fn trust_policy(&self, org: &str, name: &str) -> Result<Option<TrustPolicy>, StoreError>;

    /// Every org's policies naming `issuer` exactly, strongly consistently (a policy just
    /// removed lets no token in).
    async fn trust_policies_of_issuer(&self, issuer: &str) -> Result<Vec<TrustRecord>, StoreError>;

    /// Stores `policy` for `org`, with its audit entry, in one transaction: a new one when
    /// `expected` is `None` (none of that name may exist), else in place of `expected` (which
    /// must be what is stored). The (issuer, audience) pair is claimed for `org`, and one the
    /// policy no longer uses released once no policy of the org uses it.
    ///
    /// # Errors
    /// `Conflict` when the stored policy of that name is not `expected` (or exists, for a new
    /// one); nothing is written.
    async fn put_trust_policy(
        &self,
        org: &str,
        expected: Option<&TrustPolicy>,
        policy: &TrustPolicy,
        audit: &AuditEntry,
    ) -> Result<TrustWrite, StoreError>;

    /// Removes `policy` (which must be what is stored) with its audit entry, releasing its
    /// pair once no policy of the org uses it.
    ///
    /// # Errors
    /// `Conflict` when the stored policy is not `policy`.
    async fn delete_trust_policy(
        &self,
        org: &str,
        policy: &TrustPolicy,
        audit: &AuditEntry,
    ) -> Result<(), StoreError>;
}
