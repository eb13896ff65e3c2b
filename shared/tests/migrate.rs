//! A migration between two memory stores sealed by different keys: every version (inline and
//! blob) copied with its data key moved to the target's key, readable there as it was; the
//! token, the trust policy, the org's permissions and the audit log with it; a locked state
//! refused, then skipped; a dry run writes nothing; a second run copies nothing again; a
//! different record on the target stops it. App states likewise, with every archive; a deleted
//! state with its versions, restored on the target. Runs move with their ends (a step token
//! refused on the source is refused on the target), an org without a token moves, `--org`
//! moves the orgs named, writes that land on the source after the survey are named, and a
//! migration that dies inside a version's commit is completed by the next run.

use std::sync::Arc;

use hegemony_state::adapters::memory::MemoryStore;
use hegemony_state::crypto::{open_into, PlatformKey};
use hegemony_state::domain::actor::StepKind;
use hegemony_state::domain::app::change::LockRequest;
use hegemony_state::domain::app::{ArchiveRecord, Ended};
use hegemony_state::domain::name::StateName;
use hegemony_state::domain::permission::Allocation;
use hegemony_state::domain::permission::Role;
use hegemony_state::domain::protection::Protection;
use hegemony_state::domain::trust::TrustPolicy;
use hegemony_state::domain::{Actor, Principal};
use hegemony_state::ports::{AuditEntry, AuditQuery, KeyService};
use hegemony_state::service::app_changes;
use hegemony_state::service::app_reads::{self, Source};
use hegemony_state::service::auth::authenticate;
use hegemony_state::service::deleted;
use hegemony_state::service::lock::lock;
use hegemony_state::service::manage::{self, download};
use hegemony_state::service::migrate::{
    migrate, orgs, survey, Count, MigrateError, Options, Sides, Step,
};
use hegemony_state::service::runs::{self, MintRequest};
use hegemony_state::service::state::{write, Content};
use hegemony_state::service::tokens::{create, NewToken};
use hegemony_state::service::{App, Limits, SystemClock};
use sha2::{Digest, Sha256};

fn app(store: &Arc<MemoryStore>, keys: Arc<dyn KeyService>) -> App {
    App {
        catalog: store.clone(),
        blobs: store.clone(),
        keys: Some(keys),
        index_keys: Default::default(),
        key_cache: hegemony_state::service::key_cache::KeyCache::new(
            64,
            std::time::Duration::from_secs(300),
        ),
        clock: Arc::new(SystemClock),
        limits: Limits {
            max_state_bytes: 32 << 20,
            keep_versions: 1000,
            // No grace: a step token of an ended run is refused at once, on both sides.
            run_end_grace: time::Duration::ZERO,
            deleted_retention: time::Duration::days(7),
            lambda_ceiling: None,
        },
        links: Default::default(),
        issuers: hegemony_state::service::issuers::Issuers::off(),
        metrics: Arc::new(hegemony_state::ports::Unmeasured),
    }
}

fn alice() -> Principal {
    Principal {
        session: None,
        org: "acme".into(),
        role: Role::Admin,
        actor: Actor::User {
            user: "alice".into(),
        },
        step: None,
    }
}

/// Two memory stores, each sealed by a key of its own: a migration's source and target.
fn two_sides() -> (App, App) {
    let side = || {
        app(
            &Arc::new(MemoryStore::new()),
            Arc::new(PlatformKey::generate()),
        )
    };
    (side(), side())
}

/// A lock as Terraform 1.11 sends it, with the ID `id`.
fn lock_doc(id: &str) -> String {
    format!(
        r#"{{"ID":"{id}","Operation":"OperationTypeApply","Info":"","Who":"a@h","Version":"1.11.4","Created":"2026-11-30T01:07:12Z","Path":""}}"#
    )
}

fn name(s: &str) -> StateName {
    StateName::parse(s).unwrap()
}

