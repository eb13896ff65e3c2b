//! The service on its production engine, end to end: the real Lambda function binaries under
//! a Lambda Runtime API behind an API Gateway emulator, and `serve --store aws` (the
//! container front door), both on DynamoDB, S3 and KMS served by moto, driven by real
//! Terraform.

use hegemony_state::http::lambda::{MAX_STATE_BYTES, PAYLOAD_CEILING};
use hegemony_state_blackbox::aws::Deployment;
use hegemony_state_blackbox::aws_calls::{self, Tally};
use hegemony_state_blackbox::gateway::Gateway;
use hegemony_state_blackbox::*;

/// A lock held by another person in the way, then a force unlock by an admin.
fn lock_conflict_then_force_unlock(api: &Api, tf: &Tf, bob: &str) {
    let taken = api.lock(bob, "net", &lock_doc("held-by-bob"));
    assert_eq!(taken.status(), StatusCode::OK);
    let run = tf.run(&["apply", "-auto-approve", "-no-color", "-var", "value=two"]);
    assert!(!run.ok);
    let out = run.output();
    assert!(out.contains("Error acquiring the state lock"), "{out}");
    assert!(out.contains("held-by-bob"), "{out}");
    tf.ok(&["force-unlock", "-force", "held-by-bob"]);
}

