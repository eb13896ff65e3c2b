//! What survives: a kill -9 in the middle of a stream of writes, a SIGTERM while a save is
//! in flight, hostile clients (slow, trickling, idle, unauthenticated, too many, or more
//! than the process has descriptors for), and what the data folder holds at rest (never a state's
//! plaintext, never a token, never the key).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hegemony_state_blackbox::*;
use serde_json::Value;

/// A state of about 200 KB that compresses to almost nothing: its sealed form is small
/// enough to live inline in the catalog, so its save is one SQLite transaction.
fn big_doc(serial: u64) -> String {
    state_doc(
        serial,
        "crash-lineage",
        &format!("{serial}-{}", "p".repeat(200_000)),
    )
}

/// A state of about 200 KB of noise, whose sealed form (about 100 KB) is too large to be
/// inline: its save writes a blob file before the commit, so a kill lands in the middle of
/// writing one.
fn noisy_doc(serial: u64) -> String {
    crash_noise(serial, 200_000)
}

/// A state of about 5 MiB of noise: over the size sealed in memory, so its save seals it
/// straight into its blob file, and a kill lands while that file is being written.
fn huge_noisy_doc(serial: u64) -> String {
    crash_noise(serial, 5 << 20)
}

fn crash_noise(serial: u64, len: usize) -> String {
    noise_doc(serial, "crash-lineage", len)
}

/// Every write of `doc` that got a 200 is readable after a kill -9 and a restart, and
/// decrypts; no torn or half-written version is visible (only the acknowledged one, or the
/// one in flight when the kill landed). Returns the server, still running.
fn acknowledged_writes_survive_kill_9(doc: fn(u64) -> String) -> Server {
    let mut server = Server::start();
    let token = server.token("acme", "alice", "operator");
    let mut acked = 0u64;
    for cycle in 0..5 {
        let last_ok = Arc::new(AtomicU64::new(acked));
        let writer = {
            let (api, token, last_ok) = (Api::new(&server), token.clone(), last_ok.clone());
            std::thread::spawn(move || {
                for serial in acked + 1.. {
                    // A failed send is the kill landing: the writer stops there.
                    match api
                        .backend("POST", "/api/tf-states/crash/state", &token)
                        .body(doc(serial))
                        .send()
                    {
                        Ok(r) if r.status() == 200 => last_ok.store(serial, Ordering::SeqCst),
                        Ok(r) => panic!("write {serial}: {}", r.status()),
                        Err(_) => return,
                    }
                }
            })
        };
        assert!(
            eventually(Duration::from_secs(30), || last_ok.load(Ordering::SeqCst)
                >= acked + 3 + cycle),
            "writes are being acknowledged"
        );
        server.kill9();
        writer.join().unwrap();
        acked = last_ok.load(Ordering::SeqCst);
        server = server.restart();
        let r = Api::new(&server).get_state(&token, "crash");
        assert_eq!(r.status(), 200);
        let text = r.text().unwrap();
        let stored: Value = serde_json::from_str(&text).expect("a whole document");
        let serial = stored["serial"].as_u64().unwrap();
        assert!(
            serial == acked || serial == acked + 1,
            "cycle {cycle}: stored serial {serial}, last acknowledged {acked}"
        );
        assert_eq!(
            text,
            doc(serial),
            "the stored version is exactly what was sent"
        );
        acked = serial;
    }
    server
}

/// Small saves, inline in the catalog: an acknowledged one survives a kill -9, and none
/// wrote a blob file.
#[test]
fn every_acknowledged_small_save_survives_kill_9() {
    let server = acknowledged_writes_survive_kill_9(big_doc);
    let blobs = server.data_dir().join("blobs");
    assert!(
        files_under(&blobs).is_empty(),
        "inline saves write no blob file"
    );
}

/// Large saves, in blob files: the same.
#[test]
fn every_acknowledged_large_save_survives_kill_9() {
    let server = acknowledged_writes_survive_kill_9(noisy_doc);
    assert!(!files_under(&server.data_dir().join("blobs")).is_empty());
}

