//! The app-state cases of the contract (included by ../contract.rs): records compared and
//! swapped on their revision, archives stored (and stored again) and deleted with them,
//! listed newest first, their neighbours found, and the blob bookkeeping and audit of each
//! commit.

use super::*;
use hegemony_state::domain::app::{AppRecord, ArchiveRecord, Ended, FileKind, FileRef};
use hegemony_state::ports::AppCommit;

fn app(revision: u64) -> AppRecord {
    let mut record = AppRecord::fresh("acme", "shop", "inc", NOW);
    record.revision = revision;
    record
}

fn file(name: &str, blob: &str) -> FileRef {
    FileRef {
        name: name.into(),
        kind: FileKind::Journal {
            command: "apply".into(),
        },
        size: 7,
        sha256: "ab".into(),
        lineage: None,
        serial: None,
        uploaded_in: "c".into(),
        uploaded_at: NOW,
        blob: blob.into(),
        seq: 3,
        key: "platform:test".into(),
        wrapped_key: Some(vec![0, 1, 2, 255]),
    }
}

fn archive(commit_id: &str, blobs: &[&str]) -> ArchiveRecord {
    ArchiveRecord {
        commit_id: commit_id.into(),
        lock_id: format!("lock-{commit_id}"),
        ended: Ended::Sealed,
        holder: user(),
        who: "alice@laptop".into(),
        info: String::new(),
        locked_at: NOW,
        sealed_at: NOW,
        sealed_by: user(),
        files: blobs
            .iter()
            .enumerate()
            .map(|(i, b)| file(&format!("journal.1-ab.f{i}.json"), b))
            .collect(),
    }
}

fn app_commit(expected: u64) -> AppCommit {
    AppCommit {
        expected_revision: expected,
        at: NOW,
        app: app(expected + 1),
        sealed: None,
        deleted: None,
        committed_blobs: Vec::new(),
        doomed_blobs: Vec::new(),
        audit: Vec::new(),
    }
}

/// Seals archives `ids` in order, one commit each, from a new record.
async fn sealed(f: &Fixture, ids: &[&str]) -> u64 {
    f.catalog.commit_app(app_commit(0)).await.unwrap();
    let mut revision = 1;
    for id in ids {
        let mut c = app_commit(revision);
        c.sealed = Some(archive(id, &[&format!("blob-{id}")]));
        c.app.newest = c.sealed.clone();
        f.catalog.commit_app(c).await.unwrap();
        revision += 1;
    }
    revision
}

pub async fn an_app_state_is_created_once_and_swapped_on_its_revision(f: Fixture) {
    assert_eq!(f.catalog.app("acme", "shop").await.unwrap(), None);
    f.catalog.commit_app(app_commit(0)).await.unwrap();
    assert!(matches!(
        f.catalog.commit_app(app_commit(0)).await,
        Err(StoreError::Conflict)
    ));
    let mut stale = app_commit(5);
    stale.sealed = Some(archive("1000-aa", &["b1"]));
    assert!(matches!(
        f.catalog.commit_app(stale).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(
        f.catalog.archive("acme", "shop", "1000-aa").await.unwrap(),
        None,
        "a lost commit writes nothing"
    );
    f.catalog.commit_app(app_commit(1)).await.unwrap();
    let stored = f.catalog.app("acme", "shop").await.unwrap().unwrap();
    assert_eq!(stored.revision, 2);
    assert_eq!(f.catalog.app("other", "shop").await.unwrap(), None);
}

pub async fn archives_are_stored_with_their_commit_and_listed_newest_first(f: Fixture) {
    let ids = ["1000-aa", "1001-bb", "1002-cc", "1003-dd"];
    sealed(&f, &ids).await;
    let all = f.catalog.archives("acme", "shop", None, 10).await.unwrap();
    let listed: Vec<&str> = all.iter().map(|a| a.commit_id.as_str()).collect();
    assert_eq!(listed, vec!["1003-dd", "1002-cc", "1001-bb", "1000-aa"]);
    assert_eq!(all[0], archive("1003-dd", &["blob-1003-dd"]));
    let page = f
        .catalog
        .archives("acme", "shop", Some("1002-cc"), 1)
        .await
        .unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].commit_id, "1001-bb");
    let after = f
        .catalog
        .archive_after("acme", "shop", "1001-bb")
        .await
        .unwrap();
    assert_eq!(after.unwrap().commit_id, "1002-cc");
    assert_eq!(
        f.catalog
            .archive_after("acme", "shop", "1003-dd")
            .await
            .unwrap(),
        None
    );
    assert!(f
        .catalog
        .archives("acme", "shop-other", None, 10)
        .await
        .unwrap()
        .is_empty());
}

