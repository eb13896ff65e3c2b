//! Workload identity end to end: the real server trusting the tests' own OpenID Connect
//! issuer (HTTPS on loopback, a CA of its own), GitHub- and GitLab-shaped ID tokens
//! exchanged for sessions, each refusal the design lists with its reason in the answer and
//! in a WARNING line (never the token), a session's reach, and its locks ending with it.

use std::time::Duration;

use base64::Engine;
use hegemony_state_blackbox::issuer::{now, TestIssuer};
use hegemony_state_blackbox::{client, eventually, lock_doc, state_doc, Server, Tf, TfVersion};
use serde_json::{json, Value};

const AUDIENCE: &str = "https://state.example.com";

/// A server that trusts `issuer`'s CA for its fetches, with `env` besides.
fn server_for(issuer: &TestIssuer, env: &[(&str, &str)]) -> Server {
    let ca = issuer.ca_file();
    let mut all = vec![("HEGEMONY_OIDC_CA_FILE", ca.to_str().unwrap())];
    all.extend_from_slice(env);
    Server::start_with(&all)
}

fn github_policy(issuer: &TestIssuer, name: &str, session_seconds: u64) -> Value {
    json!({
        "name": name, "issuer": issuer.url, "audience": AUDIENCE,
        "claims": {"repository_id": "123", "repository_owner_id": "77",
                   "ref": "refs/heads/main", "environment": "prod*"},
        "role": "operator", "states": ["net-*"], "session_seconds": session_seconds
    })
}

fn gitlab_policy(issuer: &TestIssuer) -> Value {
    json!({
        "name": "gitlab", "issuer": issuer.url, "audience": AUDIENCE,
        "claims": {"project_id": "42", "namespace_id": "7", "ref_protected": "true"},
        "role": "viewer", "states": ["dns"], "session_seconds": 900
    })
}

fn add_policy(server: &Server, admin: &str, policy: &Value) {
    let r = client()
        .post(server.url("/api/org/trust-policies"))
        .bearer_auth(admin)
        .json(policy)
        .send()
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().unwrap());
}

/// The exchange's status and body, the token sent as Bearer.
fn exchange(server: &Server, id_token: &str) -> (u16, Value) {
    let r = client()
        .post(server.url("/api/oidc/exchange"))
        .bearer_auth(id_token)
        .send()
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

fn message(body: &Value) -> String {
    body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A request with `token` as the backend's password (any username), as Terraform sends it.
fn basic(
    method: reqwest::Method,
    server: &Server,
    path: &str,
    token: &str,
) -> reqwest::blocking::RequestBuilder {
    client()
        .request(method, server.url(path))
        .basic_auth("ci", Some(token))
}

#[test]
fn a_github_job_exchanges_its_token_and_reaches_only_its_policys_states() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[]);
    let admin = server.token("acme", "root", "admin");
    add_policy(&server, &admin, &github_policy(&issuer, "deploy", 3600));
    let id_token = issuer.mint(&issuer.rsa, &issuer.github_claims(AUDIENCE));
    let (status, session) = exchange(&server, &id_token);
    assert_eq!(status, 200, "{session}");
    assert_eq!(
        (&session["org"], &session["role"], &session["states"]),
        (&json!("acme"), &json!("operator"), &json!(["net-*"]))
    );
    let token = session["token"].as_str().unwrap();
    assert!(token.starts_with("hgs_"));
    let expires = time::OffsetDateTime::parse(
        session["expires_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let lasts = expires.unix_timestamp() - now();
    assert!(
        (3590..=3600).contains(&lasts),
        "the policy's session: {lasts}"
    );

    // The backend password and Bearer, on its states only.
    let r = basic(
        reqwest::Method::POST,
        &server,
        "/api/tf-states/net-prod/state",
        token,
    )
    .body(state_doc(1, "lin", "from-ci"))
    .send()
    .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    let r = client()
        .get(server.url("/api/tf-states/net-prod/versions"))
        .bearer_auth(token)
        .send()
        .unwrap();
    let versions: Value = r.json().unwrap();
    let writer = &versions["versions"][0]["writer"];
    assert_eq!(
        writer,
        &json!({"kind": "workload", "issuer": issuer.url,
                "subject": "repo:acme/net:environment:production",
                "repository": "acme/net", "ref": "refs/heads/main", "run": "9001",
                "job": "deploy", "attempt": "1", "sha": "0123abcd",
                "environment": "production"}),
        "the version names the job: {versions}"
    );
    let r = basic(
        reqwest::Method::GET,
        &server,
        "/api/tf-states/dns/state",
        token,
    )
    .send()
    .unwrap();
    assert_eq!(r.status(), 403, "a state outside the policy");
    let body: Value = r.json().unwrap();
    assert!(message(&body).contains("net-*"), "{body}");
    for path in ["/api/tf-states", "/api/audit", "/api/org/trust-policies"] {
        let r = client()
            .get(server.url(path))
            .bearer_auth(token)
            .send()
            .unwrap();
        assert_eq!(r.status(), 403, "{path}: nothing of the org at large");
    }
    let r = client()
        .get(server.url("/api/whoami"))
        .bearer_auth(token)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);

    // The body form works too, and the ES256 key.
    let es = issuer.mint(&issuer.ec, &issuer.github_claims(AUDIENCE));
    let r = client()
        .post(server.url("/api/oidc/exchange"))
        .json(&json!({ "token": es }))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().unwrap());

    let logs = server.logs();
    assert!(
        !logs.contains(&id_token) && !logs.contains(&es),
        "no ID token in the log"
    );
    assert!(!logs.contains(token), "no session token in the log");
    let audit: Value = client()
        .get(server.url("/api/audit?action=workload.session_opened"))
        .bearer_auth(&admin)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(audit["entries"].as_array().unwrap().len(), 2, "{audit}");
    assert_eq!(audit["entries"][0]["actor"]["kind"], "workload");
}

