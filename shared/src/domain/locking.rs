//! The lock and unlock rules: (record, request, principal, now) -> decision. No I/O, no
//! status codes.

use super::actor::StepKind;
use super::hold::check_hold;
use super::lock::{Lock, LockDocument, UnlockRequest, HOLD_ID_PREFIX};
use super::permission::{Allocation, Permission};
use super::record::StateRecord;
use super::{rfc3339, Actor, Principal, Refusal, Timestamp};

/// What a lock request gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockDecision {
    /// Take this lock.
    Granted(Box<Lock>),
    /// The caller already holds the lock with this ID: a retried request.
    AlreadyHeld,
}

/// Decides a lock request.
///
/// # Errors
/// `Locked` with the holder's document when another lock is live, or when the caller holds
/// the state under a different ID.
pub fn decide_lock(
    record: &StateRecord,
    mut document: LockDocument,
    principal: &Principal,
    now: Timestamp,
) -> Result<LockDecision, Refusal> {
    let requested = Some(document.id.as_str());
    if let Some(lock) = record.live_lock(now) {
        if lock.id() == document.id && lock.is_held_by(principal) {
            return Ok(LockDecision::AlreadyHeld);
        }
        return Err(lock.refusal(requested));
    }
    check_hold(record.hold.as_ref(), principal, requested)?;
    if document.info.as_deref().unwrap_or("").is_empty() {
        // Newer clients print the holder's Info on a conflict: make it say who and since when.
        document.info = Some(format!(
            "{} since {}",
            principal.actor.describe(),
            rfc3339(now)
        ));
    }
    if let Actor::Workload(job) = &principal.actor {
        // The runner's user@host says nothing of which job it ran: Who names the job (the
        // runner kept beside it), so whoever waits knows which job to wait for or cancel.
        document.who = Some(match document.who.as_deref().filter(|w| !w.is_empty()) {
            Some(runner) => format!("{} on {runner}", job.describe()),
            None => job.describe(),
        });
    }
    // A step's lock lives as long as its token, a workload session's until the session's end
    // plus the grace; a person's never expires.
    let (live_until, token) = match (&principal.step, &principal.session) {
        (Some(step), _) => (Some(step.expires_at), Some(step.token_id.clone())),
        (None, Some(session)) => (
            Some(session.locks_live_until),
            Some(session.token_id.clone()),
        ),
        (None, None) => (None, None),
    };
    Ok(LockDecision::Granted(Box::new(Lock {
        document,
        holder: principal.actor.clone(),
        since: now,
        live_until,
        version_opened: None,
        earlier_versions_opened: Vec::new(),
        token,
    })))
}

/// What an unlock request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnlockDecision {
    /// Nothing to release: 200, for retried requests.
    NotLocked,
    /// Release the lock; `forced` when the caller is not its holder; `end_hold` when the run's
    /// hold ends with it (a force, or the run's apply releasing its lock).
    Release { forced: bool, end_hold: bool },
    /// End the run's hold and leave any lock alone (`hold-<run>` named, or an empty forced
    /// unlock when only a hold stands).
    EndHold,
}

