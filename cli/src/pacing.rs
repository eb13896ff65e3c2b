//! Pacing the accept loop when it cannot go on: how long to wait after a failed accept (out
//! of file descriptors, out of memory), and warnings given at most once per interval with
//! the count of those held back, so a fault that repeats costs neither a core nor the disk
//! the log is written to. No I/O: the caller sleeps and logs.

use std::time::{Duration, Instant};

/// The first wait after a failed accept.
const FIRST_WAIT: Duration = Duration::from_millis(10);
/// The longest wait: a freed descriptor is taken within a second.
const LONGEST_WAIT: Duration = Duration::from_secs(1);

/// Waits that double from [`FIRST_WAIT`] to [`LONGEST_WAIT`] while accepts keep failing, and
/// start over at the first success.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { next: FIRST_WAIT }
    }
}

impl Backoff {
    /// How long to wait after one more failure.
    pub fn failed(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(LONGEST_WAIT);
        wait
    }

    /// An accept went through: the next failure waits the shortest time again.
    pub fn succeeded(&mut self) {
        self.next = FIRST_WAIT;
    }
}

/// One warning per interval: the first occurrence is logged, those within the interval after
/// it are counted, and the next one logged says how many were held back.
#[derive(Debug)]
pub struct Throttle {
    interval: Duration,
    last: Option<Instant>,
    held_back: u64,
}

impl Throttle {
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            last: None,
            held_back: 0,
        }
    }

    /// Whether an occurrence at `now` is to be logged: `Some(n)` with the `n` occurrences
    /// held back since the last line, or `None` when it is held back itself.
    pub fn occurred(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(last) if now.saturating_duration_since(last) < self.interval => {
                self.held_back = self.held_back.saturating_add(1);
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.held_back))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_from_10_ms_to_1_s_and_starts_over_after_a_success() {
        let mut backoff = Backoff::default();
        let waits: Vec<u128> = (0..10).map(|_| backoff.failed().as_millis()).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        backoff.succeeded();
        assert_eq!(backoff.failed(), Duration::from_millis(10));
    }

    #[test]
    fn one_line_per_interval_naming_how_many_were_held_back() {
        let start = Instant::now();
        let mut throttle = Throttle::new(Duration::from_secs(10));
        assert_eq!(throttle.occurred(start), Some(0), "the first is logged");
        for ms in [1, 500, 9_999] {
            assert_eq!(
                throttle.occurred(start + Duration::from_millis(ms)),
                None,
                "within the interval"
            );
        }
        assert_eq!(throttle.occurred(start + Duration::from_secs(10)), Some(3));
        assert_eq!(throttle.occurred(start + Duration::from_secs(11)), None);
        assert_eq!(throttle.occurred(start + Duration::from_secs(25)), Some(1));
    }
}
