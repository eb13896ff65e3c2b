//! Faults the emulator cannot produce, on the AWS adapters with mocked SDK clients: S3's 409
//! ConditionalRequestConflict, DynamoDB's transaction conflicts and throttling, KMS being
//! unavailable or refusing a ciphertext; and the KMS checks the emulator can run: a wrong
//! encryption context, and old versions staying readable after the key setting changes.

mod support;

use std::sync::Arc;

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::CancellationReason;
use aws_sdk_kms::operation::decrypt::DecryptError;
use aws_sdk_kms::operation::generate_data_key::GenerateDataKeyError;
use aws_sdk_s3::operation::put_object::PutObjectOutput;
use aws_smithy_mocks::{mock, mock_client, RuleMode};
use hegemony_state::adapters::aws::{DynamoCatalog, KmsKeys, S3Blobs};
use hegemony_state::adapters::memory::MemoryStore;
use hegemony_state::domain::permission::Role;
use hegemony_state::domain::record::StateRecord;
use hegemony_state::key_template::KeyTemplate;
use hegemony_state::ports::{
    BlobStore, Commit, KeyContext, KeyError, KeyOpener, KeyService, StateCatalog, StoreError,
};
use hegemony_state::service::state::write;
use hegemony_state::service::{App, Error, SystemClock};
use support::{aws, limits, net, read, user};
use time::macros::datetime;

const KEY: &str = "arn:aws:kms:us-east-1:111122223333:key/test";

#[tokio::test]
async fn an_s3_conditional_conflict_is_tried_again_and_then_is_transient() {
    let once = mock!(aws_sdk_s3::Client::put_object)
        .sequence()
        .http_status(
            409,
            Some("<Error><Code>ConditionalRequestConflict</Code></Error>".into()),
        )
        .output(|| PutObjectOutput::builder().build())
        .build();
    let blobs = S3Blobs::new(mock_client!(aws_sdk_s3, RuleMode::Sequential, [&once]), "b");
    blobs.put("k", b"sealed".to_vec()).await.unwrap();
    assert_eq!(once.num_calls(), 2, "tried again after the 409");

    let always = mock!(aws_sdk_s3::Client::put_object)
        .sequence()
        .http_status(
            409,
            Some("<Error><Code>ConditionalRequestConflict</Code></Error>".into()),
        )
        .repeatedly()
        .build();
    let blobs = S3Blobs::new(mock_client!(aws_sdk_s3, RuleMode::MatchAny, [&always]), "b");
    let err = blobs.put("k", b"sealed".to_vec()).await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
}

#[tokio::test]
async fn an_existing_object_is_our_own_earlier_attempt() {
    let exists = mock!(aws_sdk_s3::Client::put_object)
        .sequence()
        .http_status(
            412,
            Some("<Error><Code>PreconditionFailed</Code></Error>".into()),
        )
        .repeatedly()
        .build();
    let blobs = S3Blobs::new(mock_client!(aws_sdk_s3, RuleMode::MatchAny, [&exists]), "b");
    blobs.put("k", b"sealed".to_vec()).await.unwrap();
}

fn commit() -> Commit {
    let record = StateRecord::fresh("acme", "net", "inc", datetime!(2026-11-30 01:00 UTC));
    let mut next = record.clone();
    next.revision = 1;
    Commit::over(&record, record.created_at, Some(next))
}

fn cancelled(code: &'static str) -> TransactWriteItemsError {
    TransactWriteItemsError::TransactionCanceledException(
        aws_sdk_dynamodb::types::error::TransactionCanceledException::builder()
            .cancellation_reasons(CancellationReason::builder().code(code).build())
            .build(),
    )
}

