//! A model-based test: random sequences of mints, locks, unlocks, writes, force unlocks,
//! run ends (one while a step locks), gone reports, clock moves, rollbacks and deletes by random principals, run on
//! the memory and local adapters. After every step the invariants are checked against what
//! the service answered and what is stored:
//!
//! - at most one live lock: a lock is granted only when no one else's lock is live;
//! - a held state is written (or locked) only by its run's steps;
//! - a released version never changes;
//! - no version stays open once the lock that opened it has ended: an open version is one
//!   the record's lock (live, or dead and not yet taken over) opened;
//! - a step's lock lives no longer than its run's end plus the grace (a run may end while
//!   a step's lock request is under way), and not at all once its attempt is gone;
//! - nothing acknowledged is lost: every version a write, import or rollback answered for
//!   still reads back as it was, unless its own lock's later save replaced it or it was
//!   deleted.

use std::collections::HashMap;

use hegemony_state::domain::actor::StepKind;
use hegemony_state::domain::permission::Role;
use hegemony_state::domain::record::StateRecord;
use hegemony_state::domain::version::Ended;
use hegemony_state::domain::{Principal, Timestamp};
use hegemony_state::service::auth::{authenticate, Caller};
use hegemony_state::service::lock::{lock, unlock};
use hegemony_state::service::manage::{delete, download, force_unlock, rollback};
use hegemony_state::service::runs::{end, gone, mint, MintRequest};
use hegemony_state::service::state::{write, WriteOutcome};
use proptest::prelude::*;
use time::Duration;

mod support;

use support::{fixture, net, plaintext, user, Adapter, Fixture};

#[derive(Debug, Clone)]
enum Op {
    Mint {
        run: u8,
        apply: bool,
        attempt: u8,
        hold: bool,
    },
    Lock {
        who: u8,
        id: u8,
    },
    Unlock {
        who: u8,
        body: u8,
    },
    Write {
        who: u8,
        with_id: bool,
        stale: bool,
    },
    ForceUnlock,
    RunEnd {
        run: u8,
    },
    /// A step's lock request, authenticated before its run's end, commits after it.
    RunEndsWhileLocking {
        who: u8,
        id: u8,
    },
    Gone {
        run: u8,
        apply: bool,
        attempt: u8,
    },
    Advance {
        seconds: u16,
    },
    Rollback {
        who: u8,
        version: u8,
    },
    Delete,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0..3u8, any::<bool>(), 1..3u8, any::<bool>()).prop_map(|(run, apply, attempt, hold)| Op::Mint { run, apply, attempt, hold }),
        4 => (any::<u8>(), 0..3u8).prop_map(|(who, id)| Op::Lock { who, id }),
        3 => (any::<u8>(), 0..4u8).prop_map(|(who, body)| Op::Unlock { who, body }),
        4 => (any::<u8>(), any::<bool>(), prop::bool::weighted(0.15)).prop_map(|(who, with_id, stale)| Op::Write { who, with_id, stale }),
        1 => Just(Op::ForceUnlock),
        1 => (0..3u8).prop_map(|run| Op::RunEnd { run }),
        1 => (any::<u8>(), 0..3u8).prop_map(|(who, id)| Op::RunEndsWhileLocking { who, id }),
        1 => (0..3u8, any::<bool>(), 1..3u8).prop_map(|(run, apply, attempt)| Op::Gone { run, apply, attempt }),
        2 => (1..900u16).prop_map(|seconds| Op::Advance { seconds }),
        1 => (any::<u8>(), 1..6u8).prop_map(|(who, version)| Op::Rollback { who, version }),
        1 => Just(Op::Delete),
    ]
}

/// What the test has been told: acknowledged content by version number (of the current
/// incarnation), and the content of every released version.
#[derive(Default)]
struct Seen {
    acknowledged: HashMap<u64, Vec<u8>>,
    released: HashMap<u64, String>,
}

struct World {
    f: Fixture,
    principals: Vec<Principal>,
    admin: Principal,
    seen: Seen,
}

fn world(adapter: Adapter) -> World {
    World {
        f: fixture(adapter, support::limits(1000)),
        principals: vec![user("alice", Role::Operator), user("bob", Role::Operator)],
        admin: user("root", Role::Admin),
        seen: Seen::default(),
    }
}

impl World {
    fn now(&self) -> Timestamp {
        self.f.app.clock.now()
    }

    fn who(&self, i: u8) -> Principal {
        self.principals[i as usize % self.principals.len()].clone()
    }

