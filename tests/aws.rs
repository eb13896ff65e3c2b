//! The service on its production engine, end to end: the real Lambda function binaries under
//! a Lambda Runtime API behind an API Gateway emulator, and `serve --store aws` (the
//! container front door), both on DynamoDB, S3 and KMS served by moto, driven by real
//! Terraform.

use hegemony_state::http::lambda::{MAX_STATE_BYTES, PAYLOAD_CEILING};
use hegemony_state_blackbox::aws::Deployment;
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
