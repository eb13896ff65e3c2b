//! Protected states over the API: rules set, read and removed by an admin only, naming
//! policies the org has, every change audited; a protected state changed only by sessions of
//! its rules' policies (every matching rule's), read as roles allow, force-unlocked by an
//! admin; the mark on the list and the state's page.

use serde_json::{json, Value};

use crate::support::api::{lock_doc, state_doc, Api};

const RULES: &str = "/api/org/protected-states";

fn policy(states: &[&str]) -> Value {
    json!({
        "issuer": "https://gitlab.example.com",
        "audience": "https://state.example.com/acme",
        "claims": {"project_id": "42", "ref_protected": "true"},
        "role": "operator",
        "states": states,
        "session_seconds": 3600
    })
}

/// An org `acme` with trust policies `deploy` and `network`, and an admin's token.
async fn org_with_policies(api: &Api) -> String {
    let admin = api.token("acme", "root", "admin").await;
    for name in ["deploy", "network"] {
        let r = api
            .request("PUT", &format!("/api/org/trust-policies/{name}"))
            .bearer(&admin)
            .json(&policy(&["*"]))
            .send()
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
    }
    admin
}

async fn protect(api: &Api, admin: &str, pattern: &str, policies: &[&str]) -> u16 {
    let r = api
        .request("PUT", &format!("{RULES}/{pattern}"))
        .bearer(admin)
        .json(&json!({ "policies": policies }))
        .send()
        .await;
    assert!(r.status < 300, "{}", r.text());
    r.status
}

#[tokio::test]
async fn an_admin_sets_reads_and_removes_a_rule_audited() {
    let api = Api::new();
    let admin = org_with_policies(&api).await;
    assert_eq!(
        api.json("GET", RULES, &admin).await,
        json!({"org": "acme", "protections": []})
    );
    assert_eq!(
        protect(&api, &admin, "prod-*", &["network", "deploy", "deploy"]).await,
        201
    );
    let rule = json!({"pattern": "prod-*", "policies": ["deploy", "network"]});
    assert_eq!(
        api.json("GET", &format!("{RULES}/prod-*"), &admin).await,
        rule
    );
    // A client that percent-encodes the star names the same rule.
    assert_eq!(
        api.json("GET", &format!("{RULES}/prod-%2A"), &admin).await,
        rule
    );
    assert_eq!(protect(&api, &admin, "prod-*", &["deploy"]).await, 200);
    assert_eq!(
        protect(&api, &admin, "prod-*", &["deploy"]).await,
        200,
        "set again: no change"
    );
    assert_eq!(protect(&api, &admin, "core-net", &["network"]).await, 201);
    assert_eq!(
        api.json("GET", RULES, &admin).await,
        json!({"org": "acme", "protections": [
            {"pattern": "core-net", "policies": ["network"]},
            {"pattern": "prod-*", "policies": ["deploy"]},
        ]})
    );
    let r = api
        .request("DELETE", &format!("{RULES}/prod-*"))
        .bearer(&admin)
        .send()
        .await;
    assert_eq!(r.status, 204);
    let r = api
        .request("DELETE", &format!("{RULES}/prod-*"))
        .bearer(&admin)
        .send()
        .await;
    assert_eq!(r.error().expect(404).0, "not_found");
    let audit = api
        .json("GET", "/api/audit?action=protection.set", &admin)
        .await;
    let details: Vec<Value> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["detail"].clone())
        .collect();
    assert_eq!(
        details,
        [
            json!({"pattern": "core-net", "policies": ["network"], "old_policies": null}),
            json!({"pattern": "prod-*", "policies": ["deploy"], "old_policies": ["deploy", "network"]}),
            json!({"pattern": "prod-*", "policies": ["deploy", "network"], "old_policies": null}),
        ],
        "newest first; setting a rule to what it is writes nothing"
    );
    let removed = api
        .json("GET", "/api/audit?action=protection.removed", &admin)
        .await;
    assert_eq!(
        removed["entries"][0]["detail"],
        json!({"pattern": "prod-*", "policies": ["deploy"]})
    );
    assert_eq!(
        removed["entries"][0]["actor"],
        json!({"kind": "user", "user": "root"})
    );
}

