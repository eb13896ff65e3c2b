//! The state port's inline-content cases of the contract (included by ../contract.rs): a
//! small version's sealed content stored in the catalog beside its record, read back with the
//! state in one read, kept or dropped as its record changes, and the largest one fitting.

use super::*;
use hegemony_state::ports::INLINE_MAX_BYTES;

/// An inline version's content reads back with the state's record in one read while it
/// is the latest, and by version afterwards; a blob version has none in the catalog.
pub async fn inline_content_reads_back_with_the_record_and_by_version(f: Fixture) {
    let mut record = StateRecord::fresh("acme", "net", "inc", NOW);
    record.latest = Some(version(1, "b1"));
    record.next_version = 2;
    f.catalog
        .commit(commit(&record, 0, vec![version(1, "b1")]))
        .await
        .unwrap();
    let (_, content) = f
        .catalog
        .org_and_state_with_content("acme", "net")
        .await
        .unwrap()
        .1
        .unwrap();
    assert_eq!(
        content, None,
        "a blob version's content is not in the catalog"
    );
    record.latest = Some(inline_version(2));
    record.next_version = 3;
    let mut c = commit(&record, 1, vec![inline_version(2)]);
    c.contents.push(sealed(2, 1000));
    f.catalog.commit(c).await.unwrap();
    let (read, content) = f
        .catalog
        .org_and_state_with_content("acme", "net")
        .await
        .unwrap()
        .1
        .unwrap();
    assert_eq!(read.latest, Some(inline_version(2)));
    assert_eq!(content.as_deref(), Some(sealed(2, 1000).sealed.as_slice()));
    assert_eq!(
        f.catalog.content("acme", "net", "inc", 2).await.unwrap(),
        Some(sealed(2, 1000).sealed.to_vec())
    );
    assert_eq!(
        f.catalog.content("acme", "net", "inc", 1).await.unwrap(),
        None
    );
    assert_eq!(
        f.catalog.content("acme", "net", "other", 2).await.unwrap(),
        None,
        "another incarnation's version 2 is not this one"
    );
    let listed = f.catalog.versions("acme", "net", "inc").await.unwrap();
    assert_eq!(listed, [inline_version(2), version(1, "b1")]);
    assert!(f
        .catalog
        .org_and_state_with_content("acme", "none")
        .await
        .unwrap()
        .1
        .is_none());
    let listing = f.catalog.states("acme", None, 10).await.unwrap();
    assert_eq!(listing[0].latest, Some(inline_version(2)));
}

/// A commit that only rewrites an inline version's record (closing its change record,
/// releasing a lock) keeps its content; new content replaces it; a record that is no
/// longer inline (a replacing save stored as a blob) drops it.
pub async fn rewriting_a_record_keeps_its_content_until_it_is_a_blob(f: Fixture) {
    let mut record = StateRecord::fresh("acme", "net", "inc", NOW);
    record.latest = Some(inline_version(1));
    record.next_version = 2;
    let mut c = commit(&record, 0, vec![inline_version(1)]);
    c.contents.push(sealed(1, 500));
    f.catalog.commit(c).await.unwrap();
    let content = |f: &Fixture| {
        let catalog = f.catalog.clone();
        async move {
            let (_, latest) = catalog
                .org_and_state_with_content("acme", "net")
                .await
                .unwrap()
                .1
                .unwrap();
            let by_version = catalog.content("acme", "net", "inc", 1).await.unwrap();
            (latest.map(|c| c.len()), by_version.map(|c| c.len()))
        }
    };
    let mut closed = inline_version(1);
    closed.change.saves = 2;
    record.latest = Some(closed.clone());
    f.catalog
        .commit(commit(&record, 1, vec![closed.clone()]))
        .await
        .unwrap();
    assert_eq!(content(&f).await, (Some(500), Some(500)), "kept");
    let mut c = commit(&record, 2, vec![closed.clone()]);
    c.contents.push(sealed(1, 700));
    f.catalog.commit(c).await.unwrap();
    assert_eq!(content(&f).await, (Some(700), Some(700)), "replaced");
    f.catalog.commit(commit(&record, 3, vec![])).await.unwrap();
    assert_eq!(
        content(&f).await,
        (Some(700), Some(700)),
        "a commit of the state alone keeps its latest content"
    );
    let blob = version(1, "b1");
    record.latest = Some(blob.clone());
    f.catalog
        .commit(commit(&record, 4, vec![blob]))
        .await
        .unwrap();
    assert_eq!(content(&f).await, (None, None), "dropped");
}

/// The largest inline version commits beside a state record far larger than any real
/// one (a long lineage in the latest version, which the state record copies): on AWS
/// both the state item and the version item stay under DynamoDB's 400 KB.
pub async fn the_largest_inline_version_fits_beside_a_large_record(f: Fixture) {
    let mut large = inline_version(1);
    large.lineage = Some("l".repeat(100_000));
    let mut record = StateRecord::fresh("acme", "net", "inc", NOW);
    record.latest = Some(large.clone());
    record.next_version = 2;
    let mut c = commit(&record, 0, vec![large]);
    c.contents.push(sealed(1, INLINE_MAX_BYTES));
    f.catalog.commit(c).await.unwrap();
    let (_, content) = f
        .catalog
        .org_and_state_with_content("acme", "net")
        .await
        .unwrap()
        .1
        .unwrap();
    assert_eq!(content.map(|c| c.len()), Some(INLINE_MAX_BYTES));
}
