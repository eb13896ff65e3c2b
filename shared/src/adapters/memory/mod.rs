//! The ports in memory: one lock around plain maps. For tests and the contract suite's
//! reference; nothing survives the process. The maps are here; each port's impl is its own
//! file (`state`, `deleted`, `access`, `runs`, `apps`, `sweep`, `trust`, `protection`, `inventory`, `issuers`, `blobs`), as the local and AWS
//! adapters are split.

mod access;
mod apps;
mod blobs;
mod deleted;
mod inventory;
mod issuers;
mod protection;
mod runs;
mod state;
mod sweep;
mod trust;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use crate::domain::app::{AppRecord, ArchiveRecord};
use crate::domain::deleted::DeletedState;
use crate::domain::inventory::StateInventory;
use crate::domain::record::StateRecord;
use crate::domain::trust::TrustPolicy;
use crate::domain::version::VersionRecord;
use crate::domain::Timestamp;
use crate::ports::{AuditEntry, OrgRecord, RunItem, RunRecord, TokenRecord};

/// A catalog and blob store in memory.
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Exchanged ID tokens' marks: key -> until.
    exchanged: HashMap<String, Timestamp>,
    /// The issuers' keys, by issuer.
    kept_keys: HashMap<String, crate::ports::KeptKeys>,
    states: BTreeMap<(String, String), StateRecord>,
    versions: HashMap<(String, String, String, u64), VersionRecord>,
    /// The sealed content of inline versions, keyed as `versions`.
    contents: HashMap<(String, String, String, u64), Arc<Vec<u8>>>,
    pending: HashMap<String, Timestamp>,
    doomed: HashMap<String, Timestamp>,
    /// (org, name, incarnation) -> versions below this go.
    marks: HashMap<(String, String, String), u64>,
    audit: Vec<AuditEntry>,
    /// In creation order, so listings are stable.
    tokens: Vec<TokenRecord>,
    runs: HashMap<String, RunRecord>,
    ended_runs: Vec<String>,
    /// Settled runs and when they ended, waiting to be pruned.
    settled_runs: Vec<(String, Timestamp)>,
    run_items: Vec<RunItem>,
    orgs: HashMap<String, OrgRecord>,
    blobs: HashMap<String, Vec<u8>>,
    /// (org, id) -> a deleted state kept for its retention.
    deleted: BTreeMap<(String, String), DeletedState>,
    apps: BTreeMap<(String, String), AppRecord>,
    /// (org, app, commit ID) -> archive: in commit ID order, which is the changes' order.
    archives: BTreeMap<(String, String, String), ArchiveRecord>,
    /// (org, policy name) -> trust policy.
    trust: BTreeMap<(String, String), TrustPolicy>,
    /// (org, state) -> the state's entry in the inventory.
    inventory: BTreeMap<(String, String), StateInventory>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding this lock can only come from a bug in a test; the maps are
        // still consistent (every mutation is a single insert or remove), so carry on.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blobs written but never committed, for tests of crash leftovers.
    pub fn pending_blobs(&self) -> Vec<String> {
        self.lock().pending.keys().cloned().collect()
    }

    /// Blobs listed for deletion.
    pub fn listed_for_deletion(&self) -> Vec<String> {
        self.lock().doomed.keys().cloned().collect()
    }
}

/// A page of an org's records of one kind (keyed by org and name), by name after `after`.
fn org_page<T: Clone>(
    records: &BTreeMap<(String, String), T>,
    org: &str,
    after: Option<&str>,
    limit: usize,
) -> Vec<T> {
    records
        .range((org.to_owned(), after.unwrap_or("").to_owned())..)
        .take_while(|((o, _), _)| o == org)
        .filter(|((_, n), _)| after.is_none_or(|a| n.as_str() > a))
        .take(limit)
        .map(|(_, r)| r.clone())
        .collect()
}