#[tokio::test]
async fn only_an_admin_reaches_the_rules_and_a_wrong_rule_is_refused_in_words() {
    let api = Api::new();
    let admin = org_with_policies(&api).await;
    let operator = api.token("acme", "op", "operator").await;
    for (method, path) in [
        ("GET", RULES.to_owned()),
        ("GET", format!("{RULES}/x")),
        ("DELETE", format!("{RULES}/x")),
    ] {
        let r = api.request(method, &path).bearer(&operator).send().await;
        assert_eq!(r.error().expect(403).0, "forbidden", "{method} {path}");
    }
    let r = api
        .request("PUT", &format!("{RULES}/prod-*"))
        .bearer(&operator)
        .json(&json!({"policies": ["deploy"]}))
        .send()
        .await;
    assert_eq!(r.error().expect(403).0, "forbidden");
    let cases = [
        ("prod-*", json!({"policies": []}), "policies must name 1-16"),
        ("prod-*", json!({"policy": ["deploy"]}), "unknown field"),
        ("prod-*", json!(["deploy"]), "the body must be"),
        (".prod*", json!({"policies": ["deploy"]}), "state pattern"),
        (
            "prod%2Fnet",
            json!({"policies": ["deploy"]}),
            "state pattern",
        ),
    ];
    for (pattern, body, says) in cases {
        let r = api
            .request("PUT", &format!("{RULES}/{pattern}"))
            .bearer(&admin)
            .json(&body)
            .send()
            .await;
        let (code, message) = r.error().expect(400);
        assert!(
            ["invalid_request", "invalid_name"].contains(&code.as_str()) && message.contains(says),
            "{pattern} {body}: {code} {message}"
        );
    }
    // A policy the org does not have is not there, as any other name.
    let r = api
        .request("PUT", &format!("{RULES}/prod-*"))
        .bearer(&admin)
        .json(&json!({"policies": ["deploy", "ghost"]}))
        .send()
        .await;
    let (code, message) = r.error().expect(404);
    assert!(
        code == "not_found"
            && message.contains("trust policy ghost")
            && message.contains("the org has deploy, network"),
        "{code} {message}"
    );
    let r = api.json("GET", "/api/org/trust-policies", &admin).await;
    assert_eq!(r["policies"].as_array().unwrap().len(), 2);
    assert_eq!(
        api.json("GET", RULES, &admin).await["protections"],
        json!([])
    );
}

