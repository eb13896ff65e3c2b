//! An `App` on the AWS store from the settings, as the Lambda functions and the container
//! front door build it once at start: clients created once, the key chosen by
//! configuration only (KMS, or the platform key; never created here).

use std::sync::Arc;

use aws_config::SdkConfig;

use super::{store, AwsSettings, KmsKeys};
use crate::config::{Config, ConfigError, KeySetting};
use crate::ports::KeyService;
use crate::service::{App, Limits, SystemClock};

/// Where the handlers run, which decides the largest state they accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrontDoor {
    /// A Lambda function behind API Gateway: states are clamped under the payload ceiling.
    Lambda,
    /// `hegemony-state serve --store aws`: up to `HEGEMONY_TF_STATE_MAX_BYTES` (128 MiB).
    Container,
}

/// The table and bucket the settings name.
///
/// # Errors
/// The first of `HEGEMONY_TF_STATE_TABLE` and `HEGEMONY_TF_STATE_BUCKET` that is unset.
pub fn settings(config: &Config) -> Result<AwsSettings, ConfigError> {
    let required = |value: &Option<String>, variable: &'static str| {
        value.clone().ok_or_else(|| ConfigError {
            variable,
            message: "is not set: the AWS store needs its table and bucket".into(),
        })
    };
    Ok(AwsSettings {
        table: required(&config.table, "HEGEMONY_TF_STATE_TABLE")?,
        bucket: required(&config.bucket, "HEGEMONY_TF_STATE_BUCKET")?,
    })
}

/// The limits requests are checked against at `door`.
pub fn limits(config: &Config, door: FrontDoor) -> Limits {
    let limits = config.limits();
    match door {
        FrontDoor::Lambda => crate::http::lambda::clamp(limits),
        FrontDoor::Container => limits,
    }
}

/// The app on the AWS store.
///
/// # Errors
/// A missing table or bucket setting.
pub fn app(config: Config, sdk: &SdkConfig, door: FrontDoor) -> Result<App, ConfigError> {
    let settings = settings(&config)?;
    let limits = limits(&config, door);
    let (catalog, blobs) = store(sdk, &settings);
    let keys: Option<Arc<dyn KeyService>> = match config.key {
        KeySetting::Kms { key, platform } => Some(Arc::new(KmsKeys::new(
            aws_sdk_kms::Client::new(sdk),
            key,
            platform,
        ))),
        KeySetting::Platform(key) => Some(Arc::new(key)),
        // Every route then says why managed state is unavailable.
        KeySetting::Unset => None,
    };
    Ok(App {
        catalog: Arc::new(catalog),
        blobs: Arc::new(blobs),
        keys,
        clock: Arc::new(SystemClock),
        limits,
        run_url_template: config.run_url_template,
    })
}
