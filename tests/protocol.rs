//! The backend protocol where it crosses the wire, against the real server: the local-only
//! LOCK and UNLOCK methods, chunked and over-limit bodies refused as they arrive (or, when
//! declared or announced by a chunk size over the limit, before they do), requests no client
//! library would send (two `Authorization` headers), refusals' log lines, tokens made by
//! another process while the server runs, and what the first start prints and when. Statuses, bodies and rules that need no wire are pinned by
//! the in-process tier (shared/tests/api/).

use std::time::Duration;

use hegemony_state_blackbox::*;

const LOCK_PATH: &str = "/api/tf-states/net/lock";

#[test]
fn the_lock_and_unlock_verbs_work_on_the_local_server() {
    let server = Server::start();
    let api = Api::new(&server);
    let t = server.token("acme", "alice", "operator");
    let send = |method: &str, id: &str| {
        api.backend(method, LOCK_PATH, &t)
            .body(lock_doc(id))
            .send()
            .unwrap()
            .status()
    };
    assert_eq!(send("LOCK", "L1"), 200);
    assert_eq!(send("UNLOCK", "L1"), 200);
    assert_eq!(send("LOCK", "L2"), 200, "the lock was released");
}

#[test]
fn terraform_force_unlock_sends_an_empty_chunked_body() {
    let server = Server::start();
    let api = Api::new(&server);
    let alice = server.token("acme", "alice", "operator");
    let admin = server.token("acme", "root", "admin");
    api.lock(&alice, "net", &lock_doc("L1"));
    // A zero-length chunked body, as Go sends for UNLOCK/PUT/POST force-unlocks.
    let empty = reqwest::blocking::Body::new(std::io::empty());
    let r = api
        .backend("UNLOCK", LOCK_PATH, &admin)
        .header("Content-Type", "application/json")
        .header("Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg==")
        .body(empty)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(api.lock(&admin, "net", &lock_doc("L2")).status(), 200);
}

#[test]
fn a_write_over_the_limit_is_413_with_or_without_content_length() {
    let server = Server::start_with(&[("HEGEMONY_TF_STATE_MAX_BYTES", "4096")]);
    let api = Api::new(&server);
    let t = server.token("acme", "alice", "operator");
    let big = state_doc(1, "lin", &"x".repeat(5000));
    let (code, msg) = error_body(api.post_state(&t, "net", None, big.clone())).expect(413);
    assert_eq!(code, "too_large");
    assert!(msg.contains("4096"), "{msg}");
    // Chunked, no Content-Length: refused as it arrives.
    let chunked = reqwest::blocking::Body::new(std::io::Cursor::new(big.into_bytes()));
    let (code, _) = error_body(api.post_state(&t, "net", None, chunked)).expect(413);
    assert_eq!(code, "too_large");
    assert_eq!(api.get_state(&t, "net").status(), 404, "nothing was stored");
    let fits = state_doc(1, "lin", "small");
    assert_eq!(api.post_state(&t, "net", None, fits).status(), 200);
}

/// A body declared over the limit is answered 413 at once, before any byte of it arrives
/// (and well within the client timeout), rather than after waiting for bytes to drain.
#[test]
fn a_body_declared_over_the_limit_is_413_before_any_byte_of_it_is_sent() {
    use std::io::{Read, Write};
    let server = Server::start_with(&[
        ("HEGEMONY_TF_STATE_MAX_BYTES", "4096"),
        ("HEGEMONY_CLIENT_TIMEOUT_SECONDS", "600"),
    ]);
    let t = server.token("acme", "alice", "operator");
    let mut sock = std::net::TcpStream::connect(server.base.trim_start_matches("http://")).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(sock, "POST /api/tf-states/net/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {t}\r\nContent-Length: 100000000\r\n\r\n").unwrap();
    let mut answer = [0u8; 4096];
    let n = sock.read(&mut answer).unwrap_or(0);
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(
        answer.starts_with("HTTP/1.1 413") && answer.contains("too_large"),
        "{answer}"
    );
}

