//! Workload identity end to end: the real server trusting the tests' own OpenID Connect
//! issuer (HTTPS on loopback, a CA of its own), GitHub- and GitLab-shaped ID tokens
//! exchanged for sessions, each refusal the design lists with its reason in the answer and
//! in a WARNING line (never the token), a session's reach, and its locks ending with it.

use std::time::Duration;

use base64::Engine;
use hegemony_state_blackbox::issuer::{now, TestIssuer};
use hegemony_state_blackbox::{client, eventually, lock_doc, state_doc, Server, Tf, TfVersion};
use serde_json::{json, Value};

/// The audience the tests' policies name: it ends with their org's name, as a new
/// policy's must.
const AUDIENCE: &str = "https://state.example.com/acme";

/// A server that trusts `issuer`'s CA for its fetches, and may reach it on loopback, with
/// `env` besides.
fn server_for(issuer: &TestIssuer, env: &[(&str, &str)]) -> Server {
    let ca = issuer.ca_file();
    let mut all = vec![
        ("HEGEMONY_OIDC_CA_FILE", ca.to_str().unwrap()),
        ("HEGEMONY_OIDC_ALLOW_PRIVATE_ISSUERS", "true"),
    ];
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

/// A fresh ID token of the GitHub job `github_claims` describes, signed with the RS256 key.
fn github_job(issuer: &TestIssuer) -> String {
    issuer.mint(&issuer.rsa, &issuer.github_claims(AUDIENCE))
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

/// Terraform's lock of `state` under lock ID `id`, with `token` as the backend's password.
fn lock(server: &Server, token: &str, state: &str, id: &str) -> reqwest::blocking::Response {
    basic(
        reqwest::Method::POST,
        server,
        &format!("/api/tf-states/{state}/lock"),
        token,
    )
    .body(lock_doc(id))
    .send()
    .unwrap()
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
    let id_token = github_job(&issuer);
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
        let token = github_job(&issuer);
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
    let (status, body) = exchange(&server, &github_job(&issuer));
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
    let (status, body) = exchange(&server, &github_job(&issuer));
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
    let r = lock(&server, token, "net-a", "JOB");
    assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    let r = lock(&server, &person, "net-a", "BOB");
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
            lock(&server, &person, "net-a", "BOB").status() == 200
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
    let (_, session) = exchange(&server, &github_job(&issuer));
    let token = session["token"].as_str().unwrap();
    for state in ["net-a", "net-b"] {
        let r = lock(&server, token, state, state);
        assert_eq!(r.status(), 200);
    }
    let r = client()
        .delete(server.url("/api/oidc/session"))
        .bearer_auth(token)
        .send()
        .unwrap();
    assert_eq!(r.status(), 204);
    for state in ["net-a", "net-b"] {
        let r = lock(&server, &person, state, "BOB");
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

/// The job's temporary folder, where `login --oidc` keeps its sessions: one per test
/// process, as a job has one.
fn job_temp() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

fn login(server: &Server, env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(hegemony_state_blackbox::bin());
    cmd.arg("login")
        .args(args)
        .env("HEGEMONY_URL", &server.base)
        .env("RUNNER_TEMP", job_temp())
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
/// the audit shows the rule set and the force unlock. Every Terraform run is `version`.
fn a_protected_state_is_applied_only_by_its_policys_jobs(version: TfVersion) {
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
        let person = Tf::new(version, &server, "net-prod", token);
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
    let job = Tf::new(version, &server, "net-prod", &session);
    job.init();
    job.ok(&["apply", "-auto-approve", "-no-color"]);
    // The job holds the lock (killed, say); an admin's force-unlock still releases it.
    let r = lock(&server, &session, "net-prod", "job-lock");
    assert_eq!(r.status(), 200);
    let admins = Tf::new(version, &server, "net-prod", &admin);
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

mod protected_state {
    use super::TfVersion;

    #[test]
    fn on_terraform_1_11_a_protected_state_is_applied_only_by_its_policys_jobs() {
        super::a_protected_state_is_applied_only_by_its_policys_jobs(TfVersion::V1_11)
    }

    #[test]
    fn on_terraform_1_15_a_protected_state_is_applied_only_by_its_policys_jobs() {
        super::a_protected_state_is_applied_only_by_its_policys_jobs(TfVersion::V1_15)
    }
}

/// A job killed mid-apply (SIGKILL: no unlock) leaves its lock; a person waiting is told
/// which job holds it, and takes it over once the session has ended and the grace passed,
/// with no force unlock. The job and the person run Terraform `version`.
fn a_killed_jobs_lock_frees_itself_after_its_session_and_the_grace(version: TfVersion) {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[("HEGEMONY_TF_STATE_RUN_END_GRACE_SECONDS", "2")]);
    let admin = server.token("acme", "root", "admin");
    let person = server.token("acme", "bob", "operator");
    add_policy(&server, &admin, &operator_policy(&issuer, 20));
    let session = gitlab_session(&server, &issuer, 20);
    let job = Tf::new(version, &server, "net-k", &session);
    job.init();
    job.ok(&["apply", "-auto-approve", "-no-color"]);
    // The next apply is still running when the job is killed.
    std::fs::write(
        job.path().join("main.tf"),
        "terraform {\n  backend \"http\" {}\n}\nresource \"terraform_data\" \"slow\" {\n  provisioner \"local-exec\" {\n    command = \"sleep 30\"\n  }\n}\n",
    )
    .unwrap();
    let mut apply = job
        .command(&["apply", "-auto-approve", "-no-color"])
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
    let waiting = Tf::new(version, &server, "net-k", &person);
    waiting.init();
    let refused = waiting.run(&["plan", "-no-color", "-lock-timeout=0s"]);
    assert!(!refused.ok);
    let said = refused.output();
    assert!(said.contains("Error acquiring the state lock"), "{said}");
    // Terraform 1.11 prints its own lock's info; 1.15 prints the holder's Info and Who from
    // the 423, which the API shows to both.
    let state: Value = client()
        .get(server.url("/api/tf-states/net-k"))
        .bearer_auth(&person)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert!(
        state["lock"]["info"]
            .as_str()
            .unwrap_or_default()
            .contains("CI job 8080 run 555 of acme/net at main"),
        "{state}"
    );
    let fields: &[&str] = match version {
        TfVersion::V1_11 => &[],
        TfVersion::V1_15 => &["Info:", "Who:"],
    };
    for field in fields {
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

mod killed_job {
    use super::TfVersion;

    #[test]
    fn on_terraform_1_11_a_killed_jobs_lock_frees_itself_after_its_session_and_the_grace() {
        super::a_killed_jobs_lock_frees_itself_after_its_session_and_the_grace(TfVersion::V1_11)
    }

    #[test]
    fn on_terraform_1_15_a_killed_jobs_lock_frees_itself_after_its_session_and_the_grace() {
        super::a_killed_jobs_lock_frees_itself_after_its_session_and_the_grace(TfVersion::V1_15)
    }
}

/// Without the issuer's CA in `HEGEMONY_OIDC_CA_FILE` its certificate is not trusted: the
/// exchange is a 503 that says the keys could not be fetched (the log says why), retried by
/// the issuer's next fetch a minute later, never a session.
#[test]
fn an_issuer_whose_certificate_is_not_trusted_is_never_believed() {
    let issuer = TestIssuer::start();
    let server = Server::start_with(&[("HEGEMONY_OIDC_ALLOW_PRIVATE_ISSUERS", "true")]);
    let admin = server.token("acme", "root", "admin");
    add_policy(&server, &admin, &github_policy(&issuer, "deploy", 3600));
    let token = github_job(&issuer);
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

/// A leaked ID token opens nothing: the first exchange opens a session, a second of the same
/// token is 401 `invalid_token` in words, whichever way it is sent, and no second session is
/// audited.
#[test]
fn an_id_token_is_exchanged_once() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[]);
    let admin = server.token("acme", "root", "admin");
    add_policy(&server, &admin, &github_policy(&issuer, "deploy", 3600));
    let id_token = github_job(&issuer);
    let (status, body) = exchange(&server, &id_token);
    assert_eq!(status, 200, "{body}");
    let (status, body) = exchange(&server, &id_token);
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "invalid_token");
    assert!(
        message(&body).contains("this ID token was already exchanged"),
        "{body}"
    );
    let r = client()
        .post(server.url("/api/oidc/exchange"))
        .json(&json!({ "token": id_token }))
        .send()
        .unwrap();
    assert_eq!(r.status(), 401, "the body form is the same token");
    // A token without a jti is known by its whole text.
    let mut claims = issuer.github_claims(AUDIENCE);
    claims.as_object_mut().unwrap().remove("jti");
    let no_jti = issuer.mint(&issuer.rsa, &claims);
    assert_eq!(exchange(&server, &no_jti).0, 200);
    assert_eq!(exchange(&server, &no_jti).0, 401);
    let audit: Value = client()
        .get(server.url("/api/audit?action=workload.session_opened"))
        .bearer_auth(&admin)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(audit["entries"].as_array().unwrap().len(), 2, "{audit}");
    let logs = server.logs();
    assert!(!logs.contains(&id_token) && !logs.contains(&no_jti));
}

/// A GitLab job hands its ID token to `login --oidc` twice (two steps of one job): the
/// second login answers the session the first opened, without a second exchange.
#[test]
fn a_job_that_logs_in_twice_with_one_id_token_gets_its_session_again() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[]);
    let admin = server.token("acme", "root", "admin");
    add_policy(&server, &admin, &gitlab_policy(&issuer));
    let id_token = issuer.mint(&issuer.rsa, &issuer.gitlab_claims(AUDIENCE));
    let env = [("CI_JOB_ID_TOKEN", id_token.as_str())];
    let args = ["--oidc", "--id-token-variable", "CI_JOB_ID_TOKEN"];
    let first = login(&server, &env, &args);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let second = login(&server, &env, &args);
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert_eq!(
        first.stdout, second.stdout,
        "the same session, printed again"
    );
    let refusals = server
        .logs()
        .lines()
        .filter(|l| l.contains("request refused"))
        .count();
    assert_eq!(refusals, 0, "no second exchange was refused: none was sent");
    // The kept session is the job's user's alone.
    let folder = job_temp().join("hegemony-state-sessions");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&folder).unwrap().permissions().mode() & 0o777,
        0o700
    );
    for file in std::fs::read_dir(&folder).unwrap() {
        let file = file.unwrap();
        assert_eq!(file.metadata().unwrap().permissions().mode() & 0o777, 0o600);
        let text = std::fs::read_to_string(file.path()).unwrap();
        assert!(!text.contains(&id_token), "the ID token is not kept");
    }
}

/// Two policies that both let a job in: the exchange refuses to pick (409
/// `ambiguous_policy`, naming them) until the job names one, in the body or with
/// `login --oidc --policy`.
#[test]
fn a_job_that_two_policies_let_in_names_the_one_to_use() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[]);
    let admin = server.token("acme", "root", "admin");
    add_policy(&server, &admin, &github_policy(&issuer, "deploy", 3600));
    let mut broad = github_policy(&issuer, "a-broad", 3600);
    broad["claims"] = json!({"repository_owner_id": "77"});
    broad["states"] = json!(["*"]);
    add_policy(&server, &admin, &broad);
    let (status, body) = exchange(&server, &github_job(&issuer));
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "ambiguous_policy");
    assert_eq!(body["error"]["policies"], json!(["a-broad", "deploy"]));
    assert!(message(&body).contains("--policy"), "{body}");
    let r = client()
        .post(server.url("/api/oidc/exchange"))
        .json(&json!({
            "token": github_job(&issuer),
            "policy": "deploy"
        }))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().unwrap()["states"], json!(["net-*"]));
    // A named policy that does not let the job in is refused, not swapped for another.
    let mut other = issuer.github_claims(AUDIENCE);
    other["ref"] = json!("refs/heads/feature");
    let r = client()
        .post(server.url("/api/oidc/exchange"))
        .json(&json!({"token": issuer.mint(&issuer.rsa, &other), "policy": "deploy"}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 403);
    let id_token = github_job(&issuer);
    let env = [("CI_ID", id_token.as_str())];
    let out = login(&server, &env, &["--oidc", "--id-token-variable", "CI_ID"]);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("a-broad, deploy") && said.contains("--policy"),
        "{said}"
    );
    // The refused exchange opened nothing, so the same token logs in once a policy is named.
    let out = login(
        &server,
        &env,
        &[
            "--oidc",
            "--id-token-variable",
            "CI_ID",
            "--policy",
            "a-broad",
            "--json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let session: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(session["states"], json!(["*"]));
}

/// In claim conditions `*` stays within a segment (no `/`, no `:`), `**` crosses them: a
/// condition `repo:acme/*` on GitHub's `sub` does not let in `repo:acme/net:environment:...`.
#[test]
fn a_claim_star_does_not_cross_a_colon_or_a_slash() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[]);
    let admin = server.token("acme", "root", "admin");
    let mut policy = github_policy(&issuer, "deploy", 3600);
    policy["claims"] = json!({"repository_owner_id": "77", "sub": "repo:acme/*"});
    add_policy(&server, &admin, &policy);
    let (status, body) = exchange(&server, &github_job(&issuer));
    assert_eq!(status, 403, "{body}");
    assert!(message(&body).contains("claim sub"), "{body}");
    policy["claims"]["sub"] = json!("repo:acme/**");
    let r = client()
        .put(server.url("/api/org/trust-policies/deploy"))
        .bearer_auth(&admin)
        .json(&policy)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let (status, body) = exchange(&server, &github_job(&issuer));
    assert_eq!(status, 200, "{body}");
}

