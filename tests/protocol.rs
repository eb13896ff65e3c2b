//! The backend protocol over HTTP against the real server: statuses and bodies exactly as
//! DESIGN section 4 pins them, every bad input refused with a message that names the
//! problem, and nothing bad stored. OpenTofu cases use request fixtures taken from the
//! protocol reference (no OpenTofu binary can run here).

use std::io::Read;
use std::time::Duration;

use hegemony_state_blackbox::*;
use serde_json::Value;

struct Api {
    server: Server,
    http: Client,
}

impl Api {
    fn new() -> Api {
        Api::with(&[])
    }

    fn with(env: &[(&str, &str)]) -> Api {
        Api {
            server: Server::start_with(env),
            http: client(),
        }
    }

    fn state_url(&self, name: &str) -> String {
        self.server.url(&format!("/api/tf-states/{name}/state"))
    }

    fn lock_url(&self, name: &str) -> String {
        self.server.url(&format!("/api/tf-states/{name}/lock"))
    }

    fn get(&self, token: &str, name: &str) -> Response {
        self.http
            .get(self.state_url(name))
            .basic_auth("u", Some(token))
            .send()
            .unwrap()
    }

    fn post(
        &self,
        token: &str,
        name: &str,
        id: Option<&str>,
        body: impl Into<reqwest::blocking::Body>,
    ) -> Response {
        let mut url = self.state_url(name);
        if let Some(id) = id {
            url.push_str(&format!("?ID={id}"));
        }
        self.http
            .post(url)
            .basic_auth("u", Some(token))
            .body(body)
            .send()
            .unwrap()
    }

    fn lock(&self, token: &str, name: &str, body: &str) -> Response {
        self.http
            .post(self.lock_url(name))
            .basic_auth("u", Some(token))
            .body(body.to_owned())
            .send()
            .unwrap()
    }

    fn unlock(&self, token: &str, name: &str, body: &str) -> Response {
        self.http
            .delete(self.lock_url(name))
            .basic_auth("u", Some(token))
            .body(body.to_owned())
            .send()
            .unwrap()
    }

    fn list(&self, token: &str) -> Value {
        let r = self
            .http
            .get(self.server.url("/api/tf-states"))
            .bearer_auth(token)
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
        r.json().unwrap()
    }
}