/// Saves sealed into their blob file as they are made: the same, and a file the kill left
/// half written is never a version.
#[test]
fn every_acknowledged_save_sealed_into_its_blob_file_survives_kill_9() {
    let server = acknowledged_writes_survive_kill_9(huge_noisy_doc);
    assert!(!files_under(&server.data_dir().join("blobs")).is_empty());
}

fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// A secret planted in a state's outputs appears nowhere in the data folder in plaintext,
/// and neither does a token; the key lives beside the folder, not in it, mode 0600.
#[test]
fn nothing_secret_is_stored_in_plaintext() {
    use std::os::unix::fs::PermissionsExt;
    let server = Server::start();
    let token = server.token("acme", "alice", "operator");
    let secret = "planted-secret-9f8e7d6c5b4a";
    let api = Api::new(&server);
    // One state small enough to be inline in the catalog, one large enough for a blob.
    let docs = [
        ("secrets", state_doc(1, "lin", secret)),
        (
            "large",
            noisy_doc(1).replacen("1-", &format!("1-{secret}"), 1),
        ),
    ];
    for (name, doc) in &docs {
        let r = api.post_state(&token, name, None, doc.clone());
        assert_eq!(r.status(), 200);
        let r = api.get_state(&token, name);
        assert_eq!(
            &r.text().unwrap(),
            doc,
            "the secret is there for those who may read it"
        );
    }
    let files = files_under(&server.data_dir());
    assert!(files.iter().any(|f| f.to_string_lossy().contains("blobs")));
    for file in &files {
        let bytes = std::fs::read(file).unwrap();
        for needle in [secret, token.as_str()] {
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
                "{} holds {needle:?} in plaintext",
                file.display()
            );
        }
    }
    let key_file = server.dir.path().join("data.key");
    assert!(key_file.exists(), "the key sits beside the data folder");
    assert_eq!(
        std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(!files
        .iter()
        .any(|f| f.extension().is_some_and(|e| e == "key")));
}

/// A changed platform key gives a clear "wrong key" error, not a decryption failure.
#[test]
fn a_changed_platform_key_is_named_as_the_wrong_key() {
    let key_a = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    let key_b = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";
    let server = Server::start_with(&[("HEGEMONY_TF_STATE_ENCRYPTION_KEY", key_a)]);
    let token = server.token("acme", "alice", "operator");
    Api::new(&server).post_state(&token, "net", None, state_doc(1, "lin", "x"));
    let server = server.restart_with(vec![(
        "HEGEMONY_TF_STATE_ENCRYPTION_KEY".into(),
        key_b.into(),
    )]);
    let r = Api::new(&server).get_state(&token, "net");
    assert_eq!(r.status(), 500);
    let body: Value = r.json().unwrap();
    assert_eq!(body["error"]["code"], "wrong_key");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("platform:") && message.contains("configure the key"),
        "{message}"
    );
}

/// A data folder that holds states never gets a new key silently when its key file is gone.
#[test]
fn a_missing_key_file_for_an_existing_store_stops_the_start() {
    let server = Server::start();
    let token = server.token("acme", "alice", "operator");
    Api::new(&server).post_state(&token, "net", None, state_doc(1, "lin", "x"));
    std::fs::remove_file(server.dir.path().join("data.key")).unwrap();
    let out = std::process::Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(server.data_dir())
        .env_remove("HEGEMONY_TF_STATE_ENCRYPTION_KEY")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("key file") && err.contains("is missing"),
        "{err}"
    );
}

