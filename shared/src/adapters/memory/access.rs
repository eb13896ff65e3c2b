//! Tokens and orgs in memory: an org's allocation compared and swapped under the one lock.

use async_trait::async_trait;

use super::MemoryStore;
use crate::domain::permission::Allocation;
use crate::domain::Timestamp;
use crate::ports::{
    AccessCatalog, AuditEntry, ExchangeMark, InventoryKey, OrgRecord, StoreError, TokenRecord,
};

#[async_trait]
impl AccessCatalog for MemoryStore {
    async fn token(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        Ok(self.lock().tokens.iter().find(|t| t.hash == hash).cloned())
    }

    async fn put_token(&self, token: &TokenRecord, audit: &AuditEntry) -> Result<(), StoreError> {
        let mut inner = self.lock();
        match inner.tokens.iter_mut().find(|t| t.hash == token.hash) {
            Some(stored) => *stored = token.clone(),
            None => inner.tokens.push(token.clone()),
        }
        inner.audit.push(audit.clone());
        Ok(())
    }

    async fn put_session(
        &self,
        token: &TokenRecord,
        mark: &ExchangeMark,
        audit: &AuditEntry,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        if inner
            .exchanged
            .get(&mark.key)
            .is_some_and(|until| *until >= now)
        {
            return Err(StoreError::Conflict);
        }
        inner.exchanged.retain(|_, until| *until >= now);
        inner.exchanged.insert(mark.key.clone(), mark.until);
        inner.tokens.push(token.clone());
        inner.audit.push(audit.clone());
        Ok(())
    }

    async fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        Ok(self.lock().tokens.clone())
    }

    async fn orgs(&self) -> Result<Vec<String>, StoreError> {
        let inner = self.lock();
        let orgs: std::collections::BTreeSet<String> = inner
            .states
            .keys()
            .map(|(org, _)| org)
            .chain(inner.deleted.keys().map(|(org, _)| org))
            .chain(inner.apps.keys().map(|(org, _)| org))
            .chain(inner.trust.keys().map(|(org, _)| org))
            .chain(inner.orgs.keys())
            .chain(inner.tokens.iter().map(|t| &t.org))
            .chain(inner.audit.iter().map(|e| &e.org))
            .filter(|org| !org.is_empty())
            .cloned()
            .collect();
        Ok(orgs.into_iter().collect())
    }

    async fn set_allocation(
        &self,
        org: &str,
        expected: &Allocation,
        allocation: &Allocation,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let stored = inner
            .orgs
            .get(org)
            .map(|o| o.allocation)
            .unwrap_or_default();
        if stored != *expected {
            return Err(StoreError::Conflict);
        }
        let record = inner
            .orgs
            .entry(org.to_owned())
            .or_insert_with(|| OrgRecord {
                inventory_key: None,
                org: org.to_owned(),
                allocation: *allocation,
                created_at: audit.at,
                protections: Vec::new(),
            });
        record.allocation = *allocation;
        inner.audit.push(audit.clone());
        Ok(())
    }

    async fn org(&self, org: &str) -> Result<Option<OrgRecord>, StoreError> {
        Ok(self.lock().orgs.get(org).cloned())
    }

    async fn put_inventory_key(
        &self,
        org: &str,
        expected: Option<&InventoryKey>,
        key: &InventoryKey,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let record = inner
            .orgs
            .entry(org.to_owned())
            .or_insert_with(|| OrgRecord {
                org: org.to_owned(),
                allocation: Allocation::default(),
                created_at: at,
                protections: Vec::new(),
                inventory_key: None,
            });
        if record.inventory_key.as_ref() != expected {
            return Err(StoreError::Conflict);
        }
        record.inventory_key = Some(key.clone());
        Ok(())
    }

    async fn create_org(&self, org: &OrgRecord) -> Result<bool, StoreError> {
        let mut inner = self.lock();
        if inner.orgs.contains_key(&org.org) {
            return Ok(false);
        }
        inner.orgs.insert(org.org.clone(), org.clone());
        Ok(true)
    }
}