/// On a shared deployment one org cannot capture another's jobs: a new policy's audience
/// ends with its own org's name, and a policy on GitHub Actions or GitLab.com names the
/// owner by an id; `login --oidc --org` refuses a session of another org.
#[test]
fn a_policy_names_its_org_in_its_audience_and_a_shared_issuer_by_owner_id() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[]);
    let acme = server.token("acme", "root", "admin");
    let globex = server.token("globex", "root", "admin");
    let post = |admin: &str, policy: &Value| {
        let r = client()
            .post(server.url("/api/org/trust-policies"))
            .bearer_auth(admin)
            .json(policy)
            .send()
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json::<Value>().unwrap_or(Value::Null))
    };
    // globex asks for acme's audience, with conditions naming acme's repository.
    let (status, body) = post(&globex, &github_policy(&issuer, "capture", 3600));
    assert_eq!(status, 400, "{body}");
    assert!(message(&body).contains("must end with /globex"), "{body}");
    let github = json!({
        "name": "gh", "issuer": "https://token.actions.githubusercontent.com",
        "audience": AUDIENCE, "claims": {"repository": "acme/net"},
        "role": "operator", "states": ["*"], "session_seconds": 3600
    });
    let (status, body) = post(&acme, &github);
    assert_eq!(status, 400, "{body}");
    assert!(
        message(&body).contains("repository_owner_id or repository_id"),
        "{body}"
    );
    let gitlab = json!({
        "name": "gl", "issuer": "https://gitlab.com",
        "audience": AUDIENCE, "claims": {"namespace_path": "acme"},
        "role": "operator", "states": ["*"], "session_seconds": 3600
    });
    let (status, body) = post(&acme, &gitlab);
    assert_eq!(status, 400, "{body}");
    assert!(
        message(&body).contains("namespace_id or project_id"),
        "{body}"
    );
    let mut owned = github.clone();
    owned["claims"] = json!({"repository_owner_id": "77"});
    assert_eq!(post(&acme, &owned).0, 201);
    // A session of another org than the job expects is ended at once.
    let mut own = github_policy(&issuer, "deploy", 3600);
    own["audience"] = json!("https://state.example.com/globex");
    assert_eq!(post(&globex, &own).0, 201);
    let id_token = issuer.mint(
        &issuer.rsa,
        &issuer.github_claims("https://state.example.com/globex"),
    );
    // A first login names no org and keeps its session; the next, naming acme, is refused
    // although it reuses that kept session, and the session ends.
    let env = [("CI_ID", id_token.as_str())];
    let out = login(&server, &env, &["--oidc", "--id-token-variable", "CI_ID"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = login(
        &server,
        &env,
        &["--oidc", "--id-token-variable", "CI_ID", "--org", "acme"],
    );
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("org globex, not acme"), "{said}");
    let ended: Value = client()
        .get(server.url("/api/audit?action=workload.session_ended"))
        .bearer_auth(&globex)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(ended["entries"].as_array().unwrap().len(), 1, "{ended}");
}

