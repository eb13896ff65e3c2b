//! The use cases over the memory adapter: what a write, lock and unlock leave in storage.

use std::sync::Arc;

use hegemony_state::adapters::memory::MemoryStore;
use hegemony_state::crypto::PlatformKey;
use hegemony_state::domain::name::StateName;
use hegemony_state::domain::permission::Role;
use hegemony_state::domain::version::Ended;
use hegemony_state::domain::{Actor, Principal, Refusal};
use hegemony_state::ports::{AuditQuery, BlobStore, StateCatalog, INLINE_MAX_BYTES};
use hegemony_state::service::lock::{lock, unlock, UnlockOutcome};
use hegemony_state::service::state::{write, WriteOutcome};
use hegemony_state::service::{App, Error, Limits, SystemClock};

mod support;
use support::{read, set_slot};

fn app_with(store: Arc<MemoryStore>, key: Option<PlatformKey>) -> App {
    App {
        catalog: store.clone(),
        blobs: store,
        keys: key.map(|k| Arc::new(k) as _),
        index_keys: Default::default(),
        key_cache: hegemony_state::service::key_cache::KeyCache::off(),
        clock: Arc::new(SystemClock),
        limits: Limits {
            max_state_bytes: 32 << 20,
            keep_versions: 50,
            run_end_grace: time::Duration::minutes(10),
            deleted_retention: time::Duration::days(7),
            lambda_ceiling: None,
        },
        links: Default::default(),
        issuers: hegemony_state::service::issuers::Issuers::off(),
        metrics: std::sync::Arc::new(hegemony_state::ports::Unmeasured),
    }
}

fn who(user: &str, role: Role) -> Principal {
    Principal {
        session: None,
        org: "acme".into(),
        role,
        actor: Actor::User { user: user.into() },
        step: None,
    }
}

fn all() -> AuditQuery {
    AuditQuery {
        limit: 100,
        ..AuditQuery::default()
    }
}

fn net() -> StateName {
    StateName::parse("net").unwrap()
}

fn doc(serial: u64, secret: &str) -> Vec<u8> {
    format!(r#"{{"version":4,"serial":{serial},"lineage":"lin","outputs":{{"pw":{{"value":"{secret}","type":"string"}}}}}}"#).into_bytes()
}

/// `len` characters of hex noise: it compresses to about half, so the sealed size of a state
/// holding it follows `len` closely.
fn noise(len: usize) -> String {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from_digit((x % 16) as u32, 16).unwrap()
        })
        .collect()
}

fn noisy_doc(serial: u64, len: usize) -> Vec<u8> {
    doc(serial, &noise(len))
}

/// A state whose sealed form is too large to be inline.
fn large_doc(serial: u64) -> Vec<u8> {
    noisy_doc(serial, INLINE_MAX_BYTES * 3)
}

/// The sealed bytes of the latest version, wherever they are, and whether inline.
async fn stored(store: &MemoryStore) -> (Vec<u8>, bool) {
    let record = store.state("acme", "net").await.unwrap().unwrap();
    let latest = record.latest.unwrap();
    let sealed = if latest.inline {
        store
            .content("acme", "net", &record.incarnation, latest.version)
            .await
            .unwrap()
    } else {
        store.get(&latest.blob).await.unwrap()
    };
    (sealed.expect("the content is stored"), latest.inline)
}

