//! The runs API against the real server, with real Terraform driven by step tokens: holds
//! from plan to apply, a saved plan gone stale, a hold ended by its run's end, and the
//! server's warning about a short grace. The runs API's rules that need no Terraform (the
//! grace, gone reports, what a step token may not do, bad input) are pinned in-process
//! (shared/tests/api/runs.rs).

use hegemony_state_blackbox::*;
use serde_json::{json, Value};

struct Env {
    server: Server,
    api: Api,
    platform: String,
    admin: String,
    alice: String,
}

impl Env {
    fn new(grace: &str) -> Env {
        let server = Server::start_with(&[
            ("HEGEMONY_TF_STATE_RUN_END_GRACE_SECONDS", grace),
            (
                "HEGEMONY_RUN_URL_TEMPLATE",
                "https://ci.example.com/runs/{run}",
            ),
        ]);
        let platform = server.platform_token();
        let admin = server.token("default", "root", "admin");
        let alice = server.token("default", "alice", "operator");
        Env {
            api: Api::new(&server),
            server,
            platform,
            admin,
            alice,
        }
    }

    fn post(&self, path: &str, token: &str, body: Value) -> Response {
        self.api.post_json(path, token, &body)
    }

    /// Mints a step token; returns the token and the backend settings.
    fn mint(&self, run: &str, step: &str, attempt: u32, kind: &str, hold: bool) -> (String, Value) {
        let r = self.post(
            &format!("/api/runs/{run}/tf-state-tokens"),
            &self.platform,
            json!({"org": "default", "state": "net", "step": step, "attempt": attempt, "kind": kind, "timeout_seconds": 600, "hold": hold}),
        );
        assert_eq!(r.status(), 201, "{}", r.text().unwrap());
        let v: Value = r.json().unwrap();
        (
            v["token"].as_str().unwrap().to_owned(),
            v["backend"].clone(),
        )
    }

    fn lock(&self, token: &str, id: &str) -> u16 {
        self.api.lock(token, "net", &lock_doc(id)).status().as_u16()
    }

    fn state_item(&self) -> Value {
        self.api.listed(&self.admin, "net")
    }
}

fn step_tf(token: &str, backend: &Value) -> Tf {
    let tf = Tf::local(TfVersion::V1_11, token);
    tf.write_minted_backend(backend);
    tf.write_config(true);
    tf.init();
    tf
}

/// A plan with hold; another principal's apply is refused with hold-<run> in its output; the
/// same run's apply succeeds and the hold ends.
#[test]
fn a_plan_with_hold_keeps_others_out_until_its_runs_apply() {
    let env = Env::new("600");
    let (plan_token, backend) = env.mint("run-1", "plan", 1, "plan", true);
    let plan = step_tf(&plan_token, &backend);
    plan.ok(&["plan", "-no-color", "-out=run.tfplan"]);
    // Nothing written yet, but the hold is listed, so the 423 below has a visible cause.
    let item = env.state_item();
    assert_eq!(item["latest_version"], Value::Null, "{item}");
    assert_eq!(item["hold"]["id"], "hold-run-1", "{item}");

    let other = Tf::new(TfVersion::V1_11, &env.server, "net", &env.alice);
    other.init();
    let run = other.run(&["apply", "-auto-approve", "-no-color", "-lock-timeout=0s"]);
    assert!(!run.ok);
    assert!(run.output().contains("hold-run-1"), "{}", run.output());

    let (apply_token, _) = env.mint("run-1", "apply", 1, "apply", false);
    let mut apply = step_tf(&apply_token, &backend);
    std::fs::copy(
        plan.path().join("run.tfplan"),
        apply.path().join("run.tfplan"),
    )
    .unwrap();
    apply.set_token(&apply_token);
    apply.ok(&["apply", "-no-color", "run.tfplan"]);
    let item = env.state_item();
    assert!(
        item["hold"].is_null(),
        "the apply's release ended the hold: {item}"
    );
    assert_eq!(
        item["updated_by"],
        json!({"kind": "step", "run": "run-1", "step": "apply", "attempt": 1})
    );
    other.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=two"]);
}