    async fn record(&self) -> Option<StateRecord> {
        self.f.app.catalog.state("acme", "net").await.unwrap()
    }

    /// Whether `p` may take or write under the state now, by the stored truth: no one else's
    /// live lock and no other run's hold.
    fn free_for(record: &Option<StateRecord>, p: &Principal, now: Timestamp) -> (bool, bool) {
        let Some(r) = record else { return (true, true) };
        let lock_free = r.live_lock(now).is_none_or(|l| l.is_held_by(p));
        let hold_free = r
            .hold
            .as_ref()
            .is_none_or(|h| p.step.as_ref().is_some_and(|g| g.run == h.run));
        (lock_free, hold_free)
    }

    async fn apply(&mut self, op: &Op) {
        let now = self.now();
        let before = self.record().await;
        match op.clone() {
            Op::Mint {
                run,
                apply,
                attempt,
                hold,
            } => {
                let request = MintRequest {
                    org: "acme".into(),
                    state: "net".into(),
                    step: if apply { "apply" } else { "plan" }.into(),
                    attempt: attempt as u32,
                    kind: if apply {
                        StepKind::Apply
                    } else {
                        StepKind::Plan
                    },
                    timeout_seconds: 600,
                    hold: hold && !apply,
                };
                if let Ok((token, _)) = mint(&self.f.app, &format!("r{run}"), &request).await {
                    if let Ok(Caller::Org(p)) = authenticate(&self.f.app, &token).await {
                        self.principals.push(*p);
                    }
                }
            }
            Op::Lock { who, id } => {
                let p = self.who(who);
                let result = lock(
                    &self.f.app,
                    &p,
                    &net(),
                    format!(r#"{{"ID":"L{id}"}}"#).as_bytes(),
                )
                .await;
                let (lock_free, hold_free) = Self::free_for(&before, &p, now);
                if result.is_ok() {
                    assert!(
                        lock_free,
                        "a lock was granted while someone else's lock was live: {op:?}"
                    );
                    assert!(
                        hold_free,
                        "a lock was granted through another run's hold: {op:?}"
                    );
                }
            }
            Op::Unlock { who, body } => {
                let p = self.who(who);
                let body = match body {
                    0 => Vec::new(),
                    1 => br#"{"ID":"L0"}"#.to_vec(),
                    2 => br#"{"ID":"L1"}"#.to_vec(),
                    _ => br#"{"ID":"hold-r0"}"#.to_vec(),
                };
                let _ = unlock(&self.f.app, &p, &net(), &body).await;
            }
            Op::Write {
                who,
                with_id,
                stale,
            } => {
                let p = self.who(who);
                let serial = before
                    .as_ref()
                    .and_then(|r| r.latest.as_ref())
                    .and_then(|l| l.serial)
                    .unwrap_or(0);
                let serial = if stale {
                    serial.saturating_sub(1)
                } else {
                    serial + 1
                };
                let id = before
                    .as_ref()
                    .and_then(|r| r.live_lock(now))
                    .map(|l| l.id().to_owned())
                    .filter(|_| with_id);
                let body = format!(
                    r#"{{"version":4,"serial":{serial},"lineage":"l","outputs":{{"t":"{now}"}}}}"#
                )
                .into_bytes();
                let result = write(&self.f.app, &p, &net(), id.as_deref(), body.clone()).await;
                let (lock_free, hold_free) = Self::free_for(&before, &p, now);
                if let Ok(outcome) = result {
                    assert!(
                        lock_free && hold_free,
                        "a write got through someone else's lock or hold: {op:?} {outcome:?}"
                    );
                    match outcome {
                        WriteOutcome::Created { version } | WriteOutcome::Replaced { version } => {
                            self.seen.acknowledged.insert(version, body);
                        }
                        WriteOutcome::Unchanged => {}
                    }
                }
            }
            Op::ForceUnlock => {
                let _ = force_unlock(&self.f.app, &self.admin, &net()).await;
            }
            Op::RunEnd { run } => {
                end(&self.f.app, &format!("r{run}"), None).await.unwrap();
            }
            Op::RunEndsWhileLocking { who, id } => {
                let p = self.who(who);
                if let Some(grant) = &p.step {
                    end(&self.f.app, &grant.run, None).await.unwrap();
                }
                let before = self.record().await;
                let result = lock(
                    &self.f.app,
                    &p,
                    &net(),
                    format!(r#"{{"ID":"L{id}"}}"#).as_bytes(),
                )
                .await;
                let (lock_free, hold_free) = Self::free_for(&before, &p, now);
                if result.is_ok() {
                    assert!(
                        lock_free && hold_free,
                        "a lock was granted through someone else's lock or hold: {op:?}"
                    );
                }
            }
            Op::Gone {
                run,
                apply,
                attempt,
            } => {
                gone(
                    &self.f.app,
                    &format!("r{run}"),
                    if apply { "apply" } else { "plan" },
                    attempt as u32,
                )
                .await
                .unwrap();
            }
            Op::Advance { seconds } => {
                self.f.advance(Duration::seconds(seconds as i64));
            }
            Op::Rollback { who, version } => {
                let p = self.who(who);
                let result = rollback(&self.f.app, &p, &net(), version as u64).await;
                let (lock_free, hold_free) = Self::free_for(&before, &p, now);
                if let Ok(v) = result {
                    assert!(
                        lock_free
                            && hold_free
                            && before.as_ref().is_none_or(|r| r.live_lock(now).is_none()),
                        "a rollback got through a lock or hold: {op:?}"
                    );
                    let bytes = plaintext(
                        download(&self.f.app, &self.admin, &net(), v.version)
                            .await
                            .unwrap(),
                    );
                    self.seen.acknowledged.insert(v.version, bytes);
                }
            }
            Op::Delete => {
                if delete(&self.f.app, &self.admin, &net()).await.is_ok() {
                    self.seen = Seen::default();
                }
            }
        }
        self.check().await;
    }

    /// Released versions never change; none stays open past its lock; acknowledged content is
    /// never lost.
    async fn check(&mut self) {
        let Some(record) = self.record().await else {
            return;
        };
        if !record.is_visible() {
            return;
        }
        let versions = self
            .f
            .app
            .catalog
            .versions("acme", "net", &record.incarnation)
            .await
            .unwrap();
        let opened: Vec<u64> = record
            .lock
            .iter()
            .flat_map(|l| l.versions_opened())
            .collect();
        for v in &versions {
            assert!(
                v.change.ended != Ended::Open || opened.contains(&v.version),
                "version {} is open but no lock holds it open (the lock's: {opened:?})",
                v.version
            );
            if v.change.ended != Ended::Open {
                let sha = self
                    .seen
                    .released
                    .entry(v.version)
                    .or_insert_with(|| v.sha256.clone());
                assert_eq!(*sha, v.sha256, "released version {} changed", v.version);
            }
        }
        for (version, body) in &self.seen.acknowledged {
            let stored = plaintext(
                download(&self.f.app, &self.admin, &net(), *version)
                    .await
                    .unwrap(),
            );
            assert_eq!(
                &stored, body,
                "acknowledged version {version} was lost or changed"
            );
        }
        assert!(versions.iter().all(|v| v.version < record.next_version));
        self.check_step_lock(&record).await;
    }

    /// A step's lock lives no longer than its run's end plus the grace, and not at all once
    /// its token is revoked (its attempt's gone report).
    async fn check_step_lock(&self, record: &StateRecord) {
        let now = self.now();
        let Some(lock) = record.live_lock(now) else {
            return;
        };
        let Some(token_id) = &lock.token else { return };
        let catalog = &self.f.app.catalog;
        let token = catalog.tokens().await.unwrap();
        let token = token.iter().find(|t| t.id == *token_id).unwrap();
        assert!(!token.revoked, "a revoked step token's lock is live");
        let run = &token.step.as_ref().unwrap().run;
        let ended = catalog.run(run).await.unwrap().and_then(|r| r.ended_at);
        if let Some(ended) = ended {
            let last = ended + self.f.app.limits.run_end_grace;
            assert!(
                lock.live_until.is_some_and(|until| until <= last),
                "a step's lock outlives its run's end plus the grace: {:?} > {last}",
                lock.live_until
            );
        }
    }
}

fn run_model(make: impl Fn() -> World, cases: u32) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(ops in prop::collection::vec(op(), 1..40))| {
        runtime.block_on(async {
            let mut world = make();
            for op in &ops {
                world.apply(op).await;
            }
        });
    });
}

#[test]
fn the_model_holds_on_the_memory_adapter() {
    run_model(|| world(Adapter::Memory), 96);
}

#[test]
fn the_model_holds_on_the_local_adapter() {
    run_model(|| world(Adapter::Local), 24);
}
