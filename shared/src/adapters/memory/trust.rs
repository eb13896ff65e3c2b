//! Trust policies in memory: the pair check and the write under the one lock.

use async_trait::async_trait;

use super::MemoryStore;
use crate::domain::trust::TrustPolicy;
use crate::ports::{AuditEntry, StoreError, TrustCatalog, TrustRecord, TrustWrite};

#[async_trait]
impl TrustCatalog for MemoryStore {
    async fn trust_policies(&self, org: &str) -> Result<Vec<TrustPolicy>, StoreError> {
        Ok(self
            .lock()
            .trust
            .iter()
            .filter(|((o, _), _)| o == org)
            .map(|(_, p)| p.clone())
            .collect())
    }

    async fn trust_policy(&self, org: &str, name: &str) -> Result<Option<TrustPolicy>, StoreError> {
        Ok(self
            .lock()
            .trust
            .get(&(org.to_owned(), name.to_owned()))
            .cloned())
    }

    async fn trust_policies_of_issuer(&self, issuer: &str) -> Result<Vec<TrustRecord>, StoreError> {
        Ok(self
            .lock()
            .trust
            .iter()
            .filter(|(_, p)| p.issuer == issuer)
            .map(|((org, _), p)| TrustRecord {
                org: org.clone(),
                policy: p.clone(),
            })
            .collect())
    }

    async fn put_trust_policy(
        &self,
        org: &str,
        expected: Option<&TrustPolicy>,
        policy: &TrustPolicy,
        audit: &AuditEntry,
    ) -> Result<TrustWrite, StoreError> {
        let mut inner = self.lock();
        let key = (org.to_owned(), policy.name.clone());
        if inner.trust.get(&key) != expected {
            return Err(StoreError::Conflict);
        }
        let taken = inner.trust.iter().find(|((o, _), p)| {
            o != org && p.issuer == policy.issuer && p.audience == policy.audience
        });
        if let Some(((other, _), _)) = taken {
            return Ok(TrustWrite::PairTaken { org: other.clone() });
        }
        inner.trust.insert(key, policy.clone());
        inner.audit.push(audit.clone());
        Ok(TrustWrite::Written)
    }

    async fn delete_trust_policy(
        &self,
        org: &str,
        policy: &TrustPolicy,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let key = (org.to_owned(), policy.name.clone());
        if inner.trust.get(&key) != Some(policy) {
            return Err(StoreError::Conflict);
        }
        inner.trust.remove(&key);
        inner.audit.push(audit.clone());
        Ok(())
    }
}