/// A bad setting fails the start, naming the variable and its range.
#[test]
fn a_bad_setting_stops_the_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    for (var, value, words) in [
        ("HEGEMONY_TF_STATE_MAX_BYTES", "10", "1024 to 134217728"),
        ("HEGEMONY_CLIENT_TIMEOUT_SECONDS", "0", "1 to 3600"),
        ("HEGEMONY_MAX_CONNECTIONS", "none", "1 to 1000000"),
        ("HEGEMONY_TF_STATE_KEEP_VERSIONS", "0", "1 to"),
        ("HEGEMONY_TF_STATE_ENCRYPTION_KEY", "c2hvcnQ=", "32 bytes"),
        (
            "HEGEMONY_MAX_BODY_BYTES_IN_FLIGHT",
            "1000",
            "less than the largest state",
        ),
        (
            "HEGEMONY_TF_STATE_KEY_BACKEND",
            "kms:alias/x",
            "needs the AWS store",
        ),
    ] {
        let out = std::process::Command::new(bin())
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .env(var, value)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(var) && err.contains(words), "{err}");
    }
    let out = std::process::Command::new(bin())
        .args(["serve", "--listen", "nowhere"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--listen"));
}

/// A server whose cap on request bytes in flight is one largest state, so one slow save
/// holding its declared bytes makes any other save wait: how a test sees that a slow save is
/// in flight.
fn capped_server() -> Server {
    Server::start_with(&[
        ("HEGEMONY_TF_STATE_MAX_BYTES", "1048576"),
        ("HEGEMONY_MAX_BODY_BYTES_IN_FLIGHT", "1048576"),
    ])
}

/// A save of 100 KB: refused with 503 while a slow save holds the cap.
fn probe(server: &Server, token: &str) -> Response {
    Api::new(server).post_state(
        token,
        "other",
        None,
        state_doc(1, "l", &"x".repeat(100_000)),
    )
}

/// A slow client: a large body declared, its first byte sent, the rest held back.
struct SlowSave {
    sock: std::net::TcpStream,
    rest: Vec<u8>,
}

impl SlowSave {
    /// Starts saving `body` as state `slow`, and returns once the server is reading it
    /// (another save is refused for the bytes it holds). A probe that the server took first
    /// makes the slow save itself the one refused as busy: then it begins again, a bounded
    /// number of times.
    fn begin(server: &Server, token: &str, body: &str) -> SlowSave {
        let addr = server.base.trim_start_matches("http://");
        for _attempt in 0..5 {
            let mut sock = std::net::TcpStream::connect(addr).unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(60)))
                .unwrap();
            write!(
                sock,
                "POST /api/tf-states/slow/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n{}",
                body.len(),
                &body[..1]
            )
            .unwrap();
            sock.flush().unwrap();
            let mut refused = false;
            let in_flight = eventually(Duration::from_secs(10), || {
                refused = answered(&sock);
                if refused {
                    return true;
                }
                let r = probe(server, token);
                r.status() == StatusCode::SERVICE_UNAVAILABLE && r.headers()["retry-after"] == "1"
            });
            if in_flight && !refused {
                return SlowSave {
                    sock,
                    rest: body.as_bytes()[1..].to_vec(),
                };
            }
            assert!(
                refused,
                "a save past the cap is refused with 503 and Retry-After"
            );
        }
        panic!("the slow save was refused as busy at every attempt");
    }

    /// Sends the rest of the body and returns the whole answer, read until the server closes.
    fn finish(mut self) -> String {
        self.sock.write_all(&self.rest).unwrap();
        self.sock.flush().unwrap();
        let mut answer = Vec::new();
        let _ = self.sock.read_to_end(&mut answer);
        String::from_utf8_lossy(&answer).into_owned()
    }
}

/// Whether the server has already answered on `sock` (the slow save refused as busy).
fn answered(sock: &std::net::TcpStream) -> bool {
    sock.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let peeked = sock.peek(&mut byte);
    sock.set_nonblocking(false).unwrap();
    matches!(peeked, Ok(n) if n > 0)
}

/// The body of the slow save: most of the cap.
fn slow_body() -> String {
    state_doc(1, "slow-lineage", &"p".repeat(990_000))
}

/// The cap on request bytes in flight: while one save's declared body holds most of it,
/// another that would pass it gets 503 with Retry-After at once; when the first is done,
/// saves are taken again.
#[test]
fn saves_past_the_bytes_in_flight_cap_are_refused_for_a_retry() {
    let server = capped_server();
    let token = server.token("acme", "alice", "operator");
    // Beginning the slow save asserts that a save past the cap is refused meanwhile.
    let slow = SlowSave::begin(&server, &token, &slow_body());
    drop(slow);
    let taken = eventually(Duration::from_secs(10), || {
        probe(&server, &token).status() == StatusCode::OK
    });
    assert!(taken, "the first save's bytes are released when it ends");
}

