//! The sweeper: tidies what a commit left for later, working only from sparse records
//! (version marks, deleted states by purge date, blobs listed for deletion, blobs pending
//! since long ago, ended and settled runs). Each pass is bounded, idempotent, and safe to run twice at once: deleting a
//! deleted blob and dropping a dropped version change nothing. Correctness never waits for
//! it: it only frees space, and repairs the holds of a run end that failed part way.

use serde::Serialize;
use time::Duration;

use super::commit::take_over_dead_lock;
use super::retry::{commit, until_done, Attempt};
use super::{deleted, runs};
use super::{App, Error};
use crate::domain::{Actor, Timestamp};
use crate::ports::{Commit, SweepPass};

/// The most records one pass handles of each kind.
const PASS_LIMIT: usize = 1000;

/// A blob listed for deletion waits this long, so a reader that fetched the record naming it
/// just before it was replaced still finds it.
pub const DOOMED_GRACE: Duration = Duration::minutes(5);

/// A blob pending this long was never committed: its write died. A blob store's leftovers
/// (the local store's temporary files) this old are a dead write's too.
pub const PENDING_GRACE: Duration = Duration::hours(1);

/// A settled run's items are pruned this long after its end: `runs::MAX_TOKEN_LIFETIME`
/// plus an hour for the clocks of different processes to disagree. A mint is refused once
/// the run has ended, so by then every token minted for the run has expired, whatever
/// happened to the run's record, and none of its items can be needed again: its locks are
/// dead and cleared, its holds ended, and a late end or gone report finds nothing to lower.
pub const PRUNE_AFTER: Duration = Duration::hours(25);

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    /// Dead locks of ended runs cleared (each audited `lock.expired`).
    pub locks_cleared: usize,
    /// Holds of ended runs ended (the run's end ends them; this repairs an end whose own
    /// write failed after the run was recorded as ended).
    pub holds_cleared: usize,
    /// Step tokens dropped after they expired.
    pub tokens_dropped: usize,
    /// Settled runs whose run -> token -> state items were all pruned (their ended marker
    /// stays, so a late mint for them is still refused).
    pub runs_pruned: usize,
    /// Deleted states purged once their retention passed (each audited `state.purged`).
    pub deleted_states_purged: usize,
    /// Versions dropped: pruned past the limit, or of deleted states purged.
    pub versions_dropped: usize,
    /// Blobs deleted that no version uses any more.
    pub blobs_deleted: usize,
    /// Blobs deleted that were written but never committed.
    pub uncommitted_blobs_deleted: usize,
    /// What puts that died part way left in the blob store (the local store's temporary
    /// files), removed.
    pub blob_leftovers_removed: usize,
}

/// Runs one bounded pass at `now`, reported to the app's metrics: its outcome, its duration
/// and what it removed of each kind.
///
/// # Errors
/// `Unavailable` when storage fails; what was done before the failure stays done.
pub async fn sweep(app: &App, now: Timestamp) -> Result<SweepReport, Error> {
    let started = std::time::Instant::now();
    let result = pass(app, now).await;
    let removed = result
        .as_ref()
        .map(SweepReport::removed)
        .unwrap_or_default();
    app.metrics.sweep(&SweepPass {
        ok: result.is_ok(),
        seconds: started.elapsed().as_secs_f64(),
        removed: &removed,
    });
    result
}

