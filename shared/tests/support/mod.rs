//! What the service-level and in-process API tests share: a clock they move, an app on
//! either adapter, principals, a client that drives the HTTP handlers in-process (`api`) and
//! captured logs (`logs`). Each test binary uses part of it, so unused items are expected here.
#![allow(dead_code)]

pub mod api;
pub mod aws;
pub mod logs;

use std::sync::{Arc, Mutex};

use hegemony_state::adapters::{local, memory::MemoryStore};
use hegemony_state::crypto::PlatformKey;
use hegemony_state::domain::name::StateName;
use hegemony_state::domain::permission::Role;
use hegemony_state::domain::{Actor, Principal, Timestamp};
use hegemony_state::ports::{BlobStore, Catalog, Commit, KeyService};
use hegemony_state::service::{App, Clock, Limits};
use time::macros::datetime;
use time::Duration;

/// A clock that stands still until a test moves it.
pub struct TestClock(Mutex<Timestamp>);

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap()
    }
}

/// An app on one adapter, its clock, and whatever keeps the adapter alive.
pub struct Fixture {
    pub app: App,
    pub clock: Arc<TestClock>,
    pub catalog: Arc<dyn Catalog>,
    pub blobs: Arc<dyn BlobStore>,
    _dir: Option<tempfile::TempDir>,
}

impl Fixture {
    pub fn advance(&self, by: Duration) {
        *self.clock.0.lock().unwrap() += by;
    }

    /// The local store's data folder; `None` on the other adapters.
    pub fn data_dir(&self) -> Option<&std::path::Path> {
        self._dir.as_ref().map(|d| d.path())
    }
}

/// The adapters every service-level case runs on.
#[derive(Debug, Clone, Copy)]
pub enum Adapter {
    Memory,
    Local,
    /// DynamoDB, S3 and KMS on the emulator.
    Aws,
}

/// Limits with `keep` versions kept and a 600 s grace.
pub fn limits(keep: u64) -> Limits {
    Limits {
        max_state_bytes: 1 << 20,
        keep_versions: keep,
        run_end_grace: Duration::seconds(600),
        deleted_retention: Duration::days(7),
        lambda_ceiling: None,
    }
}

pub fn fixture(adapter: Adapter, limits: Limits) -> Fixture {
    let platform: Arc<dyn KeyService> = Arc::new(PlatformKey::generate());
    let (catalog, blobs, keys, dir): (Arc<dyn Catalog>, Arc<dyn BlobStore>, _, _) = match adapter {
        Adapter::Memory => {
            let store = Arc::new(MemoryStore::new());
            (store.clone(), store, platform, None)
        }
        Adapter::Local => {
            let dir = tempfile::tempdir().unwrap();
            let (catalog, blobs) = local::open(dir.path()).unwrap();
            (Arc::new(catalog), Arc::new(blobs), platform, Some(dir))
        }
        Adapter::Aws => aws::block_on(async {
            let config = aws::sdk_config().await;
            let (catalog, blobs, _) = aws::fresh_store(&config).await;
            let (keys, _) = aws::fresh_kms_keys(&config).await;
            let keys: Arc<dyn KeyService> = Arc::new(keys);
            (
                Arc::new(catalog) as Arc<dyn Catalog>,
                Arc::new(blobs) as Arc<dyn BlobStore>,
                keys,
                None,
            )
        }),
    };
    let clock = Arc::new(TestClock(Mutex::new(datetime!(2026-11-30 01:00:00 UTC))));
    let app = App {
        catalog: catalog.clone(),
        blobs: blobs.clone(),
        keys: Some(keys),
        index_keys: Default::default(),
        key_cache: hegemony_state::service::key_cache::KeyCache::off(),
        clock: clock.clone(),
        limits,
        links: Default::default(),
        issuers: hegemony_state::service::issuers::Issuers::off(),
        metrics: std::sync::Arc::new(hegemony_state::ports::Unmeasured),
    };
    Fixture {
        app,
        clock,
        catalog,
        blobs,
        _dir: dir,
    }
}

pub fn user(name: &str, role: Role) -> Principal {
    Principal {
        session: None,
        org: "acme".into(),
        role,
        actor: Actor::User { user: name.into() },
        step: None,
    }
}

pub fn net() -> StateName {
    StateName::parse("net").unwrap()
}

/// Runs each listed case, an `async fn(Fixture)` in `cases`, on every adapter.
#[macro_export]
macro_rules! every_adapter {
    ($limits:expr; $($case:ident),* $(,)?) => {
        mod memory_adapter {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() { cases::$case(support::fixture(support::Adapter::Memory, $limits)).await })*
        }
        mod local_adapter {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() { cases::$case(support::fixture(support::Adapter::Local, $limits)).await })*
        }
        mod aws_adapter {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() { cases::$case(support::fixture(support::Adapter::Aws, $limits)).await })*
        }
    };
}

/// A version's plaintext from what a read or a download gives: a format-2 version comes
/// back as its gzip member, which a client inflates.
pub fn plaintext(content: hegemony_state::service::state::Content) -> Vec<u8> {
    use hegemony_state::service::state::Content;
    match content {
        Content::Whole(bytes) => bytes,
        Content::Gzip { opening, size } => {
            hegemony_state::crypto::open_into(*opening, size as usize, Vec::new()).unwrap()
        }
    }
}

/// The latest version's plaintext, as `service::state::read` gives it.
pub async fn read(
    app: &App,
    principal: &Principal,
    name: &StateName,
) -> Result<Option<Vec<u8>>, hegemony_state::service::Error> {
    let content = hegemony_state::service::state::read(app, principal, name).await?;
    Ok(content.map(plaintext))
}

/// Replaces the latest version's key slot of acme's `state` (in its record and the state's
/// copy), as a re-wrap or a record from before the slot was kept would leave it: `None`
/// leaves a version that no longer opens.
pub async fn set_slot(catalog: &dyn Catalog, state: &str, wrapped_key: Option<Vec<u8>>) {
    let record = catalog.state("acme", state).await.unwrap().unwrap();
    let mut version = record.latest.clone().unwrap();
    version.wrapped_key = wrapped_key;
    let mut stored = record.clone();
    stored.revision += 1;
    stored.latest = Some(version.clone());
    let mut commit = Commit::over(&record, record.created_at, Some(stored));
    commit.versions.push(version);
    catalog.commit(commit).await.unwrap();
}
