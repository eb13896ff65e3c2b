//! The inventory through the use cases, over the memory adapter: every change of a state's
//! latest version (write, import, rollback, delete, restore) leaves its entry in the index,
//! the org's inventory key is made once and unwrapped once a process, no attribute value is
//! kept, and a rebuild fills an index that lacks entries and skips what is current.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use hegemony_state::adapters::memory::MemoryStore;
use hegemony_state::crypto::PlatformKey;
use hegemony_state::domain::inventory::{ResourceTag, StateInventory};
use hegemony_state::domain::name::StateName;
use hegemony_state::domain::permission::Role;
use hegemony_state::domain::{Actor, Principal};
use hegemony_state::ports::{
    AccessCatalog, Commit, DataKey, InventoryChange, KeyContext, KeyError, KeyOpener, KeyService,
    ResourceQuery, WrappedKey,
};
use hegemony_state::service::reindex::{self, Entries, Outcome, Rebuilt};
use hegemony_state::service::{
    deleted, manage, overview, resources, state, App, Limits, SystemClock,
};
use zeroize::Zeroizing;

mod support;
use support::set_slot;

/// The platform key, counting the inventory keys it makes and unwraps, and the versions'
/// keys it unwraps (each a version opened); while `down`, unavailable for every call.
struct Counting {
    key: PlatformKey,
    made: AtomicUsize,
    unwraps: AtomicUsize,
    opens: AtomicUsize,
    down: AtomicBool,
}

impl Counting {
    fn up(&self) -> Result<(), KeyError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(KeyError::Unavailable("stopped by the test".into()));
        }
        Ok(())
    }
}

#[async_trait]
impl KeyOpener for Counting {
    async fn unwrap_key(
        &self,
        key_id: &str,
        wrapped: &[u8],
        context: &KeyContext<'_>,
    ) -> Result<Zeroizing<[u8; 32]>, KeyError> {
        self.up()?;
        if context.state == ".inventory" {
            self.unwraps.fetch_add(1, Ordering::SeqCst);
        } else {
            self.opens.fetch_add(1, Ordering::SeqCst);
        }
        self.key.unwrap_key(key_id, wrapped, context).await
    }
}

#[async_trait]
impl KeyService for Counting {
    async fn data_key(&self, context: &KeyContext<'_>) -> Result<DataKey, KeyError> {
        self.up()?;
        if context.state == ".inventory" {
            self.made.fetch_add(1, Ordering::SeqCst);
        }
        self.key.data_key(context).await
    }
    async fn current_key_id(&self, context: &KeyContext<'_>) -> Result<String, KeyError> {
        self.up()?;
        self.key.current_key_id(context).await
    }
    async fn wrap_key(
        &self,
        plaintext: &[u8; 32],
        context: &KeyContext<'_>,
    ) -> Result<WrappedKey, KeyError> {
        self.up()?;
        self.key.wrap_key(plaintext, context).await
    }
}

fn app(store: &Arc<MemoryStore>, keys: &Arc<Counting>) -> App {
    App {
        catalog: store.clone(),
        blobs: store.clone(),
        keys: Some(keys.clone() as _),
        key_cache: hegemony_state::service::key_cache::KeyCache::off(),
        index_keys: Default::default(),
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
        metrics: Arc::new(hegemony_state::ports::Unmeasured),
    }
}

fn setup() -> (Arc<MemoryStore>, Arc<Counting>, App) {
    let store = Arc::new(MemoryStore::new());
    let keys = Arc::new(Counting {
        key: PlatformKey::generate(),
        made: AtomicUsize::new(0),
        unwraps: AtomicUsize::new(0),
        opens: AtomicUsize::new(0),
        down: AtomicBool::new(false),
    });
    let app = app(&store, &keys);
    (store, keys, app)
}

