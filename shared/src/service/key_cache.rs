//! A bounded cache of unwrapped data keys in front of the key service, so reading the same
//! version again does not call KMS or Transit again (on AWS a network round trip and a
//! charge per read). An entry is found only by everything that names the key: the org, the
//! state and its incarnation, the version, the key id and the wrapped key's bytes; another
//! org, state, incarnation or version never gets it, and a re-wrapped key misses. Entries
//! last at most the configured age and the cache holds at most the configured count;
//! every key is zeroized when it leaves (evicted, expired, or the cache dropped). Never a
//! place a key is created: only what a key service unwrapped is kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zeroize::Zeroizing;

use crate::ports::{KeyContext, KeyError, KeyOpener, Metrics, Unmeasured};

/// Which data key: the version it opens and its wrapped form, as stored.
#[derive(Debug, Clone, Copy)]
pub struct KeySlot<'a> {
    pub org: &'a str,
    pub state: &'a str,
    pub incarnation: &'a str,
    pub version: u64,
    pub key_id: &'a str,
    pub wrapped: &'a [u8],
}

/// A [`KeySlot`] owned: what an entry is found by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SlotKey {
    org: String,
    state: String,
    incarnation: String,
    version: u64,
    key_id: String,
    wrapped: Vec<u8>,
}

impl From<&KeySlot<'_>> for SlotKey {
    fn from(slot: &KeySlot<'_>) -> Self {
        Self {
            org: slot.org.to_owned(),
            state: slot.state.to_owned(),
            incarnation: slot.incarnation.to_owned(),
            version: slot.version,
            key_id: slot.key_id.to_owned(),
            wrapped: slot.wrapped.to_vec(),
        }
    }
}

/// An unwrapped key and when it was unwrapped. `Zeroizing` clears it when it is dropped.
struct Entry {
    key: Zeroizing<[u8; 32]>,
    at: Instant,
}

/// How many keys, for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bounds {
    entries: usize,
    max_age: Duration,
}

/// The cache; off (every read unwraps) when built with no room or no age.
pub struct KeyCache {
    bounds: Option<Bounds>,
    entries: Mutex<HashMap<SlotKey, Entry>>,
    /// Where each read's hit or miss is counted (a cache that is off counts none).
    metrics: Arc<dyn Metrics>,
}

impl KeyCache {
    /// At most `entries` keys, each for at most `max_age`; either 0 turns the cache off.
    pub fn new(entries: usize, max_age: Duration) -> Self {
        let bounds = (entries > 0 && !max_age.is_zero()).then_some(Bounds { entries, max_age });
        Self {
            bounds,
            entries: Mutex::new(HashMap::new()),
            metrics: Arc::new(Unmeasured),
        }
    }

    /// Counts each read's hit or miss into `metrics` from now on.
    pub fn report_to(&mut self, metrics: Arc<dyn Metrics>) {
        self.metrics = metrics;
    }

    /// No cache: every read unwraps its key (the sweeper's app, tests).
    pub fn off() -> Self {
        Self::new(0, Duration::ZERO)
    }

    /// The key of `slot`: from the cache when it was unwrapped less than the age ago,
    /// otherwise unwrapped by `opener` (under the context `{org, state}`) and kept.
    ///
    /// # Errors
    /// What `opener` answers; a failure is never kept, so the next read asks again.
    pub async fn unwrap_key(
        &self,
        opener: &dyn KeyOpener,
        slot: &KeySlot<'_>,
        now: Instant,
    ) -> Result<Zeroizing<[u8; 32]>, KeyError> {
        let Some(bounds) = self.bounds else {
            return opener
                .unwrap_key(slot.key_id, slot.wrapped, &context(slot))
                .await;
        };
        let found = SlotKey::from(slot);
        let cached = self.get(&found, bounds, now);
        self.metrics.key_cache(cached.is_some());
        if let Some(key) = cached {
            return Ok(key);
        }
        let key = opener
            .unwrap_key(slot.key_id, slot.wrapped, &context(slot))
            .await?;
        self.put(found, &key, bounds, now);
        Ok(key)
    }

