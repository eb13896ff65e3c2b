//! Start-up wiring: the `App` of each deployment, built once from the settings: the local
//! store (`make run`, `serve`), the AWS store behind the Lambda functions or behind the
//! container front door, and the sweeper's app on either (which never opens content, so it
//! gets no key). The start-up warnings and the Lambda clamp live here, once. Nothing here
//! runs per request, and no other module assembles an `App`.

use std::sync::Arc;
use std::time::Duration;

use crate::adapters::key_ring::KeyRing;
use crate::adapters::oidc::HttpsIssuers;
use crate::adapters::transit::TransitKeys;
use crate::config::Config;
use crate::crypto::PlatformKey;
use crate::http::lambda::{MAX_STATE_BYTES, PAYLOAD_CEILING};
use crate::ports::{BlobStore, Catalog, KeyOpener, KeyService, Unmeasured};
use crate::service::issuers::Issuers;
use crate::service::key_cache::KeyCache;
use crate::service::{App, Limits, Links, SystemClock};
use crate::transit_settings::TransitSettings;

#[cfg(feature = "aws")]
pub mod aws;
#[cfg(feature = "local")]
pub mod local;

/// Where the handlers run, which decides the largest state they accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrontDoor {
    /// A Lambda function behind API Gateway: states are clamped under the payload ceiling.
    Lambda,
    /// `hegemony-state serve`: up to `HEGEMONY_TF_STATE_MAX_BYTES` (128 MiB at most).
    Container,
}

/// The limits requests are checked against at `door`.
pub fn limits(config: &Config, door: FrontDoor) -> Limits {
    let limits = Limits {
        max_state_bytes: config.max_state_bytes,
        keep_versions: config.keep_versions,
        run_end_grace: time::Duration::seconds(config.run_end_grace_seconds as i64),
        deleted_retention: time::Duration::days(config.deleted_retention_days as i64),
        lambda_ceiling: None,
    };
    match door {
        FrontDoor::Lambda => clamp(limits),
        FrontDoor::Container => limits,
    }
}

/// The limits on Lambda: `HEGEMONY_TF_STATE_MAX_BYTES` clamped under the payload ceiling, so
/// a function refuses a larger state itself, naming the ceiling, instead of API Gateway
/// answering without our error body. Crate-visible for the Lambda routing tests.
pub(crate) fn clamp(limits: Limits) -> Limits {
    Limits {
        max_state_bytes: limits.max_state_bytes.min(MAX_STATE_BYTES),
        lambda_ceiling: Some(PAYLOAD_CEILING),
        ..limits
    }
}

/// What an operator should fix, said once when a serving process starts: a grace shorter
/// than the rule allows, and (`keyless`) a deployment that cannot open any state. Sweepers
/// say neither: the serving processes of the same settings already do.
// A build with neither store has no deployment to wire; the library still checks there.
#[cfg_attr(not(any(feature = "local", feature = "aws")), allow(dead_code))]
fn warn_at_start(config: &Config, keyless: bool) {
    if let Some(warning) = config.grace_warning() {
        tracing::warn!("{warning}");
    }
    if keyless {
        tracing::warn!("no key configured (HEGEMONY_TF_STATE_KEY_BACKEND or HEGEMONY_TF_STATE_ENCRYPTION_KEY): every state route answers 503 until one is");
    }
}

/// What wraps every new data key, as a deployment's settings choose it.
#[cfg_attr(not(any(feature = "local", feature = "aws")), allow(dead_code))]
// One value, made once at start and consumed at once: a Transit variant's size costs nothing.
#[allow(clippy::large_enum_variant)]
enum Wrapping {
    /// A Transit engine; the platform key, when there is one, opens the versions it wrapped.
    Transit {
        backend: TransitSettings,
        platform: Option<PlatformKey>,
    },
    /// The platform key.
    Platform(PlatformKey),
    /// A service that also opens every key id no other service claims (KMS, which opens the
    /// platform key's versions itself), called `name`. Only the AWS store has one.
    #[cfg_attr(not(feature = "aws"), allow(dead_code))]
    CatchAll {
        service: Arc<dyn KeyService>,
        name: String,
    },
}

impl Wrapping {
    /// What the wrapping service is called: the start-up log's key, and what a version no
    /// service opens is told to configure.
    #[cfg_attr(not(any(feature = "local", feature = "aws")), allow(dead_code))]
    fn name(&self) -> String {
        match self {
            Self::Transit { backend, .. } => backend.name(),
            Self::Platform(key) => key.key_id().to_owned(),
            Self::CatchAll { name, .. } => name.clone(),
        }
    }
}