/// Without a hold, a change made between a saved plan and its apply makes the apply fail as
/// stale and change nothing.
#[test]
fn without_a_hold_a_change_in_between_makes_the_saved_plan_stale() {
    let env = Env::new("600");
    let setup = Tf::new(TfVersion::V1_11, &env.server, "net", &env.alice);
    setup.init();
    setup.ok(&["apply", "-auto-approve", "-no-color"]);
    let (plan_token, backend) = env.mint("run-6", "plan", 1, "plan", false);
    let plan = step_tf(&plan_token, &backend);
    plan.ok(&[
        "plan",
        "-no-color",
        "-var",
        "value=planned",
        "-out=run.tfplan",
    ]);
    setup.ok(&[
        "apply",
        "-auto-approve",
        "-no-color",
        "-var",
        "value=sneaked-in",
    ]);
    let before = env.api.get_state(&env.admin, "net").text().unwrap();
    let (apply_token, _) = env.mint("run-6", "apply", 1, "apply", false);
    let apply = step_tf(&apply_token, &backend);
    std::fs::copy(
        plan.path().join("run.tfplan"),
        apply.path().join("run.tfplan"),
    )
    .unwrap();
    let run = apply.run(&["apply", "-no-color", "run.tfplan"]);
    assert!(!run.ok);
    assert!(
        run.output().contains("Saved plan is stale"),
        "{}",
        run.output()
    );
    let after = env.api.get_state(&env.admin, "net").text().unwrap();
    assert_eq!(before, after, "nothing changed");
}

/// A plan with hold that finds no changes, and a run that ends without an apply: the hold
/// ends at the run's end. The list shows the hold and links the run meanwhile.
#[test]
fn a_hold_without_an_apply_ends_with_the_run() {
    let env = Env::new("600");
    let setup = Tf::new(TfVersion::V1_11, &env.server, "net", &env.alice);
    setup.init();
    setup.ok(&["apply", "-auto-approve", "-no-color"]);
    let (plan_token, backend) = env.mint("run-2", "plan", 1, "plan", true);
    let plan = step_tf(&plan_token, &backend);
    let run = plan.run(&["plan", "-detailed-exitcode", "-no-color"]);
    assert!(run.ok, "no changes: {}", run.output());
    let hold = env.state_item()["hold"].clone();
    assert_eq!(hold["id"], "hold-run-2");
    assert_eq!(hold["run_url"], "https://ci.example.com/runs/run-2");
    assert_eq!(env.lock(&env.alice, "A"), 423);
    let r = env.post(
        "/api/runs/run-2/end",
        &env.platform,
        json!({"status": "succeeded"}),
    );
    assert_eq!(r.status(), 200);
    assert!(env.state_item()["hold"].is_null());
    assert_eq!(env.lock(&env.alice, "A"), 200);
    // Ending again is 200, and a mint for the ended run is refused.
    assert_eq!(
        env.post("/api/runs/run-2/end", &env.platform, json!({}))
            .status(),
        200
    );
    let r = env.post("/api/runs/run-2/tf-state-tokens", &env.platform, json!({"org": "default", "state": "net", "step": "s", "attempt": 1, "kind": "plan", "timeout_seconds": 60}));
    assert_eq!(r.status(), 409);
}

/// A grace under the 480 s the rule asks for is accepted, with a warning at start that
/// names the rule.
#[test]
fn a_short_grace_is_accepted_with_a_warning() {
    let env = Env::new("2");
    assert!(
        env.server.logs().contains("is under 480"),
        "the short grace is warned about"
    );
    assert_eq!(env.lock(&env.alice, "A"), 200, "and the server serves");
}
