//! The unit tests of `write`, beside it so that the file holds its code alone.

use super::*;
use crate::domain::document::sniff;
use crate::domain::lock::parse_lock;
use crate::domain::locking::{decide_lock, LockDecision};
use crate::domain::permission::Role;
use crate::domain::version::Ended;
use crate::domain::Actor;
use time::macros::datetime;

const NOW: Timestamp = datetime!(2026-11-30 01:00:00 UTC);

fn user(name: &str) -> Principal {
    Principal {
        session: None,
        org: "acme".into(),
        role: Role::Operator,
        actor: Actor::User { user: name.into() },
        step: None,
    }
}

fn state_doc(serial: u64, lineage: &str, extra: &str) -> String {
    format!(
        r#"{{"version":4,"serial":{serial},"lineage":"{lineage}","outputs":{{"x":"{extra}"}}}}"#
    )
}

/// What a write did, as the tests compare it.
#[derive(Debug, PartialEq, Eq)]
enum Wrote {
    Unchanged,
    Create { version: u64 },
    Replace { version: u64 },
}

/// Plans and applies a write of `body`, as the service does, returning what it did.
fn write(
    record: &mut StateRecord,
    who: &Principal,
    lock_id: Option<&str>,
    body: &str,
) -> Result<Wrote, Refusal> {
    let document = sniff(body.as_bytes());
    let sha = format!("{:x}", md5_like(body));
    let request = WriteRequest {
        lock_id,
        document: &document,
        sha256: &sha,
    };
    let plan = match plan_write(record, &request, who, NOW)? {
        WriteDecision::Unchanged => return Ok(Wrote::Unchanged),
        WriteDecision::Write(plan) => plan,
    };
    let wrote = match &plan.target {
        Target::Create { version, .. } => Wrote::Create { version: *version },
        Target::Replace { latest } => Wrote::Replace {
            version: latest.version,
        },
    };
    let content = SealedContent {
        size: body.len() as u64,
        sha256: sha,
        key: "platform:test".into(),
        wrapped_key: vec![7; 40],
        blob: format!("blob-{}", record.revision),
        inline: false,
        index: None,
    };
    *record = apply_write(record, plan, content, who, NOW).state;
    Ok(wrote)
}

/// A stand-in digest for tests: distinct bodies get distinct values.
fn md5_like(body: &str) -> u128 {
    body.bytes().fold(0xcbf29ce484222325u128, |h, b| {
        (h ^ b as u128).wrapping_mul(0x100000001b3)
    })
}

