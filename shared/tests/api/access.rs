//! Who reaches what on the backend routes: Basic or Bearer and their refusals, roles and
//! orgs, and names and routes that are refused with a 4xx, never a 5xx.

use crate::support::api::{lock_doc, state_doc, Api};
use crate::support::logs;

#[tokio::test]
async fn credentials_basic_or_bearer_and_their_refusals() {
    let (logs, _capturing) = logs::capture();
    let api = Api::new();
    let t = api.token("acme", "alice", "operator").await;
    let state = "/api/tf-states/net/state";
    let r = api.request("GET", state).send().await;
    assert_eq!(r.error().expect(401).0, "unauthenticated");
    let r = api.request("GET", state).basic("hgs_garbage").send().await;
    assert_eq!(r.error().expect(401).0, "unauthenticated");
    let r = api.request("GET", state).bearer(&t).send().await;
    assert_eq!(r.status, 404, "Bearer works on the backend routes");
    let r = api.request("GET", "/api/tf-states").basic(&t).send().await;
    let (code, msg) = r.error().expect(401);
    assert_eq!(code, "unauthenticated");
    assert!(msg.contains("Bearer"), "{msg}");
    let logs = logs.text();
    assert!(!logs.contains(&t), "a token never reaches the log");
}

/// Two sets of credentials are refused, whichever is valid and whichever comes first: a
/// proxy in front that picks the other one must never disagree with us about the caller.
#[tokio::test]
async fn two_authorization_headers_are_refused_in_either_order() {
    let api = Api::new();
    let t = api.token("acme", "alice", "operator").await;
    api.post_state(&t, "net", None, state_doc(1, "lin", "x"))
        .await;
    let valid = format!("Bearer {t}");
    let invalid = "Bearer hgs_garbage".to_owned();
    for (first, second) in [(&valid, &invalid), (&invalid, &valid), (&valid, &valid)] {
        for (method, path, body) in [
            ("GET", "/api/tf-states/net/state", String::new()),
            ("POST", "/api/tf-states/net/lock", lock_doc("L")),
            ("GET", "/api/tf-states", String::new()),
        ] {
            let r = api
                .request(method, path)
                .header("authorization", first)
                .repeated_header("authorization", second)
                .body(body)
                .send()
                .await;
            let (code, msg) = r.error().expect(400);
            assert_eq!(code, "invalid_request", "{method} {path}");
            assert!(msg.contains("Authorization"), "{msg}");
        }
    }
    // API Gateway and some proxies join a repeated header's values with commas.
    let r = api
        .request("GET", "/api/tf-states/net/state")
        .header("authorization", &format!("{valid},{invalid}"))
        .send()
        .await;
    assert_eq!(r.error().expect(400).0, "invalid_request");
    assert_eq!(
        api.get_state(&t, "net").await.status,
        200,
        "one header is served as ever"
    );
    assert_eq!(
        api.lock(&t, "net", &lock_doc("M")).await.status,
        200,
        "no refused lock was taken"
    );
}

#[tokio::test]
async fn roles_and_orgs_bound_what_a_token_reaches() {
    let api = Api::new();
    let alice = api.token("acme", "alice", "operator").await;
    let viewer = api.token("acme", "vic", "viewer").await;
    let stranger = api.token("other", "sam", "admin").await;
    api.post_state(&alice, "net", None, state_doc(1, "lin", "x"))
        .await;
    let (code, msg) = api.get_state(&viewer, "net").await.error().expect(403);
    assert_eq!(code, "forbidden");
    assert!(
        msg.contains("tf_state:read") && msg.contains("operator"),
        "{msg}"
    );
    let r = api.lock(&viewer, "net", &lock_doc("L")).await;
    assert_eq!(r.error().expect(403).0, "forbidden");
    assert_eq!(
        api.list(&viewer).await["states"].as_array().unwrap().len(),
        1,
        "viewers list"
    );
    // Another org's state is simply not there.
    assert_eq!(api.get_state(&stranger, "net").await.status, 404);
    assert!(api.list(&stranger).await["states"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn illegal_names_and_unknown_routes_are_4xx_never_5xx() {
    let api = Api::new();
    let t = api.token("acme", "alice", "operator").await;
    for name in [".hidden", "a%2Fb", "a%20b", &"n".repeat(129)] {
        let (code, msg) = api.get_state(&t, name).await.error().expect(400);
        assert_eq!(code, "invalid_name", "{name}");
        assert!(msg.contains("name"), "{msg}");
    }
    // `..` as sent: nothing between the test and the route table normalises it away.
    for name in ["..", "%2E%2E"] {
        let r = api
            .request("GET", &format!("/api/tf-states/{name}/state"))
            .bearer(&t)
            .send()
            .await;
        let (code, _) = r.error().expect(400);
        assert_eq!(code, "invalid_name", "{name}");
    }
    let r = api
        .request("GET", "/api/tf-states/a/b/state")
        .bearer(&t)
        .send()
        .await;
    assert_eq!(r.error().expect(404).0, "not_found");
    let r = api
        .request("PUT", "/api/tf-states/net/lock")
        .bearer(&t)
        .send()
        .await;
    // What every front door answers, as the OpenAPI document describes it: LOCK and UNLOCK
    // are the local server's and the container's alone, described there in words.
    assert_eq!(r.header("allow"), "POST, DELETE");
    assert_eq!(r.error().expect(405).0, "method_not_allowed");
    let r = api
        .request("GET", "/api/tf-states/")
        .bearer(&t)
        .send()
        .await;
    assert_eq!(
        r.status, 200,
        "the list answers with a trailing slash, no redirect"
    );
}