/// SIGTERM while a save's body is still arriving: the save is read to the end, stored and
/// acknowledged, and then the server exits cleanly.
#[test]
fn a_sigterm_lets_a_save_in_flight_finish_then_the_server_exits() {
    let mut server = capped_server();
    let token = server.token("acme", "alice", "operator");
    let body = slow_body();
    let slow = SlowSave::begin(&server, &token, &body);
    server.terminate();
    assert!(
        eventually(Duration::from_secs(10), || server
            .logs()
            .contains("shutting down")),
        "the server starts shutting down"
    );
    let answer = slow.finish();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let exited = server.wait_exit(Duration::from_secs(40));
    assert!(
        exited.is_some_and(|s| s.success()),
        "exits once the save is answered: {exited:?}\n{}",
        server.logs()
    );
    let server = server.restart();
    let stored = Api::new(&server).get_state(&token, "slow");
    assert_eq!(
        stored.text().unwrap(),
        body,
        "the acknowledged save was kept"
    );
}

/// Once shutdown has started, a new connection is refused, even while a save in flight is
/// still being finished.
#[test]
fn after_a_sigterm_new_connections_are_refused() {
    let server = capped_server();
    let token = server.token("acme", "alice", "operator");
    let slow = SlowSave::begin(&server, &token, &slow_body());
    server.terminate();
    assert!(
        eventually(Duration::from_secs(10), || server
            .logs()
            .contains("shutting down")),
        "the server starts shutting down"
    );
    let addr = server.base.trim_start_matches("http://");
    let refused = std::net::TcpStream::connect(addr);
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused),
        "{refused:?}"
    );
    assert!(
        slow.finish().starts_with("HTTP/1.1 200"),
        "the save in flight still ends"
    );
}

/// A base URL that is an [`Endpoint`], for a server this file starts itself.
struct At(String);

impl Endpoint for At {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.0)
    }
}

/// What a store showed on a full disk: the server's answers and logs, and `token create`'s.
struct OnFullDisk {
    read: (u16, String),
    write: (u16, String),
    logs: String,
    token_failed: bool,
    token_err: String,
    /// Whether a write succeeded once the disk had room again, the server running on.
    wrote_once_there_was_room: bool,
}

