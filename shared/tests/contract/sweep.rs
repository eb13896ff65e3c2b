//! The sweep port's cases of the contract (included by ../contract.rs): version marks drop
//! the versions below them and list their blobs for deletion; blob records found by age and
//! forgotten.

use super::*;
use hegemony_state::ports::VersionMark;

/// Version marks drop the versions below them (not others, not other incarnations) and
/// list their blobs for deletion in the same step; blob records are found by age and
/// forgotten.
pub async fn marks_drop_versions_and_blobs_are_found_by_age(f: Fixture) {
    let record = StateRecord::fresh("acme", "net", "inc", NOW);
    let versions: Vec<_> = (1..=4).map(|n| version(n, &format!("b{n}"))).collect();
    let mut c = commit(&record, 0, versions);
    c.version_marks = vec![VersionMark {
        incarnation: "inc".into(),
        below: 3,
    }];
    f.catalog.commit(c).await.unwrap();
    // Another state's versions are not touched.
    let other = StateRecord::fresh("acme", "other", "inc", NOW);
    f.catalog
        .commit(commit(&other, 0, vec![version(1, "o1")]))
        .await
        .unwrap();
    let later = NOW + time::Duration::minutes(10);
    assert_eq!(
        f.catalog.drop_marked_versions(1, NOW).await.unwrap(),
        1,
        "bounded"
    );
    assert_eq!(f.catalog.drop_marked_versions(100, NOW).await.unwrap(), 1);
    assert_eq!(
        f.catalog.drop_marked_versions(100, NOW).await.unwrap(),
        0,
        "the mark is spent"
    );
    let left: Vec<u64> = f
        .catalog
        .versions("acme", "net", "inc")
        .await
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(left, [4, 3]);
    assert_eq!(
        f.catalog
            .versions("acme", "other", "inc")
            .await
            .unwrap()
            .len(),
        1
    );
    let mut doomed = f.catalog.doomed_blobs(later, 100).await.unwrap();
    doomed.sort();
    assert_eq!(doomed, ["b1", "b2"]);
    assert!(
        f.catalog.doomed_blobs(NOW, 100).await.unwrap().is_empty(),
        "not before the time"
    );
    f.catalog.add_pending_blob("p1", NOW).await.unwrap();
    assert_eq!(
        f.catalog.stale_pending_blobs(later, 100).await.unwrap(),
        ["p1"]
    );
    f.catalog
        .forget_blobs(&["b1".into(), "b2".into(), "p1".into()])
        .await
        .unwrap();
    assert!(f.catalog.doomed_blobs(later, 100).await.unwrap().is_empty());
    assert!(f
        .catalog
        .stale_pending_blobs(later, 100)
        .await
        .unwrap()
        .is_empty());
}

/// Marks drop inline versions with their content and list only blob versions' blobs
/// for deletion: an inline version has no blob to delete.
pub async fn marks_drop_inline_versions_without_listing_a_blob(f: Fixture) {
    let mut record = StateRecord::fresh("acme", "net", "inc", NOW);
    record.latest = Some(inline_version(3));
    record.next_version = 4;
    let mut c = commit(
        &record,
        0,
        vec![inline_version(1), version(2, "b2"), inline_version(3)],
    );
    c.contents = vec![sealed(1, 10), sealed(3, 30)];
    c.version_marks = vec![VersionMark {
        incarnation: "inc".into(),
        below: 3,
    }];
    f.catalog.commit(c).await.unwrap();
    assert_eq!(f.catalog.drop_marked_versions(100, NOW).await.unwrap(), 2);
    let later = NOW + time::Duration::minutes(10);
    assert_eq!(f.catalog.doomed_blobs(later, 100).await.unwrap(), ["b2"]);
    assert_eq!(
        f.catalog.content("acme", "net", "inc", 1).await.unwrap(),
        None
    );
    assert_eq!(
        f.catalog
            .content("acme", "net", "inc", 3)
            .await
            .unwrap()
            .map(|c| c.len()),
        Some(30),
        "the kept version keeps its content"
    );
}
