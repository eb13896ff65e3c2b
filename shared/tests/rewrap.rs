//! Key rotation over the memory adapter: a platform key replaced by a new one, the old one
//! kept only to open (retired), every version (and every app state file) re-wrapped while a
//! writer keeps saving, then the old key removed: everything, old and new, still reads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hegemony_state::adapters::key_ring::KeyRing;
use hegemony_state::adapters::memory::MemoryStore;
use hegemony_state::crypto::{open_into, PlatformKey};
use hegemony_state::domain::app::change::LockRequest;
use hegemony_state::domain::app::Ended;
use hegemony_state::domain::name::StateName;
use hegemony_state::domain::permission::Role;
use hegemony_state::domain::{Actor, Principal};
use hegemony_state::ports::{AppCatalog, AuditQuery, AuditRecord, KeyService, StateCatalog};
use hegemony_state::service::app_changes as apps;
use hegemony_state::service::app_keys::{app_report, org_apps, rewrap_app};
use hegemony_state::service::app_reads::{self, Source};
use hegemony_state::service::keys::{org_states, rewrap_state, state_report, Holder};
use hegemony_state::service::lock::{lock, unlock};
use hegemony_state::service::manage::download;
use hegemony_state::service::state::{write, Content};
use hegemony_state::service::{App, Limits, SystemClock};

