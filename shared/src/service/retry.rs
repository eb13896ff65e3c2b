//! The compare-and-swap retry loop, written once. A use case's attempt reads a snapshot,
//! decides and commits; when another request committed first, the loop runs it again on a
//! fresh snapshot. It never looks at what an attempt decides.
//!
//! An attempt is a closure returning a future rather than an async closure: the future of an
//! `AsyncFnMut` that borrows its surroundings cannot yet be shown to be `Send`
//! (rust-lang/rust#139475), and every handler's future must be.

use std::future::Future;
use std::sync::{Mutex, PoisonError};

use super::{App, Error};
use crate::ports::{Commit, StoreError};

/// How many times a use case re-reads and decides again after losing a compare-and-swap
/// before it answers 503 (clients retry that). Each loss means another request committed,
/// so reaching this needs sustained contention on one state.
const MAX_ATTEMPTS: usize = 16;

/// How one attempt ended.
pub(super) enum Attempt<T> {
    /// It committed, or found nothing to commit: the use case's answer.
    Done(T),
    /// Another request committed first: read again and decide again.
    LostRace,
}

/// Runs `attempt` until it is done, at most `MAX_ATTEMPTS` times.
///
/// # Errors
/// What an attempt fails with; `Unavailable` when every attempt lost the race.
pub(super) async fn until_done<T, F>(mut attempt: impl FnMut() -> F) -> Result<T, Error>
where
    F: Future<Output = Result<Attempt<T>, Error>>,
{
    for _ in 0..MAX_ATTEMPTS {
        if let Attempt::Done(answer) = attempt().await? {
            return Ok(answer);
        }
    }
    Err(StoreError::Conflict.into())
}

/// Commits `commit`: done with `answer` when it went through, `LostRace` when another
/// request committed first (a failed condition or a transaction conflict, never a 5xx).
///
/// # Errors
/// Any other storage failure.
pub(super) async fn commit<T>(app: &App, commit: Commit, answer: T) -> Result<Attempt<T>, Error> {
    match app.catalog.commit(commit).await {
        Ok(()) => Ok(Attempt::Done(answer)),
        Err(StoreError::Conflict) => Ok(Attempt::LostRace),
        Err(e) => Err(e.into()),
    }
}

/// What one attempt leaves for the next, such as a blob it sealed, so that a retry does not
/// seal the same body again. Attempts run one after another, so the lock is never contended:
/// it is there because an attempt's future may share what surrounds its closure but not
/// borrow it mutably.
pub(super) struct Carried<T>(Mutex<Option<T>>);

impl<T> Default for Carried<T> {
    fn default() -> Self {
        Self(Mutex::new(None))
    }
}

impl<T> Carried<T> {
    /// What the previous attempt left, if anything. A panic cannot leave the value half
    /// changed (it is only moved in and out), so a poisoned lock is still sound to use.
    pub(super) fn take(&self) -> Option<T> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// Leaves `value` for the next attempt.
    pub(super) fn put(&self, value: T) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(value);
    }
}
