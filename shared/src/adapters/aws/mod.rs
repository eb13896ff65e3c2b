//! The AWS store: the catalog in one DynamoDB table (small versions' sealed content inline in
//! its items), larger sealed blobs in one S3 bucket, data keys from KMS. The Lambda functions and `serve --store aws` build it once at start and share it
//! between requests; nothing here is created on AWS automatically except by `schema` (for
//! emulators and tests; deployments create the table with the SAM template).

mod access;
mod apps;
mod blobs;
mod catalog;
mod deleted;
mod inventory;
mod issuers;
mod items;
mod keys;
mod protection;
mod runs;
pub mod schema;
mod state;
mod sweep;
mod trust;

use std::time::Duration;

use aws_config::{BehaviorVersion, SdkConfig};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};

pub use blobs::S3Blobs;
pub use catalog::DynamoCatalog;
pub use keys::{KmsKeys, KmsOpener};

/// Where the AWS store lives: `HEGEMONY_TF_STATE_TABLE` and `HEGEMONY_TF_STATE_BUCKET`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsSettings {
    pub table: String,
    pub bucket: String,
}

/// The SDK's settings from the environment (`AWS_REGION`, credentials, `AWS_ENDPOINT_URL`
/// for an emulator), on an HTTPS client of rustls with ring, with timeouts short enough that
/// a stalled call becomes a 503 the client retries instead of a hung request.
pub async fn sdk_config() -> SdkConfig {
    loader().load().await
}

/// The SDK's loader with our HTTP client and timeouts, for callers (tests, emulators) that
/// set the endpoint, region or credentials themselves.
pub fn loader() -> aws_config::ConfigLoader {
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let timeouts = aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(3))
        .operation_attempt_timeout(Duration::from_secs(20))
        .build();
    aws_config::defaults(BehaviorVersion::latest())
        .http_client(http)
        .timeout_config(timeouts)
}

/// The catalog and blob store of one deployment, on clients built from `config`.
pub fn store(config: &SdkConfig, settings: &AwsSettings) -> (DynamoCatalog, S3Blobs) {
    (catalog(config, settings), blobs(config, settings))
}

/// The catalog of one deployment, on a DynamoDB client built from `config`.
pub fn catalog(config: &SdkConfig, settings: &AwsSettings) -> DynamoCatalog {
    DynamoCatalog::new(aws_sdk_dynamodb::Client::new(config), &settings.table)
}

/// The blob store of one deployment, on an S3 client built from `config`.
pub fn blobs(config: &SdkConfig, settings: &AwsSettings) -> S3Blobs {
    let s3_config = aws_sdk_s3::config::Builder::from(config)
        // Emulators serve buckets by path, not by host name.
        .force_path_style(config.endpoint_url().is_some())
        .build();
    S3Blobs::new(aws_sdk_s3::Client::from_conf(s3_config), &settings.bucket)
}

/// A failed AWS call as a message for logs and 503 bodies: the operation, the service's
/// error code and message (they name resources, never secrets).
fn describe_failure<E, R>(operation: &str, err: &aws_sdk_dynamodb::error::SdkError<E, R>) -> String
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    format!(
        "{operation} failed: {}",
        aws_sdk_dynamodb::error::DisplayErrorContext(err)
    )
}