/// A full disk, for real: a 4 MiB tmpfs filled to its last block, mounted in a user and
/// mount namespace of the test's own (`unshare -rm`: no root needed where unprivileged user
/// namespaces are on, as on most Linux systems). The store in `store` (a server's folder,
/// the server stopped) is copied in, the disk filled, then `token create` and `serve` run on
/// it, and `token` reads and writes the state `net`; then the disk is given room, and a
/// write is tried again.
fn on_full_disk(store: &std::path::Path, token: &str) -> OnFullDisk {
    let userns = std::process::Command::new("unshare")
        .args(["-rm", "true"])
        .status();
    assert!(
        userns.is_ok_and(|s| s.success()),
        "this test mounts a small file system in a user namespace of its own: it needs unshare (util-linux) and unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)"
    );
    let outer = tempfile::tempdir().unwrap();
    let disk = outer.path().join("disk");
    std::fs::create_dir(&disk).unwrap();
    let script = r#"set -e
mount -t tmpfs -o size=4m tmpfs "$DISK"
cp -a "$STORE/." "$DISK/"
dd if=/dev/zero of="$DISK/filler" bs=4k 2>/dev/null || true
( while [ ! -e "$OUT/free" ]; do sleep 0.1; done; rm -f "$DISK/filler"; touch "$OUT/freed" ) &
"$BIN" token create --org acme --user bob --role operator --data-dir "$DISK/data" > "$OUT/token.out" 2> "$OUT/token.err" || echo $? > "$OUT/token.rc"
exec "$BIN" serve --listen 127.0.0.1:0 --data-dir "$DISK/data""#;
    let mut child = std::process::Command::new("unshare")
        .args(["-rm", "sh", "-c", script])
        .env("DISK", &disk)
        .env("STORE", store)
        .env("BIN", bin())
        .env("OUT", outer.path())
        .env("RUST_LOG", "info")
        .env_remove("HEGEMONY_TF_STATE_ENCRYPTION_KEY")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let logs = Arc::new(std::sync::Mutex::new(String::new()));
    let sink = logs.clone();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if let Some(addr) = line.split("listening on http://").nth(1) {
                let _ = tx.send(addr.trim().to_owned());
            }
            sink.lock().unwrap().push_str(&(line + "\n"));
        }
    });
    let started = rx.recv_timeout(Duration::from_secs(20));
    let logs = move || logs.lock().unwrap().clone();
    let Ok(addr) = started else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the server did not start on a full disk:\n{}", logs());
    };
    let api = Api::new(&At(format!("http://{addr}")));
    let read = api.get_state(token, "net");
    let read = (read.status().as_u16(), read.text().unwrap());
    let write = api.post_state(token, "net", None, state_doc(2, "lin", "lost"));
    let write = (write.status().as_u16(), write.text().unwrap());
    std::fs::write(outer.path().join("free"), "").unwrap();
    let freed = outer.path().join("freed");
    assert!(eventually(Duration::from_secs(10), || freed.exists()));
    let wrote_once_there_was_room = eventually(Duration::from_secs(20), || {
        api.post_state(token, "net", None, state_doc(2, "lin", "room"))
            .status()
            == 200
    });
    let _ = child.kill();
    let _ = child.wait();
    OnFullDisk {
        read,
        write,
        logs: logs(),
        token_failed: outer.path().join("token.rc").exists(),
        token_err: std::fs::read_to_string(outer.path().join("token.err")).unwrap(),
        wrote_once_there_was_room,
    }
}

/// A server whose store holds one state, `net`, and an operator's token.
fn store_with_a_state() -> (Server, String, String) {
    let server = Server::start();
    let token = server.token("acme", "alice", "operator");
    let doc = state_doc(1, "lin", "kept");
    let saved = Api::new(&server).post_state(&token, "net", None, doc.clone());
    assert_eq!(saved.status(), 200);
    (server, token, doc)
}

/// Opening the catalog used to write, so neither the server nor `token create` could even
/// start on a full disk. A store closed cleanly has no SQLite shared-memory file, which
/// takes space to make: the catalog opens read-only, says so at ERROR, serves reads and
/// refuses writes in words.
#[test]
fn on_a_full_disk_the_server_starts_serves_reads_and_refuses_writes_in_words() {
    let (mut server, token, doc) = store_with_a_state();
    server.terminate();
    assert!(server.wait_exit(Duration::from_secs(40)).is_some());
    let seen = on_full_disk(server.dir.path(), &token);
    assert_eq!(seen.read, (200, doc));
    assert_eq!(seen.write.0, 503);
    assert!(seen.write.1.contains("free space"), "{}", seen.write.1);
    assert!(
        seen.logs.contains("ERROR") && seen.logs.contains("serving it read-only"),
        "{}",
        seen.logs
    );
    assert!(seen.token_failed, "token create succeeded on a full disk");
    assert!(
        seen.token_err.contains("cannot create the token") && seen.token_err.contains("free space"),
        "{}",
        seen.token_err
    );
    assert!(
        seen.wrote_once_there_was_room,
        "the catalog is opened for writing again once the disk has room:\n{}",
        seen.logs
    );
}

/// A store a crash left (its write-ahead log and shared memory in place) opens as it is,
/// with no write: a write then meets the full disk itself, said in words.
#[test]
fn after_a_crash_on_a_full_disk_the_store_opens_without_writing() {
    let (mut server, token, doc) = store_with_a_state();
    server.kill9();
    let seen = on_full_disk(server.dir.path(), &token);
    assert_eq!(seen.read, (200, doc));
    assert_eq!(seen.write.0, 503);
    assert!(
        seen.write.1.contains("disk") && seen.write.1.contains("is full"),
        "{}",
        seen.write.1
    );
    assert!(!seen.logs.contains("read-only"), "{}", seen.logs);
    assert!(seen.token_failed, "token create succeeded on a full disk");
    assert!(
        seen.token_err.contains("cannot create the token") && seen.token_err.contains("is full"),
        "{}",
        seen.token_err
    );
    assert!(seen.wrote_once_there_was_room, "{}", seen.logs);
}
/// The client timeout the tests of slow clients run with, in seconds.
const SHORT_TIMEOUT: &str = "2";

