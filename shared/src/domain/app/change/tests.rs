//! The rules of a change, on records built in memory.

use time::macros::datetime;

use super::*;
use crate::domain::permission::Role;

fn person(user: &str) -> Principal {
    Principal {
        session: None,
        org: "acme".into(),
        role: Role::Operator,
        actor: Actor::User { user: user.into() },
        step: None,
    }
}

const T0: Timestamp = datetime!(2026-10-01 12:30:53.600 UTC);

fn locked_by(user: &str, lock_id: &str) -> AppRecord {
    let record = AppRecord::fresh("acme", "shop", "inc", T0);
    let request = LockRequest {
        lock_id: Some(lock_id.into()),
        ..LockRequest::default()
    };
    match decide_lock(&record, &request, &person(user), T0, "unused", "5bbc6995") {
        Ok(LockDecision::Granted(r)) => *r,
        other => panic!("{other:?}"),
    }
}

fn file(name: &str, blob: &str, serial: Option<u64>, change: &str) -> FileRef {
    let parsed = FileName::parse(name).unwrap();
    FileRef {
        name: name.into(),
        kind: parsed.kind,
        size: 10,
        sha256: "00".into(),
        lineage: serial.map(|_| "L".into()),
        serial,
        uploaded_in: change.into(),
        uploaded_at: T0,
        blob: blob.into(),
        seq: 1,
        key: "platform:x".into(),
        wrapped_key: None,
    }
}

fn upload(record: &AppRecord, f: FileRef) -> AppRecord {
    apply_upload(record, f).0
}