    /// How many keys the cache holds now (expired ones included until they are swept).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the cache holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SlotKey, Entry>> {
        // A panic while the lock was held cannot leave a half-made entry (each change is
        // one insert or remove), so the map is still sound: keep using it.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn get(&self, slot: &SlotKey, bounds: Bounds, now: Instant) -> Option<Zeroizing<[u8; 32]>> {
        let mut entries = self.lock();
        let entry = entries.get(slot)?;
        if now.saturating_duration_since(entry.at) < bounds.max_age {
            return Some(Zeroizing::new(*entry.key));
        }
        entries.remove(slot);
        None
    }

    /// Keeps `key`, making room first: the expired keys go, then the oldest while full.
    fn put(&self, slot: SlotKey, key: &Zeroizing<[u8; 32]>, bounds: Bounds, now: Instant) {
        let mut entries = self.lock();
        if entries.len() >= bounds.entries && !entries.contains_key(&slot) {
            entries.retain(|_, e| now.saturating_duration_since(e.at) < bounds.max_age);
            while entries.len() >= bounds.entries {
                // Scanning for the oldest takes well under a millisecond at the largest size
                // allowed, and only a read that misses on a full cache pays it (against a
                // key service's round trip).
                let Some(oldest) = entries
                    .iter()
                    .min_by_key(|(_, e)| e.at)
                    .map(|(k, _)| k.clone())
                else {
                    break;
                };
                entries.remove(&oldest);
            }
        }
        entries.insert(
            slot,
            Entry {
                key: Zeroizing::new(**key),
                at: now,
            },
        );
    }
}

