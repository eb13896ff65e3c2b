//! The AWS adapters on a local emulator: one moto server per test process (from the tools
//! `make tools` installs), a fresh table, bucket and KMS key per fixture, so tests never see
//! each other's records. Each test binary uses part of it.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use aws_config::SdkConfig;
use hegemony_state::adapters::aws::{self, AwsSettings, DynamoCatalog, KmsKeys, S3Blobs};
use hegemony_state::key_template::KeyTemplate;

/// The moto server of this test process: its endpoint, and the pipe whose closing (when
/// the process exits, however it exits) stops it.
struct Moto {
    endpoint: String,
    _stdin: Mutex<ChildStdin>,
}

fn tools_bin(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../.tools/bin")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: run `make tools` (it installs the AWS emulator the AWS adapter tests use)",
        path.display()
    );
    path
}

fn moto() -> &'static Moto {
    static MOTO: OnceLock<Moto> = OnceLock::new();
    MOTO.get_or_init(|| {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // The shell stops the server once our end of its stdin closes. moto_serial.py
        // answers one request at a time: moto's own threaded server lets a cancelled
        // transaction undo another request's write (the script says how).
        let script =
            format!("\"$0\" \"$1\" {port} >/dev/null 2>&1 & pid=$!; cat >/dev/null; kill $pid");
        let serial =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/tools/moto_serial.py");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(tools_bin("python3"))
            .arg(serial)
            .stdin(Stdio::piped())
            .spawn()
            .expect("start moto (moto_serial.py)");
        let stdin = child.stdin.take().unwrap();
        // The child itself is never waited for: it lives as long as this process.
        std::mem::forget(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto did not start within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        Moto {
            endpoint: format!("http://127.0.0.1:{port}"),
            _stdin: Mutex::new(stdin),
        }
    })
}

/// The SDK's settings for the emulator.
pub async fn sdk_config() -> SdkConfig {
    aws::loader()
        .endpoint_url(&moto().endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "testing", "testing", None, None, "moto",
        ))
        .load()
        .await
}

/// A fresh table and bucket on the emulator.
pub async fn fresh_store(config: &SdkConfig) -> (DynamoCatalog, S3Blobs, AwsSettings) {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let settings = AwsSettings {
        table: format!("hegemony-{}-{n}", std::process::id()),
        bucket: format!("hegemony-{}-{n}", std::process::id()),
    };
    aws::schema::create_table(&aws_sdk_dynamodb::Client::new(config), &settings.table)
        .await
        .unwrap();
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(config)
            .force_path_style(true)
            .build(),
    )
    .create_bucket()
    .bucket(&settings.bucket)
    .send()
    .await
    .unwrap();
    let (catalog, blobs) = aws::store(config, &settings);
    (catalog, blobs, settings)
}

/// A fresh KMS key on the emulator, and the data keys it wraps.
pub async fn fresh_kms_keys(config: &SdkConfig) -> (KmsKeys, String) {
    let kms = aws_sdk_kms::Client::new(config);
    let key = kms.create_key().send().await.unwrap();
    let arn = key.key_metadata.unwrap().arn.unwrap();
    let template = KeyTemplate::parse(&arn).unwrap();
    (KmsKeys::new(kms, template, None), arn)
}

/// Runs `future` to completion from synchronous fixture code inside a multi-thread test.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}
