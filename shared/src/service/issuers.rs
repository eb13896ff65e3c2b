//! OpenID Connect issuers' signing keys, and the trust policies the exchange and the sessions
//! read lately. A key is looked up in what was fetched last while that is younger than its
//! age (`HEGEMONY_OIDC_KEYS_MAX_AGE_SECONDS`, or the issuer's shorter `Cache-Control:
//! max-age`), so a key the issuer withdrew stops verifying within that bound; an unknown key
//! id or an aged key set makes one fetch at most once a minute per issuer, so a flood of
//! tokens naming made-up keys costs the issuer (and us) one request a minute. Where a
//! deployment runs many processes (the AWS functions) the fetch's start and its keys are kept
//! in the table, so the minute holds for all of them together. Only the exchange asks, and
//! only for an issuer some trust policy names: an unknown issuer never makes the server
//! fetch anything.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use jsonwebtoken::jwk::Jwk;

use super::Error;
use crate::crypto::id_token::SigningKeys;
use crate::domain::trust::TrustPolicy;
use crate::domain::Timestamp;
use crate::ports::{IssuerKeyStore, IssuerKeys, KeptKeys, StoreError, TrustCatalog, TrustRecord};

/// The least time between two fetches of one issuer's keys.
pub const REFETCH_AFTER: time::Duration = time::Duration::minutes(1);

/// The least time between two reads of the shared store for one issuer, by one process,
/// when its kept keys refuse a token.
const REREAD_AFTER: time::Duration = time::Duration::seconds(1);

/// How long an issuer's policies, as read, are believed: every exchange asks for them first,
/// so a flood of tokens naming a shared issuer (or genuine ones anyone can mint there) costs
/// no table read each. A policy written through this process is seen at once; through
/// another, within this.
pub const POLICIES_FOR: time::Duration = time::Duration::seconds(10);

/// How long a session believes the policy that opened it as last read: a policy deleted
/// or narrowed ends or narrows its sessions within this, whichever process serves them.
pub const SESSION_POLICY_FOR: time::Duration = time::Duration::seconds(60);

/// The most entries each of the short-lived tables holds: a flood of made-up issuers
/// cannot grow them without bound (a full table is emptied and filled again).
const MAX_REMEMBERED: usize = 4096;

/// The issuers' keys, fetched through `fetcher`, kept in memory (and in `store`, where the
/// deployment has one), and the trust policies read lately.
pub struct Issuers {
    /// `None` in a function that serves no exchange (its routes never ask).
    fetcher: Option<Arc<dyn IssuerKeys>>,
    /// Where every process of the deployment keeps the keys; `None` for one process.
    store: Option<Arc<dyn IssuerKeyStore>>,
    max_age: time::Duration,
    kept: Mutex<HashMap<String, Kept>>,
    /// Every org's policies naming an issuer, by issuer: what the exchange asks first.
    issuer_policies: Remembered<String, Arc<Vec<TrustRecord>>>,
    /// A policy by org and name, as the sessions it opened check it.
    session_policies: Remembered<(String, String), Option<TrustPolicy>>,
}

/// What this process keeps of one issuer: the record as kept, its keys parsed, and when the
/// shared store was last read for it.
struct Kept {
    record: KeptKeys,
    keys: Option<Arc<SigningKeys>>,
    read_at: Option<Timestamp>,
}

impl Kept {
    fn of(record: KeptKeys) -> Self {
        // A kept key set that no longer parses is as none: the next fetch replaces it.
        let keys = record
            .jwks
            .as_deref()
            .and_then(|text| SigningKeys::parse(text).ok())
            .map(Arc::new);
        Self {
            record,
            keys,
            read_at: None,
        }
    }

    /// Whether its keys are still believed at `now`.
    fn fresh(&self, now: Timestamp) -> bool {
        let age =
            time::Duration::seconds(i64::try_from(self.record.max_age_seconds).unwrap_or(i64::MAX));
        self.keys.is_some() && self.record.keys_at.is_some_and(|at| now < at + age)
    }
}

