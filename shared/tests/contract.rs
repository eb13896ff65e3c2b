//! The contract every storage adapter passes: the same cases, run against the memory, the
//! local (SQLite + files) and the AWS (DynamoDB, S3 on the emulator) adapters. An adapter that
//! passes them can carry the services.
//!
//! Here are the fixtures, the helpers every case shares, and the one list of cases each
//! adapter runs (`every_adapter!`); the cases are in `contract/`, one file per port (`state`,
//! with its `key_slots` and `inline` content, `deleted`, `access`, `trust`, `protection`, `inventory`, `runs`, `sweep`, `blobs`, `apps`), and
//! the local adapter's own in `contract/local.rs`. A new case goes in its port's file and in
//! the list.

#[path = "support/aws.rs"]
mod aws;

use std::sync::Arc;

use hegemony_state::adapters::{local, memory::MemoryStore};
use hegemony_state::domain::record::StateRecord;
use hegemony_state::domain::version::{ChangeRecord, Source, VersionRecord};
use hegemony_state::domain::{Actor, Timestamp};
use hegemony_state::ports::{
    AuditEntry, AuditQuery, BlobStore, Catalog, Commit, InlineContent, StoreError,
};
use time::macros::datetime;

const NOW: Timestamp = datetime!(2026-11-30 01:00:00 UTC);

/// One adapter's catalog and blob store, and whatever keeps them alive.
struct Fixture {
    catalog: Arc<dyn Catalog>,
    blobs: Arc<dyn BlobStore>,
    _dir: Option<tempfile::TempDir>,
}

fn memory() -> Fixture {
    let store = Arc::new(MemoryStore::new());
    Fixture {
        catalog: store.clone(),
        blobs: store,
        _dir: None,
    }
}

fn local_store() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, blobs) = local::open(&dir.path().join("data")).unwrap();
    Fixture {
        catalog: Arc::new(catalog),
        blobs: Arc::new(blobs),
        _dir: Some(dir),
    }
}

fn aws_store() -> Fixture {
    let (catalog, blobs) = aws::block_on(async {
        let config = aws::sdk_config().await;
        let (catalog, blobs, _) = aws::fresh_store(&config).await;
        (catalog, blobs)
    });
    Fixture {
        catalog: Arc::new(catalog),
        blobs: Arc::new(blobs),
        _dir: None,
    }
}

fn user() -> Actor {
    Actor::User {
        user: "alice".into(),
    }
}

fn version(n: u64, blob: &str) -> VersionRecord {
    VersionRecord {
        version: n,
        serial: Some(n),
        lineage: Some("l".into()),
        size: 10,
        sha256: format!("{n:064x}"),
        source: Source::Write,
        key: "platform:test".into(),
        wrapped_key: Some(vec![n as u8; 60]),
        opentofu_encrypted: false,
        terraform_version: Some("1.11.4".into()),
        instances: Some(n * 3),
        index: None,
        created_at: NOW,
        writer: user(),
        change: ChangeRecord::first_save(None, NOW),
        blob: blob.into(),
        inline: false,
    }
}

/// A version whose sealed content is inline in the catalog.
fn inline_version(n: u64) -> VersionRecord {
    VersionRecord {
        inline: true,
        ..version(n, &format!("i{n}"))
    }
}

/// Sealed bytes as an inline version carries them (opaque to storage).
fn sealed(n: u64, len: usize) -> InlineContent {
    InlineContent {
        version: n,
        sealed: Arc::new((0..len).map(|i| (i as u64 * 31 + n) as u8).collect()),
    }
}

fn audit(org: &str, action: &str) -> AuditEntry {
    AuditEntry {
        org: org.into(),
        at: NOW,
        action: action.into(),
        actor: user(),
        state: Some("net".into()),
        version: None,
        detail: serde_json::Value::Null,
    }
}

/// A commit that stores `record` (at `expected + 1`) with the given versions.
fn commit(record: &StateRecord, expected: u64, versions: Vec<VersionRecord>) -> Commit {
    let mut stored = record.clone();
    stored.revision = expected + 1;
    Commit {
        org: record.org.clone(),
        name: record.name.clone(),
        home: record.home().to_owned(),
        expected_revision: expected,
        at: NOW,
        state: Some(stored),
        versions,
        contents: Vec::new(),
        committed_blobs: Vec::new(),
        doomed_blobs: Vec::new(),
        run_items: Vec::new(),
        step: None,
        version_marks: Vec::new(),
        deleted: None,
        inventory: None,
        audit: Vec::new(),
    }
}

fn query(limit: usize) -> AuditQuery {
    AuditQuery {
        limit,
        ..AuditQuery::default()
    }
}

#[path = "contract/access.rs"]
mod access_cases;
#[path = "contract/apps.rs"]
mod app_cases;
#[path = "contract/blobs.rs"]
mod blob_cases;
#[path = "contract/deleted.rs"]
mod deleted_cases;
#[path = "contract/inline.rs"]
mod inline_cases;
#[path = "contract/inventory.rs"]
mod inventory_cases;
#[path = "contract/issuers.rs"]
mod issuer_cases;
#[path = "contract/key_slots.rs"]
mod key_slot_cases;
#[path = "contract/local.rs"]
mod local_only;
#[path = "contract/protection.rs"]
mod protection_cases;
#[path = "contract/runs.rs"]
mod run_cases;
#[path = "contract/state.rs"]
mod state_cases;
#[path = "contract/sweep.rs"]
mod sweep_cases;
#[path = "contract/trust.rs"]
mod trust_cases;

