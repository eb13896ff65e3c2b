//! Trust policies over the API: the pinned shape in and out, admin only, refused when
//! outside the rules, an issuer and audience pair held by one org, every change audited.

use serde_json::{json, Value};

use crate::support::api::Api;

const POLICIES: &str = "/api/org/trust-policies";

fn github(name: &str) -> Value {
    json!({
        "name": name,
        "issuer": "https://token.actions.githubusercontent.com",
        "audience": "https://state.example.com/acme",
        "claims": {"repository_id": "123", "ref": "refs/heads/main"},
        "role": "operator",
        "states": ["net-*"],
        "session_seconds": 3600
    })
}

#[tokio::test]
async fn an_admin_adds_reads_replaces_and_removes_a_policy_in_the_pinned_shape() {
    let api = Api::new();
    let admin = api.token("acme", "root", "admin").await;
    let r = api.post_json(POLICIES, &admin, &github("deploy")).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json(), github("deploy"), "answered exactly as sent");
    assert_eq!(
        api.json("GET", &format!("{POLICIES}/deploy"), &admin).await,
        github("deploy")
    );
    assert_eq!(
        api.json("GET", POLICIES, &admin).await,
        json!({"org": "acme", "policies": [github("deploy")], "warnings": []})
    );
    let mut changed = github("deploy");
    changed["states"] = json!(["net-*", "dns"]);
    changed["role"] = json!("viewer");
    let r = api
        .request("PUT", &format!("{POLICIES}/deploy"))
        .bearer(&admin)
        .json(&changed)
        .send()
        .await;
    assert_eq!((r.status, r.json()), (200, changed.clone()));
    let r = api
        .request("PUT", &format!("{POLICIES}/plan"))
        .bearer(&admin)
        .json(&github("plan"))
        .send()
        .await;
    assert_eq!(r.status, 201, "PUT creates a policy of a new name");
    let mut unnamed = github("plan");
    unnamed.as_object_mut().unwrap().remove("name");
    unnamed["role"] = json!("viewer");
    let r = api
        .request("PUT", &format!("{POLICIES}/plan"))
        .bearer(&admin)
        .json(&unnamed)
        .send()
        .await;
    assert_eq!(
        (r.status, r.json()["name"].clone(), r.json()["role"].clone()),
        (200, json!("plan"), json!("viewer")),
        "the path names the policy a body leaves unnamed"
    );
    let r = api
        .request("DELETE", &format!("{POLICIES}/deploy"))
        .bearer(&admin)
        .send()
        .await;
    assert_eq!(r.status, 204);
    let r = api
        .request("GET", &format!("{POLICIES}/deploy"))
        .bearer(&admin)
        .send()
        .await;
    assert_eq!(r.error().expect(404).0, "not_found");
    let audit = api.json("GET", "/api/audit", &admin).await;
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .filter(|a| a.starts_with("trust_policy."))
        .collect();
    assert_eq!(
        actions,
        [
            "trust_policy.deleted",
            "trust_policy.changed",
            "trust_policy.created",
            "trust_policy.changed",
            "trust_policy.created"
        ]
    );
    let changed_entry = &audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["action"] == "trust_policy.changed")
        .unwrap()["detail"];
    assert_eq!(changed_entry["old"], github("deploy"));
    assert_eq!(changed_entry["new"], changed);
}

#[tokio::test]
async fn only_an_admin_reaches_trust_policies() {
    let api = Api::new();
    let admin = api.token("acme", "root", "admin").await;
    api.post_json(POLICIES, &admin, &github("deploy")).await;
    let operator = api.token("acme", "alice", "operator").await;
    for (method, path, body) in [
        ("GET", POLICIES.to_owned(), None),
        ("POST", POLICIES.to_owned(), Some(github("x"))),
        ("GET", format!("{POLICIES}/deploy"), None),
        ("PUT", format!("{POLICIES}/deploy"), Some(github("deploy"))),
        ("DELETE", format!("{POLICIES}/deploy"), None),
    ] {
        let mut call = api.request(method, &path).bearer(&operator);
        if let Some(body) = &body {
            call = call.json(body);
        }
        let r = call.send().await;
        assert_eq!(r.error().expect(403).0, "forbidden", "{method} {path}");
    }
    let r = api.request("GET", POLICIES).send().await;
    assert_eq!(r.error().expect(401).0, "unauthenticated");
}