fn app(store: &Arc<MemoryStore>, keys: Arc<dyn KeyService>) -> App {
    App {
        catalog: store.clone(),
        blobs: store.clone(),
        keys: Some(keys),
        // On, as in production: a re-wrapped slot must miss the key it replaced.
        index_keys: Default::default(),
        key_cache: hegemony_state::service::key_cache::KeyCache::new(
            64,
            std::time::Duration::from_secs(300),
        ),
        clock: Arc::new(SystemClock),
        limits: Limits {
            max_state_bytes: 32 << 20,
            keep_versions: 1000,
            run_end_grace: time::Duration::minutes(10),
            deleted_retention: time::Duration::days(7),
            lambda_ceiling: None,
        },
        links: Default::default(),
        issuers: hegemony_state::service::issuers::Issuers::off(),
        metrics: std::sync::Arc::new(hegemony_state::ports::Unmeasured),
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

fn net() -> StateName {
    StateName::parse("net").unwrap()
}

fn doc(serial: u64) -> Vec<u8> {
    format!(r#"{{"version":4,"serial":{serial},"lineage":"lin","outputs":{{"n":{{"value":"{serial}","type":"string"}}}}}}"#).into_bytes()
}

fn lock_doc(id: &str) -> Vec<u8> {
    format!(r#"{{"ID":"{id}","Operation":"OperationTypeApply","Info":"","Who":"a@h","Version":"1.11.4","Created":"2026-11-30T01:07:12Z","Path":""}}"#).into_bytes()
}

/// A download's plaintext, whichever way it was answered.
fn plaintext(content: Content) -> Vec<u8> {
    match content {
        Content::Whole(bytes) => bytes,
        Content::Gzip { opening, size } => open_into(*opening, size as usize, vec![]).unwrap(),
    }
}

/// Each version's content, by version number, read through `app`.
async fn contents(app: &App) -> Vec<(u64, Vec<u8>)> {
    let record = app.catalog.state("acme", "net").await.unwrap().unwrap();
    let versions = app
        .catalog
        .versions("acme", "net", &record.incarnation)
        .await
        .unwrap();
    let mut out = Vec::new();
    for v in versions {
        let content = download(app, &alice(), &net(), v.version).await.unwrap();
        out.push((v.version, plaintext(content)));
    }
    out
}

/// The org's `keys.rewrapped` audit entries.
async fn rewrapped_entries(store: &MemoryStore) -> Vec<AuditRecord> {
    let query = AuditQuery {
        action: Some("keys.rewrapped".into()),
        limit: 10,
        ..AuditQuery::default()
    };
    store.audit("acme", &query).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewrap_beside_a_live_writer_loses_nothing_and_the_old_key_can_go() {
    let store = Arc::new(MemoryStore::new());
    let old = Arc::new(PlatformKey::generate());
    let new = Arc::new(PlatformKey::generate());
    let before = app(&store, old.clone());
    for serial in 1..=40 {
        write(&before, &alice(), &net(), None, doc(serial))
            .await
            .unwrap();
    }
    let old_id = old.key_id().to_owned();
    let ring = KeyRing::new(new.clone(), new.key_id(), "platform:").opening(&old_id, old);
    let during = Arc::new(app(&store, Arc::new(ring)));

    // The writer saves under a lock (each save replaces the open version's content and key
    // slot), unlocks (which writes the version's record back), and makes new versions.
    let writer = {
        let during = during.clone();
        tokio::spawn(async move {
            for round in 0..20u64 {
                let id = format!("lock-{round}");
                lock(&during, &alice(), &net(), &lock_doc(&id))
                    .await
                    .unwrap();
                for save in 0..3 {
                    let serial = 100 + round * 10 + save;
                    write(&during, &alice(), &net(), Some(&id), doc(serial))
                        .await
                        .unwrap();
                }
                unlock(&during, &alice(), &net(), &lock_doc(&id))
                    .await
                    .unwrap();
            }
        })
    };
    let record = store.state("acme", "net").await.unwrap().unwrap();
    let seen = AtomicU64::new(0);
    let first = rewrap_state(&during, Holder::State(&record), false, &|| {
        seen.fetch_add(1, Ordering::Relaxed);
    })
    .await
    .unwrap();
    writer.await.unwrap();
    assert!(first.failed.is_empty(), "{:?}", first.failed);
    assert_eq!(first.to, new.key_id());
    assert_eq!(
        seen.load(Ordering::Relaxed),
        first.rewrapped + first.current
    );

    // A second run moves only what the first did not reach: nothing is wrapped twice.
    let record = store.state("acme", "net").await.unwrap().unwrap();
    let second = rewrap_state(&during, Holder::State(&record), false, &|| {})
        .await
        .unwrap();
    assert_eq!(
        second.rewrapped, 0,
        "every version was moved once: {second:?}"
    );
    assert_eq!(second.current, 60);
    let report = state_report(&during, Holder::State(&record)).await.unwrap();
    assert_eq!(report.keys.len(), 1, "{report:?}");
    assert_eq!(
        (report.keys[0].versions, report.keys[0].behind),
        (60, false)
    );

    // The old key removed from the configuration: every version still reads, with the
    // content it had.
    let after = app(&store, new);
    let read = contents(&after).await;
    assert_eq!(read.len(), 60);
    for (version, bytes) in read {
        let serial = if version <= 40 {
            version
        } else {
            100 + (version - 41) * 10 + 2
        };
        assert_eq!(bytes, doc(serial), "version {version}");
    }
    let audit = rewrapped_entries(&store).await;
    assert_eq!(audit.len(), 2, "one entry per state per run");
    assert_eq!(org_states(&after, "acme").await.unwrap().len(), 1);
}

/// A dry run says what would move and moves nothing.
#[tokio::test]
async fn a_dry_run_counts_and_changes_nothing() {
    let store = Arc::new(MemoryStore::new());
    let old = Arc::new(PlatformKey::generate());
    let new = Arc::new(PlatformKey::generate());
    let before = app(&store, old.clone());
    for serial in 1..=3 {
        write(&before, &alice(), &net(), None, doc(serial))
            .await
            .unwrap();
    }
    let old_id = old.key_id().to_owned();
    let ring = KeyRing::new(new.clone(), new.key_id(), "platform:").opening(&old_id, old);
    let during = app(&store, Arc::new(ring));
    let record = store.state("acme", "net").await.unwrap().unwrap();
    let dry = rewrap_state(&during, Holder::State(&record), true, &|| {})
        .await
        .unwrap();
    assert_eq!((dry.rewrapped, dry.current), (3, 0));
    let report = state_report(&during, Holder::State(&record)).await.unwrap();
    assert!(report.keys.iter().all(|k| k.behind), "{report:?}");
    let again = store.state("acme", "net").await.unwrap().unwrap();
    assert_eq!(again.revision, record.revision, "nothing written");
}

fn octo_lock() -> LockRequest {
    LockRequest {
        lock_id: None,
        who: "octo@h".into(),
        info: String::new(),
    }
}

fn file_body(name: &str) -> Vec<u8> {
    format!(r#"{{"file":"{name}"}}"#).into_bytes()
}

/// One sealed change of the app state `net` uploading `names`.
async fn change(app: &App, names: &[String]) {
    let lock = apps::lock(app, &alice(), &net(), &octo_lock())
        .await
        .unwrap();
    for name in names {
        apps::upload(app, &alice(), &net(), &lock.lock_id, name, file_body(name))
            .await
            .unwrap();
    }
    apps::seal(app, &alice(), &net(), &lock.lock_id, Ended::Sealed)
        .await
        .unwrap();
}

/// An app state's files: each sealed once but listed in every archive that carries it, in the
/// record's newest archive and in an open change. A re-wrap beside a live Octo writer (who
/// seals the open change, then seals more) moves each file's data key once and writes it into
/// every copy; then the old key goes and every file of every archive still opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_state_rewrap_beside_live_changes_moves_every_copy_and_the_old_key_can_go() {
    let store = Arc::new(MemoryStore::new());
    let old = Arc::new(PlatformKey::generate());
    let new = Arc::new(PlatformKey::generate());
    let before = app(&store, old.clone());
    for c in 0..8 {
        let mut names = vec![format!("c{c}.json")];
        if c == 0 {
            names.push("shared.json".into());
        }
        change(&before, &names).await;
    }
    let open = apps::lock(&before, &alice(), &net(), &octo_lock())
        .await
        .unwrap();
    apps::upload(
        &before,
        &alice(),
        &net(),
        &open.lock_id,
        "open.json",
        file_body("open.json"),
    )
    .await
    .unwrap();
    let old_id = old.key_id().to_owned();
    let ring = KeyRing::new(new.clone(), new.key_id(), "platform:").opening(&old_id, old);
    let during = Arc::new(app(&store, Arc::new(ring)));

    let record = store.app("acme", "net").await.unwrap().unwrap();
    let dry = rewrap_app(&during, &record, true, &|| {}).await.unwrap();
    assert_eq!(
        (dry.rewrapped, dry.current),
        (10, 0),
        "nine sealed files and the open upload"
    );
    assert_eq!(
        store.app("acme", "net").await.unwrap().unwrap().revision,
        record.revision,
        "a dry run writes nothing"
    );

    let writer = {
        let during = during.clone();
        let lock_id = open.lock_id.clone();
        tokio::spawn(async move {
            apps::seal(&during, &alice(), &net(), &lock_id, Ended::Sealed)
                .await
                .unwrap();
            for round in 0..10 {
                change(&during, &[format!("w{round}.json")]).await;
            }
        })
    };
    let seen = AtomicU64::new(0);
    let first = rewrap_app(&during, &record, false, &|| {
        seen.fetch_add(1, Ordering::Relaxed);
    })
    .await
    .unwrap();
    writer.await.unwrap();
    assert!(first.failed.is_empty(), "{:?}", first.failed);
    // The ten files on the old key moved; a change the writer sealed before the run listed
    // the archives is already on the new key and counts as current (on a loaded machine
    // the writer can get there first).
    assert_eq!(first.rewrapped, 10, "{first:?}");
    assert!(first.current <= 10, "{first:?}");
    assert_eq!(seen.load(Ordering::Relaxed), 10 + first.current);

    // A second run finds every copy on the key in use: each data key was moved once, and no
    // archive sealed during the first run kept a copy from before it.
    let record = store.app("acme", "net").await.unwrap().unwrap();
    let second = rewrap_app(&during, &record, false, &|| {}).await.unwrap();
    assert_eq!((second.rewrapped, second.current), (0, 20), "{second:?}");
    let report = app_report(&during, &record).await.unwrap();
    assert_eq!(report.keys.len(), 1, "{report:?}");
    assert_eq!((report.keys[0].files, report.keys[0].behind), (20, false));

    // The old key removed: every file of every archive opens, with what was uploaded.
    let after = app(&store, new);
    let archives = store.archives("acme", "net", None, 100).await.unwrap();
    assert_eq!(archives.len(), 19);
    let mut opened = 0;
    for archive in &archives {
        for file in &archive.files {
            let bytes = app_reads::download(
                &after,
                &alice(),
                &net(),
                Source::Archive(&archive.commit_id),
                &file.name,
            )
            .await
            .unwrap_or_else(|e| panic!("{} in {}: {e}", file.name, archive.commit_id));
            assert_eq!(bytes, file_body(&file.name));
            opened += 1;
        }
    }
    assert!(opened > 100, "{opened} copies opened");
    let audit = rewrapped_entries(&store).await;
    assert_eq!(
        audit.len(),
        2,
        "one entry per app state per run, none for the dry run"
    );
    assert!(audit.iter().all(|a| a.entry.detail["app"] == "net"));
    assert_eq!(org_apps(&after, "acme").await.unwrap().len(), 1);
}

/// A deleted state's versions are counted by the key report and moved by the re-wrap, so
/// once the old key is gone the state still comes back, under another name, and reads
/// whole: a rotation never strands a version a restore would bring back.
#[tokio::test]
async fn a_deleted_states_versions_are_rewrapped_and_read_after_a_restore() {
    use hegemony_state::service::deleted::restore;
    use hegemony_state::service::keys::org_deleted_states;
    use hegemony_state::service::manage::delete;

    let store = Arc::new(MemoryStore::new());
    let old = Arc::new(PlatformKey::generate());
    let new = Arc::new(PlatformKey::generate());
    let before = app(&store, old.clone());
    for serial in 1..=3 {
        write(&before, &alice(), &net(), None, doc(serial))
            .await
            .unwrap();
    }
    let kept = delete(&before, &alice(), &net()).await.unwrap().unwrap();
    let old_id = old.key_id().to_owned();
    let ring = KeyRing::new(new.clone(), new.key_id(), "platform:").opening(&old_id, old);
    let during = app(&store, Arc::new(ring));
    let deleted = org_deleted_states(&during, "acme").await.unwrap();
    assert_eq!(deleted.len(), 1);
    let holder = Holder::Deleted(&deleted[0]);
    let report = state_report(&during, holder).await.unwrap();
    assert_eq!(report.deleted_id.as_deref(), Some(kept.id.as_str()));
    assert_eq!(report.keys.len(), 1);
    assert!(report.keys[0].behind && report.keys[0].versions == 3);
    let done = rewrap_state(&during, holder, false, &|| {}).await.unwrap();
    assert_eq!((done.rewrapped, done.failed.len()), (3, 0));
    assert_eq!(done.state, format!("net (deleted {})", kept.id));

    let after = app(&store, new);
    let moved = StateName::parse("net-back").unwrap();
    let restored = restore(&after, &alice(), &kept.id, Some(&moved))
        .await
        .unwrap();
    assert_eq!((restored.version, restored.versions), (3, 3));
    for v in 1..=3 {
        let content = download(&after, &alice(), &moved, v).await.unwrap();
        assert_eq!(
            plaintext(content),
            doc(v),
            "version {v} reads under the new key only"
        );
    }
    write(&after, &alice(), &moved, None, doc(4)).await.unwrap();
}
