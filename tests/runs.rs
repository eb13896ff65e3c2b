//! The runs API against the real server, with real Terraform driven by step tokens: holds
//! from plan to apply, a run's end and its grace, gone reports, and what a step token may
//! not do.

use std::time::Duration;

use hegemony_state_blackbox::*;
use serde_json::{json, Value};

struct Env {
    server: Server,
    http: Client,
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
            server,
            http: client(),
            platform,
            admin,
            alice,
        }
    }

    fn post(&self, path: &str, token: &str, body: Value) -> Response {
        self.http
            .post(self.server.url(path))
            .bearer_auth(token)
            .json(&body)
            .send()
            .unwrap()
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
        self.http
            .post(self.server.url("/api/tf-states/net/lock"))
            .basic_auth("x", Some(token))
            .body(lock_doc(id))
            .send()
            .unwrap()
            .status()
            .as_u16()
    }

    fn state_item(&self) -> Value {
        Api::new(&self.server).listed(&self.admin, "net")
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
    let item = env.state_item();
    assert!(item.is_null(), "nothing written yet: not listed");

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
    let before = env
        .http
        .get(env.server.url("/api/tf-states/net/state"))
        .bearer_auth(&env.admin)
        .send()
        .unwrap()
        .text()
        .unwrap();
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
    let after = env
        .http
        .get(env.server.url("/api/tf-states/net/state"))
        .bearer_auth(&env.admin)
        .send()
        .unwrap()
        .text()
        .unwrap();
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

/// A run ends while its step holds a lock: the lock stays live through the grace, then the
/// next lock takes it over and the audit says "lock expired". (A 2 s grace, accepted with a
/// warning that names the rule.)
#[test]
fn a_lock_outlives_its_run_by_the_grace_then_is_taken_over() {
    let env = Env::new("2");
    assert!(
        env.server.logs().contains("is under 480"),
        "the short grace is warned about"
    );
    let (token, _) = env.mint("run-3", "apply", 1, "apply", false);
    assert_eq!(env.lock(&token, "S"), 200);
    let holder: Value = env
        .http
        .post(env.server.url("/api/tf-states/net/lock"))
        .bearer_auth(&env.alice)
        .body(lock_doc("A"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert!(
        holder["Info"]
            .as_str()
            .unwrap()
            .starts_with("run run-3 step apply attempt 1 since"),
        "{holder}"
    );
    assert_eq!(
        env.post("/api/runs/run-3/end", &env.platform, json!({}))
            .status(),
        200
    );
    assert_eq!(env.lock(&env.alice, "A"), 423, "live through the grace");
    assert!(eventually(Duration::from_secs(10), || env
        .lock(&env.alice, "A")
        == 200));
    let audit: Value = env
        .http
        .get(env.server.url("/api/audit?action=lock.expired"))
        .bearer_auth(&env.admin)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(audit["entries"].as_array().unwrap().len(), 1);
    assert_eq!(audit["entries"][0]["detail"]["lock_id"], "S");
}

/// A step reported gone frees its lock at once; attempt 1's gone report does not free
/// attempt 2's lock.
#[test]
fn gone_frees_only_its_own_attempts_lock() {
    let env = Env::new("600");
    let (first, _) = env.mint("run-4", "apply", 1, "apply", false);
    assert_eq!(env.lock(&first, "S1"), 200);
    let r = env.post(
        "/api/runs/run-4/steps/apply/gone",
        &env.platform,
        json!({"attempt": 1}),
    );
    assert_eq!(r.json::<Value>().unwrap()["revoked"], 1);
    let (second, _) = env.mint("run-4", "apply", 2, "apply", false);
    assert_eq!(
        env.lock(&second, "S2"),
        200,
        "attempt 1's lock is free at once"
    );
    assert_eq!(
        env.post(
            "/api/runs/run-4/steps/apply/gone",
            &env.platform,
            json!({"attempt": 1})
        )
        .status(),
        200
    );
    assert_eq!(env.lock(&env.alice, "A"), 423, "attempt 2 still holds it");
    assert_eq!(env.lock(&first, "S1b"), 401, "attempt 1's token is revoked");
    let r = env.post("/api/runs/run-4/steps/apply/gone", &env.platform, json!({}));
    assert_eq!(r.status(), 400, "the attempt is required");
}

/// A step token cannot touch another state or any management route, and never forces;
/// `force-unlock hold-<run>` ends only the hold.
#[test]
fn what_a_step_token_may_not_do() {
    let env = Env::new("600");
    let (token, _) = env.mint("run-5", "plan", 1, "plan", true);
    let get = |path: &str| {
        env.http
            .get(env.server.url(path))
            .basic_auth("x", Some(&token))
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(
        get("/api/tf-states/net/state"),
        404,
        "its own state: no version yet"
    );
    assert_eq!(get("/api/tf-states/other/state"), 403);
    let bearer = |path: &str| {
        env.http
            .get(env.server.url(path))
            .bearer_auth(&token)
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(bearer("/api/tf-states"), 403);
    assert_eq!(bearer("/api/tf-states/net"), 403);
    assert_eq!(bearer("/api/audit"), 403);
    assert_eq!(env.lock(&token, "P"), 200);
    // The admin ends only the hold; the step's lock stays.
    let unlock = |token: &str, body: &str| {
        env.http
            .delete(env.server.url("/api/tf-states/net/lock"))
            .basic_auth("x", Some(token))
            .body(body.to_owned())
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(unlock(&env.admin, r#"{"ID":"hold-run-5"}"#), 200);
    assert_eq!(
        env.lock(&env.alice, "A"),
        423,
        "the lock is still the step's"
    );
    let state = env.state_item();
    assert!(state.is_null() || state["hold"].is_null());
    // Alice takes a lock after the step releases; the step then never forces it.
    assert_eq!(unlock(&token, &lock_doc("P")), 200);
    assert_eq!(env.lock(&env.alice, "A"), 200);
    assert_eq!(unlock(&token, ""), 403);
    assert_eq!(unlock(&token, &lock_doc("A")), 403);
    // A personal token cannot call the runs API.
    let r = env.post("/api/runs/run-5/end", &env.admin, json!({}));
    assert_eq!(r.status(), 403);
}

#[test]
fn the_runs_api_refuses_bad_input_with_a_clear_4xx() {
    let env = Env::new("600");
    let good = json!({"org": "default", "state": "net", "step": "plan", "attempt": 1, "kind": "plan", "timeout_seconds": 60});
    let with = |k: &str, v: Value| {
        let mut b = good.clone();
        b[k] = v;
        b
    };
    let without = |k: &str| {
        let mut b = good.clone();
        b.as_object_mut().unwrap().remove(k);
        b
    };
    let cases: Vec<(&str, Value, u16, &str)> = vec![
        (
            "/api/runs/r/tf-state-tokens",
            with("kind", json!("destroy")),
            400,
            "plan or apply",
        ),
        (
            "/api/runs/r/tf-state-tokens",
            with("timeout_seconds", json!(0)),
            400,
            "positive",
        ),
        (
            "/api/runs/r/tf-state-tokens",
            with("timeout_seconds", json!(-5)),
            400,
            "positive",
        ),
        (
            "/api/runs/r/tf-state-tokens",
            with("timeout_seconds", json!(1.5)),
            400,
            "positive",
        ),
        (
            "/api/runs/r/tf-state-tokens",
            with("state", json!("../x")),
            400,
            "state name",
        ),
        (
            "/api/runs/r/tf-state-tokens",
            with("step", json!("a b")),
            400,
            "step name",
        ),
        (
            "/api/runs/r/tf-state-tokens",
            with("hold", json!("yes")),
            400,
            "true or false",
        ),
        (
            "/api/runs/r/tf-state-tokens",
            with("kind", json!("apply"))
                .as_object()
                .map(|o| {
                    let mut o = o.clone();
                    o.insert("hold".into(), json!(true));
                    Value::Object(o)
                })
                .unwrap(),
            400,
            "plan step",
        ),
        (
            "/api/runs/r/tf-state-tokens",
            without("org"),
            400,
            "\"org\" is required",
        ),
        (
            "/api/runs/r/tf-state-tokens",
            with("extra", json!(1)),
            400,
            "unknown field",
        ),
        (
            "/api/runs/.r/tf-state-tokens",
            good.clone(),
            400,
            "run name",
        ),
        (
            "/api/runs/r/steps/s/gone",
            json!({"attempt": 0}),
            400,
            "positive",
        ),
    ];
    for (path, body, status, words) in cases {
        let r = env.post(path, &env.platform, body.clone());
        assert_eq!(r.status().as_u16(), status, "{path} {body}");
        let v: Value = r.json().unwrap();
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{path} {body}: {message}");
    }
    // A timeout of any positive size is fine: the token is capped at 24 hours.
    let r = env.post(
        "/api/runs/big/tf-state-tokens",
        &env.platform,
        with("timeout_seconds", json!(10_000_000)),
    );
    assert_eq!(r.status(), 201);
    // A run is bound to its org by its first mint.
    env.server.token("other", "o", "admin");
    let r = env.post(
        "/api/runs/big/tf-state-tokens",
        &env.platform,
        with("org", json!("other")),
    );
    assert_eq!(r.status(), 409);
    // The org's allocation refusing operators refuses the mint with its code.
    let r = env
        .http
        .put(env.server.url("/api/org/permissions"))
        .bearer_auth(&env.admin)
        .body(r#"{"tf_state:write":"admin"}"#)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = env.post("/api/runs/r9/tf-state-tokens", &env.platform, good);
    assert_eq!(r.status(), 403);
    assert_eq!(
        r.json::<Value>().unwrap()["error"]["code"],
        "permission_not_allocated"
    );
}
