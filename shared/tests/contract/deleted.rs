//! The deleted-states port's cases of the contract (included by ../contract.rs): a deleted
//! state kept by its delete's commit and taken once by a restore's, listed by page, its
//! versions kept at their home under another name, purged (every version left to the
//! sweeper, audited), found by purge date, its revision raised by a key slot's change, and
//! stored as another store kept it (a migration).

use super::*;
use hegemony_state::domain::deleted::DeletedState;
use hegemony_state::domain::version::KeySlot;
use hegemony_state::ports::{DeletedChange, SlotChange, SlotOwner, VersionMark};

/// State net of acme written with versions 1 and 2 (blobs b1, b2), then deleted: the
/// tombstone committed with the deleted state kept under `id`. Returns what was kept.
async fn delete_net(f: &Fixture, id: &str) -> DeletedState {
    let mut record = StateRecord::fresh("acme", "net", "inc", NOW);
    record.latest = Some(version(2, "b2"));
    record.next_version = 3;
    let versions = vec![version(1, "b1"), version(2, "b2")];
    f.catalog
        .commit(commit(&record, 0, versions.clone()))
        .await
        .unwrap();
    record.revision = 1;
    let kept = DeletedState::kept(&record, id, &versions, &user(), NOW);
    let mut tombstone = record.clone();
    tombstone.latest = None;
    tombstone.deleted_at = Some(NOW);
    let mut c = commit(&tombstone, 1, Vec::new());
    c.deleted = Some(DeletedChange::Keep(Box::new(kept.clone())));
    f.catalog.commit(c).await.unwrap();
    kept
}

/// A restore's commit of `record` (at `expected + 1`) taking deleted state `id` at
/// `revision`.
fn restore(record: &StateRecord, expected: u64, id: &str, revision: u64) -> Commit {
    let mut c = commit(record, expected, Vec::new());
    c.deleted = Some(DeletedChange::Take {
        id: id.into(),
        revision,
    });
    c
}

pub async fn a_deleted_state_is_kept_by_its_commit_and_taken_once_by_a_restore(f: Fixture) {
    let kept = delete_net(&f, "0001-a").await;
    let back = f.catalog.deleted_state("acme", "0001-a").await.unwrap();
    assert_eq!(back.as_ref(), Some(&kept));
    assert_eq!((kept.versions, kept.bytes), (2, 20));
    assert!(f
        .catalog
        .deleted_state("other", "0001-a")
        .await
        .unwrap()
        .is_none());
    let mut restored = kept.record.clone();
    restored.revision = 2;
    let stale = restore(&restored, 2, "0001-a", 7);
    assert!(matches!(
        f.catalog.commit(stale).await,
        Err(StoreError::Conflict)
    ));
    let state = f.catalog.state("acme", "net").await.unwrap().unwrap();
    assert!(state.deleted_at.is_some(), "a lost restore writes nothing");
    f.catalog
        .commit(restore(&restored, 2, "0001-a", 0))
        .await
        .unwrap();
    assert!(f
        .catalog
        .deleted_state("acme", "0001-a")
        .await
        .unwrap()
        .is_none());
    let state = f.catalog.state("acme", "net").await.unwrap().unwrap();
    assert_eq!((state.revision, state.is_visible()), (3, true));
    let again = restore(&restored, 3, "0001-a", 0);
    assert!(matches!(
        f.catalog.commit(again).await,
        Err(StoreError::Conflict)
    ));
}

pub async fn deleted_states_list_in_id_order_by_page_within_one_org(f: Fixture) {
    for (org, id) in [("acme", "0003-c"), ("acme", "0001-a"), ("acme", "0002-b")] {
        let mut record = StateRecord::fresh(org, &format!("s{id}"), id, NOW);
        record.revision = 1;
        let kept = DeletedState::kept(&record, id, &[], &user(), NOW);
        let mut c = commit(&record, 0, Vec::new());
        c.deleted = Some(DeletedChange::Keep(Box::new(kept)));
        f.catalog.commit(c).await.unwrap();
    }
    let mut other = StateRecord::fresh("zeta", "s", "z", NOW);
    other.revision = 1;
    let kept = DeletedState::kept(&other, "0000-z", &[], &user(), NOW);
    let mut c = commit(&other, 0, Vec::new());
    c.deleted = Some(DeletedChange::Keep(Box::new(kept)));
    f.catalog.commit(c).await.unwrap();
    let ids = |page: Vec<DeletedState>| page.into_iter().map(|d| d.id).collect::<Vec<_>>();
    let first = f.catalog.deleted_states("acme", None, 2).await.unwrap();
    assert_eq!(ids(first), ["0001-a", "0002-b"]);
    let rest = f
        .catalog
        .deleted_states("acme", Some("0002-b"), 2)
        .await
        .unwrap();
    assert_eq!(ids(rest), ["0003-c"]);
}

