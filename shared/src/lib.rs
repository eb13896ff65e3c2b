//! Hegemony State: managed Terraform and OpenTofu state over the tools' `http` backend.
//!
//! # Layout
//!
//! - [`domain`]: pure types and rules (names, lock documents, state sniffing, records,
//!   versions, the write checks, roles, app states' changes). No I/O, no clock, no status
//!   codes.
//! - [`ports`]: the traits storage provides: a catalog with compare-and-swap commits, a blob
//!   store, a key service.
//! - [`crypto`]: the envelope (gzip, AES-256-GCM STREAM segments, wrapped data keys) and the
//!   platform key.
//! - [`adapters`]: the ports on memory (tests), on the local embedded store (SQLite + files)
//!   and on AWS (DynamoDB, S3, KMS). They know only ports, domain and crypto.
//! - [`service`]: the use cases: snapshot -> decide -> write blobs -> one commit.
//! - [`http`]: the route table and one handler per route group, `lambda_http::Request` in,
//!   response out. The only layer that knows status codes.
//! - [`config`]: the environment settings, checked at start.
//! - [`wiring`]: each deployment's `App`, built once at start from the settings (the local
//!   store, AWS behind the Lambda functions or the container, the sweepers); the start-up
//!   warnings and the Lambda clamp.
//! - [`ids`]: random ids and hex, used by every layer.
//! - [`paging`]: the one loop that follows a paged listing to its end, used by the service,
//!   the AWS catalog and the command line.
//! - [`key_template`]: the configured KMS key and how it names each org's key, parsed by
//!   [`config`] and used by the KMS adapter.
//! - [`transit_settings`]: a configured Transit engine (named backend or internal OpenBao),
//!   parsed by [`config`] and used by the Transit adapter.

pub mod adapters;
pub mod config;
pub mod crypto;
pub mod domain;
pub mod http;
pub mod ids;
pub mod key_template;
pub mod paging;
pub mod ports;
pub mod service;
pub mod transit_settings;
pub mod wiring;