/// A raw connection to `server` whose reads give up after `wait`.
fn connect(server: &Server, wait: Duration) -> TcpStream {
    let sock = TcpStream::connect(server.base.trim_start_matches("http://")).unwrap();
    sock.set_read_timeout(Some(wait)).unwrap();
    sock
}

/// Reads one answer off `sock`: its head and its Content-Length body, or what came before
/// the connection closed or the read timed out.
fn read_answer(sock: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            if body.len() >= length {
                return text;
            }
        }
        match sock.read(&mut buf) {
            Ok(0) | Err(_) => return text,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Whether the server closed `sock` (a read ends at EOF or a reset, not at its timeout).
fn closed_by_server(sock: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match sock.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => {
                return !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                )
            }
        }
    }
}

/// Sixteen clients with no credentials and sixteen with a made-up token each declare a body
/// the size of the largest state, which is the whole cap, and send none of it: every save,
/// lock and unlock of a real client is still taken, and each of them is answered 401 on its
/// headers alone, its connection closed.
#[test]
fn unauthenticated_clients_declaring_the_largest_state_cannot_hold_the_bytes_cap() {
    let server = capped_server();
    let token = server.token("acme", "alice", "operator");
    let mut strangers: Vec<TcpStream> = (0..32)
        .map(|i| {
            let mut sock = connect(&server, Duration::from_secs(20));
            let credentials = if i % 2 == 0 {
                ""
            } else {
                "Authorization: Bearer hgs_made_up_token\r\n"
            };
            write!(
                sock,
                "POST /api/tf-states/net/state HTTP/1.1\r\nHost: x\r\n{credentials}Content-Length: 1048576\r\n\r\n"
            )
            .unwrap();
            sock
        })
        .collect();
    let api = Api::new(&server);
    assert_eq!(api.lock(&token, "net", &lock_doc("L1")).status(), 200);
    assert_eq!(
        api.post_state(
            &token,
            "net",
            Some("L1"),
            state_doc(1, "l", &"x".repeat(100_000))
        )
        .status(),
        200
    );
    assert_eq!(api.unlock(&token, "net", &lock_doc("L1")).status(), 200);
    for sock in &mut strangers {
        let answer = read_answer(sock);
        assert!(
            answer.starts_with("HTTP/1.1 401") && answer.contains("unauthenticated"),
            "{answer}"
        );
        assert!(closed_by_server(sock), "the connection is closed");
    }
}

/// A save whose body stops arriving is answered 408 once no byte has come for the client
/// timeout, and the bytes it held against the cap are released; meanwhile other clients
/// are served.
#[test]
fn a_body_that_stops_arriving_is_answered_408_and_its_bytes_released() {
    let server = Server::start_with(&[
        ("HEGEMONY_TF_STATE_MAX_BYTES", "1048576"),
        ("HEGEMONY_MAX_BODY_BYTES_IN_FLIGHT", "1048576"),
        ("HEGEMONY_CLIENT_TIMEOUT_SECONDS", SHORT_TIMEOUT),
    ]);
    let token = server.token("acme", "alice", "operator");
    // Beginning it asserts that the stalled save holds the cap: a probe save gets 503.
    let mut slow = SlowSave::begin(&server, &token, &slow_body());
    assert_eq!(
        Api::new(&server)
            .get_state(&token, "never-written")
            .status(),
        404,
        "a read is served while the save stalls"
    );
    let answer = read_answer(&mut slow.sock);
    assert!(
        answer.starts_with("HTTP/1.1 408") && answer.contains("request_timeout"),
        "{answer}"
    );
    assert_eq!(
        probe(&server, &token).status(),
        200,
        "its bytes were released"
    );
    assert!(
        eventually(Duration::from_secs(10), || server
            .logs()
            .contains("request_timeout")),
        "the refusal is logged"
    );
}