/// A key re-wrap stores an existing archive again with new key slots: the commit replaces
/// the archive whole, on the app state's revision like every other.
pub async fn an_archive_stored_again_is_replaced_on_the_revision(f: Fixture) {
    let revision = sealed(&f, &["1000-aa", "1001-bb"]).await;
    let mut moved = archive("1000-aa", &["blob-1000-aa"]);
    moved.files[0].key = "platform:new".into();
    moved.files[0].wrapped_key = Some(vec![9, 9]);
    let mut stale = app_commit(revision - 1);
    stale.sealed = Some(moved.clone());
    assert!(matches!(
        f.catalog.commit_app(stale).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(
        f.catalog.archive("acme", "shop", "1000-aa").await.unwrap(),
        Some(archive("1000-aa", &["blob-1000-aa"])),
        "a lost commit leaves the archive as it was"
    );
    let mut commit = app_commit(revision);
    commit.sealed = Some(moved.clone());
    f.catalog.commit_app(commit).await.unwrap();
    assert_eq!(
        f.catalog.archive("acme", "shop", "1000-aa").await.unwrap(),
        Some(moved)
    );
    let listed = f.catalog.archives("acme", "shop", None, 10).await.unwrap();
    assert_eq!(listed.len(), 2, "replaced, not added");
    assert_eq!(listed[1].files[0].wrapped_key, Some(vec![9, 9]));
}

pub async fn deleting_an_archive_dooms_its_blobs_and_audits_in_the_same_commit(f: Fixture) {
    let revision = sealed(&f, &["1000-aa", "1001-bb"]).await;
    f.catalog.add_pending_blob("pending-1", NOW).await.unwrap();
    let mut c = app_commit(revision);
    c.deleted = Some("1000-aa".into());
    c.doomed_blobs = vec!["blob-1000-aa".into()];
    c.committed_blobs = vec!["pending-1".into()];
    c.audit = vec![AuditEntry {
        org: "acme".into(),
        at: NOW,
        action: "app.archive_deleted".into(),
        actor: user(),
        state: None,
        version: None,
        detail: serde_json::json!({"app": "shop", "commit_id": "1000-aa"}),
    }];
    f.catalog.commit_app(c).await.unwrap();
    assert_eq!(
        f.catalog.archive("acme", "shop", "1000-aa").await.unwrap(),
        None
    );
    assert!(f
        .catalog
        .archive("acme", "shop", "1001-bb")
        .await
        .unwrap()
        .is_some());
    let later = NOW + time::Duration::hours(2);
    let doomed = f.catalog.doomed_blobs(later, 10).await.unwrap();
    assert_eq!(doomed, vec!["blob-1000-aa".to_string()]);
    assert!(f
        .catalog
        .stale_pending_blobs(later, 10)
        .await
        .unwrap()
        .is_empty());
    let audit = f.catalog.audit("acme", &query(10)).await.unwrap();
    assert_eq!(audit[0].entry.action, "app.archive_deleted");
}

pub async fn app_states_list_in_name_order_by_page_within_one_org(f: Fixture) {
    for name in ["web", "api", "shop"] {
        let mut c = app_commit(0);
        c.app.name = name.into();
        f.catalog.commit_app(c).await.unwrap();
    }
    let mut other = app_commit(0);
    other.app.org = "other".into();
    f.catalog.commit_app(other).await.unwrap();
    let names = |records: Vec<AppRecord>| records.into_iter().map(|r| r.name).collect::<Vec<_>>();
    assert_eq!(
        names(f.catalog.apps("acme", None, 2).await.unwrap()),
        vec!["api", "shop"]
    );
    assert_eq!(
        names(f.catalog.apps("acme", Some("shop"), 2).await.unwrap()),
        vec!["web"]
    );
    assert_eq!(
        names(f.catalog.apps("other", None, 10).await.unwrap()),
        vec!["shop"]
    );
}
