//! Runs over the memory and local adapters, with a clock the tests move: step tokens, the
//! liveness of their locks, a run's end and its grace, gone reports, and the takeover of a
//! dead lock by the next change.

use std::sync::{Arc, Mutex};

use hegemony_state::adapters::{local, memory::MemoryStore};
use hegemony_state::crypto::PlatformKey;
use hegemony_state::domain::actor::StepKind;
use hegemony_state::domain::name::StateName;
use hegemony_state::domain::permission::Role;
use hegemony_state::domain::version::Ended;
use hegemony_state::domain::{Actor, Principal, Refusal, Timestamp};
use hegemony_state::ports::{AccessCatalog, AuditQuery, BlobStore, Catalog};
use hegemony_state::service::auth::{authenticate, Caller};
use hegemony_state::service::lock::{lock, unlock};
use hegemony_state::service::runs::{end, gone, mint, MintRequest};
use hegemony_state::service::state::write;
use hegemony_state::service::{admin, App, Clock, Error, Limits};
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
    _dir: Option<tempfile::TempDir>,
}

impl Fixture {
    fn advance(&self, by: Duration) {
        *self.clock.0.lock().unwrap() += by;
    }

    /// Mints a token for `step` attempt `attempt` of `run` on `net` and returns its principal.
    async fn step(&self, run: &str, step: &str, attempt: u32, timeout: u64) -> Principal {
        let request = MintRequest {
            org: "acme".into(),
            state: "net".into(),
            step: step.into(),
            attempt,
            kind: StepKind::Plan,
            timeout_seconds: timeout,
            hold: false,
        };
        let (token, _) = mint(&self.app, run, &request).await.unwrap();
        let access: &dyn AccessCatalog = self.app.catalog.as_ref();
        match authenticate(access, &token, self.app.clock.now())
            .await
            .unwrap()
        {
            Caller::Org(p) => p,
            other => panic!("{other:?}"),
        }
    }
}

fn fixture(
    store: (Arc<dyn Catalog>, Arc<dyn BlobStore>),
    dir: Option<tempfile::TempDir>,
) -> Fixture {
    let clock = Arc::new(TestClock(Mutex::new(datetime!(2026-11-30 01:00:00 UTC))));
    let app = App {
        catalog: store.0,
        blobs: store.1,
        keys: Some(Arc::new(PlatformKey::generate())),
        clock: clock.clone(),
        limits: Limits {
            max_state_bytes: 1 << 20,
            keep_versions: 50,
            run_end_grace: Duration::seconds(600),
        },
    };
    Fixture {
        app,
        clock,
        _dir: dir,
    }
}

fn memory() -> Fixture {
    let store = Arc::new(MemoryStore::new());
    fixture((store.clone(), store), None)
}

fn local_store() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, blobs) = local::open(dir.path()).unwrap();
    fixture((Arc::new(catalog), Arc::new(blobs)), Some(dir))
}

fn user(name: &str, role: Role) -> Principal {
    Principal {
        org: "acme".into(),
        role,
        actor: Actor::User { user: name.into() },
        step: None,
    }
}

fn net() -> StateName {
    StateName::parse("net").unwrap()
}