#[tokio::test]
async fn a_protected_state_is_changed_only_by_its_policies_sessions() {
    let api = Api::new();
    let admin = org_with_policies(&api).await;
    let operator = api.token("acme", "op", "operator").await;
    let deploy = api.session("acme", "deploy").await;
    let network = api.session("acme", "network").await;
    // Written before the rule: it protects what exists as well as what is to come.
    assert_eq!(
        api.post_state(&operator, "prod-net", None, state_doc(1, "l", "one"))
            .await
            .status,
        200
    );
    assert_eq!(
        api.post_state(&operator, "prod-net", None, state_doc(2, "l", "two"))
            .await
            .status,
        200
    );
    protect(&api, &admin, "prod-*", &["deploy"]).await;
    for (who, token) in [
        ("operator", &operator),
        ("admin", &admin),
        ("another policy's session", &network),
    ] {
        let r = api.lock(token, "prod-net", &lock_doc("L1")).await;
        let (code, message) = r.error().expect(403);
        assert_eq!(code, "protected_state", "{who}");
        assert!(
            message.contains("prod-net")
                && message.contains("\"prod-*\"")
                && message.contains("deploy")
                && message.contains("lock"),
            "{who}: the refusal names the state, the rule and its policies: {message}"
        );
        let r = api
            .post_state(token, "prod-net", None, state_doc(3, "l", "three"))
            .await;
        assert_eq!(r.error().expect(403).0, "protected_state", "{who}");
    }
    for (method, path, body) in [
        (
            "POST",
            "/api/tf-states/prod-net/rollback",
            json!({"version": 1}).to_string(),
        ),
        (
            "POST",
            "/api/tf-states/prod-new/import",
            state_doc(1, "n", "new"),
        ),
        ("DELETE", "/api/tf-states/prod-net", String::new()),
    ] {
        let r = api
            .request(method, path)
            .bearer(&admin)
            .body(body)
            .send()
            .await;
        assert_eq!(
            r.error().expect(403).0,
            "protected_state",
            "{method} {path}"
        );
    }
    // Reading follows roles as before.
    assert_eq!(api.get_state(&operator, "prod-net").await.status, 200);
    // The policy's session changes it, and an admin may still force-unlock it, audited.
    assert_eq!(
        api.lock(&deploy, "prod-net", &lock_doc("D1")).await.status,
        200
    );
    assert_eq!(
        api.post_state(&deploy, "prod-net", Some("D1"), state_doc(3, "l", "three"))
            .await
            .status,
        200
    );
    let r = api
        .request("POST", "/api/tf-states/prod-net/force-unlock")
        .bearer(&admin)
        .send()
        .await;
    assert_eq!(r.json()["released"]["lock"]["id"], "D1", "{}", r.text());
    let audit = api
        .json("GET", "/api/tf-states/prod-net/audit", &admin)
        .await;
    assert_eq!(audit["entries"][0]["action"], "lock.force_unlocked");
    let r = api
        .request("POST", "/api/tf-states/prod-net/rollback")
        .bearer(&deploy)
        .json(&json!({"version": 1}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // Other states are changed as roles allow.
    assert_eq!(
        api.lock(&operator, "dev-net", &lock_doc("O1")).await.status,
        200
    );
    // Once the rule is gone, so is the protection.
    api.request("DELETE", &format!("{RULES}/prod-*"))
        .bearer(&admin)
        .send()
        .await;
    assert_eq!(
        api.lock(&operator, "prod-net", &lock_doc("O2"))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn a_state_under_several_rules_is_changed_only_by_a_policy_every_rule_names() {
    let api = Api::new();
    let admin = org_with_policies(&api).await;
    protect(&api, &admin, "prod-*", &["deploy", "network"]).await;
    protect(&api, &admin, "*-net", &["network"]).await;
    let deploy = api.session("acme", "deploy").await;
    let network = api.session("acme", "network").await;
    let (code, message) = api
        .lock(&deploy, "prod-net", &lock_doc("D"))
        .await
        .error()
        .expect(403);
    assert!(
        code == "protected_state" && message.contains("\"*-net\""),
        "{message}"
    );
    assert_eq!(
        api.lock(&network, "prod-net", &lock_doc("N")).await.status,
        200
    );
    assert_eq!(
        api.lock(&deploy, "prod-db", &lock_doc("D")).await.status,
        200
    );
}

#[tokio::test]
async fn the_list_and_the_states_page_mark_a_protected_state() {
    let api = Api::new();
    let admin = org_with_policies(&api).await;
    for name in ["dev-net", "prod-net"] {
        assert_eq!(
            api.post_state(&admin, name, None, state_doc(1, "l", "one"))
                .await
                .status,
            200
        );
    }
    protect(&api, &admin, "prod-*", &["deploy"]).await;
    let rule = json!([{"pattern": "prod-*", "policies": ["deploy"]}]);
    assert_eq!(api.listed(&admin, "prod-net").await["protections"], rule);
    assert_eq!(
        api.listed(&admin, "dev-net").await["protections"],
        json!([])
    );
    let page = api.json("GET", "/api/tf-states/prod-net", &admin).await;
    assert_eq!(page["protections"], rule);
    let allowed = &page["allowed_actions"];
    assert_eq!(
        (
            &allowed["rollback"],
            &allowed["delete"],
            &allowed["download"]
        ),
        (&json!(false), &json!(false), &json!(true)),
        "the page offers no change the rule refuses: {allowed}"
    );
    let deploy = api.session("acme", "deploy").await;
    let page = api.json("GET", "/api/tf-states/prod-net", &deploy).await;
    assert_eq!(page["allowed_actions"]["rollback"], json!(true));
}

#[tokio::test]
async fn a_deleted_state_is_not_restored_onto_a_protected_name() {
    let api = Api::new();
    let admin = org_with_policies(&api).await;
    assert_eq!(
        api.post_state(&admin, "old", None, state_doc(1, "l", "one"))
            .await
            .status,
        200
    );
    let r = api
        .request("DELETE", "/api/tf-states/old")
        .bearer(&admin)
        .send()
        .await;
    assert!(r.status < 300, "{}", r.text());
    protect(&api, &admin, "prod-*", &["deploy"]).await;
    let id = api.json("GET", "/api/deleted-states", &admin).await["deleted_states"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = api
        .request("POST", &format!("/api/deleted-states/{id}/restore"))
        .bearer(&admin)
        .json(&json!({"name": "prod-old"}))
        .send()
        .await;
    assert_eq!(r.error().expect(403).0, "protected_state");
    let r = api
        .request("POST", &format!("/api/deleted-states/{id}/restore"))
        .bearer(&admin)
        .json(&json!({}))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}
