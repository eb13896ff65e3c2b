//! Reading an admitted request's body off its connection, under three limits: the route's
//! (refused as soon as the body passes it, with or without Content-Length), the server's cap
//! on request bytes held at once (counted as they arrive, all at once when declared), and
//! the client timeout (a body whose bytes stop arriving is refused and its bytes released).
//! Only requests whose credentials checked out get here, so only they can hold the cap.

use std::sync::Arc;
use std::time::Duration;

use hegemony_state::http::BodyRefusal;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{timeout, timeout_at, Instant};

/// How long the rest of a refused body is read and thrown away, so the client reads its
/// answer instead of a reset connection.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// What every connection reads bodies under.
pub struct Bodies {
    /// The cap on request bytes held at once, one permit a byte.
    pub in_flight: Arc<Semaphore>,
    /// How long a body may go without a byte arriving.
    pub idle: Duration,
}

/// A body read whole, and the bytes it holds against the cap until the answer is ready.
pub struct Taken {
    pub bytes: Vec<u8>,
    pub held: Option<OwnedSemaphorePermit>,
}

/// The length a request declares, when it declares one that parses.
fn declared(headers: &hyper::HeaderMap) -> Option<u64> {
    headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

impl Bodies {
    /// Reads the body into one buffer sized from Content-Length (so a large state is never
    /// copied by regrowth), refusing it as soon as it passes `limit`. A body that would pass
    /// the cap is refused at once rather than queued. A refused body's rest is drained in
    /// the background, for a bounded time, while the refusal is answered.
    ///
    /// # Errors
    /// Why the body was not taken; its bytes are released by then.
    pub async fn read(
        &self,
        headers: &hyper::HeaderMap,
        mut incoming: Incoming,
        limit: u64,
    ) -> Result<Taken, BodyRefusal> {
        let declared = declared(headers);
        let mut held: Option<OwnedSemaphorePermit> = None;
        let mut counted = 0u64;
        let mut buf = Vec::new();
        if let Some(n) = declared {
            if n > limit {
                self.drain(incoming);
                return Err(BodyRefusal::TooLarge { limit });
            }
            if self.take(n, &mut held).is_err() {
                self.drain(incoming);
                return Err(BodyRefusal::Busy);
            }
            counted = n;
            // At most `limit`, itself at most the cap (checked at start), so it fits.
            buf = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
        }
        loop {
            let frame = match timeout(self.idle, incoming.frame()).await {
                Err(_stalled) => {
                    return Err(BodyRefusal::Stalled {
                        seconds: self.idle.as_secs(),
                    })
                }
                Ok(None) => break,
                Ok(Some(Err(e))) => return Err(BodyRefusal::Unreadable(e.to_string())),
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let len = buf.len() as u64 + data.len() as u64;
            if len > limit {
                self.drain(incoming);
                return Err(BodyRefusal::TooLarge { limit });
            }
            buf.extend_from_slice(&data);
            if len > counted {
                if self.take(len - counted, &mut held).is_err() {
                    self.drain(incoming);
                    return Err(BodyRefusal::Busy);
                }
                counted = len;
            }
        }
        Ok(Taken { bytes: buf, held })
    }

    /// Counts `bytes` more against the cap, into `held`.
    fn take(&self, bytes: u64, held: &mut Option<OwnedSemaphorePermit>) -> Result<(), ()> {
        if bytes == 0 {
            return Ok(());
        }
        let permit = u32::try_from(bytes)
            .ok()
            .and_then(|n| self.in_flight.clone().try_acquire_many_owned(n).ok())
            .ok_or(())?;
        match held {
            Some(h) => h.merge(permit),
            None => *held = Some(permit),
        }
        Ok(())
    }

    /// Reads and throws away the rest of a refused body, unbuffered and holding nothing of
    /// the cap, until it ends, stalls for the client timeout, or [`DRAIN_TIMEOUT`] passes.
    /// Then the body is dropped, and the connection closes if it had not ended.
    fn drain(&self, mut incoming: Incoming) {
        let idle = self.idle;
        tokio::spawn(async move {
            let deadline = Instant::now() + DRAIN_TIMEOUT;
            loop {
                let wait = deadline.min(Instant::now() + idle);
                match timeout_at(wait, incoming.frame()).await {
                    Ok(Some(Ok(_))) => {}
                    _ => break,
                }
            }
        });
    }
}
