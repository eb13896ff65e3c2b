//! Reading an admitted request's body off its connection, under four limits: the route's
//! (refused as soon as the body passes it, with or without Content-Length), the server's cap
//! on request bytes held at once (counted as they arrive, all at once when declared), the
//! client timeout (a body whose bytes stop arriving is refused and its bytes released), and
//! a least rate (a body that trickles, a byte now and then, is refused as one that stopped:
//! the timeout alone counts only silence). Only requests whose credentials checked out get
//! here, so only they can hold the cap.

use std::sync::Arc;
use std::time::Duration;

use hegemony_state::http::BodyRefusal;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{timeout_at, Instant};

use crate::chunks::Announced;

/// How long the rest of a refused body is read and thrown away, so the client reads its
/// answer instead of a reset connection.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// What every connection reads bodies under.
pub struct Bodies {
    /// The cap on request bytes held at once, one permit a byte.
    pub in_flight: Arc<Semaphore>,
    /// How long a body may go without a byte arriving.
    pub idle: Duration,
    /// The slowest a body may arrive; `None`: any rate that never falls silent for `idle`.
    pub min_rate: Option<MinRate>,
}

/// The least rate a body must arrive at: `bytes_per_second` on average over each `window`
/// counted from its first byte read, the last window (cut short by the body's end) aside.
#[derive(Debug, Clone, Copy)]
pub struct MinRate {
    pub bytes_per_second: u64,
    pub window: Duration,
}

/// The window a body's rate is being measured over.
struct Window {
    rate: MinRate,
    ends: Instant,
    received: u64,
}

impl Window {
    fn new(rate: MinRate, now: Instant) -> Self {
        Self {
            rate,
            ends: now + rate.window,
            received: 0,
        }
    }

    /// At its end: whether enough arrived, and if so the next window begun.
    fn passed(&mut self) -> bool {
        let least = self
            .rate
            .bytes_per_second
            .saturating_mul(self.rate.window.as_secs().max(1));
        if self.received < least {
            return false;
        }
        self.ends += self.rate.window;
        self.received = 0;
        true
    }
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
    /// copied by regrowth), refusing it as soon as it passes `limit`, or as soon as its chunk
    /// sizes `announced` say it will. A body that would pass
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
        mut announced: Announced,
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
        let mut window = self.min_rate.map(|rate| Window::new(rate, Instant::now()));
        let mut last_arrival = Instant::now();
        loop {
            let now = Instant::now();
            let stalls = last_arrival + self.idle;
            if now >= stalls {
                return Err(BodyRefusal::Stalled {
                    seconds: self.idle.as_secs(),
                });
            }
            if let Some(w) = window.as_mut().filter(|w| now >= w.ends) {
                if !w.passed() {
                    // Drained, so that the client, which is still sending, reads the 408
                    // rather than a reset connection.
                    self.drain(incoming);
                    return Err(BodyRefusal::TooSlow {
                        bytes_per_second: w.rate.bytes_per_second,
                        seconds: w.rate.window.as_secs(),
                    });
                }
            }
            let wake = window.as_ref().map_or(stalls, |w| w.ends.min(stalls));
            let next = tokio::select! {
                next = timeout_at(wake, incoming.frame()) => next,
                // A chunk's size line over the limit: refused before its data comes.
                () = announced.passes(limit) => {
                    self.drain(incoming);
                    return Err(BodyRefusal::TooLarge { limit });
                }
            };
            let frame = match next {
                // A stall or a window's end: checked at the top.
                Err(_woken) => continue,
                Ok(None) => break,
                Ok(Some(Err(e))) => return Err(BodyRefusal::Unreadable(e.to_string())),
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            last_arrival = Instant::now();
            if let Some(w) = window.as_mut() {
                w.received = w.received.saturating_add(data.len() as u64);
            }
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
