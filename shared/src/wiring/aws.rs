//! The apps on the AWS store: behind the container front door (every part), behind a Lambda
//! function (the parts its routes need), the clients built once and
//! the key chosen by the settings alone (Transit, KMS or the platform key; never created
//! here); and the sweeper's, with no key.

use std::sync::Arc;

use aws_config::SdkConfig;

use super::{
    assemble, issuers, key_cache, key_ring, limits, links, warn_at_start, FrontDoor, Wrapping,
};
use crate::adapters::absent;
use crate::adapters::aws::{self, store, AwsSettings, KmsKeys, KmsOpener};
use crate::config::{Config, ConfigError, KeySetting};
use crate::http::groups::GroupNeeds;
use crate::ports::{BlobStore, KeyOpener, KeyService};
use crate::service::issuers::Issuers;
use crate::service::key_cache::KeyCache;
use crate::service::App;

/// The table and bucket the settings name.
///
/// # Errors
/// The first of `HEGEMONY_TF_STATE_TABLE` and `HEGEMONY_TF_STATE_BUCKET` that is unset.
pub fn settings(config: &Config) -> Result<AwsSettings, ConfigError> {
    let required = |value: &Option<String>, variable: &'static str| {
        value.clone().ok_or_else(|| ConfigError {
            variable: variable.into(),
            message: "is not set: the AWS store needs its table and bucket".into(),
        })
    };
    Ok(AwsSettings {
        table: required(&config.table, "HEGEMONY_TF_STATE_TABLE")?,
        bucket: required(&config.bucket, "HEGEMONY_TF_STATE_BUCKET")?,
    })
}

/// The app on the AWS store at `door`, on clients built from `sdk`: every part, for the
/// container front door, which serves every route.
///
/// # Errors
/// A missing table or bucket setting, a Transit CA file the client does not accept.
pub fn app(config: Config, sdk: &SdkConfig, door: FrontDoor) -> Result<App, ConfigError> {
    with_parts(config, sdk, door, "container", GroupNeeds::ALL)
}

/// The app of the Lambda function `function`, with a blob store when its routes need one
/// and the configured key service when they need one (`needs`, from its rows). A part it
/// does not need is never built, nor its clients (S3; KMS and the Transit engines' HTTP
/// client); the [`absent`] stand-ins take its place.
///
/// # Errors
/// A missing table or bucket setting; when its routes need keys, a Transit CA file the
/// client does not accept.
pub fn function_app(
    config: Config,
    sdk: &SdkConfig,
    function: &'static str,
    needs: GroupNeeds,
) -> Result<App, ConfigError> {
    with_parts(config, sdk, FrontDoor::Lambda, function, needs)
}

fn with_parts(
    config: Config,
    sdk: &SdkConfig,
    door: FrontDoor,
    function: &'static str,
    needs: GroupNeeds,
) -> Result<App, ConfigError> {
    warn_at_start(&config, matches!(config.key, KeySetting::Unset));
    let settings = settings(&config)?;
    let (limits, links) = (limits(&config, door), links(&config));
    let issuers = issuers(&config, needs.issuers).map_err(|message| ConfigError {
        variable: "HEGEMONY_OIDC_CA_FILE".into(),
        message,
    })?;
    let catalog = aws::catalog(sdk, &settings);
    // The functions scale out: the issuers' keys and their fetch's start are kept in the
    // table, so every process together fetches an issuer's keys once a minute at most.
    let issuers = issuers.kept_in(Arc::new(aws::catalog(sdk, &settings)));
    let blobs: Arc<dyn BlobStore> = if needs.blobs {
        Arc::new(aws::blobs(sdk, &settings))
    } else {
        Arc::new(absent::NoBlobs { function })
    };
    let keys = if needs.keys {
        let cache = key_cache(&config);
        keys(config, sdk)?.map(|keys| (keys, cache))
    } else {
        // A configured key still lets the routes that only check for one through.
        let configured = !matches!(config.key, KeySetting::Unset);
        let keys: Arc<dyn KeyService> = Arc::new(absent::NoKeys { function });
        configured.then(|| (keys, KeyCache::off()))
    };
    Ok(assemble(catalog, blobs, keys, limits, links, issuers))
}

/// The key service the settings choose, `None` when they choose none.
///
/// # Errors
/// A Transit CA file the client does not accept.
fn keys(config: Config, sdk: &SdkConfig) -> Result<Option<Arc<dyn KeyService>>, ConfigError> {
    let refuse = |message: String| ConfigError {
        variable: "HEGEMONY_TF_STATE_KEY_BACKEND".into(),
        message,
    };
    // KMS, always at hand on AWS, opens what it wrapped before a move away from it.
    let kms_opener = || -> (&'static str, Arc<dyn KeyOpener>) {
        ("kms:", Arc::new(KmsOpener::new(kms_client(sdk))))
    };
    let (wrapping, also) = match config.key {
        // KMS opens the platform key's versions itself; the ring adds the internal
        // OpenBao's.
        KeySetting::Kms { key, platform } => {
            let name = format!("kms:{}", key.as_str());
            let service = Arc::new(KmsKeys::new(kms_client(sdk), key, platform));
            (Wrapping::CatchAll { service, name }, None)
        }
        KeySetting::Transit { backend, platform } => {
            (Wrapping::Transit { backend, platform }, Some(kms_opener()))
        }
        KeySetting::Platform(key) => (Wrapping::Platform(key), Some(kms_opener())),
        // Every route then says why managed state is unavailable.
        KeySetting::Unset => return Ok(None),
    };
    let ring =
        key_ring(wrapping, config.internal_openbao, also, config.retired_keys).map_err(refuse)?;
    Ok(Some(Arc::new(ring)))
}

fn kms_client(sdk: &SdkConfig) -> aws_sdk_kms::Client {
    aws_sdk_kms::Client::new(sdk)
}

/// The sweeper's app on the AWS store: no key, so no KMS client.
///
/// # Errors
/// A missing table or bucket setting.
pub fn sweeper(config: Config, sdk: &SdkConfig) -> Result<App, ConfigError> {
    let settings = settings(&config)?;
    let (catalog, blobs) = store(sdk, &settings);
    Ok(assemble(
        catalog,
        Arc::new(blobs),
        None,
        // A sweeper answers no requests, so no front door's clamp applies.
        limits(&config, FrontDoor::Container),
        links(&config),
        Issuers::off(),
    ))
}
