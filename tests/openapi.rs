//! The OpenAPI document against the real server: the API tester from the test tools
//! (schemathesis) runs every check, its stateful phase included, with a fixed seed and a
//! bounded number of examples, and must find nothing; a validator (openapi-spec-validator)
//! must find the document valid OpenAPI 3.1. Both from `make tools`, linked as .tools.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

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
include-name = "PUT /api/org/permissions"
headers = {{ Authorization = "Bearer {permissions_admin}" }}

# A new trust policy's audience must end with the caller's org (`/default`), which no schema
# can say: the hooks end each generated audience so, but the coverage phase sends some of
# its cases as generated, and the server's 400 naming the rule is then the right answer.
[[operations]]
include-name = ["POST /api/org/trust-policies", "PUT /api/org/trust-policies/{{name}}"]
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "423"]
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

/// Runs the tester against `server` with an admin of the default org, and asserts it found
/// nothing and ran every phase.
fn run_the_tester(server: &Server) {
    let admin = server.token("default", "root", "admin");
    let platform = server.platform_token();
    let permissions_admin = server.token("permissions", "root", "admin");
    seed_a_held_state(server, &platform);
    let doc = fetch_document(server);
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

#[test]
fn the_api_tester_finds_the_server_and_its_document_agree() {
    run_the_tester(&Server::start());
}

/// The same run while another user of the org keeps locking every state and app state the
/// tester makes, as a busy org does: each refusal it then meets (423 on a write, a lock, an
/// import, a rollback, a delete or an app state's lock) must be one the document lists.
#[test]
fn the_api_tester_agrees_with_a_server_where_others_hold_locks() {
    let server = Server::start();
    let rival = server.token("default", "rival", "operator");
    let done = AtomicBool::new(false);
    let taken = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let api = Api::new(&server);
            while !done.load(Ordering::Relaxed) {
                taken.fetch_add(lock_what_is_free(&api, &rival), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let tested =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_the_tester(&server)));
        done.store(true, Ordering::Relaxed);
        if let Err(panic) = tested {
            std::panic::resume_unwind(panic);
        }
    });
    assert!(
        taken.load(Ordering::Relaxed) > 0,
        "the rival never locked anything the tester made"
    );
    // The tester met the rival's locks, so the run checked those answers against the document.
    let met = server
        .logs()
        .lines()
        .filter(|l| l.contains("request refused") && l.contains("locked") && l.contains("root"))
        .count();
    assert!(met > 0, "the tester never met a lock the rival held");
}

/// Locks, as `rival`, every state and app state of the org that nobody holds; how many.
fn lock_what_is_free(api: &Api, rival: &str) -> usize {
    let mut taken = 0;
    let states = api.json("GET", "/api/tf-states?limit=1000", rival);
    for state in states["states"].as_array().into_iter().flatten() {
        let name = state["name"].as_str().unwrap_or_default();
        if state["lock"].is_null() && state["hold"].is_null() {
            let doc = lock_doc(&format!("rival-{name}"));
            taken += usize::from(api.lock(rival, name, &doc).status() == 200);
        }
    }
    let apps = api.json("GET", "/api/apps?limit=1000", rival);
    for app in apps["apps"].as_array().into_iter().flatten() {
        let name = app["name"].as_str().unwrap_or_default();
        if app["lock"].is_null() {
            let path = format!("/api/apps/{name}/lock");
            let body = serde_json::json!({"who": "rival", "info": "a busy org"});
            taken += usize::from(api.post_json(&path, rival, &body).status() == 200);
        }
    }
    taken
}
