//! `GET /api/whoami`: who a token is and what its role may do in the org, for the pages'
//! header and the actions they offer; never the token.

use serde_json::json;

use crate::support::api::Api;

#[tokio::test]
async fn whoami_names_the_org_the_user_the_role_and_what_it_may_do() {
    let api = Api::new();
    let viewer = api.token("acme", "vera", "viewer").await;
    let operator = api.token("acme", "otto", "operator").await;
    let admin = api.token("acme", "ada", "admin").await;
    let me = api.json("GET", "/api/whoami", &viewer).await;
    assert_eq!(me["org"], "acme");
    assert_eq!(me["actor"], json!({"kind": "user", "user": "vera"}));
    assert_eq!(me["role"], "viewer");
    assert_eq!(
        me["allowed_actions"],
        json!({"download": false, "outputs": true, "import": false, "rollback": false,
               "force_unlock": false, "delete": false, "audit": false, "permissions": false})
    );
    assert!(!me.to_string().contains(&viewer), "never the token");
    let me = api.json("GET", "/api/whoami", &operator).await;
    assert_eq!(
        me["allowed_actions"],
        json!({"download": true, "outputs": true, "import": true, "rollback": true,
               "force_unlock": false, "delete": false, "audit": false, "permissions": false})
    );
    let me = api.json("GET", "/api/whoami", &admin).await;
    assert_eq!(me["role"], "admin");
    assert!(me["allowed_actions"]
        .as_object()
        .unwrap()
        .values()
        .all(|v| v == true));
}

/// The answer follows the org's allocation as it is now, not the defaults.
#[tokio::test]
async fn whoami_follows_a_changed_allocation() {
    let api = Api::new();
    let admin = api.token("acme", "ada", "admin").await;
    let viewer = api.token("acme", "vera", "viewer").await;
    let changed = api
        .post_json("/api/org/permissions", &admin, &json!({}))
        .await;
    assert_eq!(changed.status, 405, "the allocation is changed with PUT");
    let changed = api
        .request("PUT", "/api/org/permissions")
        .bearer(&admin)
        .json(&json!({"tf_state:read": "viewer", "tf_state:manage": null}))
        .send()
        .await;
    assert_eq!(changed.status, 200);
    let me = api.json("GET", "/api/whoami", &viewer).await;
    assert_eq!(me["allowed_actions"]["download"], true);
    assert_eq!(me["allowed_actions"]["rollback"], false);
    let me = api.json("GET", "/api/whoami", &admin).await;
    assert_eq!(me["allowed_actions"]["delete"], false);
    assert_eq!(me["allowed_actions"]["audit"], true);
}

#[tokio::test]
async fn whoami_refuses_missing_and_unknown_tokens_and_platform_tokens() {
    let api = Api::new();
    let r = api.request("GET", "/api/whoami").send().await;
    assert_eq!(r.error().expect(401).0, "unauthenticated");
    let r = api
        .request("GET", "/api/whoami")
        .bearer("hgs_nope")
        .send()
        .await;
    assert_eq!(r.status, 401);
    let platform = api.platform_token().await;
    let r = api
        .request("GET", "/api/whoami")
        .bearer(&platform)
        .send()
        .await;
    assert_eq!(r.error().expect(403).0, "forbidden");
}