/// Signs `header.claims` with HMAC-SHA-256 under `secret`: the classic attack of an HS256
/// token "signed" with the issuer's public key.
fn hmac_token(header: &Value, claims: &Value, secret: &[u8]) -> String {
    let enc = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let input = format!("{}.{}", enc(header), enc(claims));
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let tag = ring::hmac::sign(&key, input.as_bytes());
    format!(
        "{input}.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag.as_ref())
    )
}

#[test]
fn each_refusal_is_401_or_403_in_words_and_logged_without_the_token() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[]);
    let admin = server.token("acme", "root", "admin");
    add_policy(&server, &admin, &github_policy(&issuer, "deploy", 600));
    add_policy(&server, &admin, &gitlab_policy(&issuer));
    let good = issuer.github_claims(AUDIENCE);
    let with = |changes: Value| {
        let mut claims = good.clone();
        for (k, v) in changes.as_object().unwrap() {
            claims[k] = v.clone();
        }
        claims
    };
    let enc = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let t = now();
    let mut fork = issuer.gitlab_claims(AUDIENCE);
    // A merge request from a fork runs in the fork's project, on an unprotected ref.
    fork["project_id"] = json!("4242");
    fork["project_path"] = json!("mallory/net");
    fork["namespace_id"] = json!("666");
    fork["ref_protected"] = json!("false");
    fork["pipeline_source"] = json!("merge_request_event");
    let cases: Vec<(&str, String, u16, &str)> = vec![
        (
            "alg none",
            format!(
                "{}.{}.",
                enc(&json!({"alg": "none", "kid": "rsa-1"})),
                enc(&good)
            ),
            401,
            "\"none\", which is not taken",
        ),
        (
            "HMAC with the public key",
            hmac_token(
                &json!({"alg": "HS256", "kid": "rsa-1", "typ": "JWT"}),
                &good,
                issuer.rsa.jwk.to_string().as_bytes(),
            ),
            401,
            "\"HS256\", which is not taken",
        ),
        (
            "another issuer",
            issuer.mint(
                &issuer.rsa,
                &with(json!({"iss": "https://token.actions.example.net"})),
            ),
            401,
            "no trust policy names issuer https://token.actions.example.net",
        ),
        (
            "another audience",
            issuer.mint(
                &issuer.rsa,
                &with(json!({"aud": "https://elsewhere.example"})),
            ),
            401,
            "audience",
        ),
        (
            "expired",
            issuer.mint(
                &issuer.rsa,
                &with(json!({"iat": t - 600, "nbf": t - 600, "exp": t - 61})),
            ),
            401,
            "expired",
        ),
        (
            "not yet valid",
            issuer.mint(&issuer.rsa, &with(json!({"nbf": t + 120, "exp": t + 400}))),
            401,
            "not valid yet",
        ),
        (
            "a lifetime over the policy's",
            issuer.mint(&issuer.rsa, &with(json!({"exp": t + 601}))),
            403,
            "longer than the 600-second session",
        ),
        (
            "a claim that does not match",
            issuer.mint(&issuer.rsa, &with(json!({"ref": "refs/heads/feature"}))),
            403,
            "claim ref is \"refs/heads/feature\"",
        ),
        (
            "a claim the token lacks",
            issuer.mint(&issuer.rsa, &{
                let mut c = good.clone();
                c.as_object_mut().unwrap().remove("environment");
                c
            }),
            403,
            "no environment claim",
        ),
        (
            "a GitLab fork's merge request",
            issuer.mint(&issuer.rsa, &fork),
            403,
            "policy gitlab: claim namespace_id is \"666\"",
        ),
        (
            "a bad signature",
            {
                let token = issuer.mint(&issuer.rsa, &good);
                let (head, _) = token.rsplit_once('.').unwrap();
                let other = issuer.mint(&issuer.rsa, &with(json!({"sub": "x"})));
                format!("{head}.{}", other.rsplit_once('.').unwrap().1)
            },
            401,
            "signature",
        ),
    ];
    for (case, token, status, says) in &cases {
        let (got, body) = exchange(&server, token);
        assert_eq!(got, *status, "{case}: {body}");
        assert!(message(&body).contains(says), "{case}: {body}");
    }
    let logs = server.logs();
    for (case, token, _, _) in &cases {
        assert!(
            !logs.contains(token.as_str()),
            "{case}: the token reached the log"
        );
    }
    let refused: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("request refused") && l.contains("/api/oidc/exchange"))
        .collect();
    assert_eq!(refused.len(), cases.len(), "one WARNING line each:\n{logs}");
    assert!(refused.iter().all(|l| l.contains("WARN")), "{refused:?}");
    let claim_line = refused
        .iter()
        .find(|l| l.contains("refs/heads/feature"))
        .unwrap();
    assert!(
        claim_line.contains("issuer https://127.0.0.1")
            && claim_line.contains("subject repo:acme/net:environment:production")
            && claim_line.contains("CI job deploy"),
        "the line names issuer, subject and job: {claim_line}"
    );
    // The GitLab job of the protected branch is let in, with its policy's role and states.
    let (status, session) = exchange(
        &server,
        &issuer.mint(&issuer.rsa, &issuer.gitlab_claims(AUDIENCE)),
    );
    assert_eq!(status, 200, "{session}");
    assert_eq!(
        (&session["role"], &session["states"]),
        (&json!("viewer"), &json!(["dns"]))
    );
}

