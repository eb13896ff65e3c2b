//! The runs API without Terraform: a run's end and its grace (the clock moved, not waited
//! for), gone reports, what a step token may not do, and bad input refused with a clear
//! 4xx. What Terraform does with step tokens stays in the black-box runs suite.

use serde_json::{json, Value};
use time::Duration;

use crate::support::api::{lock_doc, server_limits, state_doc, Api};
use crate::support::Adapter;

/// An app with a run link template, and the platform's, an admin's and an operator's
/// tokens in org `default`.
struct Env {
    api: Api,
    platform: String,
    admin: String,
    alice: String,
}

impl Env {
    async fn new(grace: Duration) -> Env {
        let limits = hegemony_state::service::Limits {
            run_end_grace: grace,
            ..server_limits()
        };
        let mut api = Api::on(Adapter::Memory, limits);
        api.fx.app.links.run_url_template = Some("https://ci.example.com/runs/{run}".into());
        let platform = api.platform_token().await;
        let admin = api.token("default", "root", "admin").await;
        let alice = api.token("default", "alice", "operator").await;
        Env {
            api,
            platform,
            admin,
            alice,
        }
    }

    /// Writes `net`'s first version as alice, so the state is listed whatever holds it.
    async fn save_first_version(&self) {
        let saved = self
            .api
            .post_state(&self.alice, "net", None, state_doc(1, "lin", "one"))
            .await;
        assert_eq!(saved.status, 200, "a listed state has a version");
    }

