//! The connections the inventory's reads take turns on: a few, so that one org's long read
//! (a search or the conflicts, tens of milliseconds over a large index) holds back only the
//! reads that find every connection busy, not every other org's, as one shared connection
//! did. A read takes an idle connection or waits for one; it gives it back when done, even
//! when it panicked (it only reads: nothing is left half done).

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use rusqlite::Connection;

/// Idle connections, and a signal when one comes back.
pub(super) struct Scanners {
    idle: Mutex<Vec<Connection>>,
    returned: Condvar,
}

impl Scanners {
    /// How many connections a catalog keeps for the inventory's reads: one a core, at least
    /// two (a quick read beside a long one) and at most four (each keeps its own page cache,
    /// and reads past the cores only take turns on them).
    pub(super) fn wanted() -> usize {
        std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4))
    }

    pub(super) fn new(connections: Vec<Connection>) -> Self {
        Self {
            idle: Mutex::new(connections),
            returned: Condvar::new(),
        }
    }

    fn idle(&self) -> MutexGuard<'_, Vec<Connection>> {
        // Each change is one push or pop: a panic elsewhere cannot leave the list half made.
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on an idle connection, waiting until one is idle. Blocks: call it off the
    /// async threads.
    pub(super) fn run<T>(&self, f: impl FnOnce(&Connection) -> T) -> T {
        let mut idle = self.idle();
        let conn = loop {
            match idle.pop() {
                Some(conn) => break conn,
                None => {
                    idle = self
                        .returned
                        .wait(idle)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
        };
        drop(idle);
        let turn = Turn {
            scanners: self,
            conn: Some(conn),
        };
        f(turn
            .conn
            .as_ref()
            .expect("a turn holds its connection until it ends"))
    }
}

/// A connection taken, given back when dropped.
struct Turn<'a> {
    scanners: &'a Scanners,
    conn: Option<Connection>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.scanners.idle().push(conn);
            self.scanners.returned.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn scanners(n: usize) -> Arc<Scanners> {
        Arc::new(Scanners::new(
            (0..n)
                .map(|_| Connection::open_in_memory().unwrap())
                .collect(),
        ))
    }

    /// Runs a quick read on another thread: its answer comes when it ends.
    fn quick_read(scanners: &Arc<Scanners>) -> mpsc::Receiver<i64> {
        let (done, ended) = mpsc::channel();
        let scanners = scanners.clone();
        std::thread::spawn(move || {
            let one = scanners.run(|conn| conn.query_row("SELECT 1", [], |r| r.get(0)).unwrap());
            done.send(one).unwrap();
        });
        ended
    }

    fn quick_read_ends(scanners: &Arc<Scanners>) -> bool {
        quick_read(scanners).recv_timeout(Duration::from_secs(5)) == Ok(1)
    }

    /// Holds one of the connections on another thread until the sender is dropped or sent to.
    fn hold_one(scanners: &Arc<Scanners>) -> (mpsc::Sender<()>, std::thread::JoinHandle<()>) {
        let (release, held) = mpsc::channel::<()>();
        let (taken, is_taken) = mpsc::channel();
        let scanners = scanners.clone();
        let long = std::thread::spawn(move || {
            scanners.run(|_| {
                taken.send(()).unwrap();
                let _ = held.recv();
            });
        });
        is_taken.recv().unwrap();
        (release, long)
    }

    #[test]
    fn a_read_goes_on_while_another_holds_a_connection() {
        let scanners = scanners(2);
        let (release, long) = hold_one(&scanners);
        assert!(
            quick_read_ends(&scanners),
            "a quick read waited for a long one"
        );
        release.send(()).unwrap();
        long.join().unwrap();
    }

    #[test]
    fn a_read_waits_for_a_connection_and_gets_it_when_one_comes_back() {
        let scanners = scanners(1);
        let (release, long) = hold_one(&scanners);
        let waiting = quick_read(&scanners);
        assert!(waiting.recv_timeout(Duration::from_millis(200)).is_err());
        release.send(()).unwrap();
        assert_eq!(waiting.recv_timeout(Duration::from_secs(5)), Ok(1));
        long.join().unwrap();
    }

    #[test]
    fn a_read_that_panics_gives_its_connection_back() {
        let scanners = scanners(1);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            scanners.run(|_| panic!("a read failed"))
        }));
        assert!(panicked.is_err());
        assert!(
            quick_read_ends(&scanners),
            "the panicked read kept the connection"
        );
    }
}