pub async fn a_state_restored_under_another_name_keeps_its_versions_at_home(f: Fixture) {
    let kept = delete_net(&f, "0001-a").await;
    let mut moved = kept.record.clone();
    moved.name = "net2".into();
    moved.home = Some("net".into());
    moved.latest = Some(inline_version(3));
    moved.next_version = 4;
    let mut c = restore(&moved, 0, "0001-a", 0);
    c.versions = vec![inline_version(3)];
    c.contents = vec![sealed(3, 300)];
    f.catalog.commit(c).await.unwrap();
    let at_home: Vec<u64> = f
        .catalog
        .versions("acme", "net", "inc")
        .await
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(
        at_home,
        [3, 2, 1],
        "a new version goes where the others are"
    );
    assert!(f
        .catalog
        .versions("acme", "net2", "inc")
        .await
        .unwrap()
        .is_empty());
    let content = f.catalog.content("acme", "net", "inc", 3).await.unwrap();
    assert_eq!(content, Some(sealed(3, 300).sealed.to_vec()));
    let (_, state) = f
        .catalog
        .org_and_state_with_content("acme", "net2")
        .await
        .unwrap();
    let (record, content) = state.unwrap();
    assert_eq!(record.home(), "net");
    assert_eq!(content, Some(sealed(3, 300).sealed.to_vec()));
    let mut pruned = record.clone();
    pruned.latest = None;
    pruned.deleted_at = Some(NOW);
    let mut c = commit(&pruned, record.revision, Vec::new());
    c.version_marks = vec![VersionMark {
        incarnation: "inc".into(),
        below: VersionMark::ALL,
    }];
    f.catalog.commit(c).await.unwrap();
    assert_eq!(f.catalog.drop_marked_versions(100, NOW).await.unwrap(), 3);
    assert!(f
        .catalog
        .versions("acme", "net", "inc")
        .await
        .unwrap()
        .is_empty());
}

pub async fn a_purge_leaves_every_version_to_the_sweeper_and_is_audited(f: Fixture) {
    let kept = delete_net(&f, "0001-a").await;
    let stale = DeletedState {
        revision: 5,
        ..kept.clone()
    };
    let entry = audit("acme", "state.purged");
    assert!(matches!(
        f.catalog.purge_deleted(&stale, &entry).await,
        Err(StoreError::Conflict)
    ));
    assert!(f
        .catalog
        .audit("acme", &query(10))
        .await
        .unwrap()
        .is_empty());
    f.catalog.purge_deleted(&kept, &entry).await.unwrap();
    assert!(matches!(
        f.catalog.purge_deleted(&kept, &entry).await,
        Err(StoreError::Conflict)
    ));
    assert!(f
        .catalog
        .deleted_state("acme", "0001-a")
        .await
        .unwrap()
        .is_none());
    let logged = f.catalog.audit("acme", &query(10)).await.unwrap();
    assert_eq!(logged.len(), 1);
    assert_eq!(f.catalog.drop_marked_versions(100, NOW).await.unwrap(), 2);
    let later = NOW + time::Duration::minutes(1);
    let mut doomed = f.catalog.doomed_blobs(later, 10).await.unwrap();
    doomed.sort();
    assert_eq!(doomed, ["b1", "b2"]);
}

/// Deleted states are found by their delete time, the earliest first: the sweeper asks for
/// those deleted before its now less the retention in force.
pub async fn deleted_states_are_due_by_their_delete_time(f: Fixture) {
    let kept = delete_net(&f, "0001-a").await;
    let before = kept.deleted_at - time::Duration::seconds(1);
    assert!(f.catalog.deleted_due(before, 10).await.unwrap().is_empty());
    let due = f.catalog.deleted_due(kept.deleted_at, 10).await.unwrap();
    assert_eq!(due, [("acme".to_owned(), "0001-a".to_owned())]);
    assert!(f
        .catalog
        .deleted_due(kept.deleted_at, 0)
        .await
        .unwrap()
        .is_empty());
}