impl SweepReport {
    /// Each count under the label the metrics give its kind.
    fn removed(&self) -> [(&'static str, u64); 9] {
        [
            ("locks", self.locks_cleared as u64),
            ("holds", self.holds_cleared as u64),
            ("tokens", self.tokens_dropped as u64),
            ("runs", self.runs_pruned as u64),
            ("deleted_states", self.deleted_states_purged as u64),
            ("versions", self.versions_dropped as u64),
            ("blobs", self.blobs_deleted as u64),
            ("uncommitted_blobs", self.uncommitted_blobs_deleted as u64),
            ("blob_leftovers", self.blob_leftovers_removed as u64),
        ]
    }
}

async fn pass(app: &App, now: Timestamp) -> Result<SweepReport, Error> {
    let (locks_cleared, holds_cleared) = tidy_ended_runs(app, now).await?;
    let tokens_dropped = app.catalog.drop_expired_tokens(now, PASS_LIMIT).await?;
    // After the tokens: on a store that links a run to its tokens, the links of tokens just
    // dropped went with them.
    let runs_pruned = prune_settled_runs(app, now).await?;
    // Before the versions: a state purged now has its versions dropped in the same pass.
    let deleted_states_purged = deleted::purge_due(app, now, DELETED_PER_PASS).await?;
    let versions_dropped = app.catalog.drop_marked_versions(PASS_LIMIT, now).await?;
    let doomed = app
        .catalog
        .doomed_blobs(now - DOOMED_GRACE, PASS_LIMIT)
        .await?;
    delete_blobs(app, &doomed).await?;
    let pending = app
        .catalog
        .stale_pending_blobs(now - PENDING_GRACE, PASS_LIMIT)
        .await?;
    delete_blobs(app, &pending).await?;
    let blob_leftovers_removed = app.blobs.remove_leftovers(now - PENDING_GRACE).await?;
    Ok(SweepReport {
        locks_cleared,
        holds_cleared,
        tokens_dropped,
        runs_pruned,
        deleted_states_purged,
        versions_dropped,
        blobs_deleted: doomed.len(),
        uncommitted_blobs_deleted: pending.len(),
        blob_leftovers_removed,
    })
}

/// Clears the holds of ended runs, and their locks once they are dead, so listings and
/// records are tidy; returns (locks, holds) cleared. An ended run is settled (left to be
/// pruned) once its grace has passed and none of its steps' locks is left: after the grace
/// no token of the run works, so none can take a lock that a later pass would have to clear.
/// Correctness does not depend on this for locks (a dead lock already reads as unlocked,
/// and the next change takes it over); for a hold it does when the run's end failed part
/// way, which this repairs.
async fn tidy_ended_runs(app: &App, now: Timestamp) -> Result<(usize, usize), Error> {
    let (mut locks, mut holds) = (0, 0);
    for run in app.catalog.ended_runs(RUNS_PER_PASS).await? {
        let mut settled = true;
        let items = app.catalog.run_items(&run).await?;
        for item in &items {
            match clear_if_dead(app, &item.org, &item.state, &item.token_id, now).await? {
                Cleared::Yes => locks += 1,
                Cleared::StillLive => settled = false,
                Cleared::Nothing => {}
            }
        }
        for (org, state) in runs::states_of(&items) {
            if runs::end_hold(app, org, state, &run).await? {
                holds += 1;
            }
        }
        let ended = app.catalog.run(&run).await?.and_then(|r| r.ended_at);
        let graced = ended.is_some_and(|at| at + app.limits.run_end_grace <= now);
        if settled && graced {
            app.catalog.settle_ended_run(&run).await?;
        }
    }
    Ok((locks, holds))
}

/// Prunes the items of runs settled more than `PRUNE_AFTER` ago, at most `PASS_LIMIT` items
/// a pass (a run with more goes on at the next); returns how many runs were pruned whole.
///
/// Pruning never revives a run: its record stays as the ended marker, so a late mint for the
/// same run id is still refused (`run_ended`), and a late end or gone report changes nothing.
/// The marker is the one thing kept per run, as the audit log keeps its mint entries;
/// everything that grows with a run's tokens and states goes.
async fn prune_settled_runs(app: &App, now: Timestamp) -> Result<usize, Error> {
    let mut budget = PASS_LIMIT;
    let mut pruned = 0;
    for run in app
        .catalog
        .settled_runs(now - PRUNE_AFTER, RUNS_PER_PASS)
        .await?
    {
        if budget == 0 {
            break;
        }
        // Every token should have expired by now; a clock far behind could mint one that
        // has not. Its run's items then wait for it.
        let live = app
            .catalog
            .run_tokens(&run)
            .await?
            .into_iter()
            .any(|t| !t.revoked && t.expires_at.is_none_or(|at| at > now));
        if live {
            continue;
        }
        let (deleted, done) = app.catalog.prune_run(&run, budget).await?;
        budget = budget.saturating_sub(deleted);
        pruned += usize::from(done);
    }
    Ok(pruned)
}

/// The most deleted states one pass purges: each is a few writes, and its versions count
/// against the pass's limit on versions dropped.
const DELETED_PER_PASS: usize = 100;

/// The most ended runs one pass looks at.
const RUNS_PER_PASS: usize = 100;

enum Cleared {
    Yes,
    StillLive,
    Nothing,
}

async fn clear_if_dead(
    app: &App,
    org: &str,
    state: &str,
    token: &str,
    now: Timestamp,
) -> Result<Cleared, Error> {
    until_done(|| async {
        let Some(snapshot) = app.catalog.state(org, state).await? else {
            return Ok(Attempt::Done(Cleared::Nothing));
        };
        let Some(lock) = snapshot
            .lock
            .as_ref()
            .filter(|l| l.token.as_deref() == Some(token))
        else {
            return Ok(Attempt::Done(Cleared::Nothing));
        };
        if lock.is_live(now) {
            return Ok(Attempt::Done(Cleared::StillLive));
        }
        let (clean, takeover) =
            take_over_dead_lock(app, snapshot.clone(), &Actor::Sweeper, now).await?;
        let next = clean.successor();
        let next = (!next.is_lock_only()).then_some(next);
        let changes = takeover.into_commit(Commit::over(&snapshot, now, next));
        commit(app, changes, Cleared::Yes).await
    })
    .await
}

/// Deletes the objects first, then their records: a crash in between leaves records whose
/// objects are already gone, which the next pass forgets harmlessly.
async fn delete_blobs(app: &App, blobs: &[String]) -> Result<(), Error> {
    for blob in blobs {
        app.blobs.delete(blob).await?;
    }
    if !blobs.is_empty() {
        app.catalog.forget_blobs(blobs).await?;
    }
    Ok(())
}