/// The key ring of a deployment, built here alone for every store: `wrapping` makes every new
/// data key; the internal OpenBao (when configured and not the wrapping service itself),
/// `also` (a service only one store has at hand, opening what it wrapped before a move away
/// from it) and the retired platform keys open the versions they wrapped.
///
/// # Errors
/// A Transit CA file the HTTP client does not accept.
#[cfg_attr(not(any(feature = "local", feature = "aws")), allow(dead_code))]
fn key_ring(
    wrapping: Wrapping,
    internal: Option<TransitSettings>,
    also: Option<(&str, Arc<dyn KeyOpener>)>,
    retired: Vec<PlatformKey>,
) -> Result<KeyRing, String> {
    let name = wrapping.name();
    // The wrapping service opens the key ids of its own prefix (every one no other claims,
    // for a catch-all); a Transit engine's platform key opens those it wrapped.
    let (service, prefix, platform): (Arc<dyn KeyService>, String, _) = match wrapping {
        Wrapping::Transit { backend, platform } => {
            let transit = TransitKeys::new(backend)?;
            let prefix = transit.key_id_prefix();
            (Arc::new(transit), prefix, platform)
        }
        Wrapping::Platform(key) => (Arc::new(key), "platform:".to_owned(), None),
        Wrapping::CatchAll { service, .. } => (service, String::new(), None),
    };
    let mut ring = opening_internal(KeyRing::new(service, &name, &prefix), internal, &name)?;
    if let Some(platform) = platform {
        ring = ring.opening("platform:", Arc::new(platform));
    }
    if let Some((prefix, opener)) = also {
        ring = ring.opening(prefix, opener);
    }
    // Each retired key by its own fingerprint, so it wins over a `platform:` prefix, until a
    // re-wrap has moved its versions.
    Ok(retired.into_iter().fold(ring, |ring, key| {
        let prefix = key.key_id().to_owned();
        ring.opening(&prefix, Arc::new(key))
    }))
}

/// `ring`, also opening the internal OpenBao's versions when it is configured and is not
/// the wrapping service (`wraps`) itself.
///
/// # Errors
/// A CA file the HTTP client does not accept.
#[cfg_attr(not(any(feature = "local", feature = "aws")), allow(dead_code))]
fn opening_internal(
    ring: KeyRing,
    internal: Option<TransitSettings>,
    wraps: &str,
) -> Result<KeyRing, String> {
    match internal.filter(|i| i.name() != wraps) {
        None => Ok(ring),
        Some(internal) => {
            let internal = TransitKeys::new(internal)?;
            let prefix = internal.key_id_prefix();
            Ok(ring.opening(&prefix, Arc::new(internal)))
        }
    }
}

/// Where the links the app hands out point, from the settings.
#[cfg_attr(not(any(feature = "local", feature = "aws")), allow(dead_code))]
fn links(config: &Config) -> Links {
    Links {
        run_url_template: config.run_url_template.clone(),
        public_url: config.public_url.clone(),
        container_url: config.container_url.clone(),
    }
}

/// The key cache the settings ask for.
#[cfg_attr(not(any(feature = "local", feature = "aws")), allow(dead_code))]
fn key_cache(config: &Config) -> KeyCache {
    KeyCache::new(
        // At most LIMIT_KEY_CACHE_SIZE, checked with the settings: it fits any usize.
        usize::try_from(config.key_cache_size).unwrap_or(usize::MAX),
        Duration::from_secs(config.key_cache_seconds),
    )
}

/// The issuers' keys for the workload exchange, fetched over HTTPS with the extra CA of
/// `HEGEMONY_OIDC_CA_FILE`, reaching private addresses only with
/// `HEGEMONY_OIDC_ALLOW_PRIVATE_ISSUERS`, believed `HEGEMONY_OIDC_KEYS_MAX_AGE_SECONDS` at
/// most; off where no route verifies an ID token (`wanted` false).
///
/// # Errors
/// A CA file the HTTP client does not accept.
#[cfg_attr(not(any(feature = "local", feature = "aws")), allow(dead_code))]
fn issuers(config: &Config, wanted: bool) -> Result<Issuers, String> {
    if !wanted {
        return Ok(Issuers::off());
    }
    let fetcher = HttpsIssuers::new(
        config.oidc_ca_pem.as_deref(),
        config.oidc_allow_private_issuers,
    )?;
    let max_age = time::Duration::seconds(
        i64::try_from(config.oidc_keys_max_age_seconds).unwrap_or(i64::MAX),
    );
    Ok(Issuers::new(Arc::new(fetcher), max_age))
}

/// The one place an `App` is assembled; every deployment reads the system clock.
#[cfg_attr(not(any(feature = "local", feature = "aws")), allow(dead_code))]
fn assemble(
    catalog: impl Catalog + 'static,
    blobs: Arc<dyn BlobStore>,
    keys: Option<(Arc<dyn KeyService>, KeyCache)>,
    limits: Limits,
    links: Links,
    issuers: Issuers,
) -> App {
    let (keys, key_cache) = match keys {
        Some((keys, cache)) => (Some(keys), cache),
        None => (None, KeyCache::off()),
    };
    App {
        catalog: Arc::new(catalog),
        blobs,
        keys,
        key_cache,
        index_keys: Default::default(),
        clock: Arc::new(SystemClock),
        limits,
        links,
        issuers,
        metrics: Arc::new(Unmeasured),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamping_keeps_a_smaller_setting_and_names_the_ceiling() {
        let limits = Limits {
            max_state_bytes: 32 << 20,
            keep_versions: 5,
            run_end_grace: time::Duration::seconds(600),
            deleted_retention: time::Duration::days(7),
            lambda_ceiling: None,
        };
        assert_eq!(clamp(limits).max_state_bytes, MAX_STATE_BYTES);
        assert_eq!(clamp(limits).lambda_ceiling, Some(PAYLOAD_CEILING));
        let small = Limits {
            max_state_bytes: 1 << 20,
            ..limits
        };
        assert_eq!(clamp(small).max_state_bytes, 1 << 20);
    }
}