fn lock_doc(id: &str) -> Vec<u8> {
    format!(r#"{{"ID":"{id}","Operation":"OperationTypeApply","Info":"","Who":"a@h","Version":"1.11.4","Created":"2026-11-30T01:07:12Z","Path":""}}"#).into_bytes()
}

/// A small save is sealed inline in the catalog (no blob, no pending record), a large one in
/// a blob; both read back byte for byte, and neither holds the plaintext.
#[tokio::test]
async fn a_write_reads_back_byte_for_byte_and_is_sealed_at_rest() {
    let large = format!("s3cr3t-planted-value {}", noise(INLINE_MAX_BYTES * 3));
    for (body, inline) in [
        (doc(1, "s3cr3t-planted-value"), true),
        (doc(1, &large), false),
    ] {
        let store = Arc::new(MemoryStore::new());
        let app = app_with(store.clone(), Some(PlatformKey::generate()));
        let alice = who("alice", Role::Operator);
        assert_eq!(
            write(&app, &alice, &net(), None, body.clone())
                .await
                .unwrap(),
            WriteOutcome::Created { version: 1 }
        );
        assert_eq!(read(&app, &alice, &net()).await.unwrap(), Some(body));
        let (sealed, was_inline) = stored(&store).await;
        assert_eq!(was_inline, inline);
        assert!(!sealed.windows(8).any(|w| w == b"s3cr3t-p"));
        assert!(
            store.pending_blobs().is_empty(),
            "the commit clears the pending record (an inline save makes none)"
        );
    }
}

/// The threshold is the sealed size: a body whose sealed form is at most
/// `INLINE_MAX_BYTES` is inline, one byte more is a blob.
#[tokio::test]
async fn the_inline_threshold_is_the_sealed_size() {
    let alice = who("alice", Role::Operator);
    let sealed_at = |len: usize| {
        let alice = alice.clone();
        async move {
            let store = Arc::new(MemoryStore::new());
            let app = app_with(store.clone(), Some(PlatformKey::generate()));
            write(&app, &alice, &net(), None, noisy_doc(1, len))
                .await
                .unwrap();
            let (sealed, inline) = stored(&store).await;
            (sealed.len(), inline)
        }
    };
    // Noise compresses to about half: the transition lies between these two.
    let (mut fits, mut spills) = (INLINE_MAX_BYTES, INLINE_MAX_BYTES * 3);
    assert!(sealed_at(fits).await.1 && !sealed_at(spills).await.1);
    while spills - fits > 1 {
        let mid = (fits + spills) / 2;
        if sealed_at(mid).await.1 {
            fits = mid;
        } else {
            spills = mid;
        }
    }
    let (inline_size, _) = sealed_at(fits).await;
    let (blob_size, _) = sealed_at(spills).await;
    assert!(
        inline_size <= INLINE_MAX_BYTES && inline_size + 2 >= INLINE_MAX_BYTES,
        "inline at {inline_size}"
    );
    assert!(blob_size > INLINE_MAX_BYTES, "a blob at {blob_size}");
}

#[tokio::test]
async fn an_identical_replay_creates_nothing() {
    let store = Arc::new(MemoryStore::new());
    let app = app_with(store.clone(), Some(PlatformKey::generate()));
    let alice = who("alice", Role::Operator);
    write(&app, &alice, &net(), None, doc(1, "x"))
        .await
        .unwrap();
    assert_eq!(
        write(&app, &alice, &net(), None, doc(1, "x"))
            .await
            .unwrap(),
        WriteOutcome::Unchanged
    );
    assert_eq!(
        store
            .state("acme", "net")
            .await
            .unwrap()
            .unwrap()
            .next_version,
        2
    );
    assert_eq!(store.audit("acme", &all()).await.unwrap().len(), 1);
}

#[tokio::test]
async fn saves_under_one_lock_fold_and_the_unlock_closes_the_change_record() {
    let store = Arc::new(MemoryStore::new());
    let app = app_with(store.clone(), Some(PlatformKey::generate()));
    let alice = who("alice", Role::Operator);
    lock(&app, &alice, &net(), &lock_doc("L1")).await.unwrap();
    for serial in 1..=3 {
        write(&app, &alice, &net(), Some("L1"), doc(serial, "x"))
            .await
            .unwrap();
    }
    let record = store.state("acme", "net").await.unwrap().unwrap();
    let latest = record.latest.clone().unwrap();
    assert_eq!(
        (latest.version, latest.serial, latest.change.saves),
        (1, Some(3), 3)
    );
    assert!(
        store.listed_for_deletion().is_empty(),
        "replaced inline content leaves no blob behind"
    );
    assert_eq!(
        store.audit("acme", &all()).await.unwrap().len(),
        1,
        "one audit entry per version"
    );
    unlock(&app, &alice, &net(), &lock_doc("L1")).await.unwrap();
    let v1 = store
        .version("acme", "net", &record.incarnation, 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(v1.change.ended, Ended::Released);
    assert!(v1.change.released_at.is_some());
    let record = store.state("acme", "net").await.unwrap().unwrap();
    assert_eq!(record.latest.unwrap().change.ended, Ended::Released);
    assert!(record.lock.is_none());
}

/// Saves under one lock moving between inline and blob content: each replaced blob is listed
/// for deletion, replaced inline content is not (it is overwritten), and the last save reads
/// back.
#[tokio::test]
async fn replacing_saves_list_only_replaced_blobs_for_deletion() {
    let store = Arc::new(MemoryStore::new());
    let app = app_with(store.clone(), Some(PlatformKey::generate()));
    let alice = who("alice", Role::Operator);
    lock(&app, &alice, &net(), &lock_doc("L1")).await.unwrap();
    let saves = [
        large_doc(1),
        large_doc(2),
        doc(3, "x"),
        large_doc(4),
        doc(5, "y"),
    ];
    for body in &saves {
        write(&app, &alice, &net(), Some("L1"), body.clone())
            .await
            .unwrap();
    }
    // Blobs of saves 1, 2 and 4 were replaced; 3 and 5 were inline.
    assert_eq!(store.listed_for_deletion().len(), 3);
    assert_eq!(
        read(&app, &alice, &net()).await.unwrap().as_deref(),
        Some(&saves[4][..])
    );
    unlock(&app, &alice, &net(), &lock_doc("L1")).await.unwrap();
    assert_eq!(
        read(&app, &alice, &net()).await.unwrap().as_deref(),
        Some(&saves[4][..]),
        "the unlock keeps the inline content"
    );
}

#[tokio::test]
async fn a_force_unlock_is_audited_and_ends_the_version_as_forced() {
    let store = Arc::new(MemoryStore::new());
    let app = app_with(store.clone(), Some(PlatformKey::generate()));
    let alice = who("alice", Role::Operator);
    lock(&app, &alice, &net(), &lock_doc("L1")).await.unwrap();
    write(&app, &alice, &net(), Some("L1"), doc(1, "x"))
        .await
        .unwrap();
    let root = who("root", Role::Admin);
    let outcome = unlock(&app, &root, &net(), b"").await.unwrap();
    assert!(matches!(
        outcome,
        UnlockOutcome::Released { forced: true, .. }
    ));
    let latest = store
        .state("acme", "net")
        .await
        .unwrap()
        .unwrap()
        .latest
        .unwrap();
    assert_eq!(latest.change.ended, Ended::ForceUnlocked);
    let audit = store.audit("acme", &all()).await.unwrap();
    assert_eq!(audit[0].entry.action, "lock.force_unlocked");
    assert_eq!(
        audit[0].entry.actor,
        Actor::User {
            user: "root".into()
        }
    );
}

#[tokio::test]
async fn a_lock_that_never_wrote_leaves_no_record() {
    let store = Arc::new(MemoryStore::new());
    let app = app_with(store.clone(), Some(PlatformKey::generate()));
    let alice = who("alice", Role::Operator);
    lock(&app, &alice, &net(), &lock_doc("L1")).await.unwrap();
    assert!(store.state("acme", "net").await.unwrap().is_some());
    unlock(&app, &alice, &net(), b"").await.unwrap();
    assert!(store.state("acme", "net").await.unwrap().is_none());
}

#[tokio::test]
async fn a_changed_platform_key_is_a_wrong_key_error_naming_both() {
    let store = Arc::new(MemoryStore::new());
    let old = PlatformKey::generate();
    let old_id = old.key_id().to_owned();
    let alice = who("alice", Role::Operator);
    write(
        &app_with(store.clone(), Some(old)),
        &alice,
        &net(),
        None,
        doc(1, "x"),
    )
    .await
    .unwrap();
    let err = read(
        &app_with(store, Some(PlatformKey::generate())),
        &alice,
        &net(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, Error::WrongKey(ref m) if m.contains(&old_id)),
        "{err}"
    );
}

/// Every new version records its key slot, and it is the only copy of a format-2 object's
/// wrapped key: a damaged slot does not open, nor does a slot emptied. (A format-1 version
/// recorded before the slot was kept opens by its header's copy: tests/formats.rs.)
#[tokio::test]
async fn the_record_key_slot_is_the_only_wrapped_key_of_a_new_version() {
    let store = Arc::new(MemoryStore::new());
    let app = app_with(store.clone(), Some(PlatformKey::generate()));
    let alice = who("alice", Role::Operator);
    write(&app, &alice, &net(), None, doc(1, "x"))
        .await
        .unwrap();
    let record = store.state("acme", "net").await.unwrap().unwrap();
    let latest = record.latest.unwrap();
    let slot = latest
        .wrapped_key
        .clone()
        .expect("a new version records its slot");
    let stored = store
        .version("acme", "net", &record.incarnation, 1)
        .await
        .unwrap();
    assert_eq!(stored.unwrap().wrapped_key.as_ref(), Some(&slot));

    let mut damaged = slot.clone();
    *damaged.last_mut().unwrap() ^= 1;
    set_slot(&*store, "net", Some(damaged)).await;
    let err = read(&app, &alice, &net()).await.unwrap_err();
    assert!(
        matches!(err, Error::Damaged(_) | Error::WrongKey(_)),
        "{err}"
    );

    set_slot(&*store, "net", None).await;
    let err = read(&app, &alice, &net()).await.unwrap_err();
    assert!(
        matches!(&err, Error::Damaged(why) if why.contains("no wrapped data key")),
        "{err}"
    );
    set_slot(&*store, "net", Some(slot)).await;
    assert_eq!(read(&app, &alice, &net()).await.unwrap(), Some(doc(1, "x")));
}

#[tokio::test]
async fn without_a_key_managed_state_is_unavailable() {
    let app = app_with(Arc::new(MemoryStore::new()), None);
    let alice = who("alice", Role::Operator);
    assert!(matches!(
        read(&app, &alice, &net()).await,
        Err(Error::NoKey)
    ));
    assert!(matches!(
        write(&app, &alice, &net(), None, doc(1, "x")).await,
        Err(Error::NoKey)
    ));
}

#[tokio::test]
async fn viewers_may_not_read_or_write_content() {
    let app = app_with(Arc::new(MemoryStore::new()), Some(PlatformKey::generate()));
    let viewer = who("v", Role::Viewer);
    assert!(matches!(
        read(&app, &viewer, &net()).await,
        Err(Error::Refused(Refusal::Forbidden { .. }))
    ));
    assert!(matches!(
        lock(&app, &viewer, &net(), &lock_doc("L")).await,
        Err(Error::Refused(Refusal::Forbidden { .. }))
    ));
}

#[tokio::test]
async fn states_of_one_org_are_invisible_to_another() {
    let store = Arc::new(MemoryStore::new());
    let app = app_with(store, Some(PlatformKey::generate()));
    write(&app, &who("a", Role::Operator), &net(), None, doc(1, "x"))
        .await
        .unwrap();
    let stranger = Principal {
        org: "other".into(),
        ..who("a", Role::Admin)
    };
    assert_eq!(read(&app, &stranger, &net()).await.unwrap(), None);
}

/// Lock, save with `?ID=` (version 1, open), save without an ID (the holder's own version
/// 2), save with `?ID=` again (version 3): version 1 can take no more saves, but it was opened
/// by the lock and must close when the lock ends, not stay `open` for ever.
#[tokio::test]
async fn every_version_a_lock_opened_closes_when_it_ends() {
    let store = Arc::new(MemoryStore::new());
    let app = app_with(store.clone(), Some(PlatformKey::generate()));
    let alice = who("alice", Role::Operator);
    lock(&app, &alice, &net(), &lock_doc("L")).await.unwrap();
    for (serial, id) in [(1, Some("L")), (2, None), (3, Some("L"))] {
        write(&app, &alice, &net(), id, doc(serial, "x"))
            .await
            .unwrap();
    }
    unlock(&app, &alice, &net(), &lock_doc("L")).await.unwrap();
    let record = store.state("acme", "net").await.unwrap().unwrap();
    let versions = store
        .versions("acme", "net", &record.incarnation)
        .await
        .unwrap();
    let ended: Vec<(u64, Ended)> = versions
        .iter()
        .map(|v| (v.version, v.change.ended))
        .collect();
    assert_eq!(
        ended,
        [
            (3, Ended::Released),
            (2, Ended::UnlockedWrite),
            (1, Ended::Released)
        ]
    );
}

/// Saves, an import, a rollback and a restore, each as an admin on `app`: what the version
/// metrics must count as two saves, one of each other kind.
async fn write_every_kind_of_version(app: &App) -> u64 {
    use hegemony_state::service::deleted::restore;
    use hegemony_state::service::manage::{delete, import, rollback};

    let admin = who("alice", Role::Admin);
    let (first, second) = (doc(1, "one"), doc(2, "two"));
    write(app, &admin, &net(), None, first.clone())
        .await
        .unwrap();
    write(app, &admin, &net(), None, second.clone())
        .await
        .unwrap();
    let other = StateName::parse("imported").unwrap();
    let imported = doc(7, "imported");
    import(app, &admin, &other, imported.clone()).await.unwrap();
    let rolled = rollback(app, &admin, &net(), 1).await.unwrap();
    let kept = delete(app, &admin, &net()).await.unwrap().expect("kept");
    restore(app, &admin, &kept.id, None).await.unwrap();
    (first.len() + second.len() + imported.len()) as u64 + rolled.size
}

/// An import, a rollback and a restore write a version as a save does, and the version
/// metrics count each by its kind, in both adapters: the Prometheus counter by its `kind`
/// label, the EMF metric by `Function` (as before) and by `Function, Kind`. A restore seals
/// nothing (its versions come back as they were sealed), so it adds no sealed bytes.
#[tokio::test]
async fn every_kind_of_version_written_is_counted_by_its_kind() {
    use hegemony_state::adapters::emf::Emf;
    use hegemony_state::adapters::prometheus::{Prometheus, Standing};
    use std::sync::Mutex;

    let prometheus = Arc::new(Prometheus::new(false));
    let app = app_with(Arc::new(MemoryStore::new()), Some(PlatformKey::generate()))
        .measured(prometheus.clone());
    let sealed = write_every_kind_of_version(&app).await;
    let scrape = prometheus.scrape(&Standing::default());
    for (kind, count) in [("save", 2), ("import", 1), ("rollback", 1), ("restore", 1)] {
        let series = format!("hegemony_state_versions_written_total{{kind=\"{kind}\"}} {count}\n");
        assert!(scrape.contains(&series), "no {series} in\n{scrape}");
    }
    let bytes = format!("hegemony_state_sealed_bytes_total {sealed}\n");
    assert!(scrape.contains(&bytes), "no {bytes} in\n{scrape}");

    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let emf = Emf::new(
        "rollback",
        Box::new(move |line| sink.lock().unwrap().push(line.to_owned())),
    );
    let app = app_with(Arc::new(MemoryStore::new()), Some(PlatformKey::generate()))
        .measured(Arc::new(emf));
    write_every_kind_of_version(&app).await;
    let lines: Vec<serde_json::Value> = lines
        .lock()
        .unwrap()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &serde_json::Value| l.get("VersionsWritten").is_some())
        .collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["Kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["save", "save", "import", "rollback", "restore"]);
    for line in &lines {
        let kept_by: Vec<&serde_json::Value> = line["_aws"]["CloudWatchMetrics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["Metrics"].to_string().contains("\"VersionsWritten\""))
            .flat_map(|d| d["Dimensions"].as_array().unwrap())
            .collect();
        assert_eq!(
            kept_by,
            [
                &serde_json::json!(["Function"]),
                &serde_json::json!(["Function", "Kind"])
            ],
            "{line}"
        );
        assert_eq!(line["VersionsWritten"], 1);
    }
    let bytes: Vec<Option<u64>> = lines.iter().map(|l| l["SealedBytes"].as_u64()).collect();
    assert_eq!(bytes[4], None, "a restore seals nothing");
    assert_eq!(bytes.iter().flatten().sum::<u64>(), sealed);
}
