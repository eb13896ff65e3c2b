//! OpenID Connect issuers' signing keys, kept per issuer: a key is looked up in what was
//! fetched last, and an unknown key id makes one fetch at most once a minute per issuer, so
//! a flood of tokens naming made-up keys costs the issuer (and us) one request a minute.
//! Only the exchange asks, and only for an issuer some trust policy names: an unknown issuer
//! never makes the server fetch anything.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jsonwebtoken::jwk::Jwk;

use super::Error;
use crate::crypto::id_token::SigningKeys;
use crate::domain::Timestamp;
use crate::ports::IssuerKeys;

/// The least time between two fetches of one issuer's keys.
pub const REFETCH_AFTER: time::Duration = time::Duration::minutes(1);

/// The issuers' keys, fetched through `fetcher`, kept in memory for the life of the process.
pub struct Issuers {
    /// `None` in a function that serves no exchange (its routes never ask).
    fetcher: Option<Arc<dyn IssuerKeys>>,
    kept: Mutex<HashMap<String, Kept>>,
}

/// What is kept of one issuer: its keys from the last fetch that worked, and when a fetch
/// was last started (worked or not: a failing issuer is not asked again sooner either).
struct Kept {
    keys: Option<Arc<SigningKeys>>,
    fetched_at: Timestamp,
}

impl Issuers {
    pub fn new(fetcher: Arc<dyn IssuerKeys>) -> Self {
        Self {
            fetcher: Some(fetcher),
            kept: Mutex::new(HashMap::new()),
        }
    }

    /// For a function whose routes verify no ID token: asking is refused as a deployment
    /// fault (a route served by the wrong function), never a fetch.
    pub fn off() -> Self {
        Self {
            fetcher: None,
            kept: Mutex::new(HashMap::new()),
        }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, HashMap<String, Kept>> {
        // Every change under this lock is one insert or one field set: still consistent
        // after a panic elsewhere.
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The key `kid` of `issuer`, from the keys kept, or from a fetch when the kept ones
    /// lack it and the last fetch is a minute old.
    ///
    /// # Errors
    /// `Unauthenticated` for a key id the issuer does not have (or not fetched again yet);
    /// `Unavailable` when the issuer cannot be reached and no key is kept.
    pub(super) async fn key(&self, issuer: &str, kid: &str, now: Timestamp) -> Result<Jwk, Error> {
        let Some(fetcher) = &self.fetcher else {
            return Err(Error::Unavailable(
                "this function verifies no ID token: the exchange is served by the wrong function"
                    .into(),
            ));
        };
        {
            let mut kept = self.kept();
            let entry = kept.get_mut(issuer);
            if let Some(key) = entry
                .as_ref()
                .and_then(|e| e.keys.as_ref())
                .and_then(|k| k.find(kid))
            {
                return Ok(key.clone());
            }
            match entry {
                // The last fetch failed (or is still under way): say so, not "unknown key".
                Some(entry) if now < entry.fetched_at + REFETCH_AFTER && entry.keys.is_none() => {
                    return Err(unreachable(issuer));
                }
                Some(entry) if now < entry.fetched_at + REFETCH_AFTER => {
                    return Err(unknown_key(issuer, kid, entry.fetched_at));
                }
                // Claimed before the fetch, under the lock: requests arriving meanwhile see
                // it and do not fetch as well.
                Some(entry) => entry.fetched_at = now,
                None => {
                    kept.insert(
                        issuer.to_owned(),
                        Kept {
                            keys: None,
                            fetched_at: now,
                        },
                    );
                }
            }
        }
        let fetched = fetcher
            .signing_keys(issuer)
            .await
            .map_err(|e| e.0)
            .and_then(|text| SigningKeys::parse(&text));
        let keys = match fetched {
            Ok(keys) => Arc::new(keys),
            Err(why) => {
                tracing::warn!(issuer, reason = %why, "could not fetch an OpenID Connect issuer's keys");
                return Err(unreachable(issuer));
            }
        };
        tracing::info!(issuer, "fetched an OpenID Connect issuer's keys");
        let found = keys.find(kid).cloned();
        if let Some(entry) = self.kept().get_mut(issuer) {
            entry.keys = Some(keys);
        }
        found.ok_or_else(|| unknown_key(issuer, kid, now))
    }
}

fn unreachable(issuer: &str) -> Error {
    Error::Unavailable(format!(
        "the keys of issuer {issuer} could not be fetched (the server log says why); they are fetched at most once a minute: retry then"
    ))
}

fn unknown_key(issuer: &str, kid: &str, fetched_at: Timestamp) -> Error {
    Error::Unauthenticated(format!(
        "the ID token is signed with key {kid:?}, which issuer {issuer} did not publish when its keys were last fetched ({}); they are fetched again at most once a minute",
        crate::domain::rfc3339(fetched_at)
    ))
}