#[tokio::test]
async fn a_policy_outside_the_rules_is_refused_in_words() {
    let api = Api::new();
    let admin = api.token("acme", "root", "admin").await;
    let cases = [
        (
            "issuer",
            json!("http://token.actions.githubusercontent.com"),
            "https://",
        ),
        ("audience", json!(""), "audience"),
        ("role", json!("admin"), "never admin"),
        ("states", json!([]), "states"),
        ("states", json!(["a/b"]), "state pattern"),
        ("session_seconds", json!(86_401), "session_seconds"),
        ("session_seconds", json!(0), "session_seconds"),
        ("claims", json!({"ref": 1}), "claims"),
    ];
    for (field, value, says) in cases {
        let mut policy = github("p");
        policy[field] = value.clone();
        let r = api.post_json(POLICIES, &admin, &policy).await;
        let (code, message) = r.error().expect(400);
        assert_eq!(code, "invalid_request", "{field} = {value}");
        assert!(message.contains(says), "{field} = {value}: {message}");
    }
    let mut unknown = github("p");
    unknown["claim"] = json!({"ref": "x"});
    let r = api.post_json(POLICIES, &admin, &unknown).await;
    assert!(r.error().expect(400).1.contains("unknown field"));
    let r = api
        .request("PUT", &format!("{POLICIES}/other"))
        .bearer(&admin)
        .json(&github("p"))
        .send()
        .await;
    assert!(r.error().expect(400).1.contains("must be the same"));
    assert_eq!(
        api.json("GET", POLICIES, &admin).await["policies"],
        json!([]),
        "nothing refused was stored"
    );
}

#[tokio::test]
async fn a_name_in_use_and_another_orgs_issuer_and_audience_are_conflicts() {
    let api = Api::new();
    let acme = api.token("acme", "root", "admin").await;
    let other = api.token("other", "root", "admin").await;
    assert_eq!(
        api.post_json(POLICIES, &acme, &github("deploy"))
            .await
            .status,
        201
    );
    let r = api.post_json(POLICIES, &acme, &github("deploy")).await;
    assert_eq!(r.error().expect(409).0, "policy_exists");
    // Another org cannot claim the audience acme's jobs ask for: a new policy's audience
    // names its own org.
    let r = api.post_json(POLICIES, &other, &github("deploy")).await;
    let (code, message) = r.error().expect(400);
    assert_eq!(code, "invalid_request");
    assert!(message.contains("must end with /other"), "{message}");
    let mut own = github("deploy");
    own["audience"] = json!("https://state.example.com/other");
    assert_eq!(api.post_json(POLICIES, &other, &own).await.status, 201);
    assert_eq!(
        api.json("GET", POLICIES, &acme).await["policies"],
        json!([github("deploy")]),
        "each org sees its own"
    );
}

/// An org holds at most 50 policies: the 51st is a 409 `policy_limit` in words (the org's
/// state refuses it, not the policy), and replacing one of the fifty still works.
#[tokio::test]
async fn an_org_holds_at_most_fifty_policies() {
    let api = Api::new();
    let admin = api.token("acme", "root", "admin").await;
    for n in 0..50 {
        let mut policy = github(&format!("p{n}"));
        policy["claims"]["repository_id"] = json!(n.to_string());
        let r = api.post_json(POLICIES, &admin, &policy).await;
        assert_eq!(r.status, 201, "{n}: {}", r.text());
    }
    let r = api.post_json(POLICIES, &admin, &github("one-more")).await;
    let (code, message) = r.error().expect(409);
    assert_eq!(code, "policy_limit");
    assert!(message.contains("the most there may be (50)"), "{message}");
    let mut changed = github("p0");
    changed["states"] = json!(["*"]);
    let r = api
        .request("PUT", &format!("{POLICIES}/p0"))
        .bearer(&admin)
        .json(&changed)
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

/// `session_seconds` is an integer as JSON Schema counts one: 3600.0 is 3600, 3600.5 is not.
#[tokio::test]
async fn a_whole_number_written_with_a_fraction_is_taken() {
    let api = Api::new();
    let admin = api.token("acme", "root", "admin").await;
    let mut policy = github("deploy");
    policy["session_seconds"] = json!(3600.0);
    let r = api.post_json(POLICIES, &admin, &policy).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["session_seconds"], json!(3600));
    policy["name"] = json!("half");
    policy["session_seconds"] = json!(3600.5);
    let r = api.post_json(POLICIES, &admin, &policy).await;
    assert_eq!(r.error().expect(400).0, "invalid_request");
}
