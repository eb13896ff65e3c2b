//! The protection port: an org's protected-state rules, written one pattern at a time with
//! their audit. They are read with the org's settings (`OrgRecord::protections`), so the
//! backend's requests, which read those already, check them at no further cost. No adapter,
//! no I/O.

use async_trait::async_trait;

use super::{AuditEntry, StoreError};
use crate::domain::protection::Protection;

/// Protected-state rules.
#[async_trait]
pub trait ProtectionCatalog: Send + Sync {
    /// Stores `protection` for `org`, with its audit entry, in one transaction: a new rule
    /// when `expected` is `None` (none of its pattern may exist), else in place of `expected`
    /// (which must be what is stored). An org with no settings yet gets them, at the default
    /// allocation.
    ///
    /// # Errors
    /// `Conflict` when the stored rule of that pattern is not `expected`; nothing is written.
    async fn put_protection(
        &self,
        org: &str,
        expected: Option<&Protection>,
        protection: &Protection,
        audit: &AuditEntry,
    ) -> Result<(), StoreError>;

    /// Removes `protection` (which must be what is stored) with its audit entry.
    ///
    /// # Errors
    /// `Conflict` when the stored rule of its pattern is not `protection`.
    async fn delete_protection(
        &self,
        org: &str,
        protection: &Protection,
        audit: &AuditEntry,
    ) -> Result<(), StoreError>;
}