/// The issuer's keys are fetched for an issuer some policy names only, and again for an
/// unknown kid at most once a minute: a thousand tokens naming a key not published yet make
/// no second fetch within the minute, and once the key is published (a rotation) the first
/// token after the minute fetches it and is let in. The one test that waits a minute.
#[test]
fn unknown_keys_are_fetched_once_a_minute_at_most_and_a_rotated_key_after_it() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[]);
    let admin = server.token("acme", "root", "admin");
    for _ in 0..20 {
        let token = issuer.mint(&issuer.rsa, &issuer.github_claims(AUDIENCE));
        let (status, body) = exchange(&server, &token);
        assert_eq!(status, 401);
        assert!(
            message(&body).contains("no trust policy names issuer"),
            "{body}"
        );
    }
    assert_eq!(
        issuer.jwks_fetches(),
        0,
        "nothing fetched for an issuer no policy names"
    );
    add_policy(&server, &admin, &github_policy(&issuer, "deploy", 3600));
    let (status, body) = exchange(
        &server,
        &issuer.mint(&issuer.rsa, &issuer.github_claims(AUDIENCE)),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(issuer.jwks_fetches(), 1);
    let rotated = issuer.mint(&issuer.rotated, &issuer.github_claims(AUDIENCE));
    for i in 0..1000 {
        let (status, body) = exchange(&server, &rotated);
        assert_eq!(status, 401, "{i}: {body}");
        if i == 0 {
            assert!(message(&body).contains("\"rsa-2\""), "{body}");
        }
    }
    let after_flood = issuer.jwks_fetches();
    assert!(
        after_flood <= 2,
        "at most one fetch a minute: {after_flood}"
    );
    issuer.rotate();
    assert!(
        eventually(Duration::from_secs(90), || exchange(&server, &rotated).0
            == 200),
        "the rotated key was never fetched"
    );
    assert!(
        issuer.jwks_fetches() <= after_flood + 2,
        "a minute's wait, not a fetch per token: {}",
        issuer.jwks_fetches()
    );
    let (status, body) = exchange(
        &server,
        &issuer.mint(&issuer.rsa, &issuer.github_claims(AUDIENCE)),
    );
    assert_eq!(status, 200, "the older key still verifies: {body}");
}

