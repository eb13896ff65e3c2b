//! Adapters: the ports on concrete storage. `memory` for tests, `local` for the embedded
//! store a person runs with `make run`, `aws` for DynamoDB, S3 and KMS, `transit` for a Vault or
//! OpenBao Transit engine, `oidc` for OpenID Connect issuers' keys over HTTPS, `reach` for the addresses such outbound fetches may reach, `key_ring` for opening each version by the key it records,
//! `prometheus` for the server's metrics, `emf` for the functions' (CloudWatch), `absent`
//! for the parts a Lambda function is built without. `memory`, `local` and `aws` hold one
//! file per port, named as the port's file in `ports/` (`state`, `access`, `runs`, `apps`,
//! `sweep`, `trust`, `blobs`, `keys`). Every adapter (but `absent` and `oidc`, which the
//! black-box tests drive against a test issuer) passes the same contract suite
//! (`shared/tests/contract.rs`, its cases in `contract/<port>.rs`). An adapter knows the
//! ports, the domain and crypto only, never the use cases, the HTTP layer or the settings:
//! `wiring` turns settings into adapters.

pub mod absent;
#[cfg(feature = "aws")]
pub mod aws;
pub mod emf;
pub mod key_ring;
#[cfg(feature = "local")]
pub mod local;
pub mod memory;
pub mod oidc;
#[cfg(feature = "local")]
pub mod prometheus;
pub mod reach;
pub mod transit;

/// What [`BlobStore::put_written`] is on a store whose writes take the whole object: the
/// object gathered in memory (off the async threads: `write` seals a large state), then put.
///
/// [`BlobStore::put_written`]: crate::ports::BlobStore::put_written
async fn put_gathered(
    store: &dyn crate::ports::BlobStore,
    key: &str,
    write: crate::ports::WriteObject,
) -> Result<(), crate::ports::StoreError> {
    let gathered = tokio::task::spawn_blocking(move || {
        let mut bytes = Vec::new();
        write(&mut bytes).map(|()| bytes)
    })
    .await
    .map_err(|e| crate::ports::StoreError::Unavailable(format!("sealing task failed: {e}")))?;
    let bytes = gathered.map_err(|e| {
        crate::ports::StoreError::Unavailable(format!("writing an object failed: {e}"))
    })?;
    store.put(key, bytes).await
}