/// Decides an unlock request. A named ID must be the current lock's (or the hold's); the
/// holder releases its own lock, and releasing anyone else's lock or a hold is a force that
/// needs tf_state:manage, which a step token never has.
///
/// # Errors
/// `LockIdMismatch` for an ID that is neither the current lock's nor the hold's;
/// `NotYourLock` for a force without tf_state:manage.
pub fn decide_unlock(
    record: &StateRecord,
    request: &UnlockRequest,
    principal: &Principal,
    allocation: &Allocation,
    now: Timestamp,
) -> Result<UnlockDecision, Refusal> {
    // Forcing is a person's act: a step or a CI job releases its own lock only.
    let may_force = principal.step.is_none()
        && principal.session.is_none()
        && allocation.allows(principal.role, Permission::Manage);
    let refuse_force = |holder: String, lock_id: String| Refusal::NotYourLock { holder, lock_id };
    let hold = record.hold.as_ref();
    let live = record.live_lock(now);
    if let UnlockRequest::Named(id) = request {
        if id.starts_with(HOLD_ID_PREFIX) {
            return match hold.filter(|h| h.id() == *id) {
                Some(_) if may_force => Ok(UnlockDecision::EndHold),
                Some(h) => Err(refuse_force(format!("run {}", h.run), h.id())),
                // A named ID must be the current lock's or hold's, so an unlock meant for an
                // old hold never frees what stands now; with nothing held it is a retry.
                None => match live.map(|l| l.id().to_owned()).or(hold.map(|h| h.id())) {
                    Some(current) => Err(Refusal::LockIdMismatch {
                        given: id.clone(),
                        current: Some(current),
                    }),
                    None => Ok(UnlockDecision::NotLocked),
                },
            };
        }
    }
    // An empty body is a force unlock unless the caller's own lock is all there is: with a
    // hold standing it ends the hold too, so it takes what forcing takes (a step never
    // forces, not even its own run's hold), and without that nothing is released.
    if let (UnlockRequest::Empty, Some(h)) = (request, hold) {
        if !may_force {
            return Err(match live.filter(|l| !l.is_held_by(principal)) {
                Some(lock) => refuse_force(lock.holder.describe(), lock.id().to_owned()),
                None => refuse_force(format!("run {}", h.run), h.id()),
            });
        }
        return Ok(match live {
            Some(_) => UnlockDecision::Release {
                forced: true,
                end_hold: true,
            },
            None => UnlockDecision::EndHold,
        });
    }
    let Some(lock) = live else {
        return Ok(UnlockDecision::NotLocked);
    };
    if let UnlockRequest::Named(id) = request {
        if id != lock.id() {
            return Err(Refusal::LockIdMismatch {
                given: id.clone(),
                current: Some(lock.id().to_owned()),
            });
        }
    }
    if lock.is_held_by(principal) {
        // The run's apply releasing its lock is what a hold waits for.
        let apply_of_run = principal
            .step
            .as_ref()
            .is_some_and(|g| g.kind == StepKind::Apply && hold.is_some_and(|h| h.run == g.run));
        return Ok(UnlockDecision::Release {
            forced: false,
            end_hold: apply_of_run,
        });
    }
    if may_force {
        // A named lock of another's: the lock alone (a hold is ended by its own ID).
        return Ok(UnlockDecision::Release {
            forced: true,
            end_hold: false,
        });
    }
    Err(refuse_force(lock.holder.describe(), lock.id().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::hold::Hold;
    use crate::domain::lock::parse_lock;
    use crate::domain::permission::Role;
    use crate::domain::Actor;
    use time::macros::datetime;

    const NOW: Timestamp = datetime!(2026-11-30 01:00:00 UTC);

    fn principal(user: &str, role: Role) -> Principal {
        Principal {
            session: None,
            org: "acme".into(),
            role,
            actor: Actor::User { user: user.into() },
            step: None,
        }
    }

    fn doc(id: &str) -> LockDocument {
        parse_lock(format!(r#"{{"ID":"{id}","Operation":"OperationTypeApply","Info":"","Who":"me@host","Version":"1.11.4","Created":"2026-11-30T01:07:12.730574508Z","Path":""}}"#).as_bytes()).unwrap()
    }

    fn locked_record(id: &str, holder: &str) -> StateRecord {
        let mut record = StateRecord::fresh("acme", "net", "inc1", NOW);
        let LockDecision::Granted(lock) =
            decide_lock(&record, doc(id), &principal(holder, Role::Operator), NOW).unwrap()
        else {
            panic!("expected a grant")
        };
        record.lock = Some(*lock);
        record
    }

    #[test]
    fn granting_fills_an_empty_info_with_the_holder_and_time() {
        let record = locked_record("L1", "alice");
        let lock = record.lock.unwrap();
        assert_eq!(
            lock.document.info.as_deref(),
            Some("user alice since 2026-11-30T01:00:00Z")
        );
        assert_eq!(
            lock.holder,
            Actor::User {
                user: "alice".into()
            }
        );
    }

    #[test]
    fn a_client_info_is_kept() {
        let record = StateRecord::fresh("acme", "net", "inc1", NOW);
        let d = parse_lock(br#"{"ID":"a","Info":"mine"}"#).unwrap();
        let LockDecision::Granted(lock) =
            decide_lock(&record, d, &principal("a", Role::Operator), NOW).unwrap()
        else {
            panic!()
        };
        assert_eq!(lock.document.info.as_deref(), Some("mine"));
    }

    #[test]
    fn lock_held_by_other_is_refused_with_the_holders_document() {
        let record = locked_record("L1", "alice");
        let err = decide_lock(&record, doc("L2"), &principal("bob", Role::Admin), NOW).unwrap_err();
        let Refusal::Locked {
            lock_id, document, ..
        } = err
        else {
            panic!("expected Locked")
        };
        assert_eq!(lock_id, "L1");
        assert!(document.contains(r#""ID":"L1""#) && document.contains("user alice since"));
    }

    #[test]
    fn a_lock_conflict_names_the_requested_id_then_the_holders_for_the_log() {
        let record = locked_record("L1", "alice");
        let bob = principal("bob", Role::Operator);
        let err = decide_lock(&record, doc("L2"), &bob, NOW).unwrap_err();
        assert_eq!(err.lock_ids(), ["L2", "L1"]);
        let err = decide_lock(&record, doc("L1"), &bob, NOW).unwrap_err();
        assert_eq!(err.lock_ids(), ["L1"]);
    }

    #[test]
    fn the_same_holder_relocking_with_the_same_id_is_already_held() {
        let record = locked_record("L1", "alice");
        let alice = principal("alice", Role::Operator);
        assert_eq!(
            decide_lock(&record, doc("L1"), &alice, NOW),
            Ok(LockDecision::AlreadyHeld)
        );
        assert!(decide_lock(&record, doc("L2"), &alice, NOW).is_err());
        assert!(decide_lock(&record, doc("L1"), &principal("bob", Role::Operator), NOW).is_err());
    }

    #[test]
    fn an_expired_lock_reads_as_unlocked() {
        let mut record = locked_record("L1", "alice");
        record.lock.as_mut().unwrap().live_until = Some(NOW);
        let bob = principal("bob", Role::Operator);
        assert!(matches!(
            decide_lock(&record, doc("L2"), &bob, NOW),
            Ok(LockDecision::Granted(_))
        ));
    }

    #[test]
    fn the_holder_releases_its_own_lock_by_id_or_with_an_empty_body() {
        let record = locked_record("L1", "alice");
        let alice = principal("alice", Role::Operator);
        let a = Allocation::default();
        for req in [UnlockRequest::Empty, UnlockRequest::Named("L1".into())] {
            assert_eq!(
                decide_unlock(&record, &req, &alice, &a, NOW),
                Ok(UnlockDecision::Release {
                    forced: false,
                    end_hold: false
                })
            );
        }
    }

    #[test]
    fn a_named_id_must_be_the_current_lock() {
        let record = locked_record("L1", "alice");
        let err = decide_unlock(
            &record,
            &UnlockRequest::Named("OLD".into()),
            &principal("alice", Role::Admin),
            &Allocation::default(),
            NOW,
        )
        .unwrap_err();
        assert_eq!(
            err,
            Refusal::LockIdMismatch {
                given: "OLD".into(),
                current: Some("L1".into())
            }
        );
    }

    #[test]
    fn releasing_someone_elses_lock_needs_manage_even_with_its_id() {
        let record = locked_record("L1", "alice");
        let a = Allocation::default();
        for req in [UnlockRequest::Empty, UnlockRequest::Named("L1".into())] {
            assert!(matches!(
                decide_unlock(&record, &req, &principal("bob", Role::Operator), &a, NOW),
                Err(Refusal::NotYourLock { .. })
            ));
            assert_eq!(
                decide_unlock(&record, &req, &principal("root", Role::Admin), &a, NOW),
                Ok(UnlockDecision::Release {
                    forced: true,
                    end_hold: false
                })
            );
        }
    }

    #[test]
    fn unlocking_an_unlocked_state_is_not_locked_even_with_an_id() {
        let record = StateRecord::fresh("acme", "net", "inc1", NOW);
        assert_eq!(
            decide_unlock(
                &record,
                &UnlockRequest::Named("X".into()),
                &principal("bob", Role::Viewer),
                &Allocation::default(),
                NOW
            ),
            Ok(UnlockDecision::NotLocked)
        );
    }

    fn held(mut record: StateRecord, run: &str) -> StateRecord {
        record.hold = Some(Hold {
            run: run.into(),
            since: NOW,
        });
        record
    }

    fn unlock(
        record: &StateRecord,
        request: UnlockRequest,
        who: &Principal,
    ) -> Result<UnlockDecision, Refusal> {
        decide_unlock(record, &request, who, &Allocation::default(), NOW)
    }

    /// `terraform force-unlock` must not report success while the hold stays.
    #[test]
    fn an_empty_body_while_a_hold_stands_is_a_force_and_needs_manage() {
        let alice = principal("alice", Role::Operator);
        let admin = principal("root", Role::Admin);
        let only_held = held(StateRecord::fresh("acme", "net", "inc1", NOW), "r1");
        let own_lock_and_hold = held(locked_record("L1", "alice"), "r1");
        for record in [&only_held, &own_lock_and_hold] {
            assert_eq!(
                unlock(record, UnlockRequest::Empty, &alice),
                Err(Refusal::NotYourLock {
                    holder: "run r1".into(),
                    lock_id: "hold-r1".into()
                }),
                "nothing is released"
            );
        }
        assert_eq!(
            unlock(&only_held, UnlockRequest::Empty, &admin),
            Ok(UnlockDecision::EndHold)
        );
        assert_eq!(
            unlock(&own_lock_and_hold, UnlockRequest::Empty, &admin),
            Ok(UnlockDecision::Release {
                forced: true,
                end_hold: true
            })
        );
        let someone_elses = held(locked_record("L1", "bob"), "r1");
        assert!(matches!(
            unlock(&someone_elses, UnlockRequest::Empty, &alice),
            Err(Refusal::NotYourLock { lock_id, .. }) if lock_id == "L1"
        ));
    }

    #[test]
    fn a_named_hold_id_must_be_the_current_hold() {
        let admin = principal("root", Role::Admin);
        let other_hold = unlock(
            &held(StateRecord::fresh("acme", "net", "inc1", NOW), "r2"),
            UnlockRequest::Named("hold-r1".into()),
            &admin,
        );
        assert_eq!(
            other_hold,
            Err(Refusal::LockIdMismatch {
                given: "hold-r1".into(),
                current: Some("hold-r2".into())
            })
        );
        assert_eq!(
            unlock(
                &locked_record("L1", "bob"),
                UnlockRequest::Named("hold-r1".into()),
                &admin
            ),
            Err(Refusal::LockIdMismatch {
                given: "hold-r1".into(),
                current: Some("L1".into())
            }),
            "a live lock is not freed, nor answered 200, for an old hold's ID"
        );
        assert_eq!(
            unlock(
                &StateRecord::fresh("acme", "net", "inc1", NOW),
                UnlockRequest::Named("hold-r1".into()),
                &admin
            ),
            Ok(UnlockDecision::NotLocked),
            "with nothing held it is a retry"
        );
    }
}
