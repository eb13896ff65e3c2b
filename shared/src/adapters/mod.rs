//! Adapters: the ports on concrete storage. `memory` for tests, `local` for the embedded
//! store a person runs with `make run`,
//! `aws` for DynamoDB, S3 and KMS. Every adapter passes the same contract suite
//! (`shared/tests/contract.rs`).

#[cfg(feature = "aws")]
pub mod aws;
#[cfg(feature = "local")]
pub mod local;
pub mod memory;
