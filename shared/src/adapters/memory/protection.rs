//! Protected-state rules in memory: inside the org's settings record, compared and swapped
//! under the one lock.

use async_trait::async_trait;

use super::MemoryStore;
use crate::domain::permission::Allocation;
use crate::domain::protection::Protection;
use crate::ports::{AuditEntry, OrgRecord, ProtectionCatalog, StoreError};

impl MemoryStore {
    fn swap_protection(
        &self,
        org: &str,
        expected: Option<&Protection>,
        new: Option<&Protection>,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let record = inner
            .orgs
            .entry(org.to_owned())
            .or_insert_with(|| OrgRecord {
                inventory_key: None,
                org: org.to_owned(),
                allocation: Allocation::default(),
                created_at: audit.at,
                protections: Vec::new(),
            });
        let pattern = &new.or(expected).expect("a rule to write or remove").pattern;
        let stored = record.protections.iter().find(|p| &p.pattern == pattern);
        if stored != expected {
            return Err(StoreError::Conflict);
        }
        record.protections.retain(|p| &p.pattern != pattern);
        record.protections.extend(new.cloned());
        record.protections.sort_by(|a, b| a.pattern.cmp(&b.pattern));
        inner.audit.push(audit.clone());
        Ok(())
    }
}

#[async_trait]
impl ProtectionCatalog for MemoryStore {
    async fn put_protection(
        &self,
        org: &str,
        expected: Option<&Protection>,
        protection: &Protection,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        self.swap_protection(org, expected, Some(protection), audit)
    }

    async fn delete_protection(
        &self,
        org: &str,
        protection: &Protection,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        self.swap_protection(org, Some(protection), None, audit)
    }
}
