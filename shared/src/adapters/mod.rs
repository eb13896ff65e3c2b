//! Adapters: the ports on concrete storage. `memory` for tests, `local` for the embedded
//! store a person runs with `make run`, `aws` for DynamoDB, S3 and KMS, `transit` for a Vault or
//! OpenBao Transit engine, `key_ring` for opening each version by the key it records, `absent`
//! for the parts a Lambda function is built without. Every adapter (but `absent`) passes
//! the same contract suite (`shared/tests/contract.rs`). An adapter knows the ports, the
//! domain and crypto only, never the use cases, the HTTP layer or the settings: `wiring`
//! turns settings into adapters.

pub mod absent;
#[cfg(feature = "aws")]
pub mod aws;
pub mod key_ring;
#[cfg(feature = "local")]
pub mod local;
pub mod memory;
pub mod transit;
