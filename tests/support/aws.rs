//! An AWS deployment on the emulator for black-box tests: a moto server, a table, bucket and
//! KMS key made for one test, and the environment the real binaries (`serve --store aws`,
//! `token create --store aws`, the Lambda functions) read to use them.

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};

use std::time::{Duration, Instant};

use hegemony_state::adapters::aws;

use crate::repo_root;

/// A moto server on a free port, stopped when dropped.
pub struct Moto {
    pub endpoint: String,
    child: Child,
}

impl Moto {
    pub fn start() -> Moto {
        let bin = repo_root().join(".tools/bin/moto_server");
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
        let child = Command::new(bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "moto_server did not start in 60 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Moto {
            endpoint: format!("http://127.0.0.1:{port}"),
            child,
        }
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A table, bucket and KMS key on `moto`, and the settings that name them.
pub struct Deployment {
    pub moto: Moto,
    pub table: String,
    pub bucket: String,
    pub key_arn: String,
}

impl Deployment {
    pub fn create() -> Deployment {
        let moto = Moto::start();
        let endpoint = moto.endpoint.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let key_arn = runtime.block_on(async {
            let config = aws::loader()
                .endpoint_url(&endpoint)
                .region(aws_config::Region::new("us-east-1"))
                .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                    "testing", "testing", None, None, "moto",
                ))
                .load()
                .await;
            aws::schema::create_table(&aws_sdk_dynamodb::Client::new(&config), "hegemony")
                .await
                .unwrap();
            aws_sdk_s3::Client::from_conf(
                aws_sdk_s3::config::Builder::from(&config)
                    .force_path_style(true)
                    .build(),
            )
            .create_bucket()
            .bucket("hegemony-states")
            .send()
            .await
            .unwrap();
            let kms = aws_sdk_kms::Client::new(&config);
            let key = kms.create_key().send().await.unwrap();
            let arn = key.key_metadata.unwrap().arn.unwrap();
            kms.create_alias()
                .alias_name("alias/hegemony-state")
                .target_key_id(&arn)
                .send()
                .await
                .unwrap();
            arn
        });
        Deployment {
            moto,
            table: "hegemony".into(),
            bucket: "hegemony-states".into(),
            key_arn,
        }
    }

    /// The environment of a process using this deployment (KMS by alias, as operators set it).
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL", self.moto.endpoint.as_str()),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
            ("HEGEMONY_TF_STATE_STORE", "aws"),
            ("HEGEMONY_TF_STATE_TABLE", &self.table),
            ("HEGEMONY_TF_STATE_BUCKET", &self.bucket),
            ("HEGEMONY_TF_STATE_KEY_BACKEND", "kms:alias/hegemony-state"),
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

    /// `hegemony-state serve --store aws` on this deployment: the container front door.
    pub fn container(&self, extra: &[(&str, &str)]) -> crate::Server {
        let mut env = self.env();
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        crate::Server::start_with(&env)
    }
}