/// A save whose body trickles in, a byte at a time and never silent for the client timeout,
/// is answered 408 once a window passes with less than the least rate, and its bytes are
/// released; a save at a normal pace is taken under the same settings.
#[test]
fn a_body_that_trickles_is_answered_408_and_its_bytes_released() {
    let server = Server::start_with(&[
        ("HEGEMONY_TF_STATE_MAX_BYTES", "1048576"),
        ("HEGEMONY_MAX_BODY_BYTES_IN_FLIGHT", "1048576"),
        ("HEGEMONY_CLIENT_MIN_BYTES_PER_SECOND", "1000"),
        ("HEGEMONY_CLIENT_RATE_WINDOW_SECONDS", "1"),
    ]);
    let token = server.token("acme", "alice", "operator");
    let body = slow_body();
    // A byte each time the wait for an answer gives up: far under 1000 bytes a second, and
    // far from 30 s of silence.
    let mut sock = connect(&server, Duration::from_millis(100));
    write!(
        sock,
        "POST /api/tf-states/slow/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let mut sent = 0;
    while sent < 300 && !String::from_utf8_lossy(&answer).contains("request_timeout") {
        if sock.write_all(&body.as_bytes()[sent..sent + 1]).is_ok() {
            sent += 1;
        }
        if let Ok(n) = sock.read(&mut buf) {
            answer.extend_from_slice(&buf[..n]);
        }
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 408") && answer.contains("request_timeout"),
        "after {sent} bytes: {answer}"
    );
    assert!(answer.contains("1000 bytes per second"), "{answer}");
    assert_eq!(
        probe(&server, &token).status(),
        200,
        "its bytes were released, and a save at a normal pace is taken"
    );
}

/// A client that sends its request head a few bytes at a time is cut off once the client
/// timeout has passed since its connection began waiting for a head, without an answer;
/// so is a keep-alive connection left idle after its answer. Others are served meanwhile.
#[test]
fn slow_and_idle_connections_are_closed_after_the_client_timeout() {
    let server = Server::start_with(&[("HEGEMONY_CLIENT_TIMEOUT_SECONDS", SHORT_TIMEOUT)]);
    let token = server.token("acme", "alice", "operator");
    let mut idle = connect(&server, Duration::from_secs(20));
    write!(
        idle,
        "GET /api/tf-states/net/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .unwrap();
    assert!(read_answer(&mut idle).starts_with("HTTP/1.1 404"));
    let mut slow = connect(&server, Duration::from_millis(250));
    slow.write_all(b"GET /api/tf-states/net/state HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let api = Api::new(&server);
    let mut cut_off = false;
    for _ in 0..80 {
        assert_eq!(
            api.get_state(&token, "net").status(),
            404,
            "others are served"
        );
        if slow.write_all(b"X-Slow: 1\r\n").is_err() || closed_by_server(&mut slow) {
            cut_off = true;
            break;
        }
    }
    assert!(cut_off, "the slow client was never cut off");
    assert!(closed_by_server(&mut idle), "the idle connection is closed");
    assert!(
        eventually(Duration::from_secs(10), || server
            .logs()
            .contains("sent no complete request head within 2 s")),
        "{}",
        server.logs()
    );
}

/// A client that stops reading a large answer is cut off once none of it has left for the
/// client timeout, instead of holding its connection and the answer for ever.
#[test]
fn a_client_that_stops_reading_its_answer_is_cut_off() {
    let server = Server::start_with(&[("HEGEMONY_CLIENT_TIMEOUT_SECONDS", SHORT_TIMEOUT)]);
    let token = server.token("acme", "alice", "operator");
    // Larger than what the socket buffers of loopback take in before the server's write waits.
    let doc = state_doc(1, "big", &"p".repeat(12 * 1024 * 1024));
    assert_eq!(
        Api::new(&server)
            .post_state(&token, "big", None, doc.clone())
            .status(),
        200
    );
    let mut reader = connect(&server, Duration::from_secs(20));
    write!(
        reader,
        "GET /api/tf-states/big/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .unwrap();
    assert!(
        eventually(Duration::from_secs(30), || server
            .logs()
            .contains("cut off a client that stopped reading its answer")),
        "the stalled write is cut off:\n{}",
        server.logs()
    );
    let mut got = Vec::new();
    let _ = reader.read_to_end(&mut got);
    assert!(got.len() < doc.len(), "the answer was cut short");
}

/// With a cap of two connections, a third waits in the backlog, unanswered, until one of
/// the two ends; then it is served. Reaching the cap is logged.
#[test]
fn the_connection_cap_makes_the_next_connection_wait_until_one_ends() {
    let server = Server::start_with(&[("HEGEMONY_MAX_CONNECTIONS", "2")]);
    let token = server.token("acme", "alice", "operator");
    let request = format!(
        "GET /api/tf-states/net/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    let mut open: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut sock = connect(&server, Duration::from_secs(20));
            sock.write_all(request.as_bytes()).unwrap();
            assert!(read_answer(&mut sock).starts_with("HTTP/1.1 404"));
            sock
        })
        .collect();
    let mut third = connect(&server, Duration::from_secs(2));
    third.write_all(request.as_bytes()).unwrap();
    assert_eq!(read_answer(&mut third), "", "not served while two are open");
    assert!(
        eventually(Duration::from_secs(10), || server
            .logs()
            .contains("at the connection cap")),
        "{}",
        server.logs()
    );
    drop(open.remove(0));
    third
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    assert!(
        read_answer(&mut third).starts_with("HTTP/1.1 404"),
        "served once one ended"
    );
}

/// The server's soft limit on open files, from /proc.
fn open_files_limit(pid: u32) -> String {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    line.split_whitespace().nth(3).unwrap().to_owned()
}

/// Sets the server's soft limit on open files with `prlimit`.
fn set_open_files_limit(pid: u32, soft: &str) {
    let set = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--nofile={soft}:")])
        .status()
        .unwrap();
    assert!(set.success(), "prlimit could not set the limit");
}

/// Out of file descriptors, every accept fails at once: the server backs off (it neither
/// spins nor floods its log: one warning per interval, naming how many it held back) and
/// serves again once descriptors are free.
#[test]
fn running_out_of_file_descriptors_backs_off_and_serves_again_once_they_are_freed() {
    let server = Server::start();
    let token = server.token("acme", "alice", "operator");
    let pid = server.pid();
    let before = open_files_limit(pid);
    let in_use = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    set_open_files_limit(pid, &(in_use + 2).to_string());
    // Two are accepted; the rest wait in the backlog, their accepts failing with EMFILE.
    let waiting: Vec<TcpStream> = (0..8)
        .map(|_| connect(&server, Duration::from_secs(20)))
        .collect();
    assert!(
        eventually(Duration::from_secs(10), || server
            .logs()
            .contains("accept failed")),
        "{}",
        server.logs()
    );
    let cpu = |pid: u32| -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    };
    let (started, ticks) = (std::time::Instant::now(), cpu(pid));
    // Bounded by count: the backoff's longest wait is one second.
    let mut waited = 0;
    while started.elapsed() < Duration::from_secs(3) && waited < 100 {
        std::thread::sleep(Duration::from_millis(50));
        waited += 1;
    }
    let used = cpu(pid) - ticks;
    let warnings = server.logs().matches("accept failed").count();
    assert!(
        warnings <= 2,
        "{warnings} warnings in a few seconds:\n{}",
        server.logs()
    );
    // A spinning loop uses a whole core: about 100 ticks a second.
    assert!(
        used < 100,
        "{used} clock ticks of CPU in about 3 s while out of descriptors"
    );
    set_open_files_limit(pid, &before);
    drop(waiting);
    assert_eq!(
        Api::new(&server).get_state(&token, "net").status(),
        404,
        "served again"
    );
}