#[tokio::test]
async fn a_transaction_conflict_is_a_lost_race_and_throttling_is_transient() {
    for (code, conflict) in [
        ("TransactionConflict", true),
        ("ConditionalCheckFailed", true),
        ("ThrottlingError", false),
    ] {
        let rule = mock!(aws_sdk_dynamodb::Client::transact_write_items)
            .then_error(move || cancelled(code));
        let catalog = DynamoCatalog::new(
            mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&rule]),
            "t",
        );
        let err = catalog.commit(commit()).await.unwrap_err();
        assert_eq!(
            matches!(err, StoreError::Conflict),
            conflict,
            "{code}: {err}"
        );
        assert_eq!(
            matches!(err, StoreError::Unavailable(_)),
            !conflict,
            "{code}: {err}"
        );
    }
    let throttled = mock!(aws_sdk_dynamodb::Client::transact_write_items).then_error(|| {
        TransactWriteItemsError::ProvisionedThroughputExceededException(
            aws_sdk_dynamodb::types::error::ProvisionedThroughputExceededException::builder()
                .build(),
        )
    });
    let catalog = DynamoCatalog::new(
        mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&throttled]),
        "t",
    );
    assert!(matches!(
        catalog.commit(commit()).await,
        Err(StoreError::Unavailable(_))
    ));
}

fn context() -> KeyContext<'static> {
    KeyContext {
        org: "acme",
        state: "net",
    }
}

#[tokio::test]
async fn kms_failures_are_transient_and_a_refused_ciphertext_is_not() {
    let down = mock!(aws_sdk_kms::Client::generate_data_key).then_error(|| {
        GenerateDataKeyError::KmsInternalException(
            aws_sdk_kms::types::error::KmsInternalException::builder().build(),
        )
    });
    let keys = KmsKeys::new(
        mock_client!(aws_sdk_kms, RuleMode::MatchAny, [&down]),
        KeyTemplate::parse(KEY).unwrap(),
        None,
    );
    assert!(matches!(
        keys.data_key(&context()).await,
        Err(KeyError::Unavailable(_))
    ));

    let refused = mock!(aws_sdk_kms::Client::decrypt).then_error(|| {
        DecryptError::InvalidCiphertextException(
            aws_sdk_kms::types::error::InvalidCiphertextException::builder().build(),
        )
    });
    let disabled = mock!(aws_sdk_kms::Client::decrypt).then_error(|| {
        DecryptError::DisabledException(
            aws_sdk_kms::types::error::DisabledException::builder().build(),
        )
    });
    let keys = KmsKeys::new(
        mock_client!(aws_sdk_kms, RuleMode::Sequential, [&refused, &disabled]),
        KeyTemplate::parse(KEY).unwrap(),
        None,
    );
    let key_id = format!("kms:{KEY}");
    assert!(matches!(
        keys.unwrap_key(&key_id, b"wrapped", &context()).await,
        Err(KeyError::Unwrap { .. })
    ));
    assert!(matches!(
        keys.unwrap_key(&key_id, b"wrapped", &context()).await,
        Err(KeyError::Unavailable(_))
    ));
    // A version wrapped by a platform key, with no platform key configured beside KMS.
    assert!(matches!(
        keys.unwrap_key("platform:abcd", b"wrapped", &context())
            .await,
        Err(KeyError::WrongKey { .. })
    ));
}