/// A state document; `noise` bytes of incompressible text make its sealed form a blob.
fn doc(serial: u64, noise: usize) -> Vec<u8> {
    let mut filler = String::new();
    let mut block = Sha256::digest(serial.to_be_bytes());
    while filler.len() < noise {
        block = Sha256::digest(block);
        filler.push_str(&hegemony_state::ids::hex(&block));
    }
    format!(r#"{{"version":4,"serial":{serial},"lineage":"lin","outputs":{{"n":{{"value":"{filler}","type":"string"}}}}}}"#).into_bytes()
}

fn plaintext(content: Content) -> Vec<u8> {
    match content {
        Content::Whole(bytes) => bytes,
        Content::Gzip { opening, size } => open_into(*opening, size as usize, vec![]).unwrap(),
    }
}

/// Versions of a state on one side: (number, SHA-256, key id).
async fn versions(app: &App, state: &str) -> Vec<(u64, String, String)> {
    let record = app.catalog.state("acme", state).await.unwrap().unwrap();
    let versions = app
        .catalog
        .versions("acme", record.home(), &record.incarnation)
        .await
        .unwrap();
    versions
        .into_iter()
        .map(|v| (v.version, v.sha256, v.key))
        .collect()
}

async fn audit_len(app: &App) -> usize {
    let query = AuditQuery {
        limit: 10_000,
        ..AuditQuery::default()
    };
    app.catalog.audit("acme", &query).await.unwrap().len()
}

#[tokio::test]
async fn a_migration_copies_every_version_under_the_targets_key_once() {
    let (from_store, to_store) = (Arc::new(MemoryStore::new()), Arc::new(MemoryStore::new()));
    let (from_key, to_key) = (
        Arc::new(PlatformKey::generate()),
        Arc::new(PlatformKey::generate()),
    );
    let from = app(&from_store, from_key.clone());
    let to = app(&to_store, to_key.clone());
    let new = NewToken::Personal {
        org: "acme",
        user: "alice",
        role: Role::Admin,
    };
    let (_, token) = create(&*from.catalog, new, &Actor::Cli, from.clock.now())
        .await
        .unwrap();
    for serial in 1..=3 {
        write(&from, &alice(), &name("net"), None, doc(serial, 10))
            .await
            .unwrap();
    }
    for serial in 1..=2 {
        write(&from, &alice(), &name("big"), None, doc(serial, 300_000))
            .await
            .unwrap();
    }
    write(&from, &alice(), &name("busy"), None, doc(1, 10))
        .await
        .unwrap();
    lock(&from, &alice(), &name("busy"), lock_doc("l-1").as_bytes())
        .await
        .unwrap();
    let policy = TrustPolicy {
        name: "ci".into(),
        issuer: "https://token.actions.githubusercontent.com".into(),
        audience: "hegemony".into(),
        claims: [("repository".to_owned(), "acme/infra".to_owned())].into(),
        role: Role::Operator,
        states: vec!["net".into()],
        session_seconds: 3600,
    };
    let entry = AuditEntry {
        org: "acme".into(),
        at: from.clock.now(),
        action: "trust_policy.created".into(),
        actor: Actor::Cli,
        state: None,
        version: None,
        detail: serde_json::json!({}),
    };
    from.catalog
        .put_trust_policy("acme", None, &policy, &entry)
        .await
        .unwrap();
    let protection = Protection {
        pattern: "net".into(),
        policies: vec!["ci".into()],
    };
    from.catalog
        .put_protection("acme", None, &protection, &entry)
        .await
        .unwrap();
    let allocation = Allocation {
        read: Some(Role::Operator),
        ..Allocation::default()
    };
    from.catalog
        .set_allocation("acme", &Allocation::default(), &allocation, &entry)
        .await
        .unwrap();
    let big = versions(&from, "big").await;
    let big_record = from.catalog.state("acme", "big").await.unwrap().unwrap();
    assert!(
        !big_record.latest.unwrap().inline,
        "a blob version is copied too"
    );

    let sides = Sides {
        from: &from,
        to: &to,
    };
    let orgs = orgs(&from).await.unwrap();
    let found = survey(&from, &orgs).await.unwrap();
    assert_eq!(found.blocked.len(), 1, "{:?}", found.blocked);
    let refused = migrate(sides, &found, Options::default(), &|_| {}).await;
    assert!(
        matches!(&refused, Err(MigrateError::Locked(s)) if s[0].starts_with("acme/busy")),
        "{refused:?}"
    );
    assert!(
        to.catalog.tokens().await.unwrap().is_empty(),
        "a refusal writes nothing"
    );

    let dry = Options {
        dry_run: true,
        skip_locked: true,
    };
    let would = migrate(sides, &found, dry, &|_| {}).await.unwrap();
    assert_eq!(
        would.versions,
        Count {
            copied: 5,
            present: 0
        }
    );
    assert_eq!(
        would.tokens,
        Count {
            copied: 1,
            present: 0
        }
    );
    assert!(
        to.catalog.tokens().await.unwrap().is_empty(),
        "a dry run writes nothing"
    );
    assert!(to.catalog.state("acme", "net").await.unwrap().is_none());
    assert_eq!(audit_len(&to).await, 0);

    let run = Options {
        dry_run: false,
        skip_locked: true,
    };
    let done = migrate(sides, &found, run, &|_| {}).await.unwrap();
    assert_eq!(
        done.versions,
        Count {
            copied: 5,
            present: 0
        }
    );
    assert_eq!(done.verified, 5);
    assert!(done.mismatched.is_empty(), "{:?}", done.mismatched);
    assert_eq!(done.skipped.len(), 1);
    let source_entries = audit_len(&from).await;
    // The source's entries, one per token, trust policy and protected-state rule copied,
    // one for the migration.
    assert_eq!(audit_len(&to).await, source_entries + 4);
    assert!(to.catalog.state("acme", "busy").await.unwrap().is_none());
    assert_eq!(
        to.catalog.token(&token.hash).await.unwrap().as_ref(),
        Some(&token),
        "the token is stored by the same hash: it keeps working"
    );
    assert_eq!(
        to.catalog.trust_policies("acme").await.unwrap(),
        vec![policy]
    );
    let org = to.catalog.org("acme").await.unwrap().unwrap();
    assert_eq!(
        org.allocation, allocation,
        "the org's permissions come along"
    );
    assert_eq!(
        org.protections,
        vec![protection],
        "and its protected states"
    );
    assert_eq!(
        done.protections,
        Count {
            copied: 1,
            present: 0
        }
    );
    let moved = versions(&to, "big").await;
    for (a, b) in big.iter().zip(&moved) {
        assert_eq!((a.0, &a.1), (b.0, &b.1));
        assert_eq!(b.2, to_key.key_id());
    }
    for (state, serial, noise) in [("net", 3, 10), ("big", 1, 300_000)] {
        let number = if state == "net" { 3 } else { 1 };
        let read = download(&to, &alice(), &name(state), number).await.unwrap();
        assert_eq!(
            plaintext(read),
            doc(serial, noise),
            "{state} reads the same"
        );
    }

    let again = migrate(sides, &found, run, &|_| {}).await.unwrap();
    assert_eq!(
        again.versions,
        Count {
            copied: 0,
            present: 5
        }
    );
    assert_eq!(
        again.tokens,
        Count {
            copied: 0,
            present: 1
        }
    );
    assert_eq!(again.audit_entries.copied, 0);
    assert_eq!(again.protections.copied, 0);
    // The two downloads above, and the run's own entry.
    assert_eq!(audit_len(&to).await, source_entries + 7);
}

#[tokio::test]
async fn a_different_state_on_the_target_stops_the_migration_naming_it() {
    let (from, to) = two_sides();
    write(&from, &alice(), &name("net"), None, doc(1, 10))
        .await
        .unwrap();
    write(&to, &alice(), &name("net"), None, doc(1, 10))
        .await
        .unwrap();
    let sides = Sides {
        from: &from,
        to: &to,
    };
    let found = survey(&from, &["acme".to_owned()]).await.unwrap();
    let stopped = migrate(sides, &found, Options::default(), &|_| {}).await;
    match stopped {
        Err(MigrateError::Differs(what)) => assert!(what.contains("acme/net"), "{what}"),
        other => panic!("{other:?}"),
    }
}

/// A state in use on the target (locked there since an earlier run) is not written over,
/// and a source state whose first apply holds only a lock is listed as locked, not passed by.
#[tokio::test]
async fn a_state_locked_on_the_target_or_only_locked_on_the_source_is_not_passed_over() {
    let (from, to) = two_sides();
    write(&from, &alice(), &name("net"), None, doc(1, 10))
        .await
        .unwrap();
    let sides = Sides {
        from: &from,
        to: &to,
    };
    let orgs = ["acme".to_owned()];
    let found = survey(&from, &orgs).await.unwrap();
    migrate(sides, &found, Options::default(), &|_| {})
        .await
        .unwrap();
    lock(&to, &alice(), &name("net"), lock_doc("l-9").as_bytes())
        .await
        .unwrap();
    write(&from, &alice(), &name("net"), None, doc(2, 10))
        .await
        .unwrap();
    let found = survey(&from, &orgs).await.unwrap();
    match migrate(sides, &found, Options::default(), &|_| {}).await {
        Err(MigrateError::Differs(what)) => {
            assert!(
                what.contains("acme/net") && what.contains("target"),
                "{what}"
            )
        }
        other => panic!("{other:?}"),
    }
    lock(&from, &alice(), &name("first"), lock_doc("l-9").as_bytes())
        .await
        .unwrap();
    let found = survey(&from, &orgs).await.unwrap();
    assert_eq!(found.blocked.len(), 1, "{:?}", found.blocked);
    assert!(
        found.blocked[0].starts_with("acme/first (locked"),
        "{:?}",
        found.blocked
    );
}

/// Takes an app state's lock, uploads `files` and seals the change: its archive.
async fn seal_change(app: &App, state: &str, files: &[(&str, &[u8])]) -> ArchiveRecord {
    let request = LockRequest {
        lock_id: None,
        who: "octo".into(),
        info: String::new(),
    };
    let lock = app_changes::lock(app, &alice(), &name(state), &request)
        .await
        .unwrap();
    for (file, body) in files {
        app_changes::upload(
            app,
            &alice(),
            &name(state),
            &lock.lock_id,
            file,
            body.to_vec(),
        )
        .await
        .unwrap();
    }
    app_changes::seal(app, &alice(), &name(state), &lock.lock_id, Ended::Sealed)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_migration_copies_app_states_with_every_archive_under_the_targets_key() {
    let (from_store, to_store) = (Arc::new(MemoryStore::new()), Arc::new(MemoryStore::new()));
    let to_key = Arc::new(PlatformKey::generate());
    let from = app(&from_store, Arc::new(PlatformKey::generate()));
    let to = app(&to_store, to_key.clone());
    let first = seal_change(
        &from,
        "octo",
        &[("net.tfstate", &doc(1, 10)), ("notes.json", b"{\"a\":1}")],
    )
    .await;
    // The second archive carries notes.json from the first: one blob, two copies of its slot.
    let second = seal_change(&from, "octo", &[("net.tfstate", &doc(2, 300))]).await;
    let request = LockRequest {
        lock_id: None,
        who: "octo".into(),
        info: String::new(),
    };
    seal_change(&from, "busy", &[("net.tfstate", &doc(1, 10))]).await;
    app_changes::lock(&from, &alice(), &name("busy"), &request)
        .await
        .unwrap();

    let sides = Sides {
        from: &from,
        to: &to,
    };
    let found = survey(&from, &["acme".to_owned()]).await.unwrap();
    assert_eq!(
        found.versions(),
        2,
        "the two archives of the unlocked app state"
    );
    let refused = migrate(sides, &found, Options::default(), &|_| {}).await;
    assert!(
        matches!(&refused, Err(MigrateError::Locked(s)) if s[0].starts_with("app state acme/busy")),
        "{refused:?}"
    );
    let dry = Options {
        dry_run: true,
        skip_locked: true,
    };
    let would = migrate(sides, &found, dry, &|_| {}).await.unwrap();
    assert_eq!(
        would.archives,
        Count {
            copied: 2,
            present: 0
        }
    );
    assert_eq!(
        would.app_states,
        Count {
            copied: 1,
            present: 0
        }
    );
    assert!(
        to.catalog.app("acme", "octo").await.unwrap().is_none(),
        "a dry run writes nothing"
    );

    let run = Options {
        dry_run: false,
        skip_locked: true,
    };
    let done = migrate(sides, &found, run, &|_| {}).await.unwrap();
    assert_eq!(
        done.archives,
        Count {
            copied: 2,
            present: 0
        }
    );
    assert_eq!(done.skipped.len(), 1, "{:?}", done.skipped);
    assert!(done.mismatched.is_empty(), "{:?}", done.mismatched);
    // net.tfstate twice, notes.json once (its second copy has the same slot).
    assert_eq!(done.verified, 3);
    assert!(to.catalog.app("acme", "busy").await.unwrap().is_none());
    let record = to.catalog.app("acme", "octo").await.unwrap().unwrap();
    assert_eq!(record.archives, 2);
    let newest = record.newest.unwrap();
    assert_eq!(newest.commit_id, second.commit_id);
    assert!(newest.files.iter().all(|f| f.key == to_key.key_id()));
    for (source, file, body) in [
        (Source::Archive(&first.commit_id), "net.tfstate", doc(1, 10)),
        (Source::Newest, "net.tfstate", doc(2, 300)),
        (Source::Newest, "notes.json", b"{\"a\":1}".to_vec()),
    ] {
        let read = app_reads::download(&to, &alice(), &name("octo"), source, file)
            .await
            .unwrap();
        assert_eq!(read, body, "{file} reads the same on the target");
    }

    let again = migrate(sides, &found, run, &|_| {}).await.unwrap();
    assert_eq!(
        again.archives,
        Count {
            copied: 0,
            present: 2
        }
    );
    assert_eq!(
        again.app_states,
        Count {
            copied: 0,
            present: 1
        }
    );

    // Another app state of that name on a third store stops the migration, naming it.
    let other = app(
        &Arc::new(MemoryStore::new()),
        Arc::new(PlatformKey::generate()),
    );
    seal_change(&other, "octo", &[("net.tfstate", &doc(1, 10))]).await;
    let sides = Sides {
        from: &from,
        to: &other,
    };
    match migrate(sides, &found, run, &|_| {}).await {
        Err(MigrateError::Differs(what)) => assert!(what.contains("app state acme/octo"), "{what}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_deleted_state_is_copied_with_its_versions_and_restores_on_the_target() {
    let (from_store, to_store) = (Arc::new(MemoryStore::new()), Arc::new(MemoryStore::new()));
    let to_key = Arc::new(PlatformKey::generate());
    let from = app(&from_store, Arc::new(PlatformKey::generate()));
    let to = app(&to_store, to_key.clone());
    write(&from, &alice(), &name("gone"), None, doc(1, 10))
        .await
        .unwrap();
    write(&from, &alice(), &name("gone"), None, doc(2, 300_000))
        .await
        .unwrap();
    let kept = manage::delete(&from, &alice(), &name("gone"))
        .await
        .unwrap()
        .expect("kept for its retention");
    let sides = Sides {
        from: &from,
        to: &to,
    };
    let found = survey(&from, &["acme".to_owned()]).await.unwrap();
    assert_eq!(found.versions(), 2);
    let would = migrate(
        sides,
        &found,
        Options {
            dry_run: true,
            skip_locked: false,
        },
        &|_| {},
    )
    .await
    .unwrap();
    assert_eq!(
        would.deleted_states,
        Count {
            copied: 1,
            present: 0
        }
    );
    assert_eq!(
        would.versions,
        Count {
            copied: 2,
            present: 0
        }
    );
    assert!(to
        .catalog
        .deleted_state("acme", &kept.id)
        .await
        .unwrap()
        .is_none());

    let done = migrate(sides, &found, Options::default(), &|_| {})
        .await
        .unwrap();
    assert_eq!(
        done.versions,
        Count {
            copied: 2,
            present: 0
        }
    );
    assert_eq!(done.verified, 2);
    assert!(done.mismatched.is_empty(), "{:?}", done.mismatched);
    let there = to
        .catalog
        .deleted_state("acme", &kept.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (&there.name, there.deleted_at, &there.deleted_by),
        (&kept.name, kept.deleted_at, &kept.deleted_by),
        "the same id, deleted time and actor (so the same purge date)"
    );
    assert_eq!(there.record.latest.unwrap().key, to_key.key_id());
    let again = migrate(sides, &found, Options::default(), &|_| {})
        .await
        .unwrap();
    assert_eq!(
        again.deleted_states,
        Count {
            copied: 0,
            present: 1
        }
    );
    assert_eq!(
        again.versions,
        Count {
            copied: 0,
            present: 2
        }
    );

    let restored = deleted::restore(&to, &alice(), &kept.id, None)
        .await
        .unwrap();
    assert_eq!((restored.version, restored.versions), (2, 2));
    for (number, noise) in [(1, 10), (2, 300_000)] {
        let read = download(&to, &alice(), &name("gone"), number)
            .await
            .unwrap();
        assert_eq!(
            plaintext(read),
            doc(number, noise),
            "version {number} reads the same"
        );
    }
}

fn plan_step(org: &str) -> MintRequest {
    MintRequest {
        org: org.into(),
        state: "net".into(),
        step: "plan".into(),
        attempt: 1,
        kind: StepKind::Plan,
        timeout_seconds: 600,
        hold: false,
    }
}

/// An ended run moves with its end, before the tokens: its step token, refused on the
/// source, is refused on the target, and no mint starts the run again there. A run in flight
/// moves open, its token working on both sides. An org that holds a state but no token moves
/// too (it is found by its records), and the report says what moved of each org.
#[tokio::test]
async fn ended_runs_and_orgs_without_tokens_move_and_nothing_refused_comes_back() {
    let (from, to) = two_sides();
    write(&from, &alice(), &name("net"), None, doc(1, 10))
        .await
        .unwrap();
    let quiet = Principal {
        org: "quiet".into(),
        ..alice()
    };
    write(&from, &quiet, &name("net"), None, doc(1, 10))
        .await
        .unwrap();
    let (ended, _) = runs::mint(&from, "r-ended", &plan_step("acme"))
        .await
        .unwrap();
    runs::end(&from, "r-ended", Some("failed")).await.unwrap();
    let (open, _) = runs::mint(&from, "r-open", &plan_step("acme"))
        .await
        .unwrap();
    runs::end(&from, "r-reported", None).await.unwrap();
    assert!(
        authenticate(&from, &ended).await.is_err(),
        "refused on the source"
    );

    let found_orgs = orgs(&from).await.unwrap();
    assert_eq!(
        found_orgs,
        ["acme", "quiet"],
        "quiet has no token, only a state"
    );
    let sides = Sides {
        from: &from,
        to: &to,
    };
    let found = survey(&from, &found_orgs).await.unwrap();
    let done = migrate(sides, &found, Options::default(), &|_| {})
        .await
        .unwrap();
    assert!(done.changed.is_empty(), "{:?}", done.changed);
    assert_eq!(
        done.runs,
        Count {
            copied: 3,
            present: 0
        }
    );
    assert!(
        authenticate(&to, &ended).await.is_err(),
        "refused on the target"
    );
    assert!(
        runs::mint(&to, "r-ended", &plan_step("acme"))
            .await
            .is_err(),
        "an ended run is not started again"
    );
    assert!(
        runs::mint(&to, "r-reported", &plan_step("acme"))
            .await
            .is_err(),
        "nor one only ever reported ended"
    );
    assert!(
        authenticate(&to, &open).await.is_ok(),
        "a run in flight goes on"
    );
    let ended_there = to.catalog.run("r-ended").await.unwrap().unwrap();
    assert_eq!(
        ended_there,
        from.catalog.run("r-ended").await.unwrap().unwrap(),
        "the same end, at the same time"
    );
    assert!(to.catalog.state("quiet", "net").await.unwrap().is_some());
    assert_eq!(done.by_org["quiet"].states.copied, 1);
    assert_eq!(done.by_org["quiet"].tokens, Count::default());
    assert_eq!(done.by_org["acme"].tokens.copied, 2);

    // Run again: nothing to copy, nothing changed.
    let found = survey(&from, &found_orgs).await.unwrap();
    let again = migrate(sides, &found, Options::default(), &|_| {})
        .await
        .unwrap();
    assert_eq!(
        again.runs,
        Count {
            copied: 0,
            present: 3
        }
    );
    // A run that ends on the source after a migration ends on the target with the next.
    runs::end(&from, "r-open", None).await.unwrap();
    let found = survey(&from, &found_orgs).await.unwrap();
    let third = migrate(sides, &found, Options::default(), &|_| {})
        .await
        .unwrap();
    assert_eq!(third.runs.copied, 1);
    assert!(authenticate(&to, &open).await.is_err());
}

/// `--org` moves the orgs it names and their records only: another org's states, tokens and
/// runs stay behind.
#[tokio::test]
async fn chosen_orgs_move_alone() {
    let (from, to) = two_sides();
    let other = Principal {
        org: "other".into(),
        ..alice()
    };
    for who in [alice(), other] {
        write(&from, &who, &name("net"), None, doc(1, 10))
            .await
            .unwrap();
    }
    runs::mint(&from, "r-other", &plan_step("other"))
        .await
        .unwrap();
    let sides = Sides {
        from: &from,
        to: &to,
    };
    let found = survey(&from, &["acme".to_owned()]).await.unwrap();
    let done = migrate(sides, &found, Options::default(), &|_| {})
        .await
        .unwrap();
    assert_eq!(done.tokens.copied, 0, "other's step token stays");
    assert_eq!(done.runs.copied, 0, "and its run");
    assert!(to.catalog.state("acme", "net").await.unwrap().is_some());
    assert!(to.catalog.state("other", "net").await.unwrap().is_none());
    assert_eq!(to.catalog.orgs().await.unwrap(), ["acme"]);
    assert!(done.changed.is_empty(), "{:?}", done.changed);
}

/// What the source takes after the survey is not lost: a version written, a state created,
/// a lock taken, a token made or revoked are named, and the next run copies them (or, for a
/// lock, refuses until it is released).
#[tokio::test]
async fn writes_on_the_source_during_the_move_are_named_and_the_next_run_copies_them() {
    let (from, to) = two_sides();
    for state in ["net", "dns"] {
        write(&from, &alice(), &name(state), None, doc(1, 10))
            .await
            .unwrap();
    }
    let (_, kept) = create(
        &*from.catalog,
        NewToken::Personal {
            org: "acme",
            user: "alice",
            role: Role::Admin,
        },
        &Actor::Cli,
        from.clock.now(),
    )
    .await
    .unwrap();
    let orgs = ["acme".to_owned()];
    let found = survey(&from, &orgs).await.unwrap();
    // The survey is made; the source takes writes before the copy reads them.
    write(&from, &alice(), &name("net"), None, doc(2, 10))
        .await
        .unwrap();
    write(&from, &alice(), &name("new"), None, doc(1, 10))
        .await
        .unwrap();
    lock(&from, &alice(), &name("dns"), lock_doc("l-7").as_bytes())
        .await
        .unwrap();
    let sides = Sides {
        from: &from,
        to: &to,
    };
    let done = migrate(sides, &found, Options::default(), &|_| {})
        .await
        .unwrap();
    let changed = done.changed.join("\n");
    assert!(
        changed.contains("state acme/net: version 2 on the source, 1 the latest on the target"),
        "{changed}"
    );
    assert!(
        changed.contains("state acme/new: version 1 on the source, none on the target"),
        "{changed}"
    );
    assert!(
        changed.contains("state acme/dns: locked on the source, lock ID l-7"),
        "{changed}"
    );
    assert_eq!(done.changed.len(), 3, "{changed}");
    // A token revoked after the copy: refused on the source, named until it is refused on
    // the target too.
    manage_revoke(&from, &kept.id).await;
    let found = survey(&from, &orgs).await.unwrap();
    let skipping = Options {
        dry_run: false,
        skip_locked: true,
    };
    let next = migrate(sides, &found, skipping, &|_| {}).await.unwrap();
    assert!(next.changed.is_empty(), "{:?}", next.changed);
    assert_eq!(
        next.skipped.len(),
        1,
        "dns stays locked: {:?}",
        next.skipped
    );
    assert!(to.catalog.token(&kept.hash).await.unwrap().unwrap().revoked);
    assert_eq!(versions(&to, "net").await.len(), 2);
    assert_eq!(versions(&to, "new").await.len(), 1);
}

async fn manage_revoke(app: &App, id: &str) {
    let mut token = app
        .catalog
        .tokens()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.id == id)
        .unwrap();
    token.revoked = true;
    let entry = AuditEntry {
        org: token.org.clone(),
        at: app.clock.now(),
        action: "token.revoked".into(),
        actor: Actor::Cli,
        state: None,
        version: None,
        detail: serde_json::Value::Null,
    };
    app.catalog.put_token(&token, &entry).await.unwrap();
}

/// A migration that dies inside a version's commit (its sealed bytes written on the target,
/// the commit naming them not made) leaves that version out; the next run commits it, with
/// the bytes written again over the pending ones, and every version reads back.
#[tokio::test]
async fn a_migration_dead_inside_a_commit_is_completed_by_the_next_run() {
    let (from_store, to_store) = (Arc::new(MemoryStore::new()), Arc::new(MemoryStore::new()));
    let (from_key, to_key) = (
        Arc::new(PlatformKey::generate()),
        Arc::new(PlatformKey::generate()),
    );
    let from = app(&from_store, from_key.clone());
    for serial in 1..=3 {
        write(&from, &alice(), &name("big"), None, doc(serial, 300_000))
            .await
            .unwrap();
    }
    let orgs = ["acme".to_owned()];
    let found = survey(&from, &orgs).await.unwrap();
    let (stores, keys) = (
        (from_store.clone(), to_store.clone()),
        (from_key.clone(), to_key.clone()),
    );
    let died = tokio::spawn(async move {
        let (from, to) = (app(&stores.0, keys.0), app(&stores.1, keys.1));
        let sealed = std::sync::atomic::AtomicU32::new(0);
        let die_at_second_seal = |step: Step| {
            if step == Step::Sealed && sealed.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1
            {
                panic!("the process dies inside the second version's commit");
            }
        };
        let sides = Sides {
            from: &from,
            to: &to,
        };
        migrate(sides, &found, Options::default(), &die_at_second_seal).await
    })
    .await;
    assert!(died.unwrap_err().is_panic());
    let to = app(&to_store, to_key.clone());
    assert_eq!(versions(&to, "big").await.len(), 1, "one version committed");
    assert_eq!(
        to_store.pending_blobs().len(),
        1,
        "the second's bytes wait, pending"
    );

    let found = survey(&from, &orgs).await.unwrap();
    let sides = Sides {
        from: &from,
        to: &to,
    };
    let steps = std::sync::Mutex::new(Vec::new());
    let done = migrate(sides, &found, Options::default(), &|s| {
        steps.lock().unwrap().push(s)
    })
    .await
    .unwrap();
    assert_eq!(
        done.versions,
        Count {
            copied: 2,
            present: 1
        }
    );
    assert_eq!(
        *steps.lock().unwrap(),
        [
            Step::Present,
            Step::Sealed,
            Step::Copied,
            Step::Sealed,
            Step::Copied
        ]
    );
    assert_eq!(done.verified, 3);
    assert!(done.mismatched.is_empty() && done.changed.is_empty());
    assert!(
        to_store.pending_blobs().is_empty(),
        "committed, none left pending"
    );
    for serial in 1..=3 {
        let read = download(&to, &alice(), &name("big"), serial).await.unwrap();
        assert_eq!(plaintext(read), doc(serial, 300_000));
    }
}