    /// Mints a step token for state `net`; returns the token.
    async fn mint(&self, run: &str, step: &str, attempt: u32, kind: &str, hold: bool) -> String {
        let r = self
            .api
            .post_json(
                &format!("/api/runs/{run}/tf-state-tokens"),
                &self.platform,
                &json!({"org": "default", "state": "net", "step": step, "attempt": attempt, "kind": kind, "timeout_seconds": 600, "hold": hold}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
        r.json()["token"].as_str().unwrap().to_owned()
    }

    async fn lock(&self, token: &str, id: &str) -> u16 {
        self.api.lock(token, "net", &lock_doc(id)).await.status
    }

    async fn unlock(&self, token: &str, body: &str) -> u16 {
        self.api.unlock(token, "net", body).await.status
    }

    async fn post(&self, path: &str, token: &str, body: Value) -> crate::support::api::Answer {
        self.api.post_json(path, token, &body).await
    }
}

/// A run ends while its step holds a lock: the lock stays live through the grace, then the
/// next lock takes it over and the audit says "lock expired".
#[tokio::test]
async fn a_lock_outlives_its_run_by_the_grace_then_is_taken_over() {
    let env = Env::new(Duration::seconds(2)).await;
    let token = env.mint("run-3", "apply", 1, "apply", false).await;
    assert_eq!(env.lock(&token, "S").await, 200);
    let holder = env
        .api
        .request("POST", "/api/tf-states/net/lock")
        .bearer(&env.alice)
        .body(lock_doc("A"))
        .send()
        .await
        .json();
    assert!(
        holder["Info"]
            .as_str()
            .unwrap()
            .starts_with("run run-3 step apply attempt 1 since"),
        "{holder}"
    );
    let ended = env
        .post("/api/runs/run-3/end", &env.platform, json!({}))
        .await;
    assert_eq!(ended.status, 200);
    assert_eq!(
        env.lock(&env.alice, "A").await,
        423,
        "live through the grace"
    );
    env.api.fx.advance(Duration::seconds(3));
    assert_eq!(env.lock(&env.alice, "A").await, 200, "taken over after it");
    let audit = env
        .api
        .json("GET", "/api/audit?action=lock.expired", &env.admin)
        .await;
    assert_eq!(audit["entries"].as_array().unwrap().len(), 1);
    assert_eq!(audit["entries"][0]["detail"]["lock_id"], "S");
}

/// A step reported gone frees its lock at once; attempt 1's gone report does not free
/// attempt 2's lock.
#[tokio::test]
async fn gone_frees_only_its_own_attempts_lock() {
    let env = Env::new(Duration::seconds(600)).await;
    let gone = "/api/runs/run-4/steps/apply/gone";
    let first = env.mint("run-4", "apply", 1, "apply", false).await;
    assert_eq!(env.lock(&first, "S1").await, 200);
    let r = env.post(gone, &env.platform, json!({"attempt": 1})).await;
    assert_eq!(r.json()["revoked"], 1);
    let second = env.mint("run-4", "apply", 2, "apply", false).await;
    assert_eq!(
        env.lock(&second, "S2").await,
        200,
        "attempt 1's lock is free at once"
    );
    let again = env.post(gone, &env.platform, json!({"attempt": 1})).await;
    assert_eq!(again.status, 200);
    assert_eq!(
        env.lock(&env.alice, "A").await,
        423,
        "attempt 2 still holds it"
    );
    assert_eq!(
        env.lock(&first, "S1b").await,
        401,
        "attempt 1's token is revoked"
    );
    let r = env.post(gone, &env.platform, json!({})).await;
    assert_eq!(r.status, 400, "the attempt is required");
}

/// A step token cannot touch another state or any management route, and never forces;
/// `force-unlock hold-<run>` ends only the hold.
#[tokio::test]
async fn what_a_step_token_may_not_do() {
    let env = Env::new(Duration::seconds(600)).await;
    let token = env.mint("run-5", "plan", 1, "plan", true).await;
    let get = |path: &str| {
        let call = env.api.request("GET", path).basic(&token);
        async move { call.send().await.status }
    };
    assert_eq!(
        get("/api/tf-states/net/state").await,
        404,
        "its own state: no version yet"
    );
    assert_eq!(get("/api/tf-states/other/state").await, 403);
    let bearer = |path: &str| {
        let call = env.api.request("GET", path).bearer(&token);
        async move { call.send().await.status }
    };
    assert_eq!(bearer("/api/tf-states").await, 403);
    assert_eq!(bearer("/api/tf-states/net").await, 403);
    assert_eq!(bearer("/api/audit").await, 403);
    assert_eq!(env.lock(&token, "P").await, 200);
    // The admin ends only the hold; the step's lock stays.
    assert_eq!(env.unlock(&env.admin, r#"{"ID":"hold-run-5"}"#).await, 200);
    assert_eq!(
        env.lock(&env.alice, "A").await,
        423,
        "the lock is still the step's"
    );
    let state = env.api.listed(&env.admin, "net").await;
    assert!(state.is_null() || state["hold"].is_null());
    // Alice takes a lock after the step releases; the step then never forces it.
    assert_eq!(env.unlock(&token, &lock_doc("P")).await, 200);
    assert_eq!(env.lock(&env.alice, "A").await, 200);
    assert_eq!(env.unlock(&token, "").await, 403);
    assert_eq!(env.unlock(&token, &lock_doc("A")).await, 403);
    // A personal token cannot call the runs API.
    let r = env.post("/api/runs/run-5/end", &env.admin, json!({})).await;
    assert_eq!(r.status, 403);
}

#[tokio::test]
async fn the_runs_api_refuses_bad_input_with_a_clear_4xx() {
    let env = Env::new(Duration::seconds(600)).await;
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
    let mint = "/api/runs/r/tf-state-tokens";
    let cases: Vec<(&str, Value, u16, &str)> = vec![
        (mint, with("kind", json!("destroy")), 400, "plan or apply"),
        (mint, with("timeout_seconds", json!(0)), 400, "positive"),
        (mint, with("timeout_seconds", json!(-5)), 400, "positive"),
        (mint, with("timeout_seconds", json!(1.5)), 400, "positive"),
        (mint, with("state", json!("../x")), 400, "state name"),
        (mint, with("step", json!("a b")), 400, "step name"),
        (mint, with("hold", json!("yes")), 400, "true or false"),
        (
            mint,
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
        (mint, without("org"), 400, "\"org\" is required"),
        (mint, with("extra", json!(1)), 400, "unknown field"),
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
        let r = env.post(path, &env.platform, body.clone()).await;
        assert_eq!(r.status, status, "{path} {body}");
        let v = r.json();
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{path} {body}: {message}");
    }
    // A timeout of any positive size is fine: the token is capped at 24 hours.
    let big = "/api/runs/big/tf-state-tokens";
    let r = env
        .post(
            big,
            &env.platform,
            with("timeout_seconds", json!(10_000_000)),
        )
        .await;
    assert_eq!(r.status, 201);
    // A run is bound to its org by its first mint.
    env.api.token("other", "o", "admin").await;
    let r = env
        .post(big, &env.platform, with("org", json!("other")))
        .await;
    assert_eq!(r.status, 409);
    // The org's allocation refusing operators refuses the mint with its code.
    let r = env
        .api
        .request("PUT", "/api/org/permissions")
        .bearer(&env.admin)
        .body(r#"{"tf_state:write":"admin"}"#)
        .send()
        .await;
    assert_eq!(r.status, 200);
    let r = env
        .post("/api/runs/r9/tf-state-tokens", &env.platform, good)
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(r.json()["error"]["code"], "permission_not_allocated");
}

/// Behind a proxy that adds a path prefix or rewrites Host, the request cannot tell the
/// public address; the setting can, and the backend a mint hands out then uses it.
#[tokio::test]
async fn a_mint_hands_out_the_configured_public_address() {
    let mut env = Env::new(Duration::seconds(600)).await;
    let seen = mint_from_a_proxy(&env).await.json();
    assert_eq!(
        seen["backend"]["address"], "http://10.0.0.7:8080/api/tf-states/net/state",
        "without the setting, as the request reached the server"
    );
    env.api.fx.app.links.public_url = Some("https://example.com/state".into());
    let set = mint_from_a_proxy(&env).await.json();
    assert_eq!(
        (
            &set["backend"]["address"],
            &set["backend"]["lock_address"],
            &set["backend"]["unlock_address"]
        ),
        (
            &json!("https://example.com/state/api/tf-states/net/state"),
            &json!("https://example.com/state/api/tf-states/net/lock"),
            &json!("https://example.com/state/api/tf-states/net/lock")
        )
    );
}

/// A mint as a proxy forwards it, with the proxy's view of Host and scheme.
async fn mint_from_a_proxy(env: &Env) -> crate::support::api::Answer {
    env.api
        .request("POST", "/api/runs/r1/tf-state-tokens")
        .bearer(&env.platform)
        .header("host", "10.0.0.7:8080")
        .header("x-forwarded-proto", "http")
        .json(&json!({"org": "default", "state": "net", "step": "plan", "attempt": 1, "kind": "plan", "timeout_seconds": 600}))
        .send()
        .await
}

/// `terraform force-unlock` sends an empty body; while a hold stands that is a force, so an
/// operator, or a step (even of the holding run), is refused and nothing is released, where
/// it used to answer 200 and leave the hold, a success that was not one.
#[tokio::test]
async fn an_empty_unlock_while_held_is_refused_unless_forcing_is_allowed() {
    let env = Env::new(Duration::seconds(600)).await;
    env.save_first_version().await;
    let plan = env.mint("r1", "plan", 1, "plan", true).await;
    assert_eq!(env.lock(&plan, "P").await, 200);
    for who in [&env.alice, &plan] {
        let refused = env
            .api
            .request("DELETE", "/api/tf-states/net/lock")
            .bearer(who)
            .send()
            .await
            .error();
        assert_eq!(
            (refused.status, refused.code.as_str()),
            (403, "not_lock_holder")
        );
    }
    assert_eq!(
        env.api.listed(&env.admin, "net").await["hold"]["id"],
        "hold-r1",
        "nothing released"
    );
    assert_eq!(
        env.unlock(&plan, &lock_doc("P")).await,
        200,
        "its own lock, by ID"
    );
    assert_eq!(env.unlock(&env.admin, "").await, 200, "an admin forces");
    assert!(env.api.listed(&env.admin, "net").await["hold"].is_null());
}

/// An unlock naming a hold's ID that is not the current hold never answers 200 over what
/// stands now.
#[tokio::test]
async fn an_unlock_naming_another_hold_is_a_mismatch() {
    let env = Env::new(Duration::seconds(600)).await;
    assert_eq!(env.lock(&env.alice, "L1").await, 200);
    let r = env
        .api
        .unlock(&env.admin, "net", r#"{"ID":"hold-old-run"}"#)
        .await
        .error();
    assert_eq!((r.status, r.code.as_str()), (409, "lock_id_mismatch"));
    assert_eq!(
        env.lock(&env.admin, "L2").await,
        423,
        "the lock still stands"
    );
}

/// Once its run has ended and the grace has passed, a step token answers 401 everywhere: it
/// could otherwise lock the state again (a lock living until the token's own expiry) or
/// write. Within the grace it still works, but a hold token sets no hold for an ended run,
/// which nothing but a force unlock would end.
#[tokio::test]
async fn a_step_token_stops_with_its_run_and_sets_no_hold_once_it_ended() {
    let env = Env::new(Duration::seconds(60)).await;
    env.save_first_version().await;
    let plan = env.mint("r1", "plan", 1, "plan", true).await;
    let ended = env.post("/api/runs/r1/end", &env.platform, json!({})).await;
    assert_eq!(ended.status, 200);
    assert_eq!(env.lock(&plan, "P").await, 200, "within the grace");
    assert!(
        env.api.listed(&env.admin, "net").await["hold"].is_null(),
        "no hold for an ended run"
    );
    assert_eq!(env.unlock(&plan, &lock_doc("P")).await, 200);
    assert_eq!(
        env.lock(&plan, "Q").await,
        200,
        "a lock taken within the grace"
    );
    env.api.fx.advance(Duration::seconds(61));
    assert_eq!(
        env.lock(&env.alice, "A").await,
        200,
        "lives no longer than the grace: the token can no longer release it"
    );
    assert_eq!(env.unlock(&env.alice, &lock_doc("A")).await, 200);
    assert_eq!(env.lock(&plan, "P").await, 401, "past the grace");
    let write = env
        .api
        .post_state(&plan, "net", None, state_doc(2, "lin", "two"))
        .await;
    assert_eq!(write.status, 401);
    assert_eq!(env.api.get_state(&plan, "net").await.status, 401);
    assert_eq!(env.lock(&env.alice, "A").await, 200, "the state is free");
}

/// A mint is audited in the org it is for, naming the run, step and attempt; reading the
/// state works while the run holds it, for people and for other runs' steps alike.
#[tokio::test]
async fn a_mint_is_audited_and_a_held_state_still_reads() {
    let env = Env::new(Duration::seconds(600)).await;
    let body = state_doc(1, "lin", "one");
    let saved = env
        .api
        .post_state(&env.alice, "net", None, body.clone())
        .await;
    assert_eq!(saved.status, 200);
    let plan = env.mint("r1", "plan", 2, "plan", true).await;
    assert_eq!(env.lock(&plan, "P").await, 200);
    assert_eq!(env.unlock(&plan, &lock_doc("P")).await, 200);
    assert_eq!(
        env.api.listed(&env.admin, "net").await["hold"]["id"],
        "hold-r1"
    );
    let other_run = env.mint("r2", "plan", 1, "plan", false).await;
    for reader in [&env.alice, &plan, &other_run] {
        let read = env.api.get_state(reader, "net").await;
        assert_eq!(
            (read.status, read.body.clone()),
            (200, body.clone().into_bytes())
        );
    }
    let audit = env
        .api
        .json("GET", "/api/audit?action=step_token.minted", &env.admin)
        .await;
    let entries = audit["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{audit}");
    let first = &entries[1];
    assert_eq!(first["actor"], json!({"kind": "platform"}));
    assert_eq!(first["state"], "net");
    assert!(
        first["detail"].to_string().contains("r1") && first["detail"].to_string().contains("plan"),
        "{first}"
    );
}

/// A version a step wrote names its writer with the run's link, as a step's lock names its
/// holder, so a page links the run without knowing the template.
#[tokio::test]
async fn a_version_written_by_a_step_links_its_run() {
    let env = Env::new(Duration::seconds(600)).await;
    let token = env.mint("run-9", "apply", 1, "apply", false).await;
    assert_eq!(env.lock(&token, "S").await, 200);
    let saved = env
        .api
        .post_state(&token, "net", Some("S"), state_doc(1, "lin", "x"))
        .await;
    assert_eq!(saved.status, 200, "{}", saved.text());
    let versions = env
        .api
        .json("GET", "/api/tf-states/net/versions", &env.admin)
        .await;
    assert_eq!(
        versions["versions"][0]["writer"],
        json!({"kind": "step", "run": "run-9", "step": "apply", "attempt": 1,
               "run_url": "https://ci.example.com/runs/run-9"})
    );
}

/// The first run of a new state holds it until its apply: its plan writes nothing, and its
/// release leaves only the hold. The list and the state's page show the state with no
/// version yet, the hold and the run's link, and offer a force unlock to whoever may use it;
/// everyone else's 423 then has a visible cause. A lock alone on a new name stays unlisted.
#[tokio::test]
async fn a_hold_on_a_state_with_no_version_yet_is_listed_and_can_be_forced() {
    let env = Env::new(Duration::seconds(600)).await;
    let plan = env.mint("r1", "plan", 1, "plan", true).await;
    assert_eq!(env.lock(&plan, "P").await, 200);
    assert_eq!(env.unlock(&plan, &lock_doc("P")).await, 200);
    assert_eq!(env.lock(&env.alice, "A").await, 423);

    let listed = env.api.listed(&env.alice, "net").await;
    assert_eq!(listed["latest_version"], Value::Null, "{listed}");
    assert_eq!(listed["serial"], Value::Null);
    assert_eq!(listed["lock"], Value::Null);
    assert_eq!(listed["hold"]["id"], "hold-r1");
    assert_eq!(listed["hold"]["run_url"], "https://ci.example.com/runs/r1");
    let page = env.api.json("GET", "/api/tf-states/net", &env.admin).await;
    assert_eq!(page["hold"]["run"], "r1", "{page}");
    assert_eq!(page["latest_version"], Value::Null);
    assert_eq!(
        page["allowed_actions"],
        json!({"download": false, "outputs": false, "import": false, "rollback": false, "force_unlock": true, "delete": false})
    );
    let page = env.api.json("GET", "/api/tf-states/net", &env.alice).await;
    assert_eq!(page["allowed_actions"]["force_unlock"], false, "{page}");
    let versions = env
        .api
        .json("GET", "/api/tf-states/net/versions", &env.alice)
        .await;
    assert_eq!(versions["versions"], json!([]));

    let forced = env
        .api
        .request("POST", "/api/tf-states/net/force-unlock")
        .bearer(&env.admin)
        .send()
        .await;
    assert_eq!(forced.status, 200, "{}", forced.text());
    assert_eq!(forced.json()["released"]["hold"]["run"], "r1");
    assert!(env.api.listed(&env.alice, "net").await.is_null());
    assert_eq!(env.lock(&env.alice, "A").await, 200);
    assert!(
        env.api.listed(&env.alice, "net").await.is_null(),
        "a lock alone on a new name is not listed"
    );
    let page = env
        .api
        .request("GET", "/api/tf-states/net")
        .bearer(&env.alice)
        .send()
        .await;
    assert_eq!(page.status, 404);
}

/// Once a step's token no longer works (its run ended and the grace passed, or its attempt
/// is gone), the list, the state's page and the overview show the state unlocked, with
/// nothing to force.
#[tokio::test]
async fn a_lock_whose_token_no_longer_works_is_shown_unlocked() {
    let env = Env::new(Duration::seconds(60)).await;
    env.save_first_version().await;
    let shown = |token: String| {
        let api = &env.api;
        async move {
            let page = api.json("GET", "/api/tf-states/net", &token).await;
            let listed = api.listed(&token, "net").await;
            (page, listed)
        }
    };

    let apply = env.mint("r1", "apply", 1, "apply", false).await;
    assert_eq!(env.lock(&apply, "S").await, 200);
    let ended = env.post("/api/runs/r1/end", &env.platform, json!({})).await;
    assert_eq!(ended.status, 200);
    let (page, listed) = shown(env.admin.clone()).await;
    assert_eq!(listed["lock"]["id"], "S", "live through the grace");
    assert_eq!(page["allowed_actions"]["force_unlock"], true);
    let overview = env.api.json("GET", "/api/overview", &env.admin).await;
    assert_eq!(overview["locks"][0]["state"], "net", "{overview}");
    env.api.fx.advance(Duration::seconds(61));
    assert_eq!(
        env.lock(&apply, "S2").await,
        401,
        "the token no longer works"
    );
    let (page, listed) = shown(env.admin.clone()).await;
    assert_eq!(
        (&listed["lock"], &listed["hold"]),
        (&Value::Null, &Value::Null)
    );
    assert_eq!((&page["lock"], &page["hold"]), (&Value::Null, &Value::Null));
    let overview = env.api.json("GET", "/api/overview", &env.admin).await;
    assert_eq!(overview["locks"], json!([]), "nor on the overview");
    assert_eq!(page["allowed_actions"]["force_unlock"], false);
    assert_eq!(page["allowed_actions"]["rollback"], true);

    let second = env.mint("r2", "apply", 1, "apply", false).await;
    assert_eq!(env.lock(&second, "T").await, 200);
    let gone = env
        .post(
            "/api/runs/r2/steps/apply/gone",
            &env.platform,
            json!({"attempt": 1}),
        )
        .await;
    assert_eq!(gone.status, 200);
    assert_eq!(env.lock(&second, "T2").await, 401);
    let (page, listed) = shown(env.alice.clone()).await;
    assert_eq!(
        listed["lock"],
        Value::Null,
        "free at once after the gone report"
    );
    assert_eq!(page["lock"], Value::Null);
}