/// The error code and message of an error response, after checking its status.
fn error(r: Response, status: u16) -> (String, String) {
    assert_eq!(r.status().as_u16(), status, "unexpected status");
    let v: Value = r.json().expect("an error body is JSON");
    (
        v["error"]["code"].as_str().unwrap().to_owned(),
        v["error"]["message"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn a_state_reads_back_exactly_as_written_and_is_404_before() {
    let api = Api::new();
    let t = api.server.token("acme", "alice", "operator");
    assert_eq!(api.get(&t, "net").status(), 404);
    let body = state_doc(1, "lin-1", "hello");
    assert_eq!(api.post(&t, "net", None, body.clone()).status(), 200);
    let r = api.get(&t, "net");
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().unwrap(), body);
}

#[test]
fn reads_are_gzipped_when_accepted() {
    let api = Api::new();
    let t = api.server.token("acme", "alice", "operator");
    let body = state_doc(1, "lin", &"x".repeat(5000));
    api.post(&t, "net", None, body.clone());
    let r = api
        .http
        .get(api.state_url("net"))
        .basic_auth("u", Some(&t))
        .header("Accept-Encoding", "gzip")
        .send()
        .unwrap();
    assert_eq!(r.headers()["content-encoding"], "gzip");
    let gz = r.bytes().unwrap();
    assert!(gz.len() < body.len() / 5);
    let mut plain = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut plain)
        .unwrap();
    assert_eq!(plain, body);
}

#[test]
fn lock_is_exactly_200_and_a_conflict_is_423_with_the_holders_document() {
    let api = Api::new();
    let alice = api.server.token("acme", "alice", "operator");
    let bob = api.server.token("acme", "bob", "admin");
    let r = api.lock(&alice, "net", &lock_doc("L-alice"));
    assert_eq!(r.status(), 200);
    assert_eq!(r.bytes().unwrap().len(), 0);
    // The same holder retrying with the same ID: 200.
    assert_eq!(api.lock(&alice, "net", &lock_doc("L-alice")).status(), 200);
    let r = api.lock(&bob, "net", &lock_doc("L-bob"));
    assert_eq!(r.status(), 423);
    assert_eq!(r.headers()["content-type"], "application/json");
    let holder: Value = r.json().unwrap();
    assert_eq!(holder["ID"], "L-alice");
    assert_eq!(holder["Who"], "tester@host");
    let info = holder["Info"].as_str().unwrap();
    assert!(info.starts_with("user alice since 20"), "{info}");
    // Alice with another ID is refused too: one lock at a time.
    assert_eq!(api.lock(&alice, "net", &lock_doc("L-other")).status(), 423);
}

#[test]
fn the_lock_and_unlock_verbs_work_on_the_local_server() {
    let api = Api::new();
    let t = api.server.token("acme", "alice", "operator");
    let lock = Method::from_bytes(b"LOCK").unwrap();
    let unlock = Method::from_bytes(b"UNLOCK").unwrap();
    let r = api
        .http
        .request(lock.clone(), api.lock_url("net"))
        .basic_auth("u", Some(&t))
        .body(lock_doc("L1"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = api
        .http
        .request(unlock, api.lock_url("net"))
        .basic_auth("u", Some(&t))
        .body(lock_doc("L1"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = api
        .http
        .request(lock, api.lock_url("net"))
        .basic_auth("u", Some(&t))
        .body(lock_doc("L2"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200, "the lock was released");
}

#[test]
fn unlock_rules_by_id_empty_body_and_permission() {
    let api = Api::new();
    let alice = api.server.token("acme", "alice", "operator");
    let carol = api.server.token("acme", "carol", "operator");
    let admin = api.server.token("acme", "root", "admin");
    // Unlocking an unlocked state is 200, even naming an ID.
    assert_eq!(
        api.unlock(&alice, "net", &lock_doc("nothing")).status(),
        200
    );
    api.lock(&alice, "net", &lock_doc("L1"));
    let (code, msg) = error(api.unlock(&alice, "net", &lock_doc("OLD")), 409);
    assert_eq!(code, "lock_id_mismatch");
    assert!(msg.contains("OLD") && msg.contains("L1"), "{msg}");
    let (code, _) = error(api.unlock(&alice, "net", "{}"), 400);
    assert_eq!(code, "invalid_unlock");
    let (code, _) = error(api.unlock(&alice, "net", r#"{"ID":""}"#), 400);
    assert_eq!(code, "invalid_unlock");
    // Someone else's lock, even with its ID, needs tf_state:manage.
    let (code, msg) = error(api.unlock(&carol, "net", &lock_doc("L1")), 403);
    assert_eq!(code, "not_lock_holder");
    assert!(msg.contains("user alice"), "{msg}");
    let (code, _) = error(api.unlock(&carol, "net", ""), 403);
    assert_eq!(code, "not_lock_holder");
    // The holder's empty body releases its own lock.
    assert_eq!(api.unlock(&alice, "net", "").status(), 200);
    api.lock(&alice, "net", &lock_doc("L2"));
    assert_eq!(
        api.unlock(&admin, "net", "").status(),
        200,
        "an admin forces"
    );
    assert_eq!(api.lock(&carol, "net", &lock_doc("L3")).status(), 200);
    let logs = api.server.logs();
    assert!(logs.contains("lock force-unlocked"), "{logs}");
}

#[test]
fn opentofu_force_unlock_names_the_id_and_releases_for_an_admin() {
    let api = Api::new();
    let alice = api.server.token("acme", "alice", "operator");
    let admin = api.server.token("acme", "root", "admin");
    api.lock(
        &alice,
        "net",
        &lock_doc("6f1c2a4e-0000-4000-8000-000000000001"),
    );
    let fixture = r#"{"ID":"6f1c2a4e-0000-4000-8000-000000000001","Operation":"","Info":"","Who":"","Version":"","Created":"0001-01-01T00:00:00Z","Path":""}"#;
    assert_eq!(api.unlock(&admin, "net", fixture).status(), 200);
    assert_eq!(api.lock(&admin, "net", &lock_doc("next")).status(), 200);
}

#[test]
fn terraform_force_unlock_sends_an_empty_chunked_body() {
    let api = Api::new();
    let alice = api.server.token("acme", "alice", "operator");
    let admin = api.server.token("acme", "root", "admin");
    api.lock(&alice, "net", &lock_doc("L1"));
    // A zero-length chunked body, as Go sends for UNLOCK/PUT/POST force-unlocks.
    let empty = reqwest::blocking::Body::new(std::io::empty());
    let r = api
        .http
        .request(Method::from_bytes(b"UNLOCK").unwrap(), api.lock_url("net"))
        .basic_auth("u", Some(&admin))
        .header("Content-Type", "application/json")
        .header("Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg==")
        .body(empty)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(api.lock(&admin, "net", &lock_doc("L2")).status(), 200);
}

#[test]
fn every_lock_document_check_refuses_with_its_reason_and_stores_nothing() {
    let api = Api::new();
    let t = api.server.token("acme", "alice", "operator");
    let cases: Vec<(String, u16, &str, &str)> = vec![
        (
            format!(r#"{{"ID":"a","Info":"{}"}}"#, "x".repeat(16 * 1024)),
            413,
            "too_large",
            "16384",
        ),
        ("[1,2]".into(), 400, "invalid_lock", "JSON object"),
        ("{not json".into(), 400, "invalid_lock", "not JSON"),
        (
            r#"{"Operation":"x"}"#.into(),
            400,
            "invalid_lock",
            "no \"ID\"",
        ),
        (
            r#"{"ID":""}"#.into(),
            400,
            "invalid_lock",
            "must not be empty",
        ),
        (
            format!(r#"{{"ID":"{}"}}"#, "i".repeat(256)),
            400,
            "invalid_lock",
            "255",
        ),
        (
            r#"{"ID":"hold-run-1"}"#.into(),
            400,
            "invalid_lock",
            "reserved",
        ),
        (
            r#"{"ID":"a","Who":42}"#.into(),
            400,
            "invalid_lock",
            "\"Who\" must be a string",
        ),
        (
            r#"{"ID":"a","Created":false}"#.into(),
            400,
            "invalid_lock",
            "\"Created\"",
        ),
    ];
    for (body, status, code, words) in cases {
        let (got_code, msg) = error(api.lock(&t, "net", &body), status);
        assert_eq!(got_code, code, "{body:.60}");
        assert!(msg.contains(words), "{msg} should name {words}");
    }
    assert!(api.list(&t)["states"].as_array().unwrap().is_empty());
    assert_eq!(
        api.lock(&t, "net", &lock_doc("ok")).status(),
        200,
        "nothing was left locked"
    );
}

#[test]
fn unknown_fields_and_a_non_rfc3339_created_are_dropped_from_the_stored_document() {
    let api = Api::new();
    let alice = api.server.token("acme", "alice", "operator");
    let bob = api.server.token("acme", "bob", "operator");
    api.lock(
        &alice,
        "net",
        r#"{"ID":"L1","Created":"2026-01-02 03:04:05","Extra":{"a":1},"Info":"mine"}"#,
    );
    let holder: Value = api.lock(&bob, "net", &lock_doc("L2")).json().unwrap();
    assert_eq!(holder, serde_json::json!({"ID": "L1", "Info": "mine"}));
}

#[test]
fn every_write_check_refuses_in_order_with_its_reason() {
    let api = Api::new();
    let alice = api.server.token("acme", "alice", "operator");
    let bob = api.server.token("acme", "bob", "operator");
    assert_eq!(
        api.post(&alice, "net", None, state_doc(5, "lin", "v5"))
            .status(),
        200
    );

    let (code, msg) = error(api.post(&alice, "net", None, "not json at all"), 400);
    assert_eq!(code, "not_a_state");
    assert!(msg.contains("invalid JSON"), "{msg}");
    let (code, msg) = error(
        api.post(&alice, "net", None, r#"{"version":4,"lineage":"lin"}"#),
        400,
    );
    assert_eq!(code, "not_a_state");
    assert!(msg.contains("\"serial\""), "{msg}");
    let (code, msg) = error(
        api.post(&alice, "net", None, state_doc(6, "other-lineage", "x")),
        409,
    );
    assert_eq!(code, "lineage_mismatch");
    assert!(msg.contains("another configuration"), "{msg}");
    let (code, msg) = error(api.post(&alice, "net", None, state_doc(4, "lin", "x")), 409);
    assert_eq!(code, "stale_serial");
    assert!(msg.contains("serial 4") && msg.contains("5"), "{msg}");
    let (code, msg) = error(
        api.post(&alice, "net", None, state_doc(5, "lin", "different")),
        409,
    );
    assert_eq!(code, "fork");
    assert!(msg.contains("two writers"), "{msg}");
    // The same bytes again: an idempotent 200.
    assert_eq!(
        api.post(&alice, "net", None, state_doc(5, "lin", "v5"))
            .status(),
        200
    );

    // A lock: someone else's comes first, before the document is even looked at.
    api.lock(&alice, "net", &lock_doc("L1"));
    let r = api.post(&bob, "net", Some("L1"), "not json");
    assert_eq!(r.status(), 423);
    assert_eq!(r.json::<Value>().unwrap()["ID"], "L1");
    assert_eq!(
        api.post(&bob, "net", None, state_doc(6, "lin", "x"))
            .status(),
        423
    );
    let (code, _) = error(
        api.post(&alice, "net", Some("WRONG"), state_doc(6, "lin", "x")),
        409,
    );
    assert_eq!(code, "lock_id_mismatch");
    api.unlock(&alice, "net", "");
    let (code, msg) = error(
        api.post(&alice, "net", Some("L1"), state_doc(6, "lin", "x")),
        409,
    );
    assert_eq!(code, "lock_id_mismatch");
    assert!(msg.contains("not locked"), "{msg}");

    // Nothing refused was stored.
    assert_eq!(
        api.get(&alice, "net").text().unwrap(),
        state_doc(5, "lin", "v5")
    );
    let listed = api.list(&alice);
    assert_eq!(listed["states"][0]["latest_version"], 1);
    let logs = api.server.logs();
    for reason in [
        "stale state",
        "fork",
        "another configuration",
        "not a Terraform",
    ] {
        assert!(logs.contains(reason), "the log names {reason}");
    }
    assert!(logs.contains("WARN") && logs.contains("state=net") && logs.contains("user bob"));
}

#[test]
fn a_write_over_the_limit_is_413_with_or_without_content_length() {
    let api = Api::with(&[("HEGEMONY_TF_STATE_MAX_BYTES", "4096")]);
    let t = api.server.token("acme", "alice", "operator");
    let big = state_doc(1, "lin", &"x".repeat(5000));
    let (code, msg) = error(api.post(&t, "net", None, big.clone()), 413);
    assert_eq!(code, "too_large");
    assert!(msg.contains("4096"), "{msg}");
    // Chunked, no Content-Length: refused as it arrives.
    let chunked = reqwest::blocking::Body::new(std::io::Cursor::new(big.into_bytes()));
    let (code, _) = error(api.post(&t, "net", None, chunked), 413);
    assert_eq!(code, "too_large");
    assert_eq!(api.get(&t, "net").status(), 404, "nothing was stored");
    let fits = state_doc(1, "lin", "small");
    assert_eq!(api.post(&t, "net", None, fits).status(), 200);
}

#[test]
fn opentofu_documents_are_stored_and_returned_byte_for_byte() {
    let api = Api::new();
    let t = api.server.token("acme", "alice", "operator");
    // OpenTofu writes compact JSON plus a newline.
    let compact = "{\"version\":4,\"terraform_version\":\"1.10.0\",\"serial\":1,\"lineage\":\"3d1c\",\"outputs\":{},\"resources\":[],\"check_results\":null}\n";
    assert_eq!(api.post(&t, "plain", None, compact).status(), 200);
    assert_eq!(api.get(&t, "plain").text().unwrap(), compact);
    let encrypted = r#"{"serial":7,"lineage":"3d1c-uuid","meta":{"key_provider.pbkdf2.main":"eyJzYWx0IjoiYSJ9"},"encrypted_data":"q83vEjRWeJA=","encryption_version":"v0"}"#;
    assert_eq!(api.post(&t, "enc", None, encrypted).status(), 200);
    assert_eq!(api.get(&t, "enc").text().unwrap(), encrypted);
    let listed = api.list(&t);
    let enc = listed["states"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "enc")
        .unwrap();
    assert_eq!(enc["opentofu_encrypted"], true);
    assert_eq!(enc["serial"], 7);
    // Its plaintext serial is checked: an older one is stale.
    let older = encrypted
        .replace("\"serial\":7", "\"serial\":6")
        .replace("q83v", "AAAA");
    let (code, _) = error(api.post(&t, "enc", None, older), 409);
    assert_eq!(code, "stale_serial");
}

#[test]
fn credentials_basic_or_bearer_and_their_refusals() {
    let api = Api::new();
    let t = api.server.token("acme", "alice", "operator");
    let r = api.http.get(api.state_url("net")).send().unwrap();
    assert_eq!(error(r, 401).0, "unauthenticated");
    let r = api
        .http
        .get(api.state_url("net"))
        .basic_auth("u", Some("hgs_garbage"))
        .send()
        .unwrap();
    assert_eq!(error(r, 401).0, "unauthenticated");
    let r = api
        .http
        .get(api.state_url("net"))
        .bearer_auth(&t)
        .send()
        .unwrap();
    assert_eq!(r.status(), 404, "Bearer works on the backend routes");
    let r = api
        .http
        .get(api.server.url("/api/tf-states"))
        .basic_auth("u", Some(&t))
        .send()
        .unwrap();
    let (code, msg) = error(r, 401);
    assert_eq!(code, "unauthenticated");
    assert!(msg.contains("Bearer"), "{msg}");
    let logs = api.server.logs();
    assert!(!logs.contains(&t), "a token never reaches the log");
}

#[test]
fn roles_and_orgs_bound_what_a_token_reaches() {
    let api = Api::new();
    let alice = api.server.token("acme", "alice", "operator");
    let viewer = api.server.token("acme", "vic", "viewer");
    let stranger = api.server.token("other", "sam", "admin");
    api.post(&alice, "net", None, state_doc(1, "lin", "x"));
    let (code, msg) = error(api.get(&viewer, "net"), 403);
    assert_eq!(code, "forbidden");
    assert!(
        msg.contains("tf_state:read") && msg.contains("operator"),
        "{msg}"
    );
    assert_eq!(
        error(api.lock(&viewer, "net", &lock_doc("L")), 403).0,
        "forbidden"
    );
    assert_eq!(
        api.list(&viewer)["states"].as_array().unwrap().len(),
        1,
        "viewers list"
    );
    // Another org's state is simply not there.
    assert_eq!(api.get(&stranger, "net").status(), 404);
    assert!(api.list(&stranger)["states"].as_array().unwrap().is_empty());
}

#[test]
fn illegal_names_and_unknown_routes_are_4xx_never_5xx() {
    let api = Api::new();
    let t = api.server.token("acme", "alice", "operator");
    for name in [".hidden", "a%2Fb", "a%20b", &"n".repeat(129)] {
        let (code, msg) = error(api.get(&t, name), 400);
        assert_eq!(code, "invalid_name", "{name}");
        assert!(msg.contains("name"), "{msg}");
    }
    // `..` as sent, not normalised away by a client library.
    for name in ["..", "%2E%2E"] {
        let answer = raw(&api.server, &format!("GET /api/tf-states/{name}/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {t}\r\nConnection: close\r\n\r\n"));
        assert!(
            answer.starts_with("HTTP/1.1 400") && answer.contains("invalid_name"),
            "{answer}"
        );
    }
    let r = api
        .http
        .get(api.server.url("/api/tf-states/a/b/state"))
        .bearer_auth(&t)
        .send()
        .unwrap();
    assert_eq!(error(r, 404).0, "not_found");
    let r = api
        .http
        .put(api.lock_url("net"))
        .bearer_auth(&t)
        .send()
        .unwrap();
    assert_eq!(r.headers()["allow"], "POST, LOCK, DELETE, UNLOCK");
    assert_eq!(error(r, 405).0, "method_not_allowed");
    let r = api
        .http
        .get(api.server.url("/api/tf-states/"))
        .bearer_auth(&t)
        .send()
        .unwrap();
    assert_eq!(
        r.status(),
        200,
        "the list answers with a trailing slash, no redirect"
    );
}

#[test]
fn huge_headers_and_broken_requests_never_get_a_500() {
    let api = Api::new();
    let t = api.server.token("acme", "alice", "operator");
    let r = api
        .http
        .get(api.state_url("net"))
        .basic_auth("u", Some(&t))
        .header("X-Huge", "h".repeat(512 * 1024))
        .send();
    if let Ok(r) = r {
        assert!(r.status().is_client_error(), "{}", r.status());
    }
    // A broken chunked body.
    let answer = raw(&api.server, &format!("POST /api/tf-states/net/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {t}\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nnope\r\n0\r\n\r\n"));
    assert!(!answer.starts_with("HTTP/1.1 5"), "{answer}");
    // The server still answers.
    assert_eq!(api.get(&t, "net").status(), 404);
}

#[test]
fn a_token_created_while_the_server_runs_works_at_once() {
    let api = Api::new();
    let late = api.server.token("acme", "late", "operator");
    assert_eq!(api.get(&late, "net").status(), 404);
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
    let api = Api {
        http: client(),
        server,
    };
    assert_eq!(api.list(&token)["org"], "default");
    // Everything the second start printed is in once it has stopped and its pipes closed.
    let printed = api.server.restart().stop();
    assert!(!printed.contains("hgs_"), "printed once only");
}

#[test]
fn the_list_shows_latest_versions_and_locks_but_not_lock_only_states() {
    let api = Api::new();
    let t = api.server.token("acme", "alice", "operator");
    api.post(&t, "b-state", None, state_doc(3, "lin", "x"));
    api.lock(&t, "b-state", &lock_doc("LB"));
    api.lock(&t, "a-never-written", &lock_doc("LA"));
    let listed = api.list(&t);
    let states = listed["states"].as_array().unwrap();
    assert_eq!(states.len(), 1);
    assert_eq!(states[0]["name"], "b-state");
    assert_eq!(states[0]["serial"], 3);
    assert_eq!(states[0]["lock"]["id"], "LB");
    assert_eq!(
        states[0]["lock"]["holder"],
        serde_json::json!({"kind": "user", "user": "alice"})
    );
    assert!(!listed.to_string().contains("\"x\""), "never any content");
    let r = api
        .http
        .get(api.server.url("/api/tf-states?limit=0"))
        .bearer_auth(&t)
        .send()
        .unwrap();
    assert_eq!(error(r, 400).0, "invalid_request");
}

#[test]
fn pages_of_the_list_follow_the_cursor() {
    let api = Api::new();
    let t = api.server.token("acme", "alice", "operator");
    for name in ["s1", "s2", "s3"] {
        api.post(&t, name, None, state_doc(1, "lin", name));
    }
    let page: Value = api
        .http
        .get(api.server.url("/api/tf-states?limit=2"))
        .bearer_auth(&t)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(page["states"].as_array().unwrap().len(), 2);
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    let next: Value = api
        .http
        .get(
            api.server
                .url(&format!("/api/tf-states?limit=2&cursor={cursor}")),
        )
        .bearer_auth(&t)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(next["states"][0]["name"], "s3");
    assert!(next["next_cursor"].is_null());
}

/// 32 clients race to lock one state, 200 rounds: exactly one wins each round, and every
/// loser gets 423 with the winner's document.
#[test]
fn racing_lockers_get_exactly_one_winner_per_round() {
    let api = Api::new();
    let tokens: Vec<String> = (0..4)
        .map(|i| api.server.token("acme", &format!("u{i}"), "operator"))
        .collect();
    let clients = 32;
    let rounds = 200;
    for round in 0..rounds {
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(clients));
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let (http, url, token, barrier) = (
                    api.http.clone(),
                    api.lock_url("race"),
                    tokens[c % tokens.len()].clone(),
                    barrier.clone(),
                );
                std::thread::spawn(move || {
                    let id = format!("r{round}-c{c}");
                    barrier.wait();
                    let r = http
                        .post(url)
                        .basic_auth("u", Some(&token))
                        .body(lock_doc(&id))
                        .send()
                        .unwrap();
                    let status = r.status().as_u16();
                    let holder = if status == 423 {
                        r.json::<Value>().unwrap()["ID"]
                            .as_str()
                            .unwrap()
                            .to_owned()
                    } else {
                        String::new()
                    };
                    (id, status, holder, token)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let winners: Vec<_> = results.iter().filter(|r| r.1 == 200).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let winner = winners[0];
        for loser in results.iter().filter(|r| r.1 != 200) {
            assert_eq!(loser.1, 423, "round {round}");
            assert_eq!(
                loser.2, winner.0,
                "round {round}: a loser sees the winner's document"
            );
        }
        assert_eq!(
            api.unlock(&winner.3, "race", &lock_doc(&winner.0)).status(),
            200
        );
    }
}

/// DESIGN section 6's folding rule, seen through the list's latest version number.
#[test]
fn writes_under_one_lock_fold_into_one_version() {
    let api = Api::new();
    let t = api.server.token("acme", "alice", "operator");
    let latest = |api: &Api| {
        let listed = api.list(&t);
        let s = &listed["states"][0];
        (
            s["latest_version"].as_u64().unwrap(),
            s["serial"].as_u64().unwrap(),
        )
    };
    api.lock(&t, "net", &lock_doc("L1"));
    for serial in 1..=3 {
        assert_eq!(
            api.post(
                &t,
                "net",
                Some("L1"),
                state_doc(serial, "lin", &serial.to_string())
            )
            .status(),
            200
        );
    }
    assert_eq!(
        latest(&api),
        (1, 3),
        "three writes under one lock: one version, the last serial"
    );
    api.unlock(&t, "net", &lock_doc("L1"));
    api.lock(&t, "net", &lock_doc("L1"));
    api.post(&t, "net", Some("L1"), state_doc(4, "lin", "4"));
    assert_eq!(
        latest(&api),
        (2, 4),
        "relocking with the same ID starts a new version"
    );
    api.post(&t, "net", None, state_doc(5, "lin", "5"));
    assert_eq!(
        latest(&api),
        (3, 5),
        "the holder's write without ID is a version of its own"
    );
    api.post(&t, "net", Some("L1"), state_doc(6, "lin", "6"));
    assert_eq!(
        latest(&api),
        (4, 6),
        "and the next ?ID= write starts another"
    );
    api.post(&t, "net", Some("L1"), state_doc(7, "lin", "7"));
    assert_eq!(latest(&api), (4, 7));
}