/// A session ends with its policy: removed, its next request is 401; narrowed in its states,
/// a state the policy no longer names is refused; changed in whom it lets in, it has ended.
#[test]
fn a_session_ends_or_narrows_with_its_policy() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[]);
    let admin = server.token("acme", "root", "admin");
    let mut policy = github_policy(&issuer, "deploy", 3600);
    policy["states"] = json!(["net-*", "dns"]);
    add_policy(&server, &admin, &policy);
    let open = || {
        let (status, body) = exchange(&server, &github_job(&issuer));
        assert_eq!(status, 200, "{body}");
        body["token"].as_str().unwrap().to_owned()
    };
    let read = |token: &str, state: &str| {
        basic(
            reqwest::Method::POST,
            &server,
            &format!("/api/tf-states/{state}/state"),
            token,
        )
        .body(state_doc(1, state, "x"))
        .send()
        .unwrap()
        .status()
        .as_u16()
    };
    let put = |policy: &Value| {
        let r = client()
            .put(server.url("/api/org/trust-policies/deploy"))
            .bearer_auth(&admin)
            .json(policy)
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    };
    let session = open();
    assert_eq!(read(&session, "dns"), 200);
    policy["states"] = json!(["net-*"]);
    put(&policy);
    assert_eq!(read(&session, "dns"), 403, "narrowed with its policy");
    assert_eq!(read(&session, "net-a"), 200);
    // Widening the policy again does not widen a session beyond what it opened with.
    policy["states"] = json!(["*"]);
    put(&policy);
    assert_eq!(read(&session, "other"), 403);
    // Whom it lets in changes: the session has ended.
    policy["claims"]["environment"] = json!("production");
    put(&policy);
    assert_eq!(read(&session, "net-a"), 401);
    let session = open();
    assert_eq!(read(&session, "net-a"), 200);
    // Given shorter sessions, the open one ends that long after it opened.
    policy["session_seconds"] = json!(1);
    put(&policy);
    assert!(
        eventually(Duration::from_secs(10), || read(&session, "net-a") == 401),
        "the session outlived its policy's shorter length"
    );
    policy["session_seconds"] = json!(3600);
    put(&policy);
    let session = open();
    assert_eq!(read(&session, "net-a"), 200);
    let r = client()
        .delete(server.url("/api/org/trust-policies/deploy"))
        .bearer_auth(&admin)
        .send()
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(read(&session, "net-a"), 401, "ended with its policy");
    let r = client()
        .get(server.url("/api/whoami"))
        .bearer_auth(&session)
        .send()
        .unwrap();
    let body: Value = r.json().unwrap();
    assert!(message(&body).contains("this token was revoked"), "{body}");
    // The same policy made again brings no session of the removed one back.
    add_policy(&server, &admin, &policy);
    assert_eq!(read(&session, "net-a"), 401);
}