/// KMS down: the save is a 503 the client retries, and nothing is written.
#[tokio::test]
async fn a_save_while_kms_is_down_writes_nothing() {
    let down = mock!(aws_sdk_kms::Client::generate_data_key).then_error(|| {
        GenerateDataKeyError::KeyUnavailableException(
            aws_sdk_kms::types::error::KeyUnavailableException::builder().build(),
        )
    });
    let store = Arc::new(MemoryStore::new());
    let app = App {
        catalog: store.clone(),
        blobs: store.clone(),
        keys: Some(Arc::new(KmsKeys::new(
            mock_client!(aws_sdk_kms, RuleMode::MatchAny, [&down]),
            KeyTemplate::parse(KEY).unwrap(),
            None,
        ))),
        index_keys: Default::default(),
        key_cache: hegemony_state::service::key_cache::KeyCache::off(),
        clock: Arc::new(SystemClock),
        limits: limits(5),
        links: Default::default(),
        issuers: hegemony_state::service::issuers::Issuers::off(),
        metrics: std::sync::Arc::new(hegemony_state::ports::Unmeasured),
    };
    let alice = user("alice", Role::Operator);
    let body = br#"{"version":4,"serial":1,"lineage":"l","resources":[]}"#.to_vec();
    let err = write(&app, &alice, &net(), None, body).await.unwrap_err();
    assert!(matches!(err, Error::Unavailable(_)), "{err}");
    assert!(store.state("acme", "net").await.unwrap().is_none());
    assert!(read(&app, &alice, &net()).await.unwrap().is_none());
    assert!(store.pending_blobs().is_empty(), "no blob was even started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_encryption_context_does_not_unwrap() {
    let config = aws::sdk_config().await;
    let (keys, _) = aws::fresh_kms_keys(&config).await;
    let key = keys.data_key(&context()).await.unwrap();
    let other = KeyContext {
        org: "acme",
        state: "other",
    };
    assert!(matches!(
        keys.unwrap_key(&key.key_id, &key.wrapped, &other).await,
        Err(KeyError::Unwrap { .. })
    ));
    let opened = keys
        .unwrap_key(&key.key_id, &key.wrapped, &context())
        .await
        .unwrap();
    assert_eq!(*opened, *key.plaintext);
}

/// Versions record the key ARN KMS answered with, so a state written under one key reads
/// after the setting moves to another, and new versions use the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_stays_readable_after_the_key_setting_changes() {
    let config = aws::sdk_config().await;
    let (catalog, blobs, _) = aws::fresh_store(&config).await;
    let (catalog, blobs) = (Arc::new(catalog), Arc::new(blobs));
    let (first, first_arn) = aws::fresh_kms_keys(&config).await;
    let (second, second_arn) = aws::fresh_kms_keys(&config).await;
    let app = |keys: KmsKeys| App {
        catalog: catalog.clone(),
        blobs: blobs.clone(),
        keys: Some(Arc::new(keys)),
        index_keys: Default::default(),
        key_cache: hegemony_state::service::key_cache::KeyCache::off(),
        clock: Arc::new(SystemClock),
        limits: limits(5),
        links: Default::default(),
        issuers: hegemony_state::service::issuers::Issuers::off(),
        metrics: std::sync::Arc::new(hegemony_state::ports::Unmeasured),
    };
    let alice = user("alice", Role::Operator);
    let one = br#"{"version":4,"serial":1,"lineage":"l","resources":[]}"#.to_vec();
    write(&app(first), &alice, &net(), None, one.clone())
        .await
        .unwrap();
    let after = app(second);
    assert_eq!(read(&after, &alice, &net()).await.unwrap().unwrap(), one);
    let two = br#"{"version":4,"serial":2,"lineage":"l","resources":[]}"#.to_vec();
    write(&after, &alice, &net(), None, two.clone())
        .await
        .unwrap();
    let record = catalog.state("acme", "net").await.unwrap().unwrap();
    let versions = catalog
        .versions("acme", "net", &record.incarnation)
        .await
        .unwrap();
    let keys: Vec<&str> = versions.iter().map(|v| v.key.as_str()).collect();
    assert_eq!(
        keys,
        [format!("kms:{second_arn}"), format!("kms:{first_arn}")],
        "newest first, each with the ARN that wrapped it"
    );
    assert_eq!(read(&after, &alice, &net()).await.unwrap().unwrap(), two);
}

/// `{org}` in an alias picks each org's own key, and the version records that key's ARN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn org_in_an_alias_picks_each_orgs_key() {
    let config = aws::sdk_config().await;
    let kms = aws_sdk_kms::Client::new(&config);
    let mut arns = Vec::new();
    for org in ["acme", "zeta"] {
        let key = kms.create_key().send().await.unwrap();
        let arn = key.key_metadata.unwrap().arn.unwrap();
        kms.create_alias()
            .alias_name(format!("alias/per-org-{}-{org}", std::process::id()))
            .target_key_id(&arn)
            .send()
            .await
            .unwrap();
        arns.push(arn);
    }
    let template = format!("alias/per-org-{}-{{org}}", std::process::id());
    let keys = KmsKeys::new(kms, KeyTemplate::parse(&template).unwrap(), None);
    for (org, arn) in ["acme", "zeta"].iter().zip(&arns) {
        let context = KeyContext { org, state: "net" };
        let key = keys.data_key(&context).await.unwrap();
        assert_eq!(key.key_id, format!("kms:{arn}"), "{org}");
        let opened = keys
            .unwrap_key(&key.key_id, &key.wrapped, &context)
            .await
            .unwrap();
        assert_eq!(*opened, *key.plaintext);
    }
}