fn lock_doc(id: &str) -> Vec<u8> {
    format!(r#"{{"ID":"{id}","Operation":"OperationTypeApply","Who":"w@h"}}"#).into_bytes()
}

fn doc(serial: u64) -> Vec<u8> {
    format!(r#"{{"version":4,"serial":{serial},"lineage":"l"}}"#).into_bytes()
}

fn locked(result: Result<(), Error>) -> bool {
    matches!(result, Err(Error::Refused(Refusal::Locked { .. })))
}

mod cases {
    use super::*;

    pub async fn a_step_lock_lives_as_long_as_its_token_then_is_taken_over(f: Fixture) {
        let step = f.step("r1", "apply", 1, 60).await;
        assert_eq!(step.role, Role::Operator);
        lock(&f.app, &step, &net(), &lock_doc("S1")).await.unwrap();
        write(&f.app, &step, &net(), Some("S1"), doc(1))
            .await
            .unwrap();
        let record = f.app.catalog.state("acme", "net").await.unwrap().unwrap();
        let lock_info = record.lock.unwrap();
        assert_eq!(
            lock_info.live_until,
            Some(f.app.clock.now() + Duration::seconds(360))
        );
        assert!(lock_info
            .document
            .info
            .unwrap()
            .starts_with("run r1 step apply attempt 1 since"));
        let alice = user("alice", Role::Operator);
        f.advance(Duration::seconds(359));
        assert!(locked(lock(&f.app, &alice, &net(), &lock_doc("A")).await));
        f.advance(Duration::seconds(2));
        lock(&f.app, &alice, &net(), &lock_doc("A")).await.unwrap();
        let record = f.app.catalog.state("acme", "net").await.unwrap().unwrap();
        assert_eq!(record.lock.unwrap().id(), "A");
        assert_eq!(record.latest.unwrap().change.ended, Ended::Expired);
        let audit = f
            .app
            .catalog
            .audit(
                "acme",
                &AuditQuery {
                    action: Some("lock.expired".into()),
                    limit: 10,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(audit.len(), 1);
        assert_eq!(audit[0].entry.actor, alice.actor);
    }

    pub async fn a_run_end_keeps_the_lock_through_the_grace(f: Fixture) {
        let step = f.step("r1", "apply", 1, 86_400).await;
        lock(&f.app, &step, &net(), &lock_doc("S1")).await.unwrap();
        end(&f.app, "r1", Some("cancelled")).await.unwrap();
        let alice = user("alice", Role::Operator);
        f.advance(Duration::seconds(599));
        assert!(
            locked(lock(&f.app, &alice, &net(), &lock_doc("A")).await),
            "live through the grace"
        );
        write(&f.app, &step, &net(), Some("S1"), doc(1))
            .await
            .expect("the step can still save");
        f.advance(Duration::seconds(2));
        lock(&f.app, &alice, &net(), &lock_doc("A"))
            .await
            .expect("taken over after the grace");
        // Ending twice changes nothing; minting for an ended run is refused.
        let again = end(&f.app, "r1", None).await.unwrap();
        assert_eq!(again.status.as_deref(), Some("cancelled"));
        let request = MintRequest {
            org: "acme".into(),
            state: "net".into(),
            step: "s".into(),
            attempt: 1,
            kind: StepKind::Plan,
            timeout_seconds: 10,
            hold: false,
        };
        assert!(matches!(
            mint(&f.app, "r1", &request).await,
            Err(Error::Refused(Refusal::RunEnded { .. }))
        ));
    }

    pub async fn gone_frees_only_that_attempts_lock_at_once(f: Fixture) {
        let first = f.step("r1", "apply", 1, 3600).await;
        lock(&f.app, &first, &net(), &lock_doc("S1")).await.unwrap();
        assert_eq!(gone(&f.app, "r1", "apply", 1).await.unwrap(), 1);
        let second = f.step("r1", "apply", 2, 3600).await;
        lock(&f.app, &second, &net(), &lock_doc("S2"))
            .await
            .expect("attempt 1's lock is dead at once");
        // A late gone report for attempt 1 does not free attempt 2's lock.
        gone(&f.app, "r1", "apply", 1).await.unwrap();
        assert!(locked(
            lock(
                &f.app,
                &user("alice", Role::Operator),
                &net(),
                &lock_doc("A")
            )
            .await
        ));
        // Attempt 1's token no longer works.
        let tokens = f.app.catalog.run_tokens("r1").await.unwrap();
        assert!(
            tokens
                .iter()
                .find(|t| t.step.as_ref().unwrap().attempt == 1)
                .unwrap()
                .revoked
        );
        assert!(
            !tokens
                .iter()
                .find(|t| t.step.as_ref().unwrap().attempt == 2)
                .unwrap()
                .revoked
        );
    }

    pub async fn a_step_never_forces_even_when_operators_may(f: Fixture) {
        let admin = user("root", Role::Admin);
        admin::set_permissions(&f.app, &admin, |mut a| {
            a.manage = Some(Role::Operator);
            a
        })
        .await
        .unwrap();
        let alice = user("alice", Role::Operator);
        lock(&f.app, &alice, &net(), &lock_doc("A")).await.unwrap();
        let step = f.step("r1", "apply", 1, 60).await;
        assert!(matches!(
            unlock(&f.app, &step, &net(), b"").await,
            Err(Error::Refused(Refusal::NotYourLock { .. }))
        ));
        unlock(&f.app, &user("bob", Role::Operator), &net(), b"")
            .await
            .expect("a person with manage forces");
    }

    pub async fn mint_checks_runs_orgs_allocation_and_keys(f: Fixture) {
        let request = |org: &str, hold: bool, kind: StepKind| MintRequest {
            org: org.into(),
            state: "net".into(),
            step: "plan".into(),
            attempt: 1,
            kind,
            timeout_seconds: 100_000,
            hold,
        };
        let (_, record) = mint(&f.app, "r1", &request("acme", true, StepKind::Plan))
            .await
            .unwrap();
        assert_eq!(
            record.expires_at,
            Some(f.app.clock.now() + Duration::hours(24)),
            "capped at 24 h"
        );
        assert!(matches!(
            mint(&f.app, "r1", &request("other", false, StepKind::Plan)).await,
            Err(Error::Refused(Refusal::RunOrgMismatch { .. }))
        ));
        assert!(matches!(
            mint(&f.app, "r2", &request("acme", true, StepKind::Apply)).await,
            Err(Error::Refused(Refusal::InvalidRequest { .. }))
        ));
        assert!(matches!(
            mint(&f.app, "bad/run", &request("acme", false, StepKind::Plan)).await,
            Err(Error::Refused(Refusal::InvalidName { .. }))
        ));
        let admin = user("root", Role::Admin);
        admin::set_permissions(&f.app, &admin, |mut a| {
            a.write = Some(Role::Admin);
            a
        })
        .await
        .unwrap();
        assert!(matches!(
            mint(&f.app, "r3", &request("acme", false, StepKind::Plan)).await,
            Err(Error::Refused(Refusal::PermissionNotAllocated { .. }))
        ));
        let no_key = App {
            keys: None,
            ..clone_app(&f.app)
        };
        assert!(matches!(
            mint(&no_key, "r4", &request("acme", false, StepKind::Plan)).await,
            Err(Error::NoKey)
        ));
    }
}

fn clone_app(app: &App) -> App {
    App {
        catalog: app.catalog.clone(),
        blobs: app.blobs.clone(),
        keys: app.keys.clone(),
        clock: app.clock.clone(),
        limits: app.limits,
    }
}

macro_rules! every_adapter {
    ($($case:ident),* $(,)?) => {
        mod memory_adapter {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() { cases::$case(memory()).await })*
        }
        mod local_adapter {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() { cases::$case(local_store()).await })*
        }
    };
}

every_adapter!(
    a_step_lock_lives_as_long_as_its_token_then_is_taken_over,
    a_run_end_keeps_the_lock_through_the_grace,
    gone_frees_only_that_attempts_lock_at_once,
    a_step_never_forces_even_when_operators_may,
    mint_checks_runs_orgs_allocation_and_keys,
);