fn sealed(record: &AppRecord, user: &str, lock_id: &str) -> (AppRecord, ArchiveRecord) {
    match decide_seal(record, lock_id, &person(user), Ended::Sealed, T0) {
        Ok(SealDecision::Seal(r, a)) => (*r, a),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_lock_s_commit_id_starts_with_its_time_in_milliseconds() {
    let record = locked_by("alice", "L1");
    let lock = record.lock.as_ref().unwrap();
    assert_eq!(lock.commit_id, "1790857853600-5bbc6995");
    assert_eq!(record.revision, 1);
}

#[test]
fn a_commit_id_never_sorts_before_the_newest_archive_even_when_the_clock_went_back() {
    let (record, archive) = sealed(&locked_by("alice", "L1"), "alice", "L1");
    let earlier = T0 - time::Duration::seconds(5);
    let id = commit_id(&record, earlier, "abcdef01");
    assert!(id > archive.commit_id, "{id} <= {}", archive.commit_id);
}

#[test]
fn a_held_lock_refuses_another_locker_naming_the_holder_and_since_when() {
    let record = locked_by("alice", "L1");
    let err = decide_lock(
        &record,
        &LockRequest::default(),
        &person("bob"),
        T0,
        "L2",
        "x",
    )
    .unwrap_err();
    match err {
        Refusal::AppLocked { holder, lock, .. } => {
            assert_eq!(holder, "user alice since 2026-10-01T12:30:53.6Z");
            assert_eq!(
                lock.holder,
                Actor::User {
                    user: "alice".into()
                }
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn locking_again_with_the_same_id_is_answered_with_the_same_lock() {
    let record = locked_by("alice", "L1");
    let again = LockRequest {
        lock_id: Some("L1".into()),
        ..LockRequest::default()
    };
    let decision = decide_lock(&record, &again, &person("alice"), T0, "x", "y").unwrap();
    assert_eq!(
        decision,
        LockDecision::AlreadyYours(record.lock.clone().unwrap())
    );
}

#[test]
fn uploads_need_the_holder_and_its_lock_id() {
    let record = locked_by("alice", "L1");
    let name = FileName::parse("models.json").unwrap();
    let facts = UploadFacts {
        size: 2,
        lineage: None,
        serial: None,
    };
    assert!(matches!(
        check_upload(&record, "L1", &person("bob"), &name, &facts),
        Err(Refusal::AppLocked { .. })
    ));
    assert!(matches!(
        check_upload(&record, "L0", &person("alice"), &name, &facts),
        Err(Refusal::LockIdMismatch { .. })
    ));
    let unlocked = AppRecord::fresh("acme", "shop", "inc", T0);
    assert!(matches!(
        check_upload(&unlocked, "L1", &person("alice"), &name, &facts),
        Err(Refusal::LockIdMismatch { current: None, .. })
    ));
    assert_eq!(
        check_upload(&record, "L1", &person("alice"), &name, &facts),
        Ok(())
    );
}

#[test]
fn a_module_state_keeps_its_lineage_and_never_goes_back_in_serial() {
    let record = locked_by("alice", "L1");
    let record = upload(&record, file("net.tfstate", "b1", Some(5), "c1"));
    let (record, _) = sealed(&record, "alice", "L1");
    let record = locked_by_again(&record, "alice", "L2");
    let name = FileName::parse("net.tfstate").unwrap();
    let facts = |lineage: &str, serial| UploadFacts {
        size: 2,
        lineage: Some(lineage.into()),
        serial: Some(serial),
    };
    let check = |f: &UploadFacts| check_upload(&record, "L2", &person("alice"), &name, f);
    assert!(matches!(
        check(&facts("other", 6)),
        Err(Refusal::LineageMismatch { .. })
    ));
    assert_eq!(
        check(&facts("L", 4)),
        Err(Refusal::StaleSerial {
            stored: 5,
            given: 4
        })
    );
    assert_eq!(check(&facts("L", 5)), Ok(()));
    assert_eq!(check(&facts("L", 6)), Ok(()));
}

fn locked_by_again(record: &AppRecord, user: &str, lock_id: &str) -> AppRecord {
    let request = LockRequest {
        lock_id: Some(lock_id.into()),
        ..LockRequest::default()
    };
    let later = T0 + time::Duration::minutes(1);
    match decide_lock(record, &request, &person(user), later, "x", "0000aaaa") {
        Ok(LockDecision::Granted(r)) => *r,
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_newest_archive_is_the_previous_seal_s_state_files_under_this_change_s_uploads() {
    let record = locked_by("alice", "L1");
    let record = upload(&record, file("net.tfstate", "b1", Some(1), "c1"));
    let record = upload(&record, file("models.json", "b2", None, "c1"));
    let record = upload(&record, file("journal.1-ab.apply.json", "b3", None, "c1"));
    let (record, first) = sealed(&record, "alice", "L1");
    assert_eq!(first.files.len(), 3);
    let record = locked_by_again(&record, "alice", "L2");
    let record = upload(&record, file("models.json", "b4", None, "c2"));
    let record = upload(&record, file("journal.2-cd.commit.json", "b5", None, "c2"));
    let (record, second) = sealed(&record, "alice", "L2");
    let blobs: Vec<(&str, &str)> = second
        .files
        .iter()
        .map(|f| (f.name.as_str(), f.blob.as_str()))
        .collect();
    assert_eq!(
        blobs,
        vec![
            ("journal.2-cd.commit.json", "b5"),
            ("models.json", "b4"),
            ("net.tfstate", "b1"),
        ]
    );
    assert_eq!(second.files[0].kind.command(), Some("commit"));
    assert!(record.lock.is_none());
    assert_eq!(record.newest.as_ref(), Some(&second));
    assert_eq!(record.archives, 2);
}

#[test]
fn an_upload_replaces_the_change_s_earlier_upload_of_that_name_and_frees_its_blob() {
    let record = locked_by("alice", "L1");
    let record = upload(&record, file("net.tfstate", "b1", Some(1), "c1"));
    let (record, replaced) = apply_upload(&record, file("net.tfstate", "b2", Some(2), "c1"));
    assert_eq!(replaced.as_deref(), Some("b1"));
    assert_eq!(record.lock.unwrap().uploads["net.tfstate"].blob, "b2");
}

#[test]
fn a_retried_seal_is_answered_with_the_archive_it_sealed() {
    let (record, archive) = sealed(&locked_by("alice", "L1"), "alice", "L1");
    let again = decide_seal(&record, "L1", &person("alice"), Ended::Sealed, T0).unwrap();
    assert_eq!(again, SealDecision::AlreadySealed(archive));
    assert!(matches!(
        decide_seal(&record, "L1", &person("bob"), Ended::Sealed, T0),
        Err(Refusal::LockIdMismatch { .. })
    ));
    assert!(
        matches!(
            decide_seal(&record, "L1", &person("alice"), Ended::GivenUp, T0),
            Err(Refusal::LockIdMismatch { .. })
        ),
        "giving up a change already sealed is not a retry of its seal"
    );
}

#[test]
fn a_seal_retried_after_newer_changes_were_sealed_is_a_retry_of_its_own_archive_only() {
    let (record, archive) = sealed(&locked_by("alice", "L1"), "alice", "L1");
    let record = locked_by_again(&record, "bob", "L2");
    let (record, _) = sealed(&record, "bob", "L2");
    // Bob's change sealed over it: the record alone refuses, and says an older archive may
    // answer; so it does with another lock held since.
    let refused = decide_seal(&record, "L1", &person("alice"), Ended::Sealed, T0).unwrap_err();
    assert!(may_be_older_retry(&refused), "{refused:?}");
    let record = locked_by_again(&record, "bob", "L3");
    let refused = decide_seal(&record, "L1", &person("alice"), Ended::Sealed, T0).unwrap_err();
    assert!(may_be_older_retry(&refused), "{refused:?}");
    // The older archive answers the same request, and nothing else.
    assert!(is_retry_of(&archive, "L1", &person("alice"), Ended::Sealed));
    assert!(!is_retry_of(
        &archive,
        "L1",
        &person("alice"),
        Ended::GivenUp
    ));
    assert!(!is_retry_of(&archive, "L1", &person("bob"), Ended::Sealed));
    assert!(!is_retry_of(
        &archive,
        "L2",
        &person("alice"),
        Ended::Sealed
    ));
    let bad = Refusal::InvalidRequest { reason: "x".into() };
    assert!(!may_be_older_retry(&bad));
}

#[test]
fn a_seal_after_a_force_unlock_is_refused_not_answered_with_the_forced_archive() {
    let record = locked_by("alice", "L1");
    let lock = record.lock.clone().unwrap();
    let (forced, _) = seal(&record, &lock, Ended::ForceUnlocked, &Actor::Cli, T0);
    assert!(matches!(
        decide_seal(&forced, "L1", &person("alice"), Ended::Sealed, T0),
        Err(Refusal::LockIdMismatch { current: None, .. })
    ));
}

#[test]
fn giving_a_change_up_seals_what_it_uploaded_marked_given_up() {
    let record = upload(
        &locked_by("alice", "L1"),
        file("journal.1-ab.apply.json", "b1", None, "c1"),
    );
    match decide_seal(&record, "L1", &person("alice"), Ended::GivenUp, T0) {
        Ok(SealDecision::Seal(next, archive)) => {
            assert_eq!(archive.ended, Ended::GivenUp);
            assert_eq!(archive.files.len(), 1);
            assert!(next.lock.is_none());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_archive_holds_at_most_its_limit_of_files() {
    let mut record = locked_by("alice", "L1");
    for i in 0..MAX_ARCHIVE_FILES {
        record = upload(
            &record,
            file(&format!("f{i}.json"), &format!("b{i}"), None, "c1"),
        );
    }
    let facts = UploadFacts {
        size: 1,
        lineage: None,
        serial: None,
    };
    let new = FileName::parse("one-more.json").unwrap();
    assert!(matches!(
        check_upload(&record, "L1", &person("alice"), &new, &facts),
        Err(Refusal::ChangeTooLarge { .. })
    ));
    let again = FileName::parse("f0.json").unwrap();
    assert_eq!(
        check_upload(&record, "L1", &person("alice"), &again, &facts),
        Ok(())
    );
}

#[test]
fn the_newest_archive_is_never_deleted() {
    let (record, archive) = sealed(&locked_by("alice", "L1"), "alice", "L1");
    assert!(matches!(
        check_delete(&record, &archive.commit_id),
        Err(Refusal::NewestArchive { .. })
    ));
    assert_eq!(check_delete(&record, "1-older"), Ok(()));
}

#[test]
fn deleting_an_archive_frees_only_the_blobs_its_neighbours_do_not_hold() {
    let archive = |files: Vec<FileRef>| ArchiveRecord {
        commit_id: "c".into(),
        lock_id: "l".into(),
        ended: Ended::Sealed,
        holder: Actor::Cli,
        who: String::new(),
        info: String::new(),
        locked_at: T0,
        sealed_at: T0,
        sealed_by: Actor::Cli,
        files,
    };
    let older = archive(vec![file("a.json", "kept-older", None, "c0")]);
    let doomed = archive(vec![
        file("a.json", "kept-older", None, "c0"),
        file("b.json", "kept-newer", None, "c1"),
        file("journal.1-ab.apply.json", "only-here", None, "c1"),
    ]);
    let newer = archive(vec![file("b.json", "kept-newer", None, "c1")]);
    assert_eq!(
        freed_blobs(&doomed, Some(&older), Some(&newer)),
        vec!["only-here".to_string()]
    );
    assert_eq!(freed_blobs(&doomed, None, None).len(), 3);
}