fn lock(record: &mut StateRecord, who: &Principal, id: &str) {
    let doc = parse_lock(format!(r#"{{"ID":"{id}"}}"#).as_bytes()).unwrap();
    let LockDecision::Granted(lock) = decide_lock(record, doc, who, NOW).unwrap() else {
        panic!("expected a grant")
    };
    record.lock = Some(*lock);
}

fn fresh() -> StateRecord {
    StateRecord::fresh("acme", "net", "inc", NOW)
}

#[test]
fn three_writes_under_one_lock_make_one_version_with_the_last_serial() {
    let alice = user("alice");
    let mut r = fresh();
    lock(&mut r, &alice, "L1");
    assert_eq!(
        write(&mut r, &alice, Some("L1"), &state_doc(1, "l", "a")),
        Ok(Wrote::Create { version: 1 })
    );
    assert_eq!(
        write(&mut r, &alice, Some("L1"), &state_doc(2, "l", "b")),
        Ok(Wrote::Replace { version: 1 })
    );
    assert_eq!(
        write(&mut r, &alice, Some("L1"), &state_doc(3, "l", "c")),
        Ok(Wrote::Replace { version: 1 })
    );
    let latest = r.latest.unwrap();
    assert_eq!(
        (latest.version, latest.serial, latest.change.saves),
        (1, Some(3), 3)
    );
    assert_eq!(latest.change.ended, Ended::Open);
    assert_eq!(latest.change.lock.unwrap().id, "L1");
}

/// A replaced blob is listed for deletion; replaced inline content goes with the
/// commit that overwrites it, so there is nothing to delete.
#[test]
fn replacing_an_inline_version_leaves_no_blob_to_delete() {
    let alice = user("alice");
    let mut r = fresh();
    lock(&mut r, &alice, "L1");
    write(&mut r, &alice, Some("L1"), &state_doc(1, "l", "a")).unwrap();
    let replace = |r: &StateRecord, serial: u64, inline: bool| {
        let body = state_doc(serial, "l", "x");
        let document = sniff(body.as_bytes());
        let sha = format!("{:x}", md5_like(&body));
        let request = WriteRequest {
            lock_id: Some("L1"),
            document: &document,
            sha256: &sha,
        };
        let Ok(WriteDecision::Write(plan)) = plan_write(r, &request, &alice, NOW) else {
            panic!("expected a write")
        };
        let content = SealedContent {
            size: body.len() as u64,
            sha256: sha.clone(),
            key: "platform:test".into(),
            wrapped_key: vec![7; 40],
            blob: format!("blob-{serial}"),
            inline,
            index: None,
        };
        apply_write(r, plan, content, &alice, NOW)
    };
    let to_inline = replace(&r, 2, true);
    assert_eq!(to_inline.replaced_blob.as_deref(), Some("blob-0"));
    assert!(to_inline.version.inline);
    let back_to_blob = replace(&to_inline.state, 3, false);
    assert_eq!(back_to_blob.replaced_blob, None);
    assert!(!back_to_blob.version.inline);
}

#[test]
fn relocking_with_the_same_id_starts_a_new_version() {
    let alice = user("alice");
    let mut r = fresh();
    lock(&mut r, &alice, "L1");
    write(&mut r, &alice, Some("L1"), &state_doc(1, "l", "a")).unwrap();
    r.lock = None;
    lock(&mut r, &alice, "L1");
    assert_eq!(
        write(&mut r, &alice, Some("L1"), &state_doc(2, "l", "b")),
        Ok(Wrote::Create { version: 2 })
    );
}

#[test]
fn a_holders_write_without_id_is_its_own_version_and_the_next_id_write_another() {
    let alice = user("alice");
    let mut r = fresh();
    lock(&mut r, &alice, "L1");
    write(&mut r, &alice, Some("L1"), &state_doc(1, "l", "a")).unwrap();
    assert_eq!(
        write(&mut r, &alice, None, &state_doc(2, "l", "b")),
        Ok(Wrote::Create { version: 2 })
    );
    assert_eq!(
        r.latest.as_ref().unwrap().change.ended,
        Ended::UnlockedWrite
    );
    assert_eq!(
        write(&mut r, &alice, Some("L1"), &state_doc(3, "l", "c")),
        Ok(Wrote::Create { version: 3 })
    );
    assert_eq!(
        write(&mut r, &alice, Some("L1"), &state_doc(4, "l", "d")),
        Ok(Wrote::Replace { version: 3 })
    );
}

#[test]
fn someone_elses_lock_refuses_before_anything_else() {
    let mut r = fresh();
    lock(&mut r, &user("alice"), "L1");
    let err = write(&mut r, &user("bob"), Some("L1"), "not json").unwrap_err();
    assert!(matches!(err, Refusal::Locked { ref lock_id, .. } if lock_id == "L1"));
    let err = write(&mut r, &user("bob"), None, &state_doc(1, "l", "")).unwrap_err();
    assert!(matches!(err, Refusal::Locked { .. }));
}

#[test]
fn an_id_must_name_the_current_lock() {
    let alice = user("alice");
    let mut r = fresh();
    assert!(matches!(
        write(&mut r, &alice, Some("GONE"), &state_doc(1, "l", "")),
        Err(Refusal::LockIdMismatch { current: None, .. })
    ));
    lock(&mut r, &alice, "L1");
    assert!(matches!(
        write(&mut r, &alice, Some("L0"), &state_doc(1, "l", "")),
        Err(Refusal::LockIdMismatch {
            current: Some(_),
            ..
        })
    ));
}

#[test]
fn a_bad_document_is_refused_after_the_lock_checks() {
    let mut r = fresh();
    assert!(matches!(
        write(&mut r, &user("a"), None, "[]"),
        Err(Refusal::NotAState { .. })
    ));
}

#[test]
fn lineage_then_serial_are_checked_against_the_latest_version() {
    let a = user("a");
    let mut r = fresh();
    write(&mut r, &a, None, &state_doc(5, "l", "x")).unwrap();
    assert!(matches!(
        write(&mut r, &a, None, &state_doc(9, "other", "")),
        Err(Refusal::LineageMismatch { .. })
    ));
    assert_eq!(
        write(&mut r, &a, None, &state_doc(4, "l", "")),
        Err(Refusal::StaleSerial {
            stored: 5,
            given: 4
        })
    );
    assert_eq!(
        write(&mut r, &a, None, &state_doc(5, "l", "different")),
        Err(Refusal::Fork { serial: 5 })
    );
    assert_eq!(
        write(&mut r, &a, None, &state_doc(5, "l", "x")),
        Ok(Wrote::Unchanged)
    );
    assert_eq!(
        write(&mut r, &a, None, &state_doc(6, "l", "y")),
        Ok(Wrote::Create { version: 2 })
    );
}

#[test]
fn any_lineage_is_accepted_when_none_is_stored() {
    let mut r = fresh();
    assert!(write(&mut r, &user("a"), None, &state_doc(1, "first", "")).is_ok());
}

#[test]
fn encrypted_states_are_checked_when_they_carry_serial_and_lineage() {
    let a = user("a");
    let mut r = fresh();
    let enc = |serial: u64, data: &str| {
        format!(
            r#"{{"serial":{serial},"lineage":"l","meta":{{}},"encrypted_data":"{data}","encryption_version":"v0"}}"#
        )
    };
    write(&mut r, &a, None, &enc(3, "AA")).unwrap();
    assert!(r.latest.as_ref().unwrap().opentofu_encrypted);
    assert_eq!(
        write(&mut r, &a, None, &enc(2, "BB")),
        Err(Refusal::StaleSerial {
            stored: 3,
            given: 2
        })
    );
    let bare = r#"{"encrypted_data":"CC","encryption_version":"v0"}"#;
    assert_eq!(
        write(&mut r, &a, None, bare),
        Ok(Wrote::Create { version: 2 })
    );
}

#[test]
fn a_write_after_a_bare_encrypted_version_is_checked_against_the_last_facts_carried() {
    let a = user("a");
    let mut r = fresh();
    write(&mut r, &a, None, &state_doc(3, "l", "")).unwrap();
    let bare = r#"{"encrypted_data":"CC","encryption_version":"v0"}"#;
    write(&mut r, &a, None, bare).unwrap();
    assert_eq!(r.latest.as_ref().unwrap().serial, None);
    assert_eq!(
        write(&mut r, &a, None, &state_doc(2, "l", "")),
        Err(Refusal::StaleSerial {
            stored: 3,
            given: 2
        })
    );
    assert_eq!(
        write(&mut r, &a, None, &state_doc(3, "l", "other")),
        Err(Refusal::Fork { serial: 3 })
    );
    assert_eq!(
        write(&mut r, &a, None, &state_doc(4, "m", "")),
        Err(Refusal::LineageMismatch {
            stored: "l".into(),
            given: "m".into()
        })
    );
    // A second bare version keeps them too, and a write that carries them moves on.
    write(
        &mut r,
        &a,
        None,
        r#"{"encrypted_data":"DD","encryption_version":"v0"}"#,
    )
    .unwrap();
    assert_eq!(
        write(&mut r, &a, None, &state_doc(4, "l", "")),
        Ok(Wrote::Create { version: 4 })
    );
    assert_eq!(
        write(&mut r, &a, None, &state_doc(4, "l", "x")),
        Err(Refusal::Fork { serial: 4 })
    );
}

#[test]
fn version_numbers_keep_counting() {
    let a = user("a");
    let mut r = fresh();
    for serial in 1..=3 {
        write(&mut r, &a, None, &state_doc(serial, "l", "")).unwrap();
    }
    assert_eq!(r.next_version, 4);
    assert_eq!(r.revision, 3);
}
