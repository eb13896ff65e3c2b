//! The state port's key-slot cases of the contract (included by ../contract.rs): a version's
//! key slot stored and read back, and replaced (a re-wrap) only while it is the one the
//! caller read, an inline version's content untouched.

use super::*;
use hegemony_state::domain::version::KeySlot;
use hegemony_state::ports::{SlotChange, SlotOwner};

/// The change of version `version` of `incarnation` of state net from `old` to `new`.
pub fn slot_change<'a>(
    incarnation: &'a str,
    version: u64,
    old: &'a KeySlot,
    new: &'a KeySlot,
) -> SlotChange<'a> {
    SlotChange {
        org: "acme",
        owner: SlotOwner::State("net"),
        home: "net",
        incarnation,
        version,
        old,
        new,
    }
}

/// A version's key slot (key id and wrapped key) reads back as stored, in the version and
/// the state's copy; a record without one (written before the slot was kept) reads back
/// without one.
pub async fn versions_keep_their_key_slot(f: Fixture) {
    let record = StateRecord::fresh("acme", "net", "inc", NOW);
    let mut slotted = version(2, "b2");
    slotted.key = "transit:bao:tf-acme:v3".into();
    slotted.wrapped_key = Some(b"vault:v3:\x00\xffwrapped".to_vec());
    let mut older = version(1, "b1");
    older.wrapped_key = None;
    let mut stored = record.clone();
    stored.latest = Some(slotted.clone());
    f.catalog
        .commit(commit(&stored, 0, vec![older.clone(), slotted.clone()]))
        .await
        .unwrap();
    assert_eq!(
        f.catalog.versions("acme", "net", "inc").await.unwrap(),
        vec![slotted.clone(), older]
    );
    let latest = f
        .catalog
        .state("acme", "net")
        .await
        .unwrap()
        .unwrap()
        .latest;
    assert_eq!(latest, Some(slotted));
}

/// A key slot is replaced only while it is still the one the caller read: in the
/// version and the state's copy, with the state's revision raised (so a commit decided
/// before it conflicts); a stale `old`, a missing version or another incarnation
/// conflicts and writes nothing.
pub async fn a_key_slot_is_replaced_only_while_it_is_the_old_one(f: Fixture) {
    let record = StateRecord::fresh("acme", "net", "inc", NOW);
    let mut stored = record.clone();
    stored.latest = Some(version(2, "b2"));
    let c = commit(&stored, 0, vec![version(1, "b1"), version(2, "b2")]);
    f.catalog.commit(c).await.unwrap();
    let new = KeySlot {
        key: "transit:bao:tf:v2".into(),
        wrapped_key: Some(b"vault:v2:abc".to_vec()),
    };
    for n in [1, 2] {
        let old = version(n, "").slot();
        f.catalog
            .replace_key_slot(&slot_change("inc", n, &old, &new))
            .await
            .unwrap();
        let again = f
            .catalog
            .replace_key_slot(&slot_change("inc", n, &old, &new))
            .await;
        assert!(matches!(again, Err(StoreError::Conflict)), "{again:?}");
        let back = f.catalog.version("acme", "net", "inc", n).await.unwrap();
        assert_eq!(back.unwrap().slot(), new);
    }
    let state = f.catalog.state("acme", "net").await.unwrap().unwrap();
    assert_eq!(state.revision, 3, "each replacement raises the revision");
    assert_eq!(state.latest.unwrap().slot(), new);
    let stale = commit(&stored, 1, Vec::new());
    assert!(matches!(
        f.catalog.commit(stale).await,
        Err(StoreError::Conflict)
    ));
    for (incarnation, n) in [("inc", 9), ("other", 1)] {
        let r = f
            .catalog
            .replace_key_slot(&slot_change(incarnation, n, &new, &new))
            .await;
        assert!(matches!(r, Err(StoreError::Conflict)), "{r:?}");
    }
    let first = f.catalog.version("acme", "net", "inc", 1).await.unwrap();
    assert_eq!(first.unwrap().version, 1, "an untouched version stays");
}

/// Re-wrapping an inline version's key changes only its slot: its content, beside the
/// version's record and (for the latest) the state's, reads back as it was.
pub async fn replacing_an_inline_versions_key_slot_keeps_its_content(f: Fixture) {
    let mut stored = StateRecord::fresh("acme", "net", "inc", NOW);
    stored.latest = Some(inline_version(2));
    let mut c = commit(&stored, 0, vec![inline_version(1), inline_version(2)]);
    c.contents.extend([sealed(1, 500), sealed(2, 700)]);
    f.catalog.commit(c).await.unwrap();
    let new = KeySlot {
        key: "transit:bao:tf:v2".into(),
        wrapped_key: Some(b"vault:v2:abc".to_vec()),
    };
    for n in [1, 2] {
        let old = inline_version(n).slot();
        f.catalog
            .replace_key_slot(&slot_change("inc", n, &old, &new))
            .await
            .unwrap();
        let content = f.catalog.content("acme", "net", "inc", n).await.unwrap();
        let len = if n == 1 { 500 } else { 700 };
        assert_eq!(content, Some(sealed(n, len).sealed.to_vec()), "version {n}");
    }
    let (_, state) = f
        .catalog
        .org_and_state_with_content("acme", "net")
        .await
        .unwrap();
    let (record, content) = state.unwrap();
    let latest = record.latest.unwrap();
    assert_eq!((latest.slot(), latest.inline), (new, true));
    assert_eq!(content, Some(sealed(2, 700).sealed.to_vec()));
}
