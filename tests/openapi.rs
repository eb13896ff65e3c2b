//! The OpenAPI document against the real server: the API tester from the test tools
//! (schemathesis) runs every check, its stateful phase included, with a fixed seed and a
//! bounded number of examples, and must find nothing; a validator (openapi-spec-validator)
//! must find the document valid OpenAPI 3.1. Both from `make tools`, linked as .tools.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use hegemony_state_blackbox::*;

/// A tool of the test tools' virtual environment.
fn tool(name: &str) -> PathBuf {
    let path = repo_root().join(".tools/bin").join(name);
    assert!(
        path.exists(),
        "{} is missing: run make tools",
        path.display()
    );
    path
}

/// The document as the server serves it, saved beside the server's data.
fn fetch_document(server: &Server) -> PathBuf {
    let r = client()
        .get(server.url("/api/openapi.json"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let path = server.dir.path().join("openapi.json");
    std::fs::write(&path, r.bytes().unwrap()).unwrap();
    path
}

#[test]
fn the_document_is_valid_openapi() {
    let server = Server::start();
    let doc = fetch_document(&server);
    let out = Command::new(tool("openapi-spec-validator"))
        .arg(&doc)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.contains(": OK"), "{text}");
}

/// The tester's settings: the admin token of one org for the routes an org's token calls,
/// the platform's token for the runs API. Changing the permissions runs as the admin of an
/// org of its own, so that the allocations it tries (reads disabled, say) leave the routes
/// it is not testing open to the first org's admin.
fn settings(admin: &str, platform: &str, permissions_admin: &str) -> String {
    let hooks = repo_root().join("tests/tools/schemathesis_hooks.py");
    format!(
        r#"seed = 20261201
workers = 1
hooks = "{hooks}"

[generation]
max-examples = 100

[checks]
enabled = true

# A valid request can still meet a lock (423) or a conflicting state (409): the state of the
# server, not the data, refuses it, and the document lists both. Likewise an invalid body
# sent to a locked state is refused with 423 before its body is read, as the tools expect.
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "401", "403", "404", "409", "423"]

[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "415", "422", "423", "428", "429", "5xx"]

# The stateful phase follows the document's links with valid data: in a negative case it
# sends the linked values and configured credentials in place of the invalid ones it meant
# (a body or a missing Authorization), then calls the server's 200 an acceptance of invalid
# data. Invalid data is the coverage and fuzzing phases' work, with every check.
[phases.stateful.generation]
mode = "positive"

[auth.openapi.token]
bearer = "{admin}"

[auth.openapi.basic]
username = "schemathesis"
password = "{admin}"

[auth.openapi.platform]
bearer = "{platform}"

[[operations]]
include-path = "/api/org/permissions"
include-method = "PUT"
headers = {{ Authorization = "Bearer {permissions_admin}" }}
"#,
        hooks = hooks.display()
    )
}

/// A state a run's plan step holds and wrote, so that every list and state the tester reads
/// shows a hold, a step's lock and a step as writer, which its random runs (of random orgs)
/// would not put in the org it reads.
fn seed_a_held_state(server: &Server, platform: &str) {
    let api = Api::new(server);
    let minted = api.post_json(
        "/api/runs/run-1/tf-state-tokens",
        platform,
        &serde_json::json!({"org": "default", "state": "held", "step": "plan", "attempt": 1,
            "kind": "plan", "timeout_seconds": 3600, "hold": true}),
    );
    assert_eq!(minted.status(), 201);
    let minted: serde_json::Value = minted.json().unwrap();
    let step = minted["token"].as_str().unwrap();
    assert_eq!(api.lock(step, "held", &lock_doc("plan-lock")).status(), 200);
    let saved = api.post_state(
        step,
        "held",
        Some("plan-lock"),
        state_doc(1, "held-lineage", "one"),
    );
    assert_eq!(saved.status(), 200);
    let listed = api.listed(&server.token("default", "reader", "viewer"), "held");
    assert!(
        listed["hold"].is_object() && listed["lock"].is_object(),
        "{listed}"
    );
}

#[test]
fn the_api_tester_finds_the_server_and_its_document_agree() {
    let server = Server::start();
    let admin = server.token("default", "root", "admin");
    let platform = server.platform_token();
    let permissions_admin = server.token("permissions", "root", "admin");
    seed_a_held_state(&server, &platform);
    let doc = fetch_document(&server);
    let config = server.dir.path().join("schemathesis.toml");
    std::fs::write(&config, settings(&admin, &platform, &permissions_admin)).unwrap();
    let out = Command::new(tool("schemathesis"))
        .arg("--no-color")
        .arg("--config-file")
        .arg(&config)
        .args(["run", "--url", &server.base])
        .arg(&doc)
        .current_dir(server.dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    // Every phase ran, the stateful one (which follows the document's links) too.
    for phase in ["Coverage", "Fuzzing", "Stateful"] {
        assert!(
            text.contains(&format!("✅ {phase}")),
            "{phase} did not pass:\n{text}"
        );
    }
}