#[test]
fn a_sessions_lock_names_the_job_and_frees_itself_after_the_session_and_the_grace() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[("HEGEMONY_TF_STATE_RUN_END_GRACE_SECONDS", "1")]);
    let admin = server.token("acme", "root", "admin");
    let person = server.token("acme", "bob", "operator");
    add_policy(&server, &admin, &github_policy(&issuer, "short", 3));
    let mut claims = issuer.github_claims(AUDIENCE);
    claims["exp"] = json!(claims["iat"].as_i64().unwrap() + 3);
    let (status, session) = exchange(&server, &issuer.mint(&issuer.rsa, &claims));
    assert_eq!(status, 200, "{session}");
    let token = session["token"].as_str().unwrap();
    let r = basic(
        reqwest::Method::POST,
        &server,
        "/api/tf-states/net-a/lock",
        token,
    )
    .body(lock_doc("JOB"))
    .send()
    .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    let r = basic(
        reqwest::Method::POST,
        &server,
        "/api/tf-states/net-a/lock",
        &person,
    )
    .body(lock_doc("BOB"))
    .send()
    .unwrap();
    assert_eq!(r.status(), 423);
    let holder: Value = r.json().unwrap();
    let info = holder["Info"].as_str().unwrap_or_default();
    assert!(
        info.contains("CI job deploy run 9001 attempt 1 of acme/net at refs/heads/main"),
        "the waiting person reads which job holds it: {holder}"
    );
    // Past the session's end plus the grace, the lock is taken over by the next one.
    assert!(
        eventually(Duration::from_secs(15), || {
            basic(
                reqwest::Method::POST,
                &server,
                "/api/tf-states/net-a/lock",
                &person,
            )
            .body(lock_doc("BOB"))
            .send()
            .unwrap()
            .status()
                == 200
        }),
        "the session's lock never freed itself"
    );
    let r = basic(
        reqwest::Method::GET,
        &server,
        "/api/tf-states/net-a/state",
        token,
    )
    .send()
    .unwrap();
    assert_eq!(r.status(), 401, "a session past its end no longer works");
}

#[test]
fn a_job_ends_its_session_early_and_its_locks_go_with_it() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[]);
    let admin = server.token("acme", "root", "admin");
    let person = server.token("acme", "bob", "operator");
    add_policy(&server, &admin, &github_policy(&issuer, "deploy", 3600));
    let (_, session) = exchange(
        &server,
        &issuer.mint(&issuer.rsa, &issuer.github_claims(AUDIENCE)),
    );
    let token = session["token"].as_str().unwrap();
    for state in ["net-a", "net-b"] {
        let r = basic(
            reqwest::Method::POST,
            &server,
            &format!("/api/tf-states/{state}/lock"),
            token,
        )
        .body(lock_doc(state))
        .send()
        .unwrap();
        assert_eq!(r.status(), 200);
    }
    let r = client()
        .delete(server.url("/api/oidc/session"))
        .bearer_auth(token)
        .send()
        .unwrap();
    assert_eq!(r.status(), 204);
    for state in ["net-a", "net-b"] {
        let r = basic(
            reqwest::Method::POST,
            &server,
            &format!("/api/tf-states/{state}/lock"),
            &person,
        )
        .body(lock_doc("BOB"))
        .send()
        .unwrap();
        assert_eq!(r.status(), 200, "{state} released with the session");
    }
    let r = client()
        .get(server.url("/api/whoami"))
        .bearer_auth(token)
        .send()
        .unwrap();
    assert_eq!(r.status(), 401, "the ended session's token no longer works");
    let r = client()
        .delete(server.url("/api/oidc/session"))
        .bearer_auth(&person)
        .send()
        .unwrap();
    assert_eq!(r.status(), 403, "only a session ends itself");
}