/// An issuer withdraws a leaked key: with `HEGEMONY_OIDC_KEYS_MAX_AGE_SECONDS` set short, a
/// token signed by it is refused once the kept keys have aged, without any unknown key id
/// forcing a fetch; the issuer's shorter `Cache-Control: max-age` is honoured too.
#[test]
fn a_withdrawn_key_stops_working_within_the_keys_age() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[("HEGEMONY_OIDC_KEYS_MAX_AGE_SECONDS", "2")]);
    let admin = server.token("acme", "root", "admin");
    add_policy(&server, &admin, &github_policy(&issuer, "deploy", 3600));
    let mint = || github_job(&issuer);
    assert_eq!(exchange(&server, &mint()).0, 200);
    assert_eq!(issuer.jwks_fetches(), 1);
    issuer.withdraw(&issuer.rsa);
    let refused = eventually(Duration::from_secs(10), || {
        let (status, body) = exchange(&server, &mint());
        status == 401 && message(&body).contains("did not publish")
    });
    assert!(refused, "the withdrawn key still verifies");
    assert!(issuer.jwks_fetches() >= 2);
    // The ES256 key, still published, works on.
    let (status, body) = exchange(
        &server,
        &issuer.mint(&issuer.ec, &issuer.github_claims(AUDIENCE)),
    );
    assert_eq!(status, 200, "{body}");
}