/// A chunked body whose first size line alone announces more than the route takes (2^40
/// bytes) is answered 413 at once, before any of the chunk's data, as a declared
/// `Content-Length` over the limit is, rather than waiting for data that never comes.
#[test]
fn a_chunk_announced_over_the_limit_is_413_before_its_data_is_sent() {
    use std::io::{Read, Write};
    let server = Server::start_with(&[
        ("HEGEMONY_TF_STATE_MAX_BYTES", "4096"),
        ("HEGEMONY_CLIENT_TIMEOUT_SECONDS", "600"),
    ]);
    let t = server.token("acme", "alice", "operator");
    let half = format!("800\r\n{}\r\n", "x".repeat(0x800));
    for (path, before, size) in [
        ("/api/tf-states/net/state", "", "10000000000\r\n"),
        // Chunks that fit one by one, until one would take the body past the limit.
        ("/api/tf-states/net/state", half.as_str(), "801\r\n"),
        ("/api/tf-states/net/lock", "", "4001\r\n"),
    ] {
        let mut sock =
            std::net::TcpStream::connect(server.base.trim_start_matches("http://")).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        write!(sock, "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {t}\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
        sock.write_all(before.as_bytes()).unwrap();
        sock.write_all(size.as_bytes()).unwrap();
        let mut answer = [0u8; 4096];
        let n = sock.read(&mut answer).unwrap_or(0);
        let answer = String::from_utf8_lossy(&answer[..n]);
        assert!(
            answer.starts_with("HTTP/1.1 413") && answer.contains("too_large"),
            "{path} {size:?}: {answer}"
        );
    }
    let api = Api::new(&server);
    assert_eq!(api.get_state(&t, "net").status(), 404, "nothing was stored");
    assert_eq!(
        api.lock(&t, "net", &lock_doc("L1")).status(),
        200,
        "nor locked"
    );
}

/// Two `Authorization` headers, one valid and one not, in either order: 400, never served
/// as either caller, so a proxy in front cannot be made to disagree with the server about
/// who is calling.
#[test]
fn two_authorization_headers_are_refused_on_the_wire() {
    let server = Server::start();
    let t = server.token("acme", "alice", "operator");
    let valid = format!("Authorization: Bearer {t}\r\n");
    let invalid = "Authorization: Bearer hgs_garbage\r\n";
    for headers in [format!("{valid}{invalid}"), format!("{invalid}{valid}")] {
        let answer = raw(&server, &format!("GET /api/tf-states/net/state HTTP/1.1\r\nHost: x\r\n{headers}Connection: close\r\n\r\n"));
        assert!(
            answer.starts_with("HTTP/1.1 400") && answer.contains("invalid_request"),
            "{answer}"
        );
    }
    let answer = raw(
        &server,
        &format!(
            "GET /api/tf-states/net/state HTTP/1.1\r\nHost: x\r\n{valid}Connection: close\r\n\r\n"
        ),
    );
    assert!(
        answer.starts_with("HTTP/1.1 404"),
        "one is served: {answer}"
    );
}

/// A lock refused on its headers (no credentials) is logged with its state and says its
/// body was not read (it never is, for a client that has not authenticated) and that the
/// caller had no valid credentials; one refused after its body was read names the body's ID.
#[test]
fn a_refused_lock_logs_its_state_lock_id_and_caller_as_far_as_known() {
    let server = Server::start();
    let viewer = server.token("acme", "vic", "viewer");
    let api = Api::new(&server);
    let r = api
        .request("POST", LOCK_PATH, None)
        .body(lock_doc("NOBODY-1"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(
        api.lock(&viewer, "net", &lock_doc("VIEWER-2")).status(),
        403
    );
    let refusals = |code: &str| -> String {
        server
            .logs()
            .lines()
            .find(|l| l.contains("request refused") && l.contains(code))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(eventually(Duration::from_secs(10), || !refusals(
        "forbidden"
    )
    .is_empty()));
    let unauthenticated = refusals("unauthenticated");
    for fact in [
        "WARN",
        "state=\"net\"",
        "lock_ids=not known: refused before its body was read",
        "principal=\"none: no valid credentials\"",
    ] {
        assert!(unauthenticated.contains(fact), "{fact}: {unauthenticated}");
    }
    let forbidden = refusals("forbidden");
    for fact in ["state=\"net\"", "lock_ids=[\"VIEWER-2\"]", "vic"] {
        assert!(forbidden.contains(fact), "{fact}: {forbidden}");
    }
}

/// `..` as sent, not normalised away by a client library, is refused by name.
#[test]
fn a_dot_dot_name_on_the_wire_is_400() {
    let server = Server::start();
    let t = server.token("acme", "alice", "operator");
    for name in ["..", "%2E%2E"] {
        let answer = raw(&server, &format!("GET /api/tf-states/{name}/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {t}\r\nConnection: close\r\n\r\n"));
        assert!(
            answer.starts_with("HTTP/1.1 400") && answer.contains("invalid_name"),
            "{answer}"
        );
    }
}

#[test]
fn huge_headers_and_broken_requests_never_get_a_500() {
    let server = Server::start();
    let api = Api::new(&server);
    let t = server.token("acme", "alice", "operator");
    let r = api
        .backend("GET", "/api/tf-states/net/state", &t)
        .header("X-Huge", "h".repeat(512 * 1024))
        .send();
    if let Ok(r) = r {
        assert!(r.status().is_client_error(), "{}", r.status());
    }
    // A broken chunked body.
    let answer = raw(&server, &format!("POST /api/tf-states/net/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {t}\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nnope\r\n0\r\n\r\n"));
    assert!(!answer.starts_with("HTTP/1.1 5"), "{answer}");
    // The server still answers.
    assert_eq!(api.get_state(&t, "net").status(), 404);
}

#[test]
fn a_token_created_while_the_server_runs_works_at_once() {
    let server = Server::start();
    let late = server.token("acme", "late", "operator");
    assert_eq!(Api::new(&server).get_state(&late, "net").status(), 404);
}

/// A script that starts the server with its output sent to a file, waits for the port and
/// then reads the file finds the token, the backend.hcl and the page's address there: they
/// are printed and flushed before the port opens.
#[test]
fn the_first_start_prints_its_token_before_the_port_opens() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let printed = dir.path().join("out.txt");
    let mut child = std::process::Command::new(bin())
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir.path().join("data"))
        .env_remove("HEGEMONY_TF_STATE_ENCRYPTION_KEY")
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&printed).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // As a script would: try the port as often as it can (no pause that would hide the
    // moment it opens), for a bounded time.
    let started = std::time::Instant::now();
    let mut open = false;
    while !open && started.elapsed() < Duration::from_secs(30) {
        open = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
    }
    let out = std::fs::read_to_string(&printed).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(open, "the server never opened its port");
    assert!(out.contains("hgs_"), "no token yet: {out:?}");
    assert!(out.contains("unlock_method"), "no backend.hcl yet: {out:?}");
    assert!(
        out.contains(&format!("http://127.0.0.1:{port}/")),
        "{out:?}"
    );
}

#[test]
fn the_first_start_prints_an_admin_token_and_a_backend_hcl_once() {
    let server = Server::start();
    assert!(eventually(Duration::from_secs(5), || server
        .stdout()
        .contains("unlock_method")));
    let out = server.stdout();
    let token = out
        .split_whitespace()
        .find(|w| w.starts_with("hgs_"))
        .unwrap()
        .to_owned();
    assert!(out.contains(&format!("{}/api/tf-states/example/lock", server.base)));
    assert!(
        !server.logs().contains(&token),
        "the token is printed, never logged"
    );
    assert_eq!(Api::new(&server).list(&token)["org"], "default");
    // Everything the second start printed is in once it has stopped and its pipes closed.
    let printed = server.restart().stop();
    assert!(!printed.contains("hgs_"), "printed once only");
}