fn context<'a>(slot: &KeySlot<'a>) -> KeyContext<'a> {
    KeyContext {
        org: slot.org,
        state: slot.state,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;

    use super::*;
    use crate::crypto::PlatformKey;
    use crate::ports::{DataKey, KeyService};

    /// The platform key, counting its unwraps.
    struct Counting {
        key: PlatformKey,
        unwraps: AtomicUsize,
    }

    #[async_trait]
    impl KeyOpener for Counting {
        async fn unwrap_key(
            &self,
            key_id: &str,
            wrapped: &[u8],
            context: &KeyContext<'_>,
        ) -> Result<Zeroizing<[u8; 32]>, KeyError> {
            self.unwraps.fetch_add(1, Ordering::Relaxed);
            self.key.unwrap_key(key_id, wrapped, context).await
        }
    }

    fn counting() -> Counting {
        Counting {
            key: PlatformKey::generate(),
            unwraps: AtomicUsize::new(0),
        }
    }

    async fn wrapped(keys: &Counting, org: &str, state: &str) -> DataKey {
        keys.key.data_key(&KeyContext { org, state }).await.unwrap()
    }

    fn slot<'a>(key: &'a DataKey, org: &'a str, state: &'a str, version: u64) -> KeySlot<'a> {
        KeySlot {
            org,
            state,
            incarnation: "inc-1",
            version,
            key_id: &key.key_id,
            wrapped: &key.wrapped,
        }
    }

    #[tokio::test]
    async fn a_second_read_of_the_same_version_does_not_unwrap_again() {
        let keys = counting();
        let key = wrapped(&keys, "acme", "net").await;
        let cache = KeyCache::new(8, Duration::from_secs(60));
        let now = Instant::now();
        for _ in 0..3 {
            let got = cache
                .unwrap_key(&keys, &slot(&key, "acme", "net", 1), now)
                .await
                .unwrap();
            assert_eq!(*got, *key.plaintext);
        }
        assert_eq!(keys.unwraps.load(Ordering::Relaxed), 1);
    }

    /// The same wrapped bytes asked for as another org's, state's, incarnation's or version's
    /// key go to the key service (which refuses another context) instead of the cache.
    #[tokio::test]
    async fn another_org_state_incarnation_or_version_never_gets_the_key() {
        let keys = counting();
        let key = wrapped(&keys, "acme", "net").await;
        let cache = KeyCache::new(8, Duration::from_secs(60));
        let now = Instant::now();
        let cached = slot(&key, "acme", "net", 1);
        cache.unwrap_key(&keys, &cached, now).await.unwrap();
        for other in [slot(&key, "other", "net", 1), slot(&key, "acme", "db", 1)] {
            let refused = cache.unwrap_key(&keys, &other, now).await;
            assert!(matches!(refused, Err(KeyError::Unwrap { .. })), "{other:?}");
        }
        // Another incarnation or version of the same state opens under the same context:
        // it is unwrapped again rather than found, and kept under its own name.
        let again = [
            KeySlot {
                incarnation: "inc-2",
                ..cached
            },
            slot(&key, "acme", "net", 2),
        ];
        for other in again {
            cache.unwrap_key(&keys, &other, now).await.unwrap();
        }
        assert_eq!(keys.unwraps.load(Ordering::Relaxed), 5);
        assert_eq!(cache.len(), 3);
    }

    #[tokio::test]
    async fn a_rewrapped_key_misses() {
        let keys = counting();
        let key = wrapped(&keys, "acme", "net").await;
        let cache = KeyCache::new(8, Duration::from_secs(60));
        let now = Instant::now();
        cache
            .unwrap_key(&keys, &slot(&key, "acme", "net", 1), now)
            .await
            .unwrap();
        let other = wrapped(&keys, "acme", "net").await;
        let got = cache
            .unwrap_key(&keys, &slot(&other, "acme", "net", 1), now)
            .await
            .unwrap();
        assert_eq!(*got, *other.plaintext);
        assert_eq!(keys.unwraps.load(Ordering::Relaxed), 2);
    }

    #[tokio::test]
    async fn a_full_cache_evicts_its_oldest_key() {
        let keys = counting();
        let key = wrapped(&keys, "acme", "net").await;
        let cache = KeyCache::new(2, Duration::from_secs(60));
        let start = Instant::now();
        for version in 1..=3 {
            let at = start + Duration::from_secs(version);
            cache
                .unwrap_key(&keys, &slot(&key, "acme", "net", version), at)
                .await
                .unwrap();
        }
        assert_eq!(cache.len(), 2);
        let later = start + Duration::from_secs(10);
        for version in [2, 3] {
            cache
                .unwrap_key(&keys, &slot(&key, "acme", "net", version), later)
                .await
                .unwrap();
        }
        assert_eq!(keys.unwraps.load(Ordering::Relaxed), 3, "2 and 3 were kept");
        cache
            .unwrap_key(&keys, &slot(&key, "acme", "net", 1), later)
            .await
            .unwrap();
        assert_eq!(keys.unwraps.load(Ordering::Relaxed), 4, "1 was evicted");
    }

    #[tokio::test]
    async fn a_key_older_than_the_age_is_unwrapped_again() {
        let keys = counting();
        let key = wrapped(&keys, "acme", "net").await;
        let cache = KeyCache::new(8, Duration::from_secs(60));
        let start = Instant::now();
        let at = |s| start + Duration::from_secs(s);
        let one = slot(&key, "acme", "net", 1);
        let read = |now| cache.unwrap_key(&keys, &one, now);
        read(at(0)).await.unwrap();
        read(at(59)).await.unwrap();
        assert_eq!(keys.unwraps.load(Ordering::Relaxed), 1);
        read(at(60)).await.unwrap();
        assert_eq!(keys.unwraps.load(Ordering::Relaxed), 2);
        read(at(119)).await.unwrap();
        assert_eq!(keys.unwraps.load(Ordering::Relaxed), 2, "kept from 60 on");
    }

    #[tokio::test]
    async fn no_room_or_no_age_turns_it_off() {
        for cache in [
            KeyCache::new(0, Duration::from_secs(60)),
            KeyCache::new(8, Duration::ZERO),
            KeyCache::off(),
        ] {
            let keys = counting();
            let key = wrapped(&keys, "acme", "net").await;
            let now = Instant::now();
            for _ in 0..2 {
                cache
                    .unwrap_key(&keys, &slot(&key, "acme", "net", 1), now)
                    .await
                    .unwrap();
            }
            assert_eq!(keys.unwraps.load(Ordering::Relaxed), 2);
            assert!(cache.is_empty());
        }
    }

    #[tokio::test]
    async fn a_failed_unwrap_is_not_kept() {
        let keys = counting();
        let key = wrapped(&keys, "acme", "net").await;
        let cache = KeyCache::new(8, Duration::from_secs(60));
        let now = Instant::now();
        let wrong = slot(&key, "other", "net", 1);
        for _ in 0..2 {
            assert!(cache.unwrap_key(&keys, &wrong, now).await.is_err());
        }
        assert_eq!(keys.unwraps.load(Ordering::Relaxed), 2);
        assert!(cache.is_empty());
    }
}