#[test]
fn the_trust_commands_add_list_and_remove_and_warn_on_names_only() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[]);
    let admin = server.token("acme", "root", "admin");
    let out = server.cli(
        &admin,
        &[
            "trust",
            "add",
            "by-name",
            "--issuer",
            &issuer.url,
            "--audience",
            AUDIENCE,
            "--claim",
            "repository=acme/net",
            "--claim",
            "ref=refs/heads/*",
            "--role",
            "operator",
            "--state",
            "net-*",
            "--session-seconds",
            "900",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: policy by-name matches on repository by name only"),
        "{stderr}"
    );
    let out = server.cli(
        &admin,
        &[
            "trust",
            "add",
            "by-id",
            "--issuer",
            &issuer.url,
            "--audience",
            AUDIENCE,
            "--claim",
            "repository_id=123",
            "--role",
            "viewer",
            "--state",
            "dns",
        ],
    );
    assert!(out.status.success());
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("warning"),
        "an immutable id: no warning"
    );
    let out = server.cli(&admin, &["trust", "list"]);
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains("by-id") && listed.contains("repository_id=123"),
        "{listed}"
    );
    assert!(
        listed.contains("by-name") && listed.contains("ref=refs/heads/*"),
        "{listed}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("by name only"));
    let out = server.cli(&admin, &["trust", "list", "--json"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["policies"][0]["session_seconds"], 3600,
        "the default session"
    );
    let out = server.cli(&admin, &["trust", "remove", "by-name"]);
    assert!(!out.status.success(), "no terminal: refused without --yes");
    let out = server.cli(&admin, &["trust", "remove", "by-name", "--yes"]);
    assert!(out.status.success());
    let out = server.cli(&admin, &["trust", "list", "--json"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["policies"].as_array().unwrap().len(), 1);
    let operator = server.token("acme", "alice", "operator");
    let out = server.cli(&operator, &["trust", "list"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("admin role"));
}

/// `protect set`, `list` and `remove` through the binary: a rule naming the org's policies,
/// one naming an unknown policy refused in words, removal confirmed, admin only.
#[test]
fn the_protect_commands_set_list_and_remove() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[]);
    let admin = server.token("acme", "root", "admin");
    add_policy(&server, &admin, &operator_policy(&issuer, 900));
    let out = server.cli(
        &admin,
        &["protect", "set", "net-*", "--policy", "gitlab-deploy"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("only CI sessions of gitlab-deploy"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = server.cli(&admin, &["protect", "set", "dns", "--policy", "ghost"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("trust policy ghost") && stderr.contains("the org has gitlab-deploy"),
        "{stderr}"
    );
    let out = server.cli(&admin, &["protect", "list"]);
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains("PATTERN") && listed.contains("net-*") && listed.contains("gitlab-deploy"),
        "{listed}"
    );
    let out = server.cli(&admin, &["protect", "list", "--json"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["protections"],
        json!([{"pattern": "net-*", "policies": ["gitlab-deploy"]}])
    );
    let operator = server.token("acme", "alice", "operator");
    let out = server.cli(&operator, &["protect", "list"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("admin role"));
    let out = server.cli(&admin, &["protect", "remove", "net-*"]);
    assert!(!out.status.success(), "no terminal: refused without --yes");
    let out = server.cli(&admin, &["protect", "remove", "net-*", "--yes"]);
    assert!(out.status.success());
    let out = server.cli(&admin, &["protect", "list", "--json"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["protections"], json!([]));
}

/// GitHub Actions' ID token endpoint as a job sees it: a plain HTTP stand-in on loopback
/// that checks the request token and the audience, and answers `{"value": <ID token>}`.
fn github_token_endpoint(issuer: &TestIssuer, request_token: &str) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://{}/token?api-version=2.0",
        listener.local_addr().unwrap()
    );
    let claims = issuer.github_claims(AUDIENCE);
    let id_token = issuer.mint(&issuer.rsa, &claims);
    let expected = format!("Bearer {request_token}");
    std::thread::spawn(move || {
        for stream in listener.incoming().take(4) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let mut authorized = false;
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
                let (name, value) = header.split_once(':').unwrap_or(("", ""));
                if name.eq_ignore_ascii_case("authorization") && value.trim() == expected {
                    authorized = true;
                }
            }
            let audience = format!(
                "audience={}",
                AUDIENCE.replace(':', "%3A").replace('/', "%2F")
            );
            let (status, body) = if authorized && line.contains(&audience) {
                ("200 OK", json!({ "value": id_token }).to_string())
            } else {
                ("403 Forbidden", "{}".to_owned())
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

fn login(server: &Server, env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(hegemony_state_blackbox::bin());
    cmd.arg("login")
        .args(args)
        .env("HEGEMONY_URL", &server.base)
        .env_remove("ACTIONS_ID_TOKEN_REQUEST_URL")
        .env_remove("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn login_finds_the_jobs_id_token_on_github_and_on_gitlab() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[]);
    let admin = server.token("acme", "root", "admin");
    add_policy(&server, &admin, &github_policy(&issuer, "deploy", 3600));
    add_policy(&server, &admin, &gitlab_policy(&issuer));
    let url = github_token_endpoint(&issuer, "runner-secret");
    let github = [
        ("ACTIONS_ID_TOKEN_REQUEST_URL", url.as_str()),
        ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "runner-secret"),
    ];
    let out = login(&server, &github, &["--oidc", "--audience", AUDIENCE]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let session = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(session.starts_with("hgs_"), "{session}");
    let r = client()
        .get(server.url("/api/whoami"))
        .bearer_auth(&session)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let out = login(&server, &github, &["--oidc"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--audience"));
    let bad = [
        ("ACTIONS_ID_TOKEN_REQUEST_URL", url.as_str()),
        ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "wrong"),
    ];
    let out = login(&server, &bad, &["--oidc", "--audience", AUDIENCE]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("id-token: write"));

    let gitlab = issuer.mint(&issuer.ec, &issuer.gitlab_claims(AUDIENCE));
    let out = login(
        &server,
        &[("HEGEMONY_ID_TOKEN", gitlab.as_str())],
        &[
            "--oidc",
            "--id-token-variable",
            "HEGEMONY_ID_TOKEN",
            "--json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&answer["role"], &answer["states"]),
        (&json!("viewer"), &json!(["dns"]))
    );
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!printed.contains(&gitlab), "the ID token is never printed");
    let mut refused = issuer.gitlab_claims(AUDIENCE);
    refused["ref_protected"] = json!("false");
    let refused = issuer.mint(&issuer.rsa, &refused);
    let out = login(
        &server,
        &[("HEGEMONY_ID_TOKEN", refused.as_str())],
        &["--oidc", "--id-token-variable", "HEGEMONY_ID_TOKEN"],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("claim ref_protected is \"false\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A GitLab job's session token, as `login --oidc` prints it, for a token living
/// `lifetime` seconds.
fn gitlab_session(server: &Server, issuer: &TestIssuer, lifetime: i64) -> String {
    let mut claims = issuer.gitlab_claims(AUDIENCE);
    claims["exp"] = json!(claims["iat"].as_i64().unwrap() + lifetime);
    let id_token = issuer.mint(&issuer.rsa, &claims);
    let out = login(
        server,
        &[("CI_JOB_ID_TOKEN", id_token.as_str())],
        &["--oidc", "--id-token-variable", "CI_JOB_ID_TOKEN"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn operator_policy(issuer: &TestIssuer, session_seconds: u64) -> Value {
    json!({
        "name": "gitlab-deploy", "issuer": issuer.url, "audience": AUDIENCE,
        "claims": {"project_id": "42", "ref_protected": "true"},
        "role": "operator", "states": ["net-*"], "session_seconds": session_seconds
    })
}

/// A job's step: `login --oidc`, then Terraform with the session token as its password:
/// init, apply, plan with nothing to change; a state outside the policy is refused.
fn a_job_logs_in_then_inits_applies_and_plans(version: TfVersion) {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[]);
    let admin = server.token("acme", "root", "admin");
    add_policy(&server, &admin, &operator_policy(&issuer, 3600));
    let session = gitlab_session(&server, &issuer, 300);
    let tf = Tf::new(version, &server, "net-ci", &session);
    let init = tf.run(&["init", "-no-color", "-backend-config=backend.hcl"]);
    assert!(init.ok, "{}", init.output());
    tf.ok(&["apply", "-auto-approve", "-no-color"]);
    let plan = tf.run(&["plan", "-detailed-exitcode", "-no-color"]);
    assert!(plan.ok, "nothing to change:\n{}", plan.output());
    let versions: Value = client()
        .get(server.url("/api/tf-states/net-ci/versions"))
        .bearer_auth(&admin)
        .send()
        .unwrap()
        .json()
        .unwrap();
    let writer = &versions["versions"][0]["writer"];
    assert_eq!(
        (
            &writer["kind"],
            &writer["repository"],
            &writer["run"],
            &writer["job"]
        ),
        (
            &json!("workload"),
            &json!("acme/net"),
            &json!("555"),
            &json!("8080")
        ),
        "{versions}"
    );
    let outside = Tf::new(version, &server, "dns", &session);
    let run = outside.run(&["init", "-no-color", "-backend-config=backend.hcl"]);
    assert!(!run.ok, "a state outside the policy");
    // Terraform's words for a 403.
    assert!(run.output().contains("invalid auth"), "{}", run.output());
}

mod terraform_1_11 {
    #[test]
    fn a_job_logs_in_then_inits_applies_and_plans() {
        super::a_job_logs_in_then_inits_applies_and_plans(super::TfVersion::V1_11)
    }
}

mod terraform_1_15 {
    #[test]
    fn a_job_logs_in_then_inits_applies_and_plans() {
        super::a_job_logs_in_then_inits_applies_and_plans(super::TfVersion::V1_15)
    }
}

/// A protected state: an operator's and an admin's personal tokens are refused on
/// `terraform apply` (the lock's 403, which Terraform prints as invalid auth; the log says
/// which rule), the policy's job applies, an admin still force-unlocks the job's lock, and
/// the audit shows the rule set and the force unlock.
#[test]
fn a_protected_state_is_applied_only_by_its_policys_jobs() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[]);
    let admin = server.token("acme", "root", "admin");
    let operator = server.token("acme", "bob", "operator");
    add_policy(&server, &admin, &operator_policy(&issuer, 3600));
    let r = client()
        .put(server.url("/api/org/protected-states/net-*"))
        .bearer_auth(&admin)
        .json(&json!({"policies": ["gitlab-deploy"]}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().unwrap());
    for (who, token) in [("an operator", &operator), ("an admin", &admin)] {
        let person = Tf::new(TfVersion::V1_11, &server, "net-prod", token);
        person.init();
        let refused = person.run(&["apply", "-auto-approve", "-no-color"]);
        assert!(!refused.ok, "{who}'s apply went through");
        let said = refused.output();
        assert!(
            said.contains("Error acquiring the state lock") && said.contains("invalid auth"),
            "{who}: Terraform's words for the lock's 403:\n{said}"
        );
    }
    let logs = server.logs();
    let refusals: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("request refused") && l.contains("protected_state"))
        .collect();
    assert_eq!(
        refusals.len(),
        2,
        "one WARNING line per refused lock:\n{logs}"
    );
    assert!(
        refusals
            .iter()
            .all(|l| l.contains("WARN") && l.contains("net-*") && l.contains("gitlab-deploy")),
        "{refusals:?}"
    );
    let session = gitlab_session(&server, &issuer, 300);
    let job = Tf::new(TfVersion::V1_11, &server, "net-prod", &session);
    job.init();
    job.ok(&["apply", "-auto-approve", "-no-color"]);
    // The job holds the lock (killed, say); an admin's force-unlock still releases it.
    let r = basic(
        reqwest::Method::POST,
        &server,
        "/api/tf-states/net-prod/lock",
        &session,
    )
    .body(lock_doc("job-lock"))
    .send()
    .unwrap();
    assert_eq!(r.status(), 200);
    let admins = Tf::new(TfVersion::V1_11, &server, "net-prod", &admin);
    admins.init();
    admins.ok(&["force-unlock", "-force", "job-lock"]);
    let audit: Value = client()
        .get(server.url("/api/audit"))
        .bearer_auth(&admin)
        .send()
        .unwrap()
        .json()
        .unwrap();
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions[0], "lock.force_unlocked", "{actions:?}");
    let set = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "protection.set")
        .expect("the rule's setting is audited");
    assert_eq!(
        set["detail"],
        json!({"pattern": "net-*", "policies": ["gitlab-deploy"], "old_policies": null})
    );
    let listed: Value = client()
        .get(server.url("/api/tf-states"))
        .bearer_auth(&operator)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(
        listed["states"][0]["protections"],
        json!([{"pattern": "net-*", "policies": ["gitlab-deploy"]}])
    );
}

/// A job killed mid-apply (SIGKILL: no unlock) leaves its lock; a person waiting is told
/// which job holds it, and takes it over once the session has ended and the grace passed,
/// with no force unlock.
#[test]
fn a_killed_jobs_lock_frees_itself_after_its_session_and_the_grace() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[("HEGEMONY_TF_STATE_RUN_END_GRACE_SECONDS", "2")]);
    let admin = server.token("acme", "root", "admin");
    let person = server.token("acme", "bob", "operator");
    add_policy(&server, &admin, &operator_policy(&issuer, 20));
    let session = gitlab_session(&server, &issuer, 20);
    let job = Tf::new(TfVersion::V1_11, &server, "net-k", &session);
    job.init();
    job.ok(&["apply", "-auto-approve", "-no-color"]);
    // The next apply is still running when the job is killed.
    std::fs::write(
        job.path().join("main.tf"),
        "terraform {\n  backend \"http\" {}\n}\nresource \"terraform_data\" \"slow\" {\n  provisioner \"local-exec\" {\n    command = \"sleep 30\"\n  }\n}\n",
    )
    .unwrap();
    let mut apply = std::process::Command::new("terraform")
        .args(["apply", "-auto-approve", "-no-color"])
        .current_dir(job.path())
        .env("TF_CLI_CONFIG_FILE", job.path().join("cli.tfrc"))
        .env("TF_HTTP_PASSWORD", &session)
        .env("TF_IN_AUTOMATION", "1")
        .env("CHECKPOINT_DISABLE", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let locked = eventually(Duration::from_secs(15), || {
        let r = client()
            .get(server.url("/api/tf-states/net-k"))
            .bearer_auth(&admin)
            .send()
            .unwrap();
        r.status() == 200 && r.json::<Value>().unwrap()["lock"].is_object()
    });
    apply.kill().unwrap();
    apply.wait().unwrap();
    assert!(locked, "the job's apply never took the lock");
    // Terraform 1.15 prints the holder's Info and Who from the 423.
    let waiting = Tf::new(TfVersion::V1_15, &server, "net-k", &person);
    waiting.init();
    let refused = waiting.run(&["plan", "-no-color", "-lock-timeout=0s"]);
    assert!(!refused.ok);
    let said = refused.output();
    for field in ["Info:", "Who:"] {
        let line = said
            .lines()
            .find(|l| l.trim_start().starts_with(field))
            .unwrap_or_default();
        assert!(
            line.contains("CI job 8080 run 555 of acme/net at main"),
            "the waiting person reads which job holds it ({field}):\n{said}"
        );
    }
    // No force unlock: the lock ends with the session (20 s) plus the grace (2 s).
    waiting.ok(&["apply", "-auto-approve", "-no-color", "-lock-timeout=60s"]);
    let audit: Value = client()
        .get(server.url("/api/audit?action=lock.expired"))
        .bearer_auth(&admin)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(audit["entries"].as_array().unwrap().len(), 1, "{audit}");
}

/// Without the issuer's CA in `HEGEMONY_OIDC_CA_FILE` its certificate is not trusted: the
/// exchange is a 503 that says the keys could not be fetched (the log says why), retried by
/// the issuer's next fetch a minute later, never a session.
#[test]
fn an_issuer_whose_certificate_is_not_trusted_is_never_believed() {
    let issuer = TestIssuer::start();
    let server = Server::start();
    let admin = server.token("acme", "root", "admin");
    add_policy(&server, &admin, &github_policy(&issuer, "deploy", 3600));
    let token = issuer.mint(&issuer.rsa, &issuer.github_claims(AUDIENCE));
    for _ in 0..3 {
        let (status, body) = exchange(&server, &token);
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"]["code"], "unavailable");
        assert!(message(&body).contains("could not be fetched"), "{body}");
    }
    let logs = server.logs();
    let fetch = logs
        .lines()
        .filter(|l| l.contains("could not fetch an OpenID Connect issuer's keys"))
        .collect::<Vec<_>>();
    assert_eq!(fetch.len(), 1, "one fetch a minute, failed or not:\n{logs}");
    assert!(
        fetch[0].to_lowercase().contains("certificate"),
        "{}",
        fetch[0]
    );
    assert_eq!(issuer.jwks_fetches(), 0);
}
