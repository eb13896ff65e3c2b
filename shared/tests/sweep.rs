//! The sweeper over the memory and local adapters, with a clock the tests move: pruning
//! keeps exactly the newest N (the current among them), a never-committed blob is deleted
//! and a committed one never is, deleted states go whole, and two sweepers at once do no harm.

use std::sync::{Arc, Mutex};

use hegemony_state::adapters::{local, memory::MemoryStore};
use hegemony_state::crypto::PlatformKey;
use hegemony_state::domain::name::StateName;
use hegemony_state::domain::permission::Role;
use hegemony_state::domain::{Actor, Principal, Timestamp};
use hegemony_state::ports::{BlobStore, Catalog};
use hegemony_state::service::manage::{delete, download};
use hegemony_state::service::state::{read, write};
use hegemony_state::service::sweep::sweep;
use hegemony_state::service::{App, Clock, Limits};
use time::macros::datetime;
use time::Duration;

struct TestClock(Mutex<Timestamp>);

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap()
    }
}

struct Fixture {
    app: App,
    clock: Arc<TestClock>,
    blobs: Arc<dyn BlobStore>,
    catalog: Arc<dyn Catalog>,
    _dir: Option<tempfile::TempDir>,
}

impl Fixture {
    fn advance(&self, by: Duration) {
        *self.clock.0.lock().unwrap() += by;
    }
}

fn fixture(
    store: (Arc<dyn Catalog>, Arc<dyn BlobStore>),
    dir: Option<tempfile::TempDir>,
    keep: u64,
) -> Fixture {
    let clock = Arc::new(TestClock(Mutex::new(datetime!(2026-11-30 01:00:00 UTC))));
    let app = App {
        catalog: store.0.clone(),
        blobs: store.1.clone(),
        keys: Some(Arc::new(PlatformKey::generate())),
        clock: clock.clone(),
        limits: Limits {
            max_state_bytes: 1 << 20,
            keep_versions: keep,
            run_end_grace: Duration::minutes(10),
        },
        run_url_template: None,
    };
    Fixture {
        app,
        clock,
        blobs: store.1,
        catalog: store.0,
        _dir: dir,
    }
}

fn memory(keep: u64) -> Fixture {
    let store = Arc::new(MemoryStore::new());
    fixture((store.clone(), store), None, keep)
}

fn local_store(keep: u64) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, blobs) = local::open(dir.path()).unwrap();
    fixture((Arc::new(catalog), Arc::new(blobs)), Some(dir), keep)
}

fn alice() -> Principal {
    Principal {
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
    format!(r#"{{"version":4,"serial":{serial},"lineage":"l","outputs":{{}}}}"#).into_bytes()
}

async fn versions(f: &Fixture) -> Vec<u64> {
    let record = f.catalog.state("acme", "net").await.unwrap().unwrap();
    f.catalog
        .versions("acme", "net", &record.incarnation)
        .await
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect()
}

mod cases {
    use super::*;

    pub async fn pruning_keeps_exactly_the_newest_n_and_their_blobs(f: Fixture) {
        for serial in 1..=6 {
            write(&f.app, &alice(), &net(), None, doc(serial))
                .await
                .unwrap();
        }
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(report.versions_dropped, 3);
        assert_eq!(report.blobs_deleted, 0, "dropped blobs wait out the grace");
        assert_eq!(versions(&f).await, [6, 5, 4]);
        f.advance(Duration::minutes(6));
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(report.blobs_deleted, 3);
        for v in [4, 5, 6] {
            assert_eq!(
                download(&f.app, &alice(), &net(), v).await.unwrap(),
                doc(v),
                "kept version {v} still reads"
            );
        }
        assert!(
            download(&f.app, &alice(), &net(), 3).await.is_err(),
            "a pruned version is gone"
        );
        assert_eq!(read(&f.app, &alice(), &net()).await.unwrap(), Some(doc(6)));
        let again = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(
            (again.versions_dropped, again.blobs_deleted),
            (0, 0),
            "idempotent"
        );
    }

    pub async fn a_never_committed_blob_goes_after_an_hour_and_a_committed_one_never(f: Fixture) {
        write(&f.app, &alice(), &net(), None, doc(1)).await.unwrap();
        // A write that died between its blob and its commit.
        let orphan = "orgs/acme/states/x/2-orphan";
        f.catalog
            .add_pending_blob(orphan, f.app.clock.now())
            .await
            .unwrap();
        f.blobs.put(orphan, b"sealed".to_vec()).await.unwrap();
        f.advance(Duration::minutes(59));
        assert_eq!(
            sweep(&f.app, f.app.clock.now())
                .await
                .unwrap()
                .uncommitted_blobs_deleted,
            0
        );
        f.advance(Duration::minutes(2));
        assert_eq!(
            sweep(&f.app, f.app.clock.now())
                .await
                .unwrap()
                .uncommitted_blobs_deleted,
            1
        );
        assert!(f.blobs.get(orphan).await.unwrap().is_none());
        f.advance(Duration::days(30));
        sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(
            read(&f.app, &alice(), &net()).await.unwrap(),
            Some(doc(1)),
            "committed content stays"
        );
    }

    pub async fn a_deleted_state_goes_whole_and_a_new_one_is_untouched(f: Fixture) {
        for serial in 1..=2 {
            write(&f.app, &alice(), &net(), None, doc(serial))
                .await
                .unwrap();
        }
        let old = f.catalog.state("acme", "net").await.unwrap().unwrap();
        delete(&f.app, &alice(), &net()).await.unwrap();
        write(&f.app, &alice(), &net(), None, doc(1)).await.unwrap();
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(report.versions_dropped, 2);
        assert!(f
            .catalog
            .versions("acme", "net", &old.incarnation)
            .await
            .unwrap()
            .is_empty());
        f.advance(Duration::minutes(6));
        assert_eq!(
            sweep(&f.app, f.app.clock.now())
                .await
                .unwrap()
                .blobs_deleted,
            2
        );
        assert_eq!(versions(&f).await, [3]);
        assert_eq!(read(&f.app, &alice(), &net()).await.unwrap(), Some(doc(1)));
    }

    pub async fn two_sweepers_at_once_do_no_harm(f: Fixture) {
        for serial in 1..=8 {
            write(&f.app, &alice(), &net(), None, doc(serial))
                .await
                .unwrap();
        }
        let now = f.app.clock.now();
        let (a, b) = tokio::join!(sweep(&f.app, now), sweep(&f.app, now));
        assert_eq!(a.unwrap().versions_dropped + b.unwrap().versions_dropped, 5);
        f.advance(Duration::minutes(6));
        let now = f.app.clock.now();
        let (a, b) = tokio::join!(sweep(&f.app, now), sweep(&f.app, now));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(
            a.blobs_deleted + b.blobs_deleted >= 5,
            "each doomed blob deleted at least once"
        );
        assert_eq!(versions(&f).await, [8, 7, 6]);
        assert_eq!(read(&f.app, &alice(), &net()).await.unwrap(), Some(doc(8)));
    }
}

macro_rules! every_adapter {
    ($($case:ident),* $(,)?) => {
        mod memory_adapter {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() { cases::$case(memory(3)).await })*
        }
        mod local_adapter {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() { cases::$case(local_store(3)).await })*
        }
    };
}

every_adapter!(
    pruning_keeps_exactly_the_newest_n_and_their_blobs,
    a_never_committed_blob_goes_after_an_hour_and_a_committed_one_never,
    a_deleted_state_goes_whole_and_a_new_one_is_untouched,
    two_sweepers_at_once_do_no_harm,
);