pub async fn a_deleted_states_key_slot_change_raises_its_revision(f: Fixture) {
    let kept = delete_net(&f, "0001-a").await;
    let new = KeySlot {
        key: "transit:bao:tf:v2".into(),
        wrapped_key: Some(b"vault:v2:abc".to_vec()),
    };
    let old = version(1, "").slot();
    let change = |incarnation, old| SlotChange {
        org: "acme",
        owner: SlotOwner::Deleted("0001-a"),
        home: "net",
        incarnation,
        version: 1,
        old,
        new: &new,
    };
    let other = f.catalog.replace_key_slot(&change("other", &old)).await;
    assert!(matches!(other, Err(StoreError::Conflict)), "{other:?}");
    f.catalog
        .replace_key_slot(&change("inc", &old))
        .await
        .unwrap();
    let back = f.catalog.version("acme", "net", "inc", 1).await.unwrap();
    assert_eq!(back.unwrap().slot(), new);
    let now = f.catalog.deleted_state("acme", "0001-a").await.unwrap();
    assert_eq!(now.unwrap().revision, 1);
    let mut restored = kept.record.clone();
    restored.revision = 2;
    assert!(matches!(
        f.catalog.commit(restore(&restored, 2, "0001-a", 0)).await,
        Err(StoreError::Conflict)
    ));
    f.catalog
        .commit(restore(&restored, 2, "0001-a", 1))
        .await
        .unwrap();
    let gone = f.catalog.replace_key_slot(&change("inc", &new)).await;
    assert!(matches!(gone, Err(StoreError::Conflict)), "{gone:?}");
}

pub async fn a_deleted_state_is_stored_as_another_store_kept_it_versions_first(f: Fixture) {
    let mut record = StateRecord::fresh("acme", "net", "inc", NOW);
    record.home = Some("old".into());
    record.latest = Some(inline_version(2));
    record.next_version = 3;
    let versions = vec![version(1, "b1"), inline_version(2)];
    let kept = DeletedState {
        revision: 4,
        ..DeletedState::kept(&record, "0001-a", &versions, &user(), NOW)
    };
    f.catalog.add_pending_blob("b1", NOW).await.unwrap();
    f.catalog
        .put_deleted_version(&kept, &versions[0], None)
        .await
        .unwrap();
    f.catalog
        .put_deleted_version(&kept, &versions[1], Some(b"sealed two"))
        .await
        .unwrap();
    assert!(
        f.catalog
            .deleted_state("acme", "0001-a")
            .await
            .unwrap()
            .is_none(),
        "its versions alone are no deleted state"
    );
    let entry = audit("acme", "store.migrated");
    f.catalog.put_deleted(&kept, &entry).await.unwrap();
    assert_eq!(
        f.catalog.deleted_state("acme", "0001-a").await.unwrap(),
        Some(kept.clone()),
        "its id, times, purge date and revision as they were"
    );
    let stored = f.catalog.versions("acme", "old", "inc").await.unwrap();
    assert_eq!(
        stored,
        vec![versions[1].clone(), versions[0].clone()],
        "under its home name"
    );
    assert_eq!(
        f.catalog
            .content("acme", "old", "inc", 2)
            .await
            .unwrap()
            .as_deref(),
        Some(&b"sealed two"[..])
    );
    let later = NOW + time::Duration::hours(2);
    assert!(
        f.catalog
            .stale_pending_blobs(later, 10)
            .await
            .unwrap()
            .is_empty(),
        "a blob version's blob is committed"
    );
    assert!(matches!(
        f.catalog.put_deleted(&kept, &entry).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(f.catalog.audit("acme", &query(10)).await.unwrap().len(), 1);
    let due = f.catalog.deleted_due(kept.deleted_at, 10).await.unwrap();
    assert_eq!(due.len(), 1, "found by its delete time: {due:?}");
}

/// On DynamoDB an older build put deleted states in the sweep index by their purge date
/// (another partition); they are found by their delete time all the same, while they last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_states_an_older_build_indexed_by_purge_date_are_due_by_delete_time() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let config = crate::aws::sdk_config().await;
    let (catalog, _, settings) = crate::aws::fresh_store(&config).await;
    let f = Fixture {
        catalog: Arc::new(catalog),
        blobs: Arc::new(MemoryStore::new()),
        _dir: None,
    };
    let kept = delete_net(&f, "0001-a").await;
    let purge = (kept.deleted_at + time::Duration::days(7)).unix_timestamp();
    aws_sdk_dynamodb::Client::new(&config)
        .update_item()
        .table_name(&settings.table)
        .key("pk", AttributeValue::S("ORG#acme".into()))
        .key("sk", AttributeValue::S("DELETED#0001-a".into()))
        .update_expression("SET sweep_pk = :old, sweep_sk = :purge")
        .expression_attribute_values(":old", AttributeValue::S("deleted".into()))
        .expression_attribute_values(
            ":purge",
            AttributeValue::S(format!("{purge:012}#acme/0001-a")),
        )
        .send()
        .await
        .unwrap();
    let before = kept.deleted_at - time::Duration::seconds(1);
    assert!(f.catalog.deleted_due(before, 10).await.unwrap().is_empty());
    assert_eq!(
        f.catalog.deleted_due(kept.deleted_at, 10).await.unwrap(),
        [("acme".to_owned(), "0001-a".to_owned())]
    );
}
