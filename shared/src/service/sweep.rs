//! The sweeper: tidies what a commit left for later, working only from sparse records
//! (version marks, blobs listed for deletion, blobs pending since long ago). Each pass is
//! bounded, idempotent, and safe to run twice at once: deleting a deleted blob and dropping a
//! dropped version change nothing. Correctness never waits for it: it only frees space.

use serde::Serialize;
use time::Duration;

use super::commit::take_over_dead_lock;
use super::retry::{commit, until_done, Attempt};
use super::runs;
use super::{App, Error};
use crate::domain::{Actor, Timestamp};
use crate::ports::Commit;

/// The most records one pass handles of each kind.
const PASS_LIMIT: usize = 1000;

/// A blob listed for deletion waits this long, so a reader that fetched the record naming it
/// just before it was replaced still finds it.
pub const DOOMED_GRACE: Duration = Duration::minutes(5);

/// A blob pending this long was never committed: its write died.
pub const PENDING_GRACE: Duration = Duration::hours(1);

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
    /// Versions dropped: pruned past the limit, or of deleted states.
    pub versions_dropped: usize,
    /// Blobs deleted that no version uses any more.
    pub blobs_deleted: usize,
    /// Blobs deleted that were written but never committed.
    pub uncommitted_blobs_deleted: usize,
}

/// Runs one bounded pass at `now`.
///
/// # Errors
/// `Unavailable` when storage fails; what was done before the failure stays done.
pub async fn sweep(app: &App, now: Timestamp) -> Result<SweepReport, Error> {
    let (locks_cleared, holds_cleared) = tidy_ended_runs(app, now).await?;
    let tokens_dropped = app.catalog.drop_expired_tokens(now, PASS_LIMIT).await?;
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
    Ok(SweepReport {
        locks_cleared,
        holds_cleared,
        tokens_dropped,
        versions_dropped,
        blobs_deleted: doomed.len(),
        uncommitted_blobs_deleted: pending.len(),
    })
}

/// Clears the holds of ended runs, and their locks once they are dead, so listings and
/// records are tidy; returns (locks, holds) cleared. An ended run is forgotten once none of
/// its steps' locks is left; one whose grace has not passed waits for a later pass.
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
        if settled {
            app.catalog.forget_ended_run(&run).await?;
        }
    }
    Ok((locks, holds))
}

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