/// An issuer on a loopback address is not fetched unless the operator allows private
/// issuers: the exchange is a 503 whose log line says why, and the issuer is never asked.
#[test]
fn a_loopback_issuer_is_not_fetched_without_the_setting() {
    let issuer = TestIssuer::start();
    let ca = issuer.ca_file();
    let server = Server::start_with(&[("HEGEMONY_OIDC_CA_FILE", ca.to_str().unwrap())]);
    let admin = server.token("acme", "root", "admin");
    add_policy(&server, &admin, &github_policy(&issuer, "deploy", 3600));
    let (status, body) = exchange(&server, &github_job(&issuer));
    assert_eq!(status, 503, "{body}");
    let logs = server.logs();
    assert!(
        logs.contains("HEGEMONY_OIDC_ALLOW_PRIVATE_ISSUERS"),
        "the log says why:\n{logs}"
    );
    assert_eq!(issuer.jwks_fetches(), 0);
}

/// A force unlock is a person's act: a CI session is refused on the force-unlock route even
/// when the org gives tf_state:manage to operators, and a person with it still forces.
#[test]
fn a_session_never_force_unlocks_whatever_the_allocation() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[]);
    let admin = server.token("acme", "root", "admin");
    let operator = server.token("acme", "otto", "operator");
    add_policy(&server, &admin, &github_policy(&issuer, "deploy", 3600));
    let r = client()
        .put(server.url("/api/org/permissions"))
        .bearer_auth(&admin)
        .json(&json!({"tf_state:read": "operator", "tf_state:write": "operator", "tf_state:manage": "operator"}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    let r = lock(&server, &operator, "net-a", "person-lock");
    assert_eq!(r.status(), 200);
    let (_, session) = exchange(&server, &github_job(&issuer));
    let session = session["token"].as_str().unwrap();
    let r = client()
        .post(server.url("/api/tf-states/net-a/force-unlock"))
        .bearer_auth(session)
        .send()
        .unwrap();
    assert_eq!(r.status(), 403);
    let body: Value = r.json().unwrap();
    assert!(message(&body).contains("a person's act"), "{body}");
    let r = client()
        .post(server.url("/api/tf-states/net-a/force-unlock"))
        .bearer_auth(&operator)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// What a token claims before it is verified reaches no log line raw: a newline in `kid`
/// or in a claim does not forge a line; an overlong or malformed `iss` is a plain 401; two
/// `Authorization` headers are a 400; an `exp` near the largest number is a plain 401.
#[test]
fn unverified_claims_are_escaped_and_odd_requests_refused_in_words() {
    let issuer = TestIssuer::start();
    let server = server_for(&issuer, &[]);
    let admin = server.token("acme", "root", "admin");
    add_policy(&server, &admin, &github_policy(&issuer, "deploy", 3600));
    let enc = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let forged = |header: Value, claims: Value| format!("{}.{}.c2ln", enc(&header), enc(&claims));
    let mut claims = issuer.github_claims(AUDIENCE);
    claims["sub"] = json!("x\nINFO hegemony_state: forged line");
    let cases = [
        (
            forged(
                json!({"alg": "RS256", "kid": "k\nWARN forged kid"}),
                claims.clone(),
            ),
            401,
        ),
        (
            forged(
                json!({"alg": "RS256", "kid": "rsa-1"}),
                json!({"iss": format!("{}\nERROR forged issuer", issuer.url)}),
            ),
            401,
        ),
        (
            forged(
                json!({"alg": "RS256", "kid": "rsa-1"}),
                json!({"iss": format!("https://{}.example", "a".repeat(600))}),
            ),
            401,
        ),
    ];
    for (token, status) in &cases {
        let (got, body) = exchange(&server, token);
        assert_eq!(got, *status, "{body}");
    }
    let mut huge = issuer.github_claims(AUDIENCE);
    huge["exp"] = json!(i64::MAX);
    let (status, body) = exchange(&server, &issuer.mint(&issuer.rsa, &huge));
    assert_eq!(status, 401, "{body}");
    assert!(message(&body).contains("not a time"), "{body}");
    let r = client()
        .post(server.url("/api/oidc/exchange"))
        .header("authorization", format!("Bearer {}", github_job(&issuer)))
        .header("authorization", "Bearer other")
        .send()
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(
        r.json::<Value>().unwrap()["error"]["code"],
        "invalid_request"
    );
    let logs = server.logs();
    for forged in [
        "INFO hegemony_state: forged",
        "WARN forged kid",
        "ERROR forged issuer",
    ] {
        assert!(
            !logs.lines().any(|l| l.trim_start().starts_with(forged)),
            "a forged line in the log:\n{logs}"
        );
    }
    assert!(
        logs.contains("k\\nWARN forged kid"),
        "escaped, still readable:\n{logs}"
    );
}
