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
    if len <= IN_PLACE_BYTES {
        return Ok(f());
    }
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Unavailable(format!("{what} task failed: {e}")))
}