fn admin() -> Principal {
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

fn name(n: &str) -> StateName {
    StateName::parse(n).unwrap()
}

const SECRET_ARN: &str = "arn:aws:s3:::very-secret-bucket";

/// A format-4 state managing buckets named by `buckets` (each with an ARN), plus a data
/// source.
fn doc(serial: u64, buckets: &[&str]) -> Vec<u8> {
    let instances: Vec<String> = buckets
        .iter()
        .map(|b| {
            let arn = if *b == "shared" { SECRET_ARN.to_owned() } else { format!("arn:aws:s3:::{b}") };
            format!(r#"{{"index_key":"{b}","attributes":{{"arn":"{arn}","bucket":"{b}","tags":{{"k":"v"}}}}}}"#)
        })
        .collect();
    format!(
        r#"{{"version":4,"serial":{serial},"lineage":"lin","resources":[
            {{"mode":"managed","type":"aws_s3_bucket","name":"b","provider":"provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{}]}},
            {{"mode":"data","type":"aws_caller_identity","name":"me","provider":"provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{{"attributes":{{"id":"123456789012"}}}}]}}
        ]}}"#,
        instances.join(",")
    )
    .into_bytes()
}

async fn addresses(app: &App) -> Vec<String> {
    let query = ResourceQuery {
        limit: 2000,
        ..ResourceQuery::default()
    };
    app.catalog
        .resources("acme", &query)
        .await
        .unwrap()
        .into_iter()
        .map(|r| format!("{}@{}:{}", r.state, r.version, r.address))
        .collect()
}

#[tokio::test]
async fn a_write_indexes_its_version_and_keeps_no_value() {
    let (_, _, app) = setup();
    let p = admin();
    state::write(&app, &p, &name("net"), None, doc(1, &["a", "shared"]))
        .await
        .unwrap();
    state::write(&app, &p, &name("app"), None, doc(1, &["shared"]))
        .await
        .unwrap();
    assert_eq!(
        addresses(&app).await,
        [
            "app@1:aws_s3_bucket.b[\"shared\"]",
            "app@1:data.aws_caller_identity.me",
            "net@1:aws_s3_bucket.b[\"a\"]",
            "net@1:aws_s3_bucket.b[\"shared\"]",
            "net@1:data.aws_caller_identity.me",
        ]
    );
    let conflicts = app.catalog.conflicts("acme", None).await.unwrap();
    assert_eq!(conflicts.len(), 1, "the one bucket both manage");
    assert_eq!(conflicts[0].len(), 2);
    let seen = format!(
        "{:?}{:?}{:?}",
        conflicts,
        app.catalog.indexed_states("acme").await.unwrap(),
        app.catalog.org("acme").await.unwrap()
    );
    for value in [SECRET_ARN, "very-secret", "123456789012"] {
        assert!(!seen.contains(value), "{value} in {seen}");
    }
}

#[tokio::test]
async fn the_orgs_key_is_made_once_and_unwrapped_once_a_process() {
    let (store, keys, first) = setup();
    let p = admin();
    for serial in 1..=3 {
        state::write(&first, &p, &name("net"), None, doc(serial, &["a"]))
            .await
            .unwrap();
    }
    assert_eq!(keys.made.load(Ordering::SeqCst), 1);
    assert_eq!(keys.unwraps.load(Ordering::SeqCst), 0);
    let stored = store.org("acme").await.unwrap().unwrap().inventory_key;
    assert!(stored.is_some());
    // Another process on the same store unwraps the stored key once, and digests agree.
    let second = app(&store, &keys);
    for serial in 1..=2 {
        state::write(&second, &p, &name("other"), None, doc(serial, &["a"]))
            .await
            .unwrap();
    }
    assert_eq!(keys.made.load(Ordering::SeqCst), 1);
    assert_eq!(keys.unwraps.load(Ordering::SeqCst), 1);
    assert_eq!(
        store.org("acme").await.unwrap().unwrap().inventory_key,
        stored
    );
    assert_eq!(
        second.catalog.conflicts("acme", None).await.unwrap().len(),
        1
    );
}

#[tokio::test]
async fn an_encrypted_state_is_listed_as_not_indexed_and_needs_no_key() {
    let (_, keys, app) = setup();
    let body = br#"{"encryption_version":"v0","serial":1,"lineage":"l","payload":"x"}"#.to_vec();
    state::write(&app, &admin(), &name("enc"), None, body)
        .await
        .unwrap();
    let entries = app.catalog.indexed_states("acme").await.unwrap();
    assert_eq!(entries.len(), 1);
    assert!(!entries[0].indexed);
    assert_eq!(keys.made.load(Ordering::SeqCst), 0);
    // However large.
    let payload = "x".repeat(600 * 1024);
    let body =
        format!(r#"{{"encryption_version":"v0","serial":2,"lineage":"l","payload":"{payload}"}}"#);
    state::write(&app, &admin(), &name("enc"), None, body.into_bytes())
        .await
        .unwrap();
    let entries = app.catalog.indexed_states("acme").await.unwrap();
    assert_eq!((entries[0].version, entries[0].indexed), (2, false));
}

/// A state with no resources (never applied, or destroyed) is indexed, with no instances,
/// and asks the key service for nothing but its version's data key.
#[tokio::test]
async fn an_empty_state_is_indexed_and_needs_no_key() {
    let (_, keys, app) = setup();
    let body = br#"{"version":4,"serial":1,"lineage":"l","outputs":{},"resources":[]}"#.to_vec();
    state::write(&app, &admin(), &name("empty"), None, body)
        .await
        .unwrap();
    let entries = app.catalog.indexed_states("acme").await.unwrap();
    assert_eq!(entries.len(), 1);
    assert!(entries[0].indexed, "{entries:?}");
    assert_eq!(entries[0].instances, 0);
    assert_eq!(keys.made.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn import_rollback_delete_and_restore_keep_the_index_with_the_latest_version() {
    let (_, _, app) = setup();
    let p = admin();
    manage::import(&app, &p, &name("net"), doc(1, &["a"]))
        .await
        .unwrap();
    assert_eq!(addresses(&app).await[0], "net@1:aws_s3_bucket.b[\"a\"]");
    state::write(&app, &p, &name("net"), None, doc(2, &["b"]))
        .await
        .unwrap();
    assert_eq!(addresses(&app).await[0], "net@2:aws_s3_bucket.b[\"b\"]");
    manage::rollback(&app, &p, &name("net"), 1).await.unwrap();
    assert_eq!(addresses(&app).await[0], "net@3:aws_s3_bucket.b[\"a\"]");
    let kept = manage::delete(&app, &p, &name("net"))
        .await
        .unwrap()
        .expect("kept for its retention");
    assert!(addresses(&app).await.is_empty());
    assert!(app.catalog.indexed_states("acme").await.unwrap().is_empty());
    deleted::restore(&app, &p, &kept.id, Some(&name("back")))
        .await
        .unwrap();
    assert_eq!(
        addresses(&app).await,
        [
            "back@3:aws_s3_bucket.b[\"a\"]",
            "back@3:data.aws_caller_identity.me"
        ]
    );
}

/// A save whose content the index keeps as it kept the latest version's (an apply that
/// changed attributes alone) moves the entry's version and touches no instance; over an
/// entry that does not hold the latest version (dropped behind the service's back), such a
/// save indexes its content whole again, so the gap lasts until the next save, not until a
/// rebuild.
#[tokio::test]
async fn a_save_that_changes_no_instance_moves_only_the_entrys_version() {
    let (_, _, app) = setup();
    let p = admin();
    let net = name("net");
    state::write(&app, &p, &net, None, doc(1, &["a"]))
        .await
        .unwrap();
    state::write(&app, &p, &net, None, doc(2, &["a"]))
        .await
        .unwrap();
    assert_eq!(addresses(&app).await[0], "net@2:aws_s3_bucket.b[\"a\"]");
    unindex(&app, "net").await;
    state::write(&app, &p, &net, None, doc(3, &["a"]))
        .await
        .unwrap();
    assert_eq!(
        addresses(&app).await,
        [
            "net@3:aws_s3_bucket.b[\"a\"]",
            "net@3:data.aws_caller_identity.me"
        ],
        "indexed again by the save"
    );
    let records = reindex::states_of(&app, "acme").await.unwrap();
    let report = reindex::rebuild(&app, "acme", records, Entries::Behind, &|_, _| {})
        .await
        .unwrap();
    assert_eq!((report.indexed, report.current), (0, 1), "{report:?}");
    state::write(&app, &p, &net, None, doc(4, &["a", "b"]))
        .await
        .unwrap();
    assert_eq!(
        addresses(&app).await,
        [
            "net@4:aws_s3_bucket.b[\"a\"]",
            "net@4:aws_s3_bucket.b[\"b\"]",
            "net@4:data.aws_caller_identity.me"
        ]
    );
    // A rolled-back content is indexed whole and noted, so the next save of it keeps it.
    manage::rollback(&app, &p, &net, 3).await.unwrap();
    state::write(&app, &p, &net, None, doc(6, &["a"]))
        .await
        .unwrap();
    assert_eq!(
        addresses(&app).await,
        [
            "net@6:aws_s3_bucket.b[\"a\"]",
            "net@6:data.aws_caller_identity.me"
        ]
    );
    // A deleted state's entry is gone: the same content written again (its version numbers
    // go on) is indexed whole.
    manage::delete(&app, &p, &net).await.unwrap();
    state::write(&app, &p, &net, None, doc(7, &["a"]))
        .await
        .unwrap();
    assert_eq!(
        addresses(&app).await,
        [
            "net@7:aws_s3_bucket.b[\"a\"]",
            "net@7:data.aws_caller_identity.me"
        ]
    );
}

/// A format-4 state with one bucket resource for each of `names`, each with its ARN and
/// `padding` bytes of another attribute.
fn one_resource_each(serial: u64, names: &[impl AsRef<str>], padding: usize) -> Vec<u8> {
    let padding = "x".repeat(padding);
    let resources: Vec<String> = names
        .iter()
        .map(|n| {
            let n = n.as_ref();
            format!(
                r#"{{"mode":"managed","type":"aws_s3_bucket","name":"{n}","provider":"provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{{"attributes":{{"arn":"arn:aws:s3:::{n}","policy":"{padding}"}}}}]}}"#
            )
        })
        .collect();
    format!(
        r#"{{"version":4,"serial":{serial},"lineage":"lin","resources":[{}]}}"#,
        resources.join(",")
    )
    .into_bytes()
}

/// Empties `state`'s entry of its rows behind the service's back, leaving its version and
/// its tags: the next save trusts the entry for every resource whose tag it holds, and adds
/// only the others' rows.
async fn empty_keeping_tags(app: &App, state: &str) {
    let tags = app.catalog.resource_tags("acme", state).await.unwrap();
    let record = app.catalog.state("acme", state).await.unwrap().unwrap();
    let emptied = StateInventory {
        version: record.latest.map_or(0, |l| l.version),
        indexed: true,
        instances: Vec::new(),
        tags,
    };
    app.catalog
        .put_inventory("acme", state, record.revision, &emptied)
        .await
        .unwrap();
}

/// A save that changes some resources sends only theirs: the entry is trusted for every
/// resource whose tag it holds. Seen through an entry emptied behind the service's back but
/// left its tags: the saves that follow add only the resources they changed, and one that
/// the entry cannot be trusted for (its tags not the latest version's) rebuilds it whole.
#[tokio::test]
async fn a_save_sends_only_the_resources_it_changed() {
    let (_, _, app) = setup();
    let p = admin();
    let net = name("net");
    state::write(&app, &p, &net, None, one_resource_each(1, &["a", "b"], 0))
        .await
        .unwrap();
    assert_eq!(addresses(&app).await.len(), 2);
    let tags = app.catalog.resource_tags("acme", "net").await.unwrap();
    assert_eq!(tags.as_ref().map(Vec::len), Some(2));
    empty_keeping_tags(&app, "net").await;
    state::write(
        &app,
        &p,
        &net,
        None,
        one_resource_each(2, &["a", "b", "c"], 0),
    )
    .await
    .unwrap();
    assert_eq!(addresses(&app).await, ["net@2:aws_s3_bucket.c"]);
    state::write(
        &app,
        &p,
        &net,
        None,
        one_resource_each(3, &["b", "c", "d"], 0),
    )
    .await
    .unwrap();
    assert_eq!(
        addresses(&app).await,
        ["net@3:aws_s3_bucket.c", "net@3:aws_s3_bucket.d"]
    );
    assert_eq!(
        app.catalog.indexed_states("acme").await.unwrap()[0].instances,
        2
    );
    // Tags that are not the latest version's (as an older release's rules left them) are
    // not trusted: the save indexes its document whole.
    let record = app.catalog.state("acme", "net").await.unwrap().unwrap();
    let stale = StateInventory {
        version: 3,
        indexed: true,
        instances: Vec::new(),
        tags: Some(vec![ResourceTag(1), ResourceTag(2)]),
    };
    app.catalog
        .put_inventory("acme", "net", record.revision, &stale)
        .await
        .unwrap();
    state::write(
        &app,
        &p,
        &net,
        None,
        one_resource_each(4, &["b", "c", "d", "e"], 0),
    )
    .await
    .unwrap();
    assert_eq!(
        addresses(&app).await,
        [
            "net@4:aws_s3_bucket.b",
            "net@4:aws_s3_bucket.c",
            "net@4:aws_s3_bucket.d",
            "net@4:aws_s3_bucket.e"
        ]
    );
}

/// A large state's index work runs on a blocking thread rather than the request's task: its
/// entry is kept and patched as a small state's is. Seen, as above, through an entry emptied
/// but left its tags.
#[tokio::test]
async fn a_large_states_entry_is_kept_and_patched_as_a_small_ones() {
    let (_, _, app) = setup();
    let p = admin();
    let net = name("net");
    let mut names: Vec<String> = (0..640).map(|i| format!("r{i}")).collect();
    let first = one_resource_each(1, &names, 1024);
    assert!(first.len() > 600 * 1024, "{} bytes", first.len());
    state::write(&app, &p, &net, None, first).await.unwrap();
    assert_eq!(found(&app).await.len(), 640, "derived by the first read");
    let entries = app.catalog.indexed_states("acme").await.unwrap();
    assert_eq!((entries[0].version, entries[0].instances), (1, 640));
    empty_keeping_tags(&app, "net").await;
    names.push("extra".into());
    state::write(&app, &p, &net, None, one_resource_each(2, &names, 1024))
        .await
        .unwrap();
    assert_eq!(addresses(&app).await, ["net@2:aws_s3_bucket.extra"]);
    state::write(&app, &p, &net, None, one_resource_each(3, &names, 1024))
        .await
        .unwrap();
    assert_eq!(addresses(&app).await, ["net@3:aws_s3_bucket.extra"]);
}

/// The org's instances as a search finds them through the service.
async fn found(app: &App) -> Vec<String> {
    let query = ResourceQuery {
        limit: 1000,
        ..ResourceQuery::default()
    };
    resources::search(app, &admin(), query)
        .await
        .unwrap()
        .resources
        .into_iter()
        .map(|r| format!("{}@{}:{}", r.state, r.version, r.address))
        .collect()
}

/// 640 names starting with `prefix`: a state of one bucket each, padded past the size from
/// which its index work leaves the request's task (512 KiB).
fn large(serial: u64, prefix: &str) -> Vec<u8> {
    let names: Vec<String> = (0..640).map(|i| format!("{prefix}{i}")).collect();
    one_resource_each(serial, &names, 1024)
}

/// Every commit carries its version's entry, however large the state: right after each
/// save (whole, kept, patched), import, rollback, delete and restore, with the key service
/// stopped, a search, the conflicts and the overview answer as of that commit, and no read
/// opens a version.
#[tokio::test]
async fn the_index_answers_each_commit_at_once_with_the_key_service_stopped() {
    let (_, keys, app) = setup();
    let p = admin();
    let net = name("net");
    let mut serial = 0;
    // Each change, then what the index must answer right after it: `net`'s version and its
    // buckets' first letter, and how many instances the org has.
    let check = |version: u64, prefix: &'static str, total: u64| {
        let (app, keys, p) = (&app, &keys, &p);
        async move {
            keys.down.store(true, Ordering::SeqCst);
            let opens = keys.opens.load(Ordering::SeqCst);
            let rows = found(app).await;
            let ours: Vec<_> = rows.iter().filter(|r| r.starts_with("net@")).collect();
            assert!(!ours.is_empty(), "net is in the index at {version}");
            let expected = format!("net@{version}:aws_s3_bucket.{prefix}");
            assert!(ours.iter().all(|r| r.starts_with(&expected)), "{ours:?}");
            let view = overview::overview(app, p).await.unwrap();
            assert_eq!((view.resources, view.not_indexed.len()), (total, 0));
            resources::conflicts(app, p, None).await.unwrap();
            assert_eq!(
                keys.opens.load(Ordering::SeqCst),
                opens,
                "no read opened a version"
            );
            keys.down.store(false, Ordering::SeqCst);
        }
    };
    let mut save = |prefix: &str, extra: bool| {
        serial += 1;
        let mut names: Vec<String> = (0..640).map(|i| format!("{prefix}{i}")).collect();
        if extra {
            names.push(format!("{prefix}x"));
        }
        one_resource_each(serial, &names, 1024)
    };
    // A whole entry (new), a kept one (the same resources), a patched one (one more), and a
    // whole one again (every resource renamed).
    state::write(&app, &p, &net, None, save("a", false))
        .await
        .unwrap();
    check(1, "a", 640).await;
    state::write(&app, &p, &net, None, save("a", false))
        .await
        .unwrap();
    check(2, "a", 640).await;
    state::write(&app, &p, &net, None, save("a", true))
        .await
        .unwrap();
    check(3, "a", 641).await;
    state::write(&app, &p, &net, None, save("b", false))
        .await
        .unwrap();
    check(4, "b", 640).await;
    manage::rollback(&app, &p, &net, 1).await.unwrap();
    check(5, "a", 640).await;
    manage::import(&app, &p, &name("imported"), large(1, "i"))
        .await
        .unwrap();
    check(5, "a", 1280).await;
    let gone = manage::delete(&app, &p, &name("imported"))
        .await
        .unwrap()
        .unwrap();
    check(5, "a", 640).await;
    deleted::restore(&app, &p, &gone.id, None).await.unwrap();
    check(5, "a", 1280).await;
}

/// Drops `state`'s entry from the index, its record untouched but for its revision: what a
/// store that never indexed it holds.
async fn unindex(app: &App, state: &str) {
    let record = app.catalog.state("acme", state).await.unwrap().unwrap();
    let mut next = record.clone();
    next.revision += 1;
    let commit = Commit {
        inventory: Some(InventoryChange::Remove),
        ..Commit::over(&record, record.created_at, Some(next))
    };
    app.catalog.commit(commit).await.unwrap();
}

#[tokio::test]
async fn a_rebuild_fills_what_is_missing_and_a_second_skips_it_all() {
    let (_, _, app) = setup();
    let p = admin();
    for (state, buckets) in [("a", &["x"][..]), ("b", &["y", "z"]), ("c", &["w"])] {
        state::write(&app, &p, &name(state), None, doc(1, buckets))
            .await
            .unwrap();
    }
    let enc = br#"{"encryption_version":"v0","serial":1,"lineage":"l","payload":"x"}"#.to_vec();
    state::write(&app, &p, &name("enc"), None, enc)
        .await
        .unwrap();
    let before = addresses(&app).await;
    for state in ["a", "b", "enc"] {
        unindex(&app, state).await;
    }
    assert_eq!(addresses(&app).await.len(), 2, "only c's are left");
    let (report, seen) = rebuild_seeing(&app).await;
    assert_eq!(
        report,
        Rebuilt {
            indexed: 2,
            current: 1,
            not_indexed: 1,
            moved_on: 0,
            unopened: 0
        }
    );
    assert_eq!(seen.len(), 4);
    assert_eq!(
        addresses(&app).await,
        before,
        "digests and all, as the saves made them"
    );
    assert_eq!(app.catalog.conflicts("acme", None).await.unwrap().len(), 0);
    let records = reindex::states_of(&app, "acme").await.unwrap();
    let again = reindex::rebuild(&app, "acme", records, Entries::Behind, &|_, _| {})
        .await
        .unwrap();
    assert_eq!(again.current, 4);
}

/// A state whose latest version does not open is reported with why and left as it was; the
/// states after it are indexed all the same, and a run after it is mended indexes it.
#[tokio::test]
async fn a_rebuild_goes_past_a_version_that_does_not_open() {
    let (_, _, app) = setup();
    let p = admin();
    for (state, buckets) in [("a", &["x"][..]), ("b", &["y"]), ("c", &["z"])] {
        state::write(&app, &p, &name(state), None, doc(1, buckets))
            .await
            .unwrap();
    }
    let before = addresses(&app).await;
    for state in ["a", "b", "c"] {
        unindex(&app, state).await;
    }
    // b's latest version loses its wrapped data key: it no longer opens.
    let slot = app
        .catalog
        .state("acme", "b")
        .await
        .unwrap()
        .unwrap()
        .latest
        .unwrap()
        .wrapped_key;
    set_slot(&*app.catalog, "b", None).await;
    let (report, seen) = rebuild_seeing(&app).await;
    assert_eq!((report.indexed, report.unopened), (2, 1), "{report:?}");
    assert!(
        matches!(&seen[1], (state, Outcome::Unopened(why)) if state == "b" && why.contains("no wrapped data key")),
        "{seen:?}"
    );
    assert_eq!(seen[2], ("c".to_owned(), Outcome::Indexed));
    let all_but_b: Vec<String> = before
        .iter()
        .filter(|a| !a.starts_with("b@"))
        .cloned()
        .collect();
    assert_eq!(addresses(&app).await, all_but_b);
    set_slot(&*app.catalog, "b", slot).await;
    let records = reindex::states_of(&app, "acme").await.unwrap();
    let again = reindex::rebuild(&app, "acme", records, Entries::Behind, &|_, _| {})
        .await
        .unwrap();
    assert_eq!((again.indexed, again.current, again.unopened), (1, 2, 0));
    assert_eq!(addresses(&app).await, before);
}

/// Rebuilds acme's index, with what happened to each state in turn.
async fn rebuild_seeing(app: &App) -> (Rebuilt, Vec<(String, Outcome)>) {
    let seen = std::sync::Mutex::new(Vec::new());
    let done = |state: &str, outcome: &Outcome| {
        seen.lock()
            .unwrap()
            .push((state.to_owned(), outcome.clone()))
    };
    let records = reindex::states_of(app, "acme").await.unwrap();
    let report = reindex::rebuild(app, "acme", records, Entries::Behind, &done)
        .await
        .unwrap();
    (report, seen.into_inner().unwrap())
}

/// A rebuild of every entry builds the current ones again too, to the same instances.
#[tokio::test]
async fn a_rebuild_of_every_entry_builds_the_current_ones_again() {
    let (_, _, app) = setup();
    let p = admin();
    for state in ["net", "app"] {
        state::write(&app, &p, &name(state), None, doc(1, &["a"]))
            .await
            .unwrap();
    }
    let before = addresses(&app).await;
    let records = reindex::states_of(&app, "acme").await.unwrap();
    let behind = reindex::rebuild(&app, "acme", records.clone(), Entries::Behind, &|_, _| {})
        .await
        .unwrap();
    assert_eq!((behind.indexed, behind.current), (0, 2), "{behind:?}");
    let all = reindex::rebuild(&app, "acme", records, Entries::All, &|_, _| {})
        .await
        .unwrap();
    assert_eq!((all.indexed, all.current), (2, 0), "{all:?}");
    assert_eq!(addresses(&app).await, before);
}

/// The overview's `versions` are the versions the states hold, summed: a state deleted and
/// written again holds its new versions only, whatever their numbers; one saved past the
/// limit holds the limit; a record stored before it kept a count has its versions counted.
#[tokio::test]
async fn the_overview_counts_the_versions_each_state_holds() {
    let (_, _, mut app) = setup();
    app.limits.keep_versions = 3;
    let p = admin();
    for serial in 1..=4 {
        state::write(&app, &p, &name("net"), None, doc(serial, &["a"]))
            .await
            .unwrap();
    }
    for serial in 1..=2 {
        state::write(&app, &p, &name("app"), None, doc(serial, &["b"]))
            .await
            .unwrap();
    }
    manage::delete(&app, &p, &name("app")).await.unwrap();
    state::write(&app, &p, &name("app"), None, doc(1, &["b"]))
        .await
        .unwrap();
    let view = overview::overview(&app, &p).await.unwrap();
    assert_eq!((view.states, view.versions), (2, 4));
}
