//! Where CPU work on a state's bytes (validation, digest, sealing, opening) runs: in place on
//! the request's task when the bytes are small, since it then takes microseconds, less than
//! handing it to a blocking thread and back; on the blocking pool when they are large, where
//! it would stall every other request sharing the async thread.

use super::Error;

/// Bytes up to which the work runs in place: a 32 KiB state validates, digests and seals in
/// well under a millisecond (most states are this size or smaller).
const IN_PLACE_BYTES: usize = 32 * 1024;

/// Runs `f`, the work on `len` bytes, in place or on the blocking pool; `what` names it
/// should its thread fail.
///
/// # Errors
/// `Unavailable` when the blocking thread panicked.
pub(super) async fn run<T: Send + 'static>(
    len: usize,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Error> {
    run_over(IN_PLACE_BYTES, len, what, f).await
}

/// As [`run`], for work lighter by the byte, which stays in place up to `in_place` bytes.
///
/// # Errors
/// `Unavailable` when the blocking thread panicked.
pub(super) async fn run_over<T: Send + 'static>(
    in_place: usize,
    len: usize,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Error> {
    if len <= in_place {
        return Ok(f());
    }
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Unavailable(format!("{what} task failed: {e}")))
}

/// Runs `beside` on a thread of its own while `here` runs on the caller's, and returns what
/// each gave; the caller's cores are as they were once it returns.
///
/// Linux queues a new thread on the core of the thread that starts it, and when the cores
/// have been busy lately it does not look for an idle one: the new thread then waits behind
/// the caller until the idle core's next balancing pulls it over, up to a scheduler tick
/// (4 ms) later. On a 2 MiB save, measured inside the server, the digest began only once the
/// sniff had ended in about half the saves, so the two passes ran one after the other. So the
/// caller steps aside onto the other cores for its pass, and the new thread has its core at
/// once.
///
/// # Panics
/// When `beside` panicked: work on memory that cannot fail, so a defect, raised here for the
/// request to answer.
pub(super) fn side_by_side<A: Send, B>(
    beside: impl FnOnce() -> A + Send,
    here: impl FnOnce() -> B,
) -> (A, B) {
    std::thread::scope(|scope| {
        let other = scope.spawn(beside);
        let mine = {
            let _aside = Aside::step();
            here()
        };
        (other.join().expect("the pass beside"), mine)
    })
}

/// The calling thread kept off the core it was on while this lives, and back on every core
/// it had when dropped.
struct Aside {
    #[cfg(target_os = "linux")]
    had: Option<nix::sched::CpuSet>,
}

#[cfg(target_os = "linux")]
impl Aside {
    /// Moves the caller off its core; stays put when it has no other (one core, or a cpuset
    /// of one) or the system refuses, the passes then sharing the core as they would anyway.
    fn step() -> Self {
        use nix::sched::{sched_getaffinity, sched_getcpu, sched_setaffinity, CpuSet};
        let me = nix::unistd::Pid::from_raw(0);
        let had = (|| {
            let had = sched_getaffinity(me).ok()?;
            let mut others = had;
            others.unset(sched_getcpu().ok()?).ok()?;
            let any = (0..CpuSet::count()).any(|cpu| others.is_set(cpu).unwrap_or(false));
            (any && sched_setaffinity(me, &others).is_ok()).then_some(had)
        })();
        Self { had }
    }
}

#[cfg(target_os = "linux")]
impl Drop for Aside {
    fn drop(&mut self) {
        if let Some(had) = &self.had {
            // Setting back a set the thread had cannot be refused; were it, the thread would
            // only stay off one core.
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), had);
        }
    }
}

#[cfg(not(target_os = "linux"))]
impl Aside {
    /// Elsewhere a thread's cores are not set this way (macOS has only hints): the caller
    /// stays where it is.
    fn step() -> Self {
        Self {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_passes_run_on_their_own_threads_and_return_their_outcomes() {
        let caller = std::thread::current().id();
        let (beside, here) = side_by_side(
            || (std::thread::current().id(), 6 * 7),
            || (std::thread::current().id(), "here"),
        );
        assert_eq!(here, (caller, "here"));
        assert_ne!(beside.0, caller);
        assert_eq!(beside.1, 42);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_caller_is_kept_off_its_core_for_its_pass_and_has_every_core_back_after() {
        use nix::sched::{sched_getaffinity, CpuSet};
        let me = nix::unistd::Pid::from_raw(0);
        let cores = |set: &CpuSet| {
            (0..CpuSet::count())
                .filter(|c| set.is_set(*c).unwrap_or(false))
                .count()
        };
        let before = sched_getaffinity(me).unwrap();
        let ((), during) = side_by_side(|| (), || sched_getaffinity(me).unwrap());
        let after = sched_getaffinity(me).unwrap();
        assert_eq!(after, before);
        if cores(&before) > 1 {
            assert_eq!(cores(&during), cores(&before) - 1);
        }
    }

    #[test]
    #[should_panic(expected = "the pass beside")]
    fn a_panic_beside_is_raised_to_the_caller() {
        side_by_side(|| panic!("a defect"), || ());
    }
}
