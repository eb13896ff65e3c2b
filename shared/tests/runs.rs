//! Runs over the memory and local adapters, with a clock the tests move: step tokens, the
//! liveness of their locks, a run's end and its grace, gone reports, and the takeover of a
//! dead lock by the next change.

use hegemony_state::domain::actor::StepKind;
use hegemony_state::domain::permission::Role;
use hegemony_state::domain::version::Ended;
use hegemony_state::domain::{Actor, Principal, Refusal};
use hegemony_state::ports::AuditQuery;
use hegemony_state::service::auth::{authenticate, Caller};
use hegemony_state::service::lock::{lock, unlock};
use hegemony_state::service::runs::{end, gone, mint, MintRequest};
use hegemony_state::service::state::write;
use hegemony_state::service::{admin, App, Error};
use time::Duration;

mod support;

use support::{net, user, Fixture};

/// Mints a token for `step` attempt `attempt` of `run` on `net` and returns its principal.
async fn step(f: &Fixture, run: &str, step: &str, attempt: u32, timeout: u64) -> Principal {
    step_of(f, run, step, attempt, timeout, StepKind::Plan, false).await
}

async fn step_of(
    f: &Fixture,
    run: &str,
    step: &str,
    attempt: u32,
    timeout: u64,
    kind: StepKind,
    hold: bool,
) -> Principal {
    let request = MintRequest {
        org: "acme".into(),
        state: "net".into(),
        step: step.into(),
        attempt,
        kind,
        timeout_seconds: timeout,
        hold,
    };
    let (token, _) = mint(&f.app, run, &request).await.unwrap();
    match authenticate(&f.app, &token).await.unwrap() {
        Caller::Org(p) => *p,
        other => panic!("{other:?}"),
    }
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

fn held_by<T>(result: Result<T, Error>, run: &str) -> bool {
    matches!(result, Err(Error::Refused(Refusal::Locked { ref lock_id, ref document, .. }))
        if *lock_id == format!("hold-{run}") && document.contains("\"Operation\":\"hold\""))
}

async fn hold_of(f: &Fixture) -> Option<String> {
    let record = f.app.catalog.state("acme", "net").await.unwrap();
    record.and_then(|r| r.hold).map(|h| h.run)
}

/// The `lock.expired` entries of the audit, newest first.
async fn expired_audit(f: &Fixture) -> Vec<hegemony_state::ports::AuditRecord> {
    let query = AuditQuery {
        action: Some("lock.expired".into()),
        limit: 10,
        ..Default::default()
    };
    f.app.catalog.audit("acme", &query).await.unwrap()
}

mod cases {
    use super::*;
    use hegemony_state::service::manage::{delete as delete_state, force_unlock, rollback};

    pub async fn a_hold_keeps_the_state_for_its_run_from_plan_to_apply(f: Fixture) {
        let plan = step_of(&f, "r1", "plan", 1, 600, StepKind::Plan, true).await;
        lock(&f.app, &plan, &net(), &lock_doc("P")).await.unwrap();
        write(&f.app, &plan, &net(), Some("P"), doc(1))
            .await
            .unwrap();
        unlock(&f.app, &plan, &net(), &lock_doc("P")).await.unwrap();
        assert_eq!(
            hold_of(&f).await.as_deref(),
            Some("r1"),
            "the plan's release leaves the hold"
        );
        let alice = user("alice", Role::Admin);
        assert!(held_by(
            lock(&f.app, &alice, &net(), &lock_doc("A")).await,
            "r1"
        ));
        assert!(held_by(
            write(&f.app, &alice, &net(), None, doc(2))
                .await
                .map(|_| ()),
            "r1"
        ));
        assert!(held_by(
            rollback(&f.app, &alice, &net(), 1).await.map(|_| ()),
            "r1"
        ));
        assert!(held_by(delete_state(&f.app, &alice, &net()).await, "r1"));
        let other_run = step_of(&f, "r2", "apply", 1, 600, StepKind::Apply, false).await;
        assert!(held_by(
            lock(&f.app, &other_run, &net(), &lock_doc("O")).await,
            "r1"
        ));
        assert!(
            support::read(&f.app, &alice, &net())
                .await
                .unwrap()
                .is_some(),
            "reading works"
        );
        // The run's apply gets in; its expiry or gone report would not end the hold, its release does.
        let apply = step_of(&f, "r1", "apply", 1, 600, StepKind::Apply, false).await;
        lock(&f.app, &apply, &net(), &lock_doc("AP")).await.unwrap();
        write(&f.app, &apply, &net(), Some("AP"), doc(2))
            .await
            .unwrap();
        unlock(&f.app, &apply, &net(), &lock_doc("AP"))
            .await
            .unwrap();
        assert_eq!(hold_of(&f).await, None);
        lock(&f.app, &alice, &net(), &lock_doc("A")).await.unwrap();
    }

    pub async fn a_hold_ends_with_its_run_and_not_with_its_tokens(f: Fixture) {
        let plan = step_of(&f, "r1", "plan", 1, 60, StepKind::Plan, true).await;
        lock(&f.app, &plan, &net(), &lock_doc("P")).await.unwrap();
        unlock(&f.app, &plan, &net(), &lock_doc("P")).await.unwrap();
        gone(&f.app, "r1", "plan", 1).await.unwrap();
        f.advance(Duration::hours(2));
        assert_eq!(
            hold_of(&f).await.as_deref(),
            Some("r1"),
            "no expiry or gone report ends it"
        );
        end(&f.app, "r1", Some("no changes")).await.unwrap();
        assert_eq!(hold_of(&f).await, None, "the run's end does");
        lock(
            &f.app,
            &user("alice", Role::Operator),
            &net(),
            &lock_doc("A"),
        )
        .await
        .unwrap();
    }

    pub async fn forcing_ends_holds_and_hold_ids_end_only_the_hold(f: Fixture) {
        let admin = user("root", Role::Admin);
        let plan = step_of(&f, "r1", "plan", 1, 600, StepKind::Plan, true).await;
        lock(&f.app, &plan, &net(), &lock_doc("P")).await.unwrap();
        // A step never forces, not even its own run's hold.
        assert!(matches!(
            unlock(&f.app, &plan, &net(), br#"{"ID":"hold-r1"}"#).await,
            Err(Error::Refused(Refusal::NotYourLock { .. }))
        ));
        // hold-<run> ends the hold and leaves the lock alone.
        unlock(&f.app, &admin, &net(), br#"{"ID":"hold-r1"}"#)
            .await
            .unwrap();
        let record = f.app.catalog.state("acme", "net").await.unwrap().unwrap();
        assert!(record.hold.is_none() && record.lock.is_some());
        // An empty forced unlock ends both.
        unlock(&f.app, &plan, &net(), &lock_doc("P")).await.unwrap();
        let plan2 = step_of(&f, "r2", "plan", 1, 600, StepKind::Plan, true).await;
        lock(&f.app, &plan2, &net(), &lock_doc("P2")).await.unwrap();
        unlock(&f.app, &admin, &net(), b"").await.unwrap();
        assert!(f
            .app
            .catalog
            .state("acme", "net")
            .await
            .unwrap()
            .is_none_or(|r| r.hold.is_none() && r.lock.is_none()));
        // The force-unlock route releases a hold alone too.
        write(&f.app, &admin, &net(), None, doc(1)).await.unwrap();
        let plan3 = step_of(&f, "r3", "plan", 1, 600, StepKind::Plan, true).await;
        lock(&f.app, &plan3, &net(), &lock_doc("P3")).await.unwrap();
        unlock(&f.app, &plan3, &net(), &lock_doc("P3"))
            .await
            .unwrap();
        let released = force_unlock(&f.app, &admin, &net()).await.unwrap();
        assert!(released.lock.is_none());
        assert_eq!(released.hold.map(|h| h.run).as_deref(), Some("r3"));
    }

    pub async fn a_step_lock_lives_as_long_as_its_token_then_is_taken_over(f: Fixture) {
        let step = step(&f, "r1", "apply", 1, 60).await;
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
        let audit = expired_audit(&f).await;
        assert_eq!(audit.len(), 1);
        assert_eq!(audit[0].entry.actor, alice.actor);
    }

    pub async fn a_run_end_keeps_the_lock_through_the_grace(f: Fixture) {
        let step = step(&f, "r1", "apply", 1, 86_400).await;
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
        let first = step(&f, "r1", "apply", 1, 3600).await;
        lock(&f.app, &first, &net(), &lock_doc("S1")).await.unwrap();
        assert_eq!(gone(&f.app, "r1", "apply", 1).await.unwrap(), 1);
        let second = step(&f, "r1", "apply", 2, 3600).await;
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

    /// A lock request authenticated before its run's end, deciding and committing after the
    /// end read the run's items (so the end lowered nothing): the lock still lives no longer
    /// than the end plus the grace, and sets no hold.
    pub async fn a_lock_that_raced_its_runs_end_lives_no_longer_than_the_grace(f: Fixture) {
        let plan = step_of(&f, "r1", "plan", 1, 86_400, StepKind::Plan, true).await;
        end(&f.app, "r1", Some("cancelled")).await.unwrap();
        lock(&f.app, &plan, &net(), &lock_doc("P")).await.unwrap();
        assert_eq!(hold_of(&f).await, None, "no hold for an ended run");
        let alice = user("alice", Role::Operator);
        f.advance(Duration::seconds(599));
        assert!(
            locked(lock(&f.app, &alice, &net(), &lock_doc("A")).await),
            "live through the grace"
        );
        f.advance(Duration::seconds(2));
        lock(&f.app, &alice, &net(), &lock_doc("A"))
            .await
            .expect("taken over once the grace has passed, not when the token expires");
    }

    /// A lock request authenticated before its attempt's gone report and committing after the
    /// report read the run's items: refused as the token now is, never a lock no one can free.
    pub async fn a_lock_that_raced_its_attempts_gone_report_is_refused(f: Fixture) {
        let apply = step(&f, "r1", "apply", 1, 86_400).await;
        assert_eq!(gone(&f.app, "r1", "apply", 1).await.unwrap(), 1);
        assert!(matches!(
            lock(&f.app, &apply, &net(), &lock_doc("S1")).await,
            Err(Error::Unauthenticated(_))
        ));
        lock(
            &f.app,
            &user("alice", Role::Operator),
            &net(),
            &lock_doc("A"),
        )
        .await
        .expect("nothing is left locked");
    }

    pub async fn the_sweeper_clears_dead_locks_of_ended_runs_and_expired_tokens(f: Fixture) {
        use hegemony_state::service::sweep::sweep;
        let step = step(&f, "r1", "apply", 1, 60).await;
        lock(&f.app, &step, &net(), &lock_doc("S1")).await.unwrap();
        write(&f.app, &step, &net(), Some("S1"), doc(1))
            .await
            .unwrap();
        end(&f.app, "r1", None).await.unwrap();
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(report.locks_cleared, 0, "live through the grace");
        f.advance(Duration::seconds(601));
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!((report.locks_cleared, report.tokens_dropped), (1, 1));
        let record = f.app.catalog.state("acme", "net").await.unwrap().unwrap();
        assert!(record.lock.is_none());
        assert_eq!(record.latest.unwrap().change.ended, Ended::Expired);
        let audit = expired_audit(&f).await;
        assert_eq!(audit[0].entry.actor, Actor::Sweeper);
        let again = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(
            (again.locks_cleared, again.tokens_dropped),
            (0, 0),
            "the run is forgotten, the token gone"
        );
        assert!(f.app.catalog.run_tokens("r1").await.unwrap().is_empty());
    }

    /// A run's end ends its holds in writes after recording the end; if one of those fails,
    /// the hold would stand until a force unlock. The sweeper finishes the job.
    pub async fn the_sweeper_ends_holds_a_failed_run_end_left(f: Fixture) {
        use hegemony_state::service::sweep::sweep;
        let plan = step_of(&f, "r1", "plan", 1, 60, StepKind::Plan, true).await;
        lock(&f.app, &plan, &net(), &lock_doc("P")).await.unwrap();
        write(&f.app, &plan, &net(), Some("P"), doc(1))
            .await
            .unwrap();
        unlock(&f.app, &plan, &net(), &lock_doc("P")).await.unwrap();
        // The end recorded, as a run end whose later writes failed leaves it.
        f.app
            .catalog
            .end_run("r1", f.app.clock.now(), None)
            .await
            .unwrap();
        assert_eq!(hold_of(&f).await.as_deref(), Some("r1"));
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(report.holds_cleared, 1);
        assert_eq!(hold_of(&f).await, None);
        let again = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(again.holds_cleared, 0, "idempotent");
    }

    /// A run's items used to stay for ever. Once the run is settled and a day has passed
    /// (every token it had is expired), the sweeper prunes them, a bounded number a pass;
    /// the run's ended marker stays, so a late mint for the same run id is still refused.
    pub async fn the_sweeper_prunes_a_settled_runs_items_and_the_run_stays_ended(f: Fixture) {
        use hegemony_state::service::sweep::{sweep, PRUNE_AFTER};
        for attempt in 1..=3 {
            let step = step(&f, "r1", "apply", attempt, 60).await;
            let id = format!("S{attempt}");
            lock(&f.app, &step, &net(), &lock_doc(&id)).await.unwrap();
            unlock(&f.app, &step, &net(), &lock_doc(&id)).await.unwrap();
        }
        assert_eq!(f.app.catalog.run_items("r1").await.unwrap().len(), 3);
        end(&f.app, "r1", None).await.unwrap();
        f.advance(Duration::seconds(601));
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(report.runs_pruned, 0, "settled, not yet pruned");
        f.advance(PRUNE_AFTER - Duration::seconds(602));
        assert_eq!(
            sweep(&f.app, f.app.clock.now()).await.unwrap().runs_pruned,
            0
        );
        assert_eq!(f.app.catalog.run_items("r1").await.unwrap().len(), 3);
        f.advance(Duration::seconds(2));
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(report.runs_pruned, 1);
        assert!(f.app.catalog.run_items("r1").await.unwrap().is_empty());
        assert!(f.app.catalog.run_tokens("r1").await.unwrap().is_empty());
        let again = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(again.runs_pruned, 0, "idempotent");
        let late = MintRequest {
            org: "acme".into(),
            state: "net".into(),
            step: "apply".into(),
            attempt: 4,
            kind: StepKind::Apply,
            timeout_seconds: 60,
            hold: false,
        };
        assert!(matches!(
            mint(&f.app, "r1", &late).await,
            Err(Error::Refused(Refusal::RunEnded { .. }))
        ));
        assert!(end(&f.app, "r1", None).await.unwrap().ended_at.is_some());
        assert_eq!(gone(&f.app, "r1", "apply", 1).await.unwrap(), 0);
    }

    /// A token of the run that still works (minted by a process whose clock was far behind)
    /// keeps the run's items until it expires: they are pruned only once its tokens are dead.
    pub async fn a_run_with_a_token_that_still_works_is_not_pruned(f: Fixture) {
        use hegemony_state::domain::actor::StepGrant;
        use hegemony_state::service::sweep::{sweep, PRUNE_AFTER};
        use hegemony_state::service::tokens::{self, NewToken};
        let step = step(&f, "r3", "apply", 1, 60).await;
        lock(&f.app, &step, &net(), &lock_doc("S1")).await.unwrap();
        unlock(&f.app, &step, &net(), &lock_doc("S1"))
            .await
            .unwrap();
        let late = StepGrant {
            token_id: String::new(),
            run: "r3".into(),
            step: "apply".into(),
            attempt: 2,
            state: "net".into(),
            kind: StepKind::Apply,
            hold: false,
            expires_at: f.app.clock.now() + PRUNE_AFTER + Duration::hours(2),
            token_hash: String::new(),
        };
        let new = NewToken::Step {
            org: "acme",
            grant: late,
        };
        tokens::create(
            f.app.catalog.as_ref(),
            new,
            &Actor::Platform,
            f.app.clock.now(),
        )
        .await
        .unwrap();
        end(&f.app, "r3", None).await.unwrap();
        f.advance(Duration::seconds(601));
        sweep(&f.app, f.app.clock.now()).await.unwrap();
        f.advance(PRUNE_AFTER);
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(report.runs_pruned, 0, "a token of the run still works");
        assert_eq!(f.app.catalog.run_items("r3").await.unwrap().len(), 1);
        f.advance(Duration::hours(3));
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(report.runs_pruned, 1, "its last token has expired");
    }

    /// A pass prunes at most its budget of items; a run with more goes on at the next.
    pub async fn pruning_is_bounded_per_pass_and_goes_on_at_the_next(f: Fixture) {
        use hegemony_state::service::sweep::PRUNE_AFTER;
        for attempt in 1..=3 {
            let step = step(&f, "r2", "apply", attempt, 60).await;
            let id = format!("S{attempt}");
            lock(&f.app, &step, &net(), &lock_doc(&id)).await.unwrap();
            unlock(&f.app, &step, &net(), &lock_doc(&id)).await.unwrap();
        }
        end(&f.app, "r2", None).await.unwrap();
        f.advance(Duration::seconds(601));
        hegemony_state::service::sweep::sweep(&f.app, f.app.clock.now())
            .await
            .unwrap();
        f.advance(PRUNE_AFTER);
        let before = f.app.clock.now() - PRUNE_AFTER;
        assert_eq!(
            f.app.catalog.settled_runs(before, 10).await.unwrap(),
            ["r2"]
        );
        assert_eq!(f.app.catalog.prune_run("r2", 2).await.unwrap(), (2, false));
        assert_eq!(f.app.catalog.run_items("r2").await.unwrap().len(), 1);
        assert_eq!(
            f.app.catalog.settled_runs(before, 10).await.unwrap(),
            ["r2"]
        );
        assert_eq!(f.app.catalog.prune_run("r2", 2).await.unwrap(), (1, true));
        assert_eq!(f.app.catalog.prune_run("r2", 2).await.unwrap(), (0, true));
        assert!(f
            .app
            .catalog
            .run("r2")
            .await
            .unwrap()
            .unwrap()
            .ended_at
            .is_some());
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
        let step = step(&f, "r1", "apply", 1, 60).await;
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
        assert!(
            f.app.catalog.org("acme").await.unwrap().is_some(),
            "the first mint creates the org"
        );
        assert_eq!(
            record.expires_at,
            Some(f.app.clock.now() + Duration::hours(24)),
            "capped at 24 h"
        );
        assert!(matches!(
            mint(&f.app, "r1", &request("other", false, StepKind::Plan)).await,
            Err(Error::Refused(Refusal::RunOrgMismatch { .. }))
        ));
        assert!(
            f.app.catalog.org("other").await.unwrap().is_none(),
            "a refused mint creates no org"
        );
        end(&f.app, "ended", None).await.unwrap();
        assert!(matches!(
            mint(&f.app, "ended", &request("third", false, StepKind::Plan)).await,
            Err(Error::Refused(Refusal::RunEnded { .. }))
        ));
        assert!(
            f.app.catalog.org("third").await.unwrap().is_none(),
            "a mint for an ended run creates no org"
        );
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
            catalog: f.app.catalog.clone(),
            blobs: f.app.blobs.clone(),
            index_keys: Default::default(),
            key_cache: hegemony_state::service::key_cache::KeyCache::off(),
            clock: f.app.clock.clone(),
            limits: f.app.limits,
            links: Default::default(),
            issuers: hegemony_state::service::issuers::Issuers::off(),
            metrics: std::sync::Arc::new(hegemony_state::ports::Unmeasured),
        };
        assert!(matches!(
            mint(&no_key, "r4", &request("acme", false, StepKind::Plan)).await,
            Err(Error::NoKey)
        ));
    }

    /// Any positive timeout is allowed; the largest ones must clamp to the cap, not overflow
    /// adding the margin (which took the whole server down).
    pub async fn the_largest_timeouts_clamp_to_the_cap(f: Fixture) {
        for (run, timeout_seconds) in [("r1", i64::MAX as u64), ("r2", u64::MAX)] {
            let request = MintRequest {
                org: "acme".into(),
                state: "net".into(),
                step: "plan".into(),
                attempt: 1,
                kind: StepKind::Plan,
                timeout_seconds,
                hold: false,
            };
            let (_, record) = mint(&f.app, run, &request).await.unwrap();
            assert_eq!(
                record.expires_at,
                Some(f.app.clock.now() + Duration::hours(24)),
                "{timeout_seconds} s is capped at 24 h"
            );
        }
    }
}

every_adapter!(support::limits(50);
    a_step_lock_lives_as_long_as_its_token_then_is_taken_over,
    a_run_end_keeps_the_lock_through_the_grace,
    gone_frees_only_that_attempts_lock_at_once,
    a_lock_that_raced_its_runs_end_lives_no_longer_than_the_grace,
    a_lock_that_raced_its_attempts_gone_report_is_refused,
    a_step_never_forces_even_when_operators_may,
    mint_checks_runs_orgs_allocation_and_keys,
    the_largest_timeouts_clamp_to_the_cap,
    a_hold_keeps_the_state_for_its_run_from_plan_to_apply,
    a_hold_ends_with_its_run_and_not_with_its_tokens,
    forcing_ends_holds_and_hold_ids_end_only_the_hold,
    the_sweeper_clears_dead_locks_of_ended_runs_and_expired_tokens,
    the_sweeper_ends_holds_a_failed_run_end_left,
    the_sweeper_prunes_a_settled_runs_items_and_the_run_stays_ended,
    pruning_is_bounded_per_pass_and_goes_on_at_the_next,
    a_run_with_a_token_that_still_works_is_not_pruned,
);
