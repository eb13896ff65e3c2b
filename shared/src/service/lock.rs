//! Locking and unlocking a state: the backend protocol's LOCK and UNLOCK.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::auth;
use super::commit::{force_unlock_entry, release, take_over_dead_lock};
use super::retry::{commit, until_done, Attempt};
use super::{App, Error};
use crate::domain::hold::{hold_set_by, Hold};
use crate::domain::lock::{parse_lock, parse_unlock, Lock};
use crate::domain::locking::{decide_lock, decide_unlock, LockDecision, UnlockDecision};
use crate::domain::name::StateName;
use crate::domain::permission::Permission;
use crate::domain::protection::Change;
use crate::domain::Principal;
use crate::ports::{Commit, RunItem, StepCheck};

/// What an unlock did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnlockOutcome {
    /// Nothing was locked.
    NotLocked,
    /// This lock and/or the run's hold were released; `forced` when by someone other than
    /// the lock's holder.
    Released {
        lock: Option<Box<Lock>>,
        hold: Option<Hold>,
        forced: bool,
    },
}

/// Takes the lock described by `body` (a lock document), or confirms the caller already
/// holds it with that ID.
///
/// # Errors
/// `Refused` for an invalid document, without tf_state:write, or when someone else's lock
/// is live (`Locked`, carrying the holder's document).
pub async fn lock(
    app: &App,
    principal: &Principal,
    name: &StateName,
    body: &[u8],
) -> Result<(), Error> {
    let (_, first) = app
        .require_to_change(principal, Permission::Write, Change::Lock, name)
        .await?;
    app.keys()?;
    let document = parse_lock(body)?;
    let tries = AtomicUsize::new(0);
    until_done(|| async {
        // A commit lost to the step's run ending or its token's revocation (the commit checks
        // both) decides again on the token as it stands: a lock no longer than the run's end
        // plus the grace, without a hold, or no lock at all.
        let principal = if tries.fetch_add(1, Ordering::Relaxed) == 0 {
            principal.clone()
        } else {
            auth::again(app, principal).await?
        };
        let now = app.clock.now();
        let snapshot = first.snapshot(app, &principal.org, name, now).await?;
        let (snapshot, takeover) =
            take_over_dead_lock(app, snapshot, &principal.actor, now).await?;
        let lock = match decide_lock(&snapshot, document.clone(), &principal, now)? {
            LockDecision::AlreadyHeld => return Ok(Attempt::Done(())),
            LockDecision::Granted(lock) => lock,
        };
        let mut state = snapshot.successor();
        state.lock = Some(*lock);
        if state.hold.is_none() {
            state.hold = hold_set_by(&principal, now);
        }
        // A step's lock is findable from its run, for the run's end and the step's gone
        // report; a workload session's from the session, for its early end. Either commits on
        // its token being unrevoked still.
        let taken_with = match (&principal.step, &principal.session) {
            (Some(g), _) => Some((g.run.clone(), &g.token_id, &g.token_hash, g.expires_at)),
            (None, Some(g)) => Some((g.run_key(), &g.token_id, &g.token_hash, g.locks_live_until)),
            (None, None) => None,
        };
        let run_items = taken_with
            .iter()
            .map(|(run, token_id, _, _)| RunItem {
                run: run.clone(),
                token_id: (*token_id).clone(),
                org: snapshot.org.clone(),
                state: snapshot.name.clone(),
            })
            .collect();
        let step = taken_with.map(|(run, _, token_hash, live_until)| StepCheck {
            run,
            token_hash: token_hash.clone(),
            ended_not_before: live_until - app.limits.run_end_grace,
        });
        let changes = Commit {
            run_items,
            step,
            ..Commit::over(&snapshot, now, Some(state))
        };
        commit(app, takeover.into_commit(changes), ()).await
    })
    .await
}

/// Releases a lock as `body` asks: empty (release what the caller holds, or force), or
/// naming a lock ID.
///
/// # Errors
/// `Refused` for an invalid body, without tf_state:write, for an ID that is not the current
/// lock's, or for a force unlock without tf_state:manage.
pub async fn unlock(
    app: &App,
    principal: &Principal,
    name: &StateName,
    body: &[u8],
) -> Result<UnlockOutcome, Error> {
    let (allocation, first) = app
        .require_with_state(principal, Permission::Write, name)
        .await?;
    app.keys()?;
    let request = parse_unlock(body)?;
    until_done(|| async {
        let now = app.clock.now();
        let Some(snapshot) = first.record(app, &principal.org, name).await? else {
            return Ok(Attempt::Done(UnlockOutcome::NotLocked));
        };
        let (lock, end_hold, forced) =
            match decide_unlock(&snapshot, &request, principal, &allocation, now)? {
                UnlockDecision::NotLocked => return Ok(Attempt::Done(UnlockOutcome::NotLocked)),
                UnlockDecision::Release { forced, end_hold } => {
                    (snapshot.lock.clone(), end_hold, forced)
                }
                UnlockDecision::EndHold => (None, true, true),
            };
        let hold = snapshot.hold.clone().filter(|_| end_hold);
        let (state, versions) =
            release(app, &snapshot, lock.as_ref(), end_hold, forced, now).await?;
        let audit = if forced {
            vec![force_unlock_entry(
                principal,
                name,
                lock.as_ref(),
                hold.as_ref(),
                now,
            )]
        } else {
            Vec::new()
        };
        let changes = Commit {
            versions,
            audit,
            ..Commit::over(&snapshot, now, state)
        };
        let outcome = UnlockOutcome::Released {
            lock: lock.map(Box::new),
            hold,
            forced,
        };
        commit(app, changes, outcome).await
    })
    .await
}