/// init, apply, a lock conflict, force-unlock, a second apply: what a team does on day one.
fn day_one(endpoint: &impl Endpoint, admin: &str, bob: &str) {
    let api = Api::new(endpoint);
    let tf = Tf::new(TfVersion::V1_11, endpoint, "net", admin);
    tf.init();
    tf.ok(&["apply", "-auto-approve", "-no-color"]);
    lock_conflict_then_force_unlock(&api, &tf, bob);
    tf.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=two"]);
    let out = tf.ok(&["output", "-raw", "value"]).stdout;
    assert_eq!(out.trim(), "two");
    let versions = api.json("GET", "/api/tf-states/net/versions", admin);
    let versions = versions["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 2, "{versions:?}");
    assert!(
        versions[0]["key"]
            .as_str()
            .unwrap()
            .starts_with("kms:arn:aws:kms:"),
        "sealed under the key's ARN, never the alias: {}",
        versions[0]["key"]
    );
    let audit = api.json("GET", "/api/tf-states/net/audit", admin);
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert!(actions.contains(&"lock.force_unlocked"), "{actions:?}");
}

#[test]
fn terraform_on_the_lambda_functions() {
    let deployment = Deployment::create();
    let admin = deployment.token("acme", "alice", "admin");
    let bob = deployment.token("acme", "bob", "operator");
    let gateway = Gateway::start(&deployment, &[]);
    day_one(&gateway, &admin, &bob);
    // A state's outputs, and the consumer's document, through the download function.
    let api = Api::new(&gateway);
    let outputs = api.json("GET", "/api/tf-states/net/outputs", &bob);
    assert_eq!(
        outputs["outputs"]["value"],
        serde_json::json!({"type": "string", "value": "two"}),
        "{outputs}"
    );
    let consumer = api
        .backend("GET", "/api/tf-states/net/outputs/state", &bob)
        .send()
        .unwrap();
    assert_eq!(consumer.status(), StatusCode::OK);
    let consumer: serde_json::Value = consumer.json().unwrap();
    assert_eq!(consumer["outputs"]["value"]["value"], "two");
    assert_eq!(consumer["resources"], serde_json::json!([]));
    // API Gateway cannot route the LOCK method: only the local server and the container do.
    let lock = Api::new(&gateway)
        .backend("LOCK", "/api/tf-states/net/lock", &admin)
        .body(lock_doc("x"))
        .send()
        .unwrap();
    assert_eq!(lock.status(), StatusCode::NOT_FOUND);
    // The scheduled sweeper runs under the runtime API too.
    let report = gateway.invoke_sweeper().unwrap();
    assert!(report["versions_dropped"].is_u64(), "{report}");
}

/// The functions built without a blob store (`lock`, `list`, `versions`, `audit`, `admin`,
/// `runs`) or a key service (all of those but `audit`) answer each of their routes, and no
/// request reaches a part its function was built without. Each function's rows decide, at
/// start, what it builds: its "ready" line says so.
#[test]
fn functions_built_without_blobs_or_keys_answer_their_routes() {
    let deployment = Deployment::create();
    let admin = deployment.token("acme", "alice", "admin");
    let platform = token_create(&["--platform".to_owned()], &deployment.env());
    let gateway = Gateway::start(&deployment, &[]);
    let api = Api::new(&gateway);
    let saved = api.post_state(
        &admin,
        "net",
        None,
        r#"{"version":4,"serial":1,"lineage":"l"}"#,
    );
    assert_eq!(saved.status(), 200);
    assert_eq!(api.lock(&admin, "net", &lock_doc("a")).status(), 200);
    assert_eq!(api.unlock(&admin, "net", &lock_doc("a")).status(), 200);
    assert_eq!(api.lock(&admin, "net", &lock_doc("b")).status(), 200);
    for path in [
        "/api/tf-states",
        "/api/tf-states/net",
        "/api/whoami",
        "/api/tf-states/net/versions",
        "/api/tf-states/net/audit",
        "/api/audit",
        "/api/keys",
        "/api/org/permissions",
    ] {
        api.json("GET", path, &admin);
    }
    let description = api
        .request("GET", "/api/openapi.json", None)
        .send()
        .unwrap();
    assert_eq!(description.status(), 200);
    let released = api.json("POST", "/api/tf-states/net/force-unlock", &admin);
    assert!(released["released"]["lock"].is_object(), "{released}");
    let minted = api.post_json(
        "/api/runs/run-1/tf-state-tokens",
        &platform,
        &serde_json::json!({"org": "acme", "state": "net", "step": "s", "attempt": 1, "kind": "apply", "timeout_seconds": 60}),
    );
    assert_eq!(minted.status(), 201, "{}", minted.text().unwrap());
    let ended = api.post_json("/api/runs/run-1/end", &platform, &serde_json::json!({}));
    assert_eq!(ended.status(), 200);
    let deleted = api
        .request("DELETE", "/api/tf-states/net", Some(&admin))
        .send()
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    // The admin function lists the deleted state (it keeps no blob and opens no content),
    // the rollback function restores it (opening its latest version to index it), the admin
    // function purges it after a second delete.
    let listed = api.json("GET", "/api/deleted-states", &admin);
    let id = listed["deleted_states"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let restored = api.json("POST", &format!("/api/deleted-states/{id}/restore"), &admin);
    assert_eq!(restored["versions"], 1, "{restored}");
    let state = api.get_state(&admin, "net");
    assert_eq!(
        state.text().unwrap(),
        r#"{"version":4,"serial":1,"lineage":"l"}"#
    );
    let again = api
        .request("DELETE", "/api/tf-states/net", Some(&admin))
        .send()
        .unwrap();
    assert_eq!(again.status(), 204);
    let listed = api.json("GET", "/api/deleted-states", &admin);
    let id = listed["deleted_states"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let purged = api.json("DELETE", &format!("/api/deleted-states/{id}"), &admin);
    assert_eq!(purged["name"], "net", "{purged}");
    let logs = gateway.logs();
    assert!(!logs.contains("is built without"), "{logs}");
    let built: Vec<(String, bool, bool)> = logs
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line["fields"]["message"] == "ready")
        .filter_map(|line| {
            let fields = &line["fields"];
            Some((
                fields["function"].as_str()?.to_owned(),
                fields["blob_store"].as_bool()?,
                fields["key_service"].as_bool()?,
            ))
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let (blobs, keys) = (true, true);
    let expected = [
        ("admin", !blobs, !keys),
        ("apps", blobs, keys),
        ("audit", !blobs, keys),
        ("download", blobs, keys),
        ("import", blobs, keys),
        ("list", !blobs, !keys),
        ("lock", !blobs, !keys),
        ("oidc", !blobs, !keys),
        ("rollback", blobs, keys),
        ("runs", !blobs, !keys),
        ("state-read", blobs, keys),
        ("state-write", blobs, keys),
        ("versions", !blobs, !keys),
    ]
    .map(|(f, b, k)| (f.to_owned(), b, k));
    assert_eq!(built, expected, "{logs}");
}

#[test]
fn terraform_through_the_container_front_door() {
    let deployment = Deployment::create();
    let server = deployment.container(&[]);
    let admin = server.token("acme", "alice", "admin");
    let bob = server.token("acme", "bob", "operator");
    day_one(&server, &admin, &bob);
    assert!(
        server.stdout().is_empty(),
        "no first token is printed for an AWS deployment"
    );
}

/// A state just under the clamped limit round-trips through the functions; one just over it
/// gets the function's own 413 naming the ceiling; one past the ceiling never reaches a
/// function.
#[test]
fn limits_on_lambda() {
    let deployment = Deployment::create();
    let admin = deployment.token("acme", "alice", "admin");
    let gateway = Gateway::start(&deployment, &[]);
    let sized = |size: usize| {
        let base = state_doc(1, "big", "");
        let pad = size - base.len();
        state_doc(1, "big", &"x".repeat(pad))
    };
    let api = Api::new(&gateway);
    let save = |body: String| {
        api.backend("POST", "/api/tf-states/big/state", &admin)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .unwrap()
    };
    let fits = sized(MAX_STATE_BYTES as usize);
    assert_eq!(save(fits.clone()).status(), StatusCode::OK);
    let read = api.get_state(&admin, "big");
    assert_eq!(read.status(), StatusCode::OK);
    assert_eq!(
        read.bytes().unwrap(),
        fits.as_bytes(),
        "served back whole, unzipped"
    );

    let over = save(sized(MAX_STATE_BYTES as usize + 1));
    assert_eq!(over.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body: serde_json::Value = over.json().unwrap();
    assert_eq!(body["error"]["code"], "too_large");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&PAYLOAD_CEILING.to_string()), "{message}");
    assert!(message.contains("serve --store aws"), "{message}");

    let past = save(sized(PAYLOAD_CEILING as usize));
    assert_eq!(past.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let text = past.text().unwrap();
    assert!(
        !text.contains("too_large"),
        "refused before any function: {text}"
    );
}

/// KMS unreachable: a save is a 503 with Retry-After, and nothing is written.
#[test]
fn a_save_while_kms_is_unreachable_is_retried_and_writes_nothing() {
    let deployment = Deployment::create();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let kms = format!("http://127.0.0.1:{port}");
    let server = deployment.container(&[("AWS_ENDPOINT_URL_KMS", &kms)]);
    let admin = server.token("acme", "alice", "admin");
    let api = Api::new(&server);
    let saved = api.post_state(&admin, "net", None, state_doc(1, "l", "v"));
    assert_eq!(saved.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(saved.headers()["retry-after"], "1");
    let read = api.get_state(&admin, "net");
    assert_eq!(read.status(), StatusCode::NOT_FOUND);
}

/// `keys rewrap --to kms:<another key>` on the AWS store: KMS's ReEncrypt moves each
/// version's data key, under the same encryption context, to the other key; the report
/// then shows none of that state behind (a state left out stays behind), and every moved
/// version reads through a server on the other key. The emulator does not refuse a
/// disabled key, but it does refuse a ciphertext of another key than the `KeyId` asked
/// (the ARN the version records) and another encryption context: so the read proves the
/// data key moved under the context it had.
#[test]
fn a_rewrap_to_another_kms_key_reencrypts_every_version() {
    let deployment = Deployment::create();
    let server = deployment.container(&[]);
    let admin = server.token("acme", "alice", "admin");
    let api = Api::new(&server);
    for serial in 1..=3 {
        let saved = api.post_state(&admin, "net", None, state_doc(serial, "l", "v"));
        assert_eq!(saved.status(), StatusCode::OK);
    }
    let left = api.post_state(&admin, "left-out", None, state_doc(1, "l", "v"));
    assert_eq!(left.status(), StatusCode::OK);
    let other = deployment.create_key();
    let to = format!("kms:{other}");
    let scope = ["rewrap", "--org", "acme", "--state", "net", "--to", &to];
    let out = server.keys(&scope, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("re-wrapped 3 versions, 0 already"), "{text}");
    let moved = [("HEGEMONY_TF_STATE_KEY_BACKEND".to_owned(), to.clone())];
    let report = server.key_report(&moved);
    let net = report.iter().find(|s| s["state"] == "net").unwrap();
    assert_eq!(net["keys"].as_array().unwrap().len(), 1, "{report:?}");
    assert_eq!(net["keys"][0]["key"], to.as_str());
    assert_eq!(net["keys"][0]["behind"], false);
    let left_out = report.iter().find(|s| s["state"] == "left-out").unwrap();
    assert_eq!(left_out["keys"][0]["behind"], true, "{report:?}");

    let server = server.restart_with(
        deployment
            .env()
            .into_iter()
            .chain(moved.iter().cloned())
            .collect(),
    );
    let api = Api::new(&server);
    for version in 1..=3u64 {
        let got = api
            .request(
                "GET",
                &format!("/api/tf-states/net/versions/{version}/content"),
                Some(&admin),
            )
            .send()
            .unwrap();
        assert_eq!(
            got.status(),
            StatusCode::OK,
            "v{version}: {}",
            server.logs()
        );
        assert_eq!(got.text().unwrap(), state_doc(version, "l", "v"));
    }
    let listed = api.json("GET", "/api/tf-states/net/versions", &admin);
    for v in listed["versions"].as_array().unwrap() {
        assert_eq!(v["key"], to.as_str(), "{v}");
    }
    let unmoved = api.get_state(&admin, "left-out");
    assert_eq!(
        unmoved.status(),
        StatusCode::OK,
        "the first key still opens its own"
    );
}

/// A state of `size` bytes that gzip about halves (hex of pseudo-random bytes), as a state
/// full of ids and keys does.
fn hex_state(size: usize) -> String {
    let base = state_doc(1, "big", "");
    let mut pad = String::with_capacity(size);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while pad.len() < size - base.len() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        pad.push_str(&format!("{x:016x}"));
    }
    pad.truncate(size - base.len());
    state_doc(1, "big", &pad)
}

/// Through the functions: a small state is saved inline in DynamoDB (no S3 object), a large
/// one in S3; both read back byte for byte, and a small save replacing a large version keeps
/// the large one's object for its version (the sweeper deletes it only once pruned).
#[test]
fn small_versions_live_in_dynamodb_and_large_ones_in_s3() {
    let deployment = Deployment::create();
    let admin = deployment.token("acme", "alice", "admin");
    let gateway = Gateway::start(&deployment, &[]);
    let api = Api::new(&gateway);
    let small = state_doc(1, "small", "a few outputs");
    assert_eq!(
        api.post_state(&admin, "small", None, small.clone())
            .status(),
        StatusCode::OK
    );
    assert_eq!(deployment.objects(), 0, "a small save puts no object");
    let large = hex_state(400 << 10);
    assert_eq!(
        api.post_state(&admin, "large", None, large.clone())
            .status(),
        StatusCode::OK
    );
    assert_eq!(deployment.objects(), 1, "a large save puts one");
    assert_eq!(api.get_state(&admin, "small").text().unwrap(), small);
    assert_eq!(api.get_state(&admin, "large").text().unwrap(), large);
    let smaller = state_doc(2, "big", "small now");
    assert_eq!(
        api.post_state(&admin, "large", None, smaller.clone())
            .status(),
        StatusCode::OK
    );
    assert_eq!(api.get_state(&admin, "large").text().unwrap(), smaller);
    let old = api
        .request("GET", "/api/tf-states/large/versions/1/content", None)
        .bearer_auth(&admin)
        .send()
        .unwrap();
    assert_eq!(old.text().unwrap(), large, "the large version still reads");
    assert_eq!(deployment.objects(), 1);
}

/// Through the functions (which gather a read into one payload) and the container door
/// (which streams it), on the AWS stores: a state of several segments, deflated in pieces,
/// reads back byte for byte, gzip'd as stored when accepted and inflated when not, on the
/// backend GET and the download.
#[test]
fn reads_are_byte_exact_through_the_functions_and_the_container_door() {
    use std::io::Read;
    let deployment = Deployment::create();
    let door = deployment.container(&[]);
    let admin = door.token("acme", "alice", "admin");
    let gateway = Gateway::start(&deployment, &[]);
    let body = hex_state(3 << 20);
    let api = Api::new(&gateway);
    assert_eq!(
        api.post_state(&admin, "net", None, body.clone()).status(),
        StatusCode::OK
    );
    for api in [Api::new(&gateway), Api::new(&door)] {
        for path in [
            "/api/tf-states/net/state",
            "/api/tf-states/net/versions/1/content",
        ] {
            let zipped = api
                .request("GET", path, None)
                .bearer_auth(&admin)
                .header("accept-encoding", "gzip")
                .send()
                .unwrap();
            assert_eq!(zipped.status(), StatusCode::OK, "{path}");
            assert_eq!(zipped.headers()["content-encoding"], "gzip", "{path}");
            let mut plain = String::new();
            flate2::read::GzDecoder::new(&zipped.bytes().unwrap()[..])
                .read_to_string(&mut plain)
                .unwrap();
            assert!(plain == body, "{path}: gzip'd, not byte-exact");
            let plain = api
                .request("GET", path, None)
                .bearer_auth(&admin)
                .header("accept-encoding", "identity")
                .send()
                .unwrap();
            assert_eq!(plain.status(), StatusCode::OK, "{path}");
            assert!(plain.headers().get("content-encoding").is_none(), "{path}");
            assert!(
                plain.text().unwrap() == body,
                "{path}: plain, not byte-exact"
            );
        }
    }
}

/// A version saved through the container door, larger than a function can return once
/// base64-encoded: through the gateway it used to be API Gateway's bare 502. It is a 413
/// naming the door; with the door configured, a 307 to it that serves the version; and
/// gzip'd small enough, it is served by the function as ever. Rollback needs no content
/// back, so it works through the functions at any size.
#[test]
fn a_version_too_large_for_the_functions_is_read_through_the_container_door() {
    let deployment = Deployment::create();
    let door = deployment.container(&[]);
    let admin = door.token("acme", "alice", "admin");
    let big = hex_state(5 << 20);
    assert_eq!(
        Api::new(&door)
            .post_state(&admin, "big", None, big.clone())
            .status(),
        StatusCode::OK
    );
    let bare = Gateway::start(&deployment, &[]);
    let api = Api::new(&bare);
    let read = api.get_state(&admin, "big");
    assert_eq!(read.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body: serde_json::Value = read.json().unwrap();
    assert_eq!(body["error"]["code"], "too_large_for_functions");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("serve --store aws"),
        "{body}"
    );
    let zipped = api
        .backend("GET", "/api/tf-states/big/state", &admin)
        .header("accept-encoding", "gzip")
        .send()
        .unwrap();
    assert_eq!(zipped.status(), StatusCode::OK, "gzip'd, it fits");

    let routed = Gateway::start(&deployment, &[("HEGEMONY_CONTAINER_URL", &door.base)]);
    let api = Api::new(&routed);
    let path = "/api/tf-states/big/versions/1/content";
    let sent = api
        .request("GET", path, None)
        .bearer_auth(&admin)
        .send()
        .unwrap();
    assert_eq!(sent.status(), StatusCode::TEMPORARY_REDIRECT);
    let location = sent.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(location, door.url(path));
    let served = client().get(&location).bearer_auth(&admin).send().unwrap();
    assert_eq!(served.status(), StatusCode::OK);
    assert_eq!(served.text().unwrap(), big);

    assert_eq!(
        api.post_state(&admin, "big", None, state_doc(2, "big", "small"))
            .status(),
        StatusCode::OK
    );
    let rolled = api
        .request("POST", "/api/tf-states/big/rollback", None)
        .bearer_auth(&admin)
        .json(&serde_json::json!({"version": 1}))
        .send()
        .unwrap();
    assert_eq!(rolled.status(), StatusCode::OK, "{:?}", rolled.text());
}

/// Terraform through the functions, on a version saved through the container door that even
/// gzip'd is too large for a function to return: without the door configured it stops at
/// the 413; with it, Go's client follows the 307 to the door on the same host (another
/// port), keeps its Basic credentials there, and reads the state.
#[test]
fn terraform_follows_the_functions_redirect_to_the_container_door() {
    let deployment = Deployment::create();
    let door = deployment.container(&[]);
    let admin = door.token("acme", "alice", "admin");
    let big = hex_state(12 << 20);
    assert_eq!(
        Api::new(&door)
            .post_state(&admin, "net", None, big.clone())
            .status(),
        StatusCode::OK
    );
    let bare = Gateway::start(&deployment, &[]);
    let tf = Tf::new(TfVersion::V1_11, &bare, "net", &admin);
    let refused = tf.run(&["init", "-no-color", "-backend-config=backend.hcl"]);
    assert!(!refused.ok);
    assert!(refused.output().contains("413"), "{}", refused.output());

    let routed = Gateway::start(&deployment, &[("HEGEMONY_CONTAINER_URL", &door.base)]);
    let tf = Tf::new(TfVersion::V1_11, &routed, "net", &admin);
    tf.init();
    let pulled = tf.ok(&["state", "pull"]).stdout;
    let pad = &big[big.find("\"value\": \"").unwrap() + 10..][..64];
    assert!(pulled.contains(pad), "the state read through the door");
}

/// The calls of `counted`, operation by operation, as `(operation, [(call, count)])`.
fn calls(counted: &[(&str, Tally)]) -> Vec<(String, Vec<(String, u64)>)> {
    counted
        .iter()
        .map(|(op, tally)| {
            let each = tally.calls.iter().map(|(c, n)| (c.clone(), *n)).collect();
            (op.to_string(), each)
        })
        .collect()
}

/// `(operation, [(call, count)])` from a table of string slices.
fn expected(table: &[(&str, &[(&str, u64)])]) -> Vec<(String, Vec<(String, u64)>)> {
    table
        .iter()
        .map(|(op, each)| {
            let each = each.iter().map(|(c, n)| (c.to_string(), *n)).collect();
            (op.to_string(), each)
        })
        .collect()
}

/// The AWS calls each backend operation makes, counted at the emulator's door through the
/// container front door: every request reads its token, then the org's settings and the
/// state's record in one batch, which for a read brings the latest version's inline content
/// too (the state here is small, so it has no S3 object); a read of a version already read
/// takes its data key from the cache instead of KMS. The list reads the org's settings (its
/// protected-state rules, for each state's mark) beside its page. The inventory's reads
/// query the org's index entries (the overview its states' records too). A change that adds
/// a call fails here.
#[test]
fn aws_calls_per_operation() {
    let deployment = Deployment::counted();
    let server = deployment.container(&[]);
    let admin = server.token("acme", "alice", "admin");
    let counted = aws_calls::per_operation(&deployment, &server, &admin);
    println!("{}", aws_calls::table(&counted));
    assert_eq!(calls(&counted), calls_per_operation());
}

/// An org with protected-state rules makes the same calls: the rules sit in the org's
/// settings item, which the batch of every backend request reads already (here the rule
/// covers other states, so the admin's changes of this one go through).
#[test]
fn protected_state_rules_add_no_aws_call() {
    let deployment = Deployment::counted();
    let server = deployment.container(&[]);
    let admin = server.token("acme", "alice", "admin");
    let api = Api::new(&server);
    let policy = serde_json::json!({
        "issuer": "https://ci.example.com",
        "audience": "https://state.example.com/acme",
        "claims": {"project_id": "42"},
        "role": "operator",
        "states": ["prod-*"],
        "session_seconds": 3600,
    });
    let r = api
        .request("PUT", "/api/org/trust-policies/deploy", Some(&admin))
        .json(&policy)
        .send()
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = api
        .request("PUT", "/api/org/protected-states/prod-*", Some(&admin))
        .json(&serde_json::json!({"policies": ["deploy"]}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 201);
    let counted = aws_calls::per_operation(&deployment, &server, &admin);
    assert_eq!(calls(&counted), calls_per_operation());
    let r = api
        .request("GET", "/api/org/protected-states", Some(&admin))
        .send()
        .unwrap();
    assert_eq!(
        r.json::<serde_json::Value>().unwrap()["protections"],
        serde_json::json!([{"pattern": "prod-*", "policies": ["deploy"]}])
    );
}

/// What each backend operation costs on AWS by state size (docs/scaling.md): a state
/// whose sealed form fits the catalog is saved with no S3 call, and costs DynamoDB a few
/// write units for every kilobyte it seals; a larger one goes to S3 whole and costs
/// DynamoDB only its records, whatever its size. Reads cost what the token and the batch
/// bring back.
///
/// The org's inventory key is made anew each run, so the index entry's digests, and its
/// compressed size, differ by a few bytes from run to run: now and then across a kilobyte,
/// two write units in a transaction. The tables are measured again, twice at most, before
/// they are taken to differ from the doc.
#[test]
fn request_units_by_state_size() {
    let deployment = Deployment::counted();
    let server = deployment.container(&[]);
    let doc = std::fs::read_to_string(repo_root().join("docs/scaling.md")).unwrap();
    for attempt in 1..=3 {
        let tables = units_by_state_size(&deployment, &server, attempt);
        if attempt == 3 || tables.iter().all(|(_, t)| doc.contains(t)) {
            cost_tables::check(&doc, &tables);
            return;
        }
    }
}

/// The figures of [`request_units_by_state_size`] in one org per size and attempt, checked
/// against their bounds, and docs/scaling.md's tables made of them.
fn units_by_state_size(
    deployment: &Deployment,
    server: &Server,
    attempt: usize,
) -> Vec<(&'static str, String)> {
    let mut writes = Vec::new();
    let mut columns = Vec::new();
    for (label, size) in [
        ("10 KiB", 10 << 10),
        ("100 KiB", 100 << 10),
        ("1 MiB", 1 << 20),
    ] {
        let org = format!("units-{}-{attempt}", size >> 10);
        let token = server.token(&org, "alice", "operator");
        let counted = aws_calls::per_operation_on(deployment, server, &token, &|serial| {
            state_of_size(size, serial)
        });
        println!("{label}\n{}", aws_calls::table(&counted));
        let post = &counted[3].1;
        assert_eq!(counted[3].0, "POST");
        writes.push((label, post.units.write, post.units.s3_bytes_put));
        for (op, tally) in &counted {
            // The token's item and the batch's two, with the inline content where the
            // batch brings it: sealed, at most half the state.
            let bound = 3.0 + (size as f64 / 2.0 / 4096.0).ceil();
            assert!(tally.units.read() <= bound, "{label} {op}: {tally:?}");
        }
        columns.push((label, counted));
    }
    // docs/scaling.md's tables are these figures, priced.
    let columns: Vec<cost_tables::Column<'_>> =
        columns.iter().map(|(l, c)| (*l, c.as_slice())).collect();
    let template = std::fs::read_to_string(repo_root().join("infra/template.yaml")).unwrap();
    let tables = vec![
        (
            "What each backend operation costs",
            cost_tables::operations(&columns),
        ),
        (
            "What a Terraform run costs",
            cost_tables::applies(&columns, &template),
        ),
        ("CloudWatch custom metrics", cost_tables::custom_metrics()),
    ];
    let [(_, small, small_s3), (_, middle, middle_s3), (_, large, large_s3)] = writes[..] else {
        unreachable!()
    };
    assert_eq!(
        (small_s3, middle_s3),
        (0, 0),
        "small states stay inline: {writes:?}"
    );
    // Inline content is written twice (the state's item and the version's), two units a
    // KB each inside the transaction. The state's index entry is one more item (its
    // instances compressed, under a KB for these): two units more, nothing else.
    assert!(
        small <= 18,
        "a 10 KiB save costs {small} write units: {writes:?}"
    );
    assert!(middle > small, "{writes:?}");
    assert!(large_s3 > 0, "a 1 MiB state is a blob: {writes:?}");
    // Its index entry grows with its instances (each an address and a digest, about 70
    // compressed bytes): a unit for every ten or so, on top of the records' 14.
    let instances = state_of_size(1 << 20, 1).matches("\"index_key\"").count() as u64;
    assert!(
        large <= 14 + instances.div_ceil(10),
        "a blob save of {instances} instances writes only records and its index entry: {writes:?}"
    );
    tables
}

/// What [`aws_calls_per_operation`] counts.
fn calls_per_operation() -> Vec<(String, Vec<(String, u64)>)> {
    const GET: (&str, u64) = ("DynamoDB GetItem", 1);
    const BATCH: (&str, u64) = ("DynamoDB BatchGetItem", 1);
    const COMMIT: (&str, u64) = ("DynamoDB TransactWriteItems", 1);
    expected(&[
        ("LOCK", &[BATCH, GET, COMMIT]),
        // A small state's latest content comes with its record in the BatchGetItem.
        ("GET", &[BATCH, GET, ("KMS Decrypt", 1)]),
        ("GET again", &[BATCH, GET]),
        // A small save is inline: no pending-blob record, no S3 object. Its index entry is
        // one more item of the same transaction, under the org's inventory key that the
        // settings item (in the batch) brought and memory kept: no call of its own.
        ("POST", &[BATCH, GET, COMMIT, ("KMS GenerateDataKey", 1)]),
        ("UNLOCK", &[BATCH, GET, COMMIT]),
        // The token's item and the org's settings item, and the page.
        ("list", &[("DynamoDB GetItem", 2), ("DynamoDB Query", 1)]),
        // The token's item, and the org's index entries in one query (a page of them, each
        // state's instances compressed in its items).
        ("search", &[GET, ("DynamoDB Query", 1)]),
        ("conflicts", &[GET, ("DynamoDB Query", 1)]),
        // The states' records, and the index's entries once, beside them: the states
        // indexed, the counts and the conflicts all come from that one read.
        ("overview", &[GET, ("DynamoDB Query", 2)]),
    ])
}

/// With the key cache turned off, every read of a version asks KMS again.
#[test]
fn with_the_key_cache_off_every_read_calls_kms() {
    let deployment = Deployment::counted();
    let server = deployment.container(&[("HEGEMONY_TF_STATE_KEY_CACHE_SECONDS", "0")]);
    let admin = server.token("acme", "alice", "admin");
    let counted = aws_calls::per_operation(&deployment, &server, &admin);
    for (op, tally) in &counted[1..=2] {
        let calls = &tally.calls;
        assert_eq!(calls.get("KMS Decrypt"), Some(&1), "{op}: {calls:?}");
    }
}

/// An Octo app file read again takes its data key from the cache, as a version does: the
/// first read of the newest seal's file asks KMS once, the next asks nothing of KMS.
#[test]
fn a_repeated_app_file_read_makes_no_key_call() {
    let deployment = Deployment::counted();
    let server = deployment.container(&[]);
    let admin = server.token("acme", "alice", "admin");
    let api = Api::new(&server);
    let r = api
        .request("POST", "/api/apps/shop/lock", Some(&admin))
        .json(&serde_json::json!({"who": "ci"}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let lock_id = r.json::<serde_json::Value>().unwrap()["lock_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = api
        .request(
            "PUT",
            &format!("/api/apps/shop/locks/{lock_id}/files/checkout.tfstate"),
            Some(&admin),
        )
        .body(state_doc(1, "shop", "one"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = api
        .request(
            "POST",
            &format!("/api/apps/shop/locks/{lock_id}/seal"),
            Some(&admin),
        )
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    deployment.calls();
    let mut decrypts = Vec::new();
    for _ in 0..2 {
        let r = api
            .request("GET", "/api/apps/shop/files/checkout.tfstate", Some(&admin))
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.text().unwrap(), state_doc(1, "shop", "one"));
        let calls = deployment.calls();
        decrypts.push(calls.get("KMS Decrypt").copied().unwrap_or(0));
    }
    assert_eq!(
        decrypts,
        [1, 0],
        "KMS Decrypt calls of the first and second read"
    );
}

/// The EMF lines (CloudWatch's embedded metrics) in the functions' logs, each parsed.
fn emf_lines(logs: &str) -> Vec<serde_json::Value> {
    logs.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line.get("_aws").is_some())
        .collect()
}

/// The functions report what they do as CloudWatch Embedded Metric Format lines in their own
/// log, under the runtime API as on Lambda: a line per request with its route and a
/// refusal's code, per version written, per key call, per key cache lookup, per sweep; each
/// line one whose every named metric is a number and every dimension a string, as
/// CloudWatch requires.
#[test]
fn the_functions_write_their_metrics_as_emf_lines() {
    let deployment = Deployment::create();
    let alice = deployment.token("acme", "alice", "operator");
    let gateway = Gateway::start(&deployment, &[]);
    let api = Api::new(&gateway);
    assert_eq!(api.lock(&alice, "net", &lock_doc("L1")).status(), 200);
    assert_eq!(api.lock(&alice, "net", &lock_doc("L2")).status(), 423);
    let saved = state_doc(1, "lin-net", "first");
    let r = api.post_state(&alice, "net", Some("L1"), saved.clone());
    assert_eq!(r.status(), 200);
    assert_eq!(api.get_state(&alice, "net").status(), 200);
    assert_eq!(api.get_state(&alice, "net").status(), 200);
    assert_eq!(api.get_state("not-a-token", "net").status(), 401);
    gateway.invoke_sweeper().unwrap();
    // The runtime answers the invocation before the function's log line reaches its file:
    // on a busy machine the line comes a moment later.
    assert!(
        eventually(std::time::Duration::from_secs(10), || {
            emf_lines(&gateway.logs())
                .iter()
                .any(|l| l["Function"] == "sweeper")
        }),
        "the sweeper wrote no metrics line: {}",
        gateway.logs()
    );

    let lines = emf_lines(&gateway.logs());
    for line in &lines {
        let directives = line["_aws"]["CloudWatchMetrics"].as_array().unwrap();
        assert!(line["_aws"]["Timestamp"].is_i64(), "{line}");
        for directive in directives {
            assert_eq!(directive["Namespace"], "HegemonyState", "{line}");
            for set in directive["Dimensions"].as_array().unwrap() {
                for dimension in set.as_array().unwrap() {
                    assert!(line[dimension.as_str().unwrap()].is_string(), "{line}");
                }
            }
            for metric in directive["Metrics"].as_array().unwrap() {
                assert!(line[metric["Name"].as_str().unwrap()].is_number(), "{line}");
            }
        }
    }
    let of = |function: &str, field: &str| -> Vec<&serde_json::Value> {
        lines
            .iter()
            .filter(|l| l["Function"] == function && l.get(field).is_some())
            .collect()
    };
    let locks = of("lock", "Requests");
    let statuses: Vec<u64> = locks
        .iter()
        .map(|l| l["Status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [200, 423]);
    assert!(locks
        .iter()
        .all(|l| l["Route"] == "/api/tf-states/{name}/lock" && l["Method"] == "POST"));
    assert_eq!(locks[1]["Code"], "locked");
    assert_eq!(locks[1]["Refusals"], 1);
    assert!(locks[0].get("Code").is_none());

    let written = of("state-write", "VersionsWritten");
    assert_eq!(written.len(), 1);
    assert_eq!(written[0]["SealedBytes"], saved.len() as u64);
    let sealing = of("state-write", "KeyCalls");
    assert_eq!(sealing.len(), 1, "one data key for one version");
    assert_eq!(sealing[0]["Backend"], "kms");
    assert_eq!(sealing[0]["Operation"], "data_key");
    assert_eq!(sealing[0]["KeyCallErrors"], 0);

    let reads = of("state-read", "Requests");
    let statuses: Vec<u64> = reads
        .iter()
        .map(|l| l["Status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [200, 200, 401]);
    assert_eq!(reads[2]["Code"], "unauthenticated");
    let cache = of("state-read", "KeyCacheHits");
    let hits: Vec<(u64, u64)> = cache
        .iter()
        .map(|l| {
            (
                l["KeyCacheHits"].as_u64().unwrap(),
                l["KeyCacheMisses"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        hits,
        [(0, 1), (1, 0)],
        "a miss, then the same key from the cache"
    );
    assert_eq!(of("state-read", "KeyCalls").len(), 1, "one unwrap");

    let sweeps = of("sweeper", "SweepPasses");
    assert_eq!(sweeps.len(), 1);
    assert_eq!(sweeps[0]["SweepErrors"], 0);
    assert!(sweeps[0]["Swept_versions"].is_u64());
}

/// The container front door (`serve --store aws`) serves its metrics too, and leaves out the
/// lock gauges: counting the table's locks would take a scan per scrape.
#[test]
fn the_container_doors_metrics_leave_out_the_lock_gauges() {
    let deployment = Deployment::create();
    let alice = deployment.token("acme", "alice", "operator");
    let door = deployment.container(&[("HEGEMONY_METRICS_LISTEN", "127.0.0.1:0")]);
    let api = Api::new(&door);
    assert_eq!(api.lock(&alice, "net", &lock_doc("L1")).status(), 200);
    let mut url = None;
    assert!(eventually(std::time::Duration::from_secs(10), || {
        url = door
            .logs()
            .split("metrics on ")
            .nth(1)
            .and_then(|rest| rest.split(['"', ' ', '\n']).next())
            .map(str::to_owned);
        url.is_some()
    }));
    let scrape = client().get(url.unwrap()).send().unwrap().text().unwrap();
    assert!(
        scrape.contains(
            "hegemony_state_http_requests_total{method=\"POST\",route=\"/api/tf-states/{name}/lock\",status=\"200\"} 1"
        ),
        "{scrape}"
    );
    for absent in [
        "hegemony_state_locks_held",
        "hegemony_state_holds",
        "hegemony_state_oldest_lock_age_seconds",
    ] {
        assert!(!scrape.contains(absent), "{absent} in\n{scrape}");
    }
}

/// "At most one key fetch a minute per issuer" holds for the deployment, not each process:
/// three container doors on one table take a flood of ID tokens naming made-up key ids, and
/// the issuer is asked for its keys once (the first exchange) and not again within the
/// minute, the fetch's start and the keys kept in the table. An `iss` too long for a
/// DynamoDB key is a plain 401, not a storage fault.
#[test]
fn issuer_keys_are_fetched_once_a_minute_per_deployment() {
    use hegemony_state_blackbox::issuer::TestIssuer;
    let issuer = TestIssuer::start();
    let deployment = Deployment::create();
    let ca = issuer.ca_file();
    let env = [
        ("HEGEMONY_OIDC_CA_FILE", ca.to_str().unwrap()),
        ("HEGEMONY_OIDC_ALLOW_PRIVATE_ISSUERS", "true"),
    ];
    let doors: Vec<Server> = (0..3).map(|_| deployment.container(&env)).collect();
    let admin = doors[0].token("acme", "alice", "admin");
    let audience = "https://state.example.com/acme";
    let policy = serde_json::json!({
        "name": "deploy", "issuer": issuer.url, "audience": audience,
        "claims": {"repository_id": "123"}, "role": "operator",
        "states": ["*"], "session_seconds": 3600,
    });
    let r = client()
        .post(doors[0].url("/api/org/trust-policies"))
        .bearer_auth(&admin)
        .json(&policy)
        .send()
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().unwrap());
    let exchange = |door: &Server, token: &str| {
        client()
            .post(door.url("/api/oidc/exchange"))
            .bearer_auth(token)
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    let good = issuer.mint(&issuer.rsa, &issuer.github_claims(audience));
    assert_eq!(exchange(&doors[0], &good), 200);
    assert_eq!(issuer.jwks_fetches(), 1);
    let made_up = issuer.mint(&issuer.rotated, &issuer.github_claims(audience));
    for round in 0..30 {
        for door in &doors {
            assert_eq!(exchange(door, &made_up), 401, "round {round}");
        }
    }
    assert_eq!(
        issuer.jwks_fetches(),
        1,
        "90 unknown key ids over three processes within the minute: no second fetch"
    );
    // The other doors verify a good token with the keys the first one fetched.
    for door in &doors[1..] {
        let token = issuer.mint(&issuer.rsa, &issuer.github_claims(audience));
        assert_eq!(exchange(door, &token), 200);
    }
    assert_eq!(issuer.jwks_fetches(), 1);
    let mut long = issuer.github_claims(audience);
    long["iss"] = serde_json::json!(format!("https://{}.example", "a".repeat(2100)));
    let r = client()
        .post(doors[1].url("/api/oidc/exchange"))
        .bearer_auth(issuer.mint(&issuer.rsa, &long))
        .send()
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: serde_json::Value = r.json().unwrap();
    assert_eq!(body["error"]["code"], "unauthenticated", "{body}");
}