/// Every case, by the name the adapters' test modules call it.
mod cases {
    pub use super::access_cases::*;
    pub use super::app_cases::*;
    pub use super::blob_cases::*;
    pub use super::deleted_cases::*;
    pub use super::inline_cases::*;
    pub use super::inventory_cases::*;
    pub use super::key_slot_cases::*;
    pub use super::protection_cases::*;
    pub use super::run_cases::*;
    pub use super::state_cases::*;
    pub use super::sweep_cases::*;
    pub use super::trust_cases::*;
}

/// Runs every case against one adapter, each in a module named after the adapter.
macro_rules! contract {
    ($adapter:ident, $make:expr, [$($case:ident),* $(,)?]) => {
        mod $adapter {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    cases::$case($make).await
                }
            )*
        }
    };
}

/// Every adapter runs the same list of cases.
macro_rules! every_adapter {
    ($($case:ident),* $(,)?) => {
        contract!(memory_adapter, memory(), [$($case),*]);
        contract!(local_adapter, local_store(), [$($case),*]);
        contract!(aws_adapter, aws_store(), [$($case),*]);
    };
}

// The emulator does not apply concurrent transactions atomically (DynamoDB does): races are
// checked on the adapters whose atomicity is real here.
contract!(
    memory_races,
    memory(),
    [
        racing_read_modify_writes_lose_no_update,
        a_search_answers_as_of_one_commit_while_commits_land
    ]
);
contract!(
    local_races,
    local_store(),
    [
        racing_read_modify_writes_lose_no_update,
        a_search_answers_as_of_one_commit_while_commits_land
    ]
);

every_adapter!(
    // contract/state.rs
    creating_twice_conflicts,
    a_stale_revision_conflicts_and_writes_nothing,
    versions_commit_with_their_state_under_its_incarnation,
    versions_keep_their_terraform_version_and_instance_count,
    a_record_can_be_removed_by_revision,
    states_list_in_name_order_by_page_within_one_org,
    an_org_and_its_state_read_together,
    audit_is_per_org_newest_first,
    // contract/key_slots.rs
    versions_keep_their_key_slot,
    a_key_slot_is_replaced_only_while_it_is_the_old_one,
    replacing_an_inline_versions_key_slot_keeps_its_content,
    // contract/deleted.rs
    a_deleted_state_is_kept_by_its_commit_and_taken_once_by_a_restore,
    deleted_states_list_in_id_order_by_page_within_one_org,
    a_state_restored_under_another_name_keeps_its_versions_at_home,
    a_purge_leaves_every_version_to_the_sweeper_and_is_audited,
    deleted_states_are_due_by_their_delete_time,
    a_deleted_states_key_slot_change_raises_its_revision,
    a_deleted_state_is_stored_as_another_store_kept_it_versions_first,
    // contract/inline.rs
    inline_content_reads_back_with_the_record_and_by_version,
    rewriting_a_record_keeps_its_content_until_it_is_a_blob,
    the_largest_inline_version_fits_beside_a_large_record,
    // contract/access.rs
    tokens_are_found_by_hash,
    an_org_is_created_once,
    an_id_token_opens_one_session,
    every_org_with_a_record_is_listed,
    // contract/trust.rs
    trust_policies_are_listed_by_org_and_found_by_issuer,
    a_trust_policy_is_replaced_and_removed_only_as_read,
    an_issuer_and_audience_pair_belongs_to_one_org,
    // contract/protection.rs
    protections_are_read_with_the_org_settings,
    a_protection_is_replaced_and_removed_only_as_read,
    // contract/inventory.rs
    a_commit_replaces_and_removes_its_states_inventory,
    a_commit_that_keeps_the_entry_moves_only_its_version,
    a_patch_keeps_the_rows_of_the_resources_still_there,
    a_search_filters_and_pages_in_state_then_address_order,
    a_substring_is_found_alike_however_many_addresses_hold_it,
    conflicts_are_equal_digests_across_states_never_within_one,
    another_orgs_inventory_is_never_seen,
    a_rebuilds_write_holds_only_while_the_state_is_as_read,
    every_commit_is_answered_by_the_next_read,
    states_not_indexed_are_listed_and_counts_are_largest_first,
    an_orgs_inventory_key_is_replaced_only_as_read,
    a_large_entry_replaced_by_a_small_one_reads_back_as_written,
    // contract/runs.rs
    a_steps_commit_checks_its_token_and_its_runs_end,
    every_run_is_listed_with_its_end,
    // contract/sweep.rs
    marks_drop_versions_and_blobs_are_found_by_age,
    marks_drop_inline_versions_without_listing_a_blob,
    // contract/blobs.rs
    blobs_put_get_delete,
    an_opened_blob_reads_as_stored,
    an_object_written_as_it_is_made_is_stored_whole_or_not_at_all,
    // contract/apps.rs
    an_app_state_is_created_once_and_swapped_on_its_revision,
    archives_are_stored_with_their_commit_and_listed_newest_first,
    an_archive_stored_again_is_replaced_on_the_revision,
    deleting_an_archive_dooms_its_blobs_and_audits_in_the_same_commit,
    app_states_list_in_name_order_by_page_within_one_org,
);