/// A small table of answers believed for a while.
struct Remembered<K, V> {
    for_how_long: time::Duration,
    entries: Mutex<HashMap<K, (Timestamp, V)>>,
}

impl<K: Eq + Hash + Clone, V: Clone> Remembered<K, V> {
    fn new(for_how_long: time::Duration) -> Self {
        Self {
            for_how_long,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<K, (Timestamp, V)>> {
        // Every change under this lock is one insert, remove or clear: still consistent
        // after a panic elsewhere.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn get(&self, key: &K, now: Timestamp) -> Option<V> {
        let entries = self.entries();
        let (at, value) = entries.get(key)?;
        (now < *at + self.for_how_long && now >= *at).then(|| value.clone())
    }

    fn put(&self, key: K, value: V, now: Timestamp) {
        let mut entries = self.entries();
        if entries.len() >= MAX_REMEMBERED {
            entries.clear();
        }
        entries.insert(key, (now, value));
    }

    fn forget(&self, matching: impl Fn(&K) -> bool) {
        self.entries().retain(|k, _| !matching(k));
    }
}

impl Issuers {
    /// Keys fetched by `fetcher`, kept in this process, believed at most `max_age`.
    pub fn new(fetcher: Arc<dyn IssuerKeys>, max_age: time::Duration) -> Self {
        Self::with(Some(fetcher), max_age)
    }

    /// For a function whose routes verify no ID token: asking for a key is refused as a
    /// deployment fault (a route served by the wrong function), never a fetch. Its sessions'
    /// policies are still read through it.
    pub fn off() -> Self {
        // No key is ever fetched or believed here: the age is never read.
        Self::with(None, REFETCH_AFTER)
    }

    fn with(fetcher: Option<Arc<dyn IssuerKeys>>, max_age: time::Duration) -> Self {
        Self {
            fetcher,
            store: None,
            max_age,
            kept: Mutex::new(HashMap::new()),
            issuer_policies: Remembered::new(POLICIES_FOR),
            session_policies: Remembered::new(SESSION_POLICY_FOR),
        }
    }

    /// The same, keeping the keys in `store` for every process of the deployment.
    #[must_use]
    pub fn kept_in(mut self, store: Arc<dyn IssuerKeyStore>) -> Self {
        self.store = Some(store);
        self
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, HashMap<String, Kept>> {
        // Every change under this lock is one insert: still consistent after a panic
        // elsewhere.
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The least time between two fetches: a minute, or the keys' whole age when the
    /// setting is shorter (a test's), so an aged key set is always fetched again.
    fn floor(&self) -> time::Duration {
        REFETCH_AFTER.min(self.max_age)
    }

    /// How long keys fetched with the issuer's `max-age` are believed: the setting, or the
    /// issuer's shorter age, but never under the floor between fetches.
    fn age_of(&self, issuer_max_age: Option<u64>) -> u64 {
        let setting = self.max_age.whole_seconds().max(0) as u64;
        let floor = self.floor().whole_seconds().max(0) as u64;
        issuer_max_age.map_or(setting, |age| setting.min(age.max(floor)))
    }

    /// Every org's trust policies naming `issuer`, as read within [`POLICIES_FOR`].
    ///
    /// # Errors
    /// `StorageFault` when the policies cannot be read.
    pub(super) async fn policies_of(
        &self,
        catalog: &dyn TrustCatalog,
        issuer: &str,
        now: Timestamp,
    ) -> Result<Arc<Vec<TrustRecord>>, Error> {
        if let Some(policies) = self.issuer_policies.get(&issuer.to_owned(), now) {
            return Ok(policies);
        }
        let policies = Arc::new(catalog.trust_policies_of_issuer(issuer).await?);
        self.issuer_policies
            .put(issuer.to_owned(), policies.clone(), now);
        Ok(policies)
    }

    /// Policy `name` of `org` as a session checks it: read at most once a minute per
    /// process.
    ///
    /// # Errors
    /// `StorageFault` when the policies cannot be read.
    pub(super) async fn session_policy(
        &self,
        catalog: &dyn TrustCatalog,
        org: &str,
        name: &str,
        now: Timestamp,
    ) -> Result<Option<TrustPolicy>, Error> {
        let key = (org.to_owned(), name.to_owned());
        if let Some(policy) = self.session_policies.get(&key, now) {
            return Ok(policy);
        }
        let policy = catalog.trust_policy(org, name).await?;
        self.session_policies.put(key, policy.clone(), now);
        Ok(policy)
    }

    /// Forgets what was read of `org`'s policies and of `issuer`: called by each change of
    /// a policy, so this process sees it at once.
    pub(super) fn forget(&self, org: &str, issuer: &str) {
        self.issuer_policies.forget(|i| i == issuer);
        self.session_policies.forget(|(o, _)| o == org);
    }

    /// The key `kid` of `issuer`, from the keys kept while they are fresh, or from a fetch
    /// when they lack it or have aged and the last fetch (of any process sharing the store)
    /// is a minute old.
    ///
    /// # Errors
    /// `Unauthenticated` for a key id the issuer does not have (or not fetched again yet);
    /// `Unavailable` when the issuer cannot be reached and no fresh key is kept;
    /// `StorageFault` when the shared store cannot be read.
    pub(super) async fn key(&self, issuer: &str, kid: &str, now: Timestamp) -> Result<Jwk, Error> {
        let Some(fetcher) = &self.fetcher else {
            return Err(Error::Unavailable(
                "this function verifies no ID token: the exchange is served by the wrong function"
                    .into(),
            ));
        };
        match self.answer_from_kept(issuer, kid, now) {
            Some(Ok(key)) => return Ok(key),
            // A refusal from what this process keeps may be stale where another process
            // fetched since (its claim stopped this one, its keys came after): the table is
            // read again first, once a second at most, so no instance refuses for the rest
            // of the minute what the others verify.
            Some(Err(refused)) if !self.rereads(issuer, now) => return Err(refused),
            Some(Err(_)) | None => {}
        }
        // What another process fetched may answer, or show that a fetch is under way.
        let shared = match &self.store {
            Some(store) => store.kept_keys(issuer).await?,
            None => None,
        };
        if let Some(shared) = &shared {
            self.adopt(shared.clone());
            if let Some(answer) = self.answer_from_kept(issuer, kid, now) {
                return answer;
            }
        }
        // This process claims the fetch, under its lock: requests arriving meanwhile see
        // the claim and do not fetch as well.
        let (claim, before) = {
            let mut kept = self.kept();
            let entry = kept.entry(issuer.to_owned()).or_insert_with(|| {
                Kept::of(KeptKeys {
                    issuer: issuer.to_owned(),
                    jwks: None,
                    keys_at: None,
                    max_age_seconds: 0,
                    tried_at: now,
                })
            });
            let before = entry.record.tried_at;
            entry.record.tried_at = now;
            (entry.record.clone(), before)
        };
        if let Some(store) = &self.store {
            match store
                .put_kept_keys(&claim, shared.as_ref().map(|s| s.tried_at))
                .await
            {
                Ok(()) => {}
                // Another process claimed it first: answer from what it keeps.
                Err(StoreError::Conflict) => {
                    if let Some(theirs) = store.kept_keys(issuer).await? {
                        self.adopt(theirs);
                    }
                    return self
                        .answer_from_kept(issuer, kid, now)
                        .unwrap_or_else(|| Err(unreachable(issuer)));
                }
                // The claim is not this process's to hold when the table did not take it:
                // the next request may try again rather than wait out the minute.
                Err(e) => {
                    if let Some(entry) = self.kept().get_mut(issuer) {
                        entry.record.tried_at = before;
                    }
                    return Err(e.into());
                }
            }
        }
        let fetched = fetcher
            .signing_keys(issuer)
            .await
            .map_err(|e| e.0)
            .and_then(|fetched| {
                SigningKeys::parse(&fetched.jwks).map(|keys| (fetched, Arc::new(keys)))
            });
        let (fetched, keys) = match fetched {
            Ok(fetched) => fetched,
            Err(why) => {
                // The reason may quote what the issuer's discovery document said.
                tracing::warn!(issuer = %crate::domain::untrusted::shown(issuer), reason = %crate::domain::untrusted::shown_within(&why, 2000), "could not fetch an OpenID Connect issuer's keys");
                return Err(unreachable(issuer));
            }
        };
        let record = KeptKeys {
            jwks: Some(fetched.jwks),
            keys_at: Some(now),
            max_age_seconds: self.age_of(fetched.max_age_seconds),
            ..claim
        };
        tracing::info!(
            issuer = %crate::domain::untrusted::shown(issuer),
            max_age_seconds = record.max_age_seconds,
            "fetched an OpenID Connect issuer's keys"
        );
        if let Some(store) = &self.store {
            // Lost to a later claim (a slow fetch): its keys replace these anyway.
            match store.put_kept_keys(&record, Some(now)).await {
                Ok(()) | Err(StoreError::Conflict) => {}
                Err(e) => {
                    tracing::warn!(issuer = %crate::domain::untrusted::shown(issuer), reason = %e, "could not keep an OpenID Connect issuer's keys for the other processes")
                }
            }
        }
        let found = keys.find(kid).cloned();
        self.kept().insert(
            issuer.to_owned(),
            Kept {
                record,
                keys: Some(keys),
                read_at: None,
            },
        );
        found.ok_or_else(|| unknown_key(issuer, kid, now))
    }

    /// Whether a refusal from the kept keys should first read the shared store again: there
    /// is one, and it was not read for `issuer` within the last second. Marks it read.
    fn rereads(&self, issuer: &str, now: Timestamp) -> bool {
        if self.store.is_none() {
            return false;
        }
        let mut kept = self.kept();
        let Some(entry) = kept.get_mut(issuer) else {
            return true;
        };
        if entry
            .read_at
            .is_some_and(|at| now < at + REREAD_AFTER && now >= at)
        {
            return false;
        }
        entry.read_at = Some(now);
        true
    }

    /// Takes `record` in place of what this process keeps when it is newer.
    fn adopt(&self, record: KeptKeys) {
        let mut kept = self.kept();
        let newer = kept.get(&record.issuer).is_none_or(|mine| {
            record.tried_at > mine.record.tried_at || record.keys_at > mine.record.keys_at
        });
        if newer {
            let read_at = kept.get(&record.issuer).and_then(|mine| mine.read_at);
            kept.insert(
                record.issuer.clone(),
                Kept {
                    read_at,
                    ..Kept::of(record)
                },
            );
        }
    }

    /// The answer the kept keys give without a fetch: the key while they are fresh, or,
    /// within the minute after the last fetch, why there is none. `None`: a fetch is due.
    fn answer_from_kept(
        &self,
        issuer: &str,
        kid: &str,
        now: Timestamp,
    ) -> Option<Result<Jwk, Error>> {
        let kept = self.kept();
        let entry = kept.get(issuer)?;
        if entry.fresh(now) {
            if let Some(key) = entry.keys.as_ref().and_then(|k| k.find(kid)) {
                return Some(Ok(key.clone()));
            }
        }
        if now >= entry.record.tried_at + self.floor() {
            return None;
        }
        Some(Err(if entry.fresh(now) {
            unknown_key(issuer, kid, entry.record.tried_at)
        } else {
            // The last fetch failed, is under way, or left keys that have aged since.
            unreachable(issuer)
        }))
    }
}

fn unreachable(issuer: &str) -> Error {
    Error::Unavailable(format!(
        "the keys of issuer {} could not be fetched (the server log says why); they are fetched at most once a minute: retry then",
        crate::domain::untrusted::shown(issuer)
    ))
}

fn unknown_key(issuer: &str, kid: &str, fetched_at: Timestamp) -> Error {
    Error::Unauthenticated(format!(
        "the ID token is signed with key \"{}\", which issuer {} did not publish when its keys were last fetched ({}); they are fetched again at most once a minute",
        crate::domain::untrusted::shown(kid),
        crate::domain::untrusted::shown(issuer),
        crate::domain::rfc3339(fetched_at)
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::adapters::memory::MemoryStore;
    use crate::ports::{FetchedKeys, IssuerError};

    const ISSUER: &str = "https://issuer.example";
    const NOW: Timestamp = time::macros::datetime!(2026-12-07 10:00:00 UTC);

    /// An issuer whose published key ids and `max-age` the test sets, counting fetches.
    #[derive(Default)]
    struct Published {
        kids: Mutex<Vec<&'static str>>,
        max_age: Mutex<Option<u64>>,
        fetches: AtomicUsize,
    }

    #[async_trait::async_trait]
    impl IssuerKeys for Published {
        async fn signing_keys(&self, _issuer: &str) -> Result<FetchedKeys, IssuerError> {
            self.fetches.fetch_add(1, Ordering::SeqCst);
            let keys: Vec<serde_json::Value> = self
                .kids
                .lock()
                .unwrap()
                .iter()
                .map(|kid| {
                    serde_json::json!({"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256",
                        "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
                        "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"})
                })
                .collect();
            Ok(FetchedKeys {
                jwks: serde_json::json!({ "keys": keys }).to_string(),
                max_age_seconds: *self.max_age.lock().unwrap(),
            })
        }
    }

    fn published(kids: &[&'static str]) -> Arc<Published> {
        let issuer = Published::default();
        *issuer.kids.lock().unwrap() = kids.to_vec();
        Arc::new(issuer)
    }

    fn at(seconds: i64) -> Timestamp {
        NOW + time::Duration::seconds(seconds)
    }

    #[tokio::test]
    async fn a_withdrawn_key_stops_verifying_once_the_keys_have_aged() {
        let issuer = published(&["k1", "k2"]);
        let issuers = Issuers::new(issuer.clone(), time::Duration::seconds(600));
        assert!(issuers.key(ISSUER, "k1", at(0)).await.is_ok());
        // The issuer withdraws k1 (a leak): kept keys still answer while they are fresh...
        *issuer.kids.lock().unwrap() = vec!["k2"];
        assert!(issuers.key(ISSUER, "k1", at(599)).await.is_ok());
        assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1);
        // ...and once they have aged, the next exchange fetches and k1 is refused.
        let refused = issuers.key(ISSUER, "k1", at(600)).await.unwrap_err();
        assert!(matches!(refused, Error::Unauthenticated(_)), "{refused:?}");
        assert!(issuers.key(ISSUER, "k2", at(601)).await.is_ok());
        assert_eq!(issuer.fetches.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_shorter_max_age_from_the_issuer_is_honoured_but_never_under_a_minute() {
        let issuer = published(&["k1"]);
        *issuer.max_age.lock().unwrap() = Some(120);
        let issuers = Issuers::new(issuer.clone(), time::Duration::seconds(600));
        issuers.key(ISSUER, "k1", at(0)).await.unwrap();
        issuers.key(ISSUER, "k1", at(119)).await.unwrap();
        assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1);
        issuers.key(ISSUER, "k1", at(120)).await.unwrap();
        assert_eq!(issuer.fetches.load(Ordering::SeqCst), 2, "aged at 120 s");
        // `no-store` reads as 0: kept a minute, the floor between fetches, no less.
        *issuer.max_age.lock().unwrap() = Some(0);
        issuers.key(ISSUER, "k1", at(240)).await.unwrap();
        issuers.key(ISSUER, "k1", at(299)).await.unwrap();
        assert_eq!(issuer.fetches.load(Ordering::SeqCst), 3);
        issuers.key(ISSUER, "k1", at(300)).await.unwrap();
        assert_eq!(issuer.fetches.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn unknown_keys_fetch_once_a_minute_across_every_process_sharing_the_store() {
        let issuer = published(&["k1"]);
        let store = Arc::new(MemoryStore::new());
        let processes: Vec<Issuers> = (0..8)
            .map(|_| {
                Issuers::new(issuer.clone(), time::Duration::seconds(600)).kept_in(store.clone())
            })
            .collect();
        for (n, process) in processes.iter().enumerate() {
            assert!(process.key(ISSUER, "k1", at(n as i64)).await.is_ok());
            for made_up in 0..20 {
                let kid: &'static str = Box::leak(format!("made-up-{made_up}").into_boxed_str());
                assert!(process.key(ISSUER, kid, at(n as i64)).await.is_err());
            }
        }
        assert_eq!(
            issuer.fetches.load(Ordering::SeqCst),
            1,
            "eight processes, 168 lookups within the minute: one fetch"
        );
        // After the minute, one of them fetches again, and the others take its keys.
        issuer.kids.lock().unwrap().push("k2");
        assert!(processes[3].key(ISSUER, "k2", at(61)).await.is_ok());
        for process in &processes {
            assert!(process.key(ISSUER, "k2", at(62)).await.is_ok());
        }
        assert_eq!(issuer.fetches.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_process_new_to_an_issuer_answers_from_the_keys_another_fetched() {
        let issuer = published(&["k1"]);
        let store = Arc::new(MemoryStore::new());
        let first =
            Issuers::new(issuer.clone(), time::Duration::seconds(600)).kept_in(store.clone());
        let second =
            Issuers::new(issuer.clone(), time::Duration::seconds(600)).kept_in(store.clone());
        first.key(ISSUER, "k1", at(0)).await.unwrap();
        assert!(second.key(ISSUER, "k1", at(1)).await.is_ok());
        assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1);
        // Their keys age alike: the first to ask after the age fetches, for both.
        *issuer.kids.lock().unwrap() = vec!["k2"];
        assert!(second.key(ISSUER, "k1", at(600)).await.is_err());
        assert!(first.key(ISSUER, "k1", at(601)).await.is_err());
        assert_eq!(issuer.fetches.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_process_that_saw_anothers_fetch_under_way_takes_its_keys_a_second_later() {
        let issuer = published(&["k1"]);
        let store = Arc::new(MemoryStore::new());
        let second =
            Issuers::new(issuer.clone(), time::Duration::seconds(600)).kept_in(store.clone());
        second.key(ISSUER, "k1", at(0)).await.unwrap();
        // Another process claims the fetch once the keys have aged...
        let mut claim = store.kept_keys(ISSUER).await.unwrap().unwrap();
        claim.tried_at = at(600);
        store.put_kept_keys(&claim, Some(at(0))).await.unwrap();
        // ...and this one, seeing the claim, cannot answer meanwhile.
        assert!(second.key(ISSUER, "k1", at(600)).await.is_err());
        let fetched = KeptKeys {
            keys_at: Some(at(600)),
            max_age_seconds: 600,
            ..claim.clone()
        };
        store.put_kept_keys(&fetched, Some(at(600))).await.unwrap();
        // A second later it reads the table again and verifies with the other's keys.
        assert!(second.key(ISSUER, "k1", at(601)).await.is_ok());
        assert_eq!(
            issuer.fetches.load(Ordering::SeqCst),
            1,
            "no fetch of its own"
        );
    }

    #[test]
    fn remembered_answers_last_their_time_and_a_full_table_starts_again() {
        let table: Remembered<String, bool> = Remembered::new(time::Duration::seconds(10));
        table.put("a".into(), true, at(0));
        assert_eq!(table.get(&"a".into(), at(9)), Some(true));
        assert_eq!(table.get(&"a".into(), at(10)), None);
        assert_eq!(
            table.get(&"a".into(), at(-1)),
            None,
            "a clock that moved back"
        );
        for n in 0..MAX_REMEMBERED + 1 {
            table.put(n.to_string(), false, at(0));
        }
        assert!(table.entries().len() <= MAX_REMEMBERED);
        table.forget(|k| k == "4096");
        assert_eq!(table.get(&"4096".into(), at(0)), None);
    }
}
