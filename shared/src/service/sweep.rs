//! The sweeper: tidies what a commit left for later, working only from sparse records
//! (version marks, blobs listed for deletion, blobs pending since long ago). Each pass is
//! bounded, idempotent, and safe to run twice at once: deleting a deleted blob and dropping a
//! dropped version change nothing. Correctness never waits for it: it only frees space.

use serde::Serialize;
use time::Duration;

use super::{App, Error};
use crate::domain::Timestamp;

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
        versions_dropped,
        blobs_deleted: doomed.len(),
        uncommitted_blobs_deleted: pending.len(),
    })
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
