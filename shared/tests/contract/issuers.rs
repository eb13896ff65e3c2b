//! The issuers' key store's cases (included by ../contract.rs), on the stores that keep an
//! issuer's keys for many processes (memory, as the services' tests share it, and DynamoDB):
//! the first claim of a fetch, a claim on what was read, keys put only while the claim
//! stands.

use super::*;
use hegemony_state::ports::{IssuerKeyStore, KeptKeys};

async fn claims_and_keys_are_compared_and_swapped(store: Arc<dyn IssuerKeyStore>) {
    let issuer = "https://token.actions.githubusercontent.com";
    assert_eq!(store.kept_keys(issuer).await.unwrap(), None);
    let claim = KeptKeys {
        issuer: issuer.into(),
        jwks: None,
        keys_at: None,
        max_age_seconds: 0,
        tried_at: NOW,
    };
    store.put_kept_keys(&claim, None).await.unwrap();
    // A second process that read nothing loses: the first claim stands.
    let late = store.put_kept_keys(&claim, None).await;
    assert!(matches!(late, Err(StoreError::Conflict)), "{late:?}");
    let keys = KeptKeys {
        jwks: Some(r#"{"keys":[]}"#.into()),
        keys_at: Some(NOW),
        max_age_seconds: 600,
        ..claim.clone()
    };
    store.put_kept_keys(&keys, Some(NOW)).await.unwrap();
    assert_eq!(store.kept_keys(issuer).await.unwrap(), Some(keys.clone()));
    // A claim made on an older read writes nothing.
    let minute = NOW + time::Duration::minutes(1);
    let next = KeptKeys {
        tried_at: minute,
        ..keys.clone()
    };
    let stale = store
        .put_kept_keys(&next, Some(NOW - time::Duration::minutes(1)))
        .await;
    assert!(matches!(stale, Err(StoreError::Conflict)), "{stale:?}");
    store.put_kept_keys(&next, Some(NOW)).await.unwrap();
    assert_eq!(store.kept_keys(issuer).await.unwrap(), Some(next));
    assert_eq!(
        store.kept_keys("https://other.example").await.unwrap(),
        None
    );
}

#[tokio::test]
async fn memory_keeps_issuers_keys_compared_and_swapped() {
    claims_and_keys_are_compared_and_swapped(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_keeps_issuers_keys_compared_and_swapped() {
    let catalog = aws::block_on(async {
        let config = aws::sdk_config().await;
        aws::fresh_store(&config).await.0
    });
    claims_and_keys_are_compared_and_swapped(Arc::new(catalog)).await;
}
