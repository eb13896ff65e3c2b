//! An AWS deployment on the emulator for black-box tests: one moto server per test process,
//! a table, bucket and KMS key (and its alias) made for one test on it, and the environment
//! the real binaries (`serve --store aws`, `token create --store aws`, the Lambda functions)
//! read to use them.

use std::net::{TcpListener, TcpStream};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use hegemony_state::adapters::aws;

use crate::aws_calls::{CallCounter, Calls, Tally};
use crate::repo_root;

/// The moto server of this test process: its endpoint, and the pipe whose closing (when
/// the process exits, however it exits) stops it. One per process, not one per deployment:
/// starting moto takes seconds, and deployments keep apart by their own names.
struct Moto {
    endpoint: String,
    _stdin: Mutex<ChildStdin>,
}

fn moto() -> &'static Moto {
    static MOTO: OnceLock<Moto> = OnceLock::new();
    MOTO.get_or_init(|| {
        let bin = repo_root().join(".tools/bin/python3");
        assert!(
            bin.exists(),
            "{} is missing: run `make tools` (it installs the AWS emulator)",
            bin.display()
        );
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
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(bin)
            .arg(repo_root().join("tests/tools/moto_serial.py"))
            .stdin(Stdio::piped())
            .spawn()
            .expect("start moto (moto_serial.py)");
        let stdin = child.stdin.take().unwrap();
        // The child itself is never waited for: it lives as long as this process.
        std::mem::forget(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto did not start in 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        Moto {
            endpoint: format!("http://127.0.0.1:{port}"),
            _stdin: Mutex::new(stdin),
        }
    })
}

/// A table, bucket and KMS key (with an alias) of its own on this process's moto, and the
/// settings that name them.
pub struct Deployment {
    pub endpoint: String,
    pub table: String,
    pub bucket: String,
    pub alias: String,
    pub key_arn: String,
    /// The relay counting this deployment's AWS calls, when it was made counted.
    calls: Option<CallCounter>,
}

/// Runs `future` to its end on a runtime of its own.
fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// The SDK settings of this process's moto.
async fn sdk(endpoint: &str) -> aws_config::SdkConfig {
    aws::loader()
        .endpoint_url(endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "testing", "testing", None, None, "moto",
        ))
        .load()
        .await
}

impl Deployment {
    /// A deployment whose processes reach the emulator through a [`CallCounter`], so
    /// [`Deployment::calls`] says which AWS calls they made.
    pub fn counted() -> Deployment {
        let mut deployment = Deployment::create();
        let counter = CallCounter::start(&deployment.endpoint);
        deployment.endpoint = counter.endpoint.clone();
        deployment.calls = Some(counter);
        deployment
    }

    /// The AWS calls this deployment's processes made since the last take (a counted
    /// deployment's only).
    pub fn calls(&self) -> Calls {
        self.tally().calls
    }

    /// The AWS calls made since the last take, with the request units they cost.
    pub fn tally(&self) -> Tally {
        self.calls
            .as_ref()
            .expect("a counted deployment (Deployment::counted)")
            .take()
    }

    /// Another KMS key on this deployment's moto: its ARN.
    pub fn create_key(&self) -> String {
        block_on(async {
            let kms = aws_sdk_kms::Client::new(&sdk(&self.endpoint).await);
            let key = kms.create_key().send().await.unwrap();
            key.key_metadata.unwrap().arn.unwrap()
        })
    }

    pub fn create() -> Deployment {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let suffix = format!("{}-{n}", std::process::id());
        let table = format!("hegemony-{suffix}");
        let bucket = format!("hegemony-states-{suffix}");
        let alias = format!("alias/hegemony-state-{suffix}");
        let endpoint = moto().endpoint.clone();
        let key_arn = block_on(async {
            let config = sdk(&endpoint).await;
            aws::schema::create_table(&aws_sdk_dynamodb::Client::new(&config), &table)
                .await
                .unwrap();
            aws_sdk_s3::Client::from_conf(
                aws_sdk_s3::config::Builder::from(&config)
                    .force_path_style(true)
                    .build(),
            )
            .create_bucket()
            .bucket(&bucket)
            .send()
            .await
            .unwrap();
            let kms = aws_sdk_kms::Client::new(&config);
            let key = kms.create_key().send().await.unwrap();
            let arn = key.key_metadata.unwrap().arn.unwrap();
            kms.create_alias()
                .alias_name(&alias)
                .target_key_id(&arn)
                .send()
                .await
                .unwrap();
            arn
        });
        Deployment {
            endpoint,
            table,
            bucket,
            alias,
            key_arn,
            calls: None,
        }
    }

    /// The environment of a process using this deployment (KMS by alias, as operators set it).
    pub fn env(&self) -> Vec<(String, String)> {
        let key_backend = format!("kms:{}", self.alias);
        [
            ("AWS_ENDPOINT_URL", self.endpoint.as_str()),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
            ("HEGEMONY_TF_STATE_STORE", "aws"),
            ("HEGEMONY_TF_STATE_TABLE", &self.table),
            ("HEGEMONY_TF_STATE_BUCKET", &self.bucket),
            ("HEGEMONY_TF_STATE_KEY_BACKEND", &key_backend),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// A personal token made with `hegemony-state token create --store aws`.
    pub fn token(&self, org: &str, user: &str, role: &str) -> String {
        let args = ["--org", org, "--user", user, "--role", role].map(str::to_owned);
        crate::token_create(&args, &self.env())
    }

    /// How many objects the deployment's bucket holds.
    pub fn objects(&self) -> usize {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let config = aws::loader()
                .endpoint_url(&self.endpoint)
                .region(aws_config::Region::new("us-east-1"))
                .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                    "testing", "testing", None, None, "moto",
                ))
                .load()
                .await;
            let s3 = aws_sdk_s3::Client::from_conf(
                aws_sdk_s3::config::Builder::from(&config)
                    .force_path_style(true)
                    .build(),
            );
            let listed = s3
                .list_objects_v2()
                .bucket(&self.bucket)
                .send()
                .await
                .unwrap();
            listed.contents().len()
        })
    }

    /// `hegemony-state serve --store aws` on this deployment: the container front door.
    pub fn container(&self, extra: &[(&str, &str)]) -> crate::Server {
        let mut env = self.env();
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        crate::Server::start_with(&env)
    }
}
