//! The audit: each audited action makes exactly one entry naming who, when, the state and
//! the version; reads make none; filters and pages.

use serde_json::{json, Value};

use crate::authorization::org;
use crate::support::api::{lock_doc, server_limits, state_doc, Api};
use crate::support::Adapter;

async fn entries(api: &Api, admin: &str) -> Vec<Value> {
    api.json("GET", "/api/audit?limit=500", admin).await["entries"]
        .as_array()
        .unwrap()
        .clone()
}

async fn count(api: &Api, admin: &str, action: &str) -> usize {
    entries(api, admin)
        .await
        .iter()
        .filter(|e| e["action"] == action)
        .count()
}

/// Each audited action produces exactly one entry; listings, version lists and plain
/// backend reads produce none.
#[tokio::test]
async fn audit_is_complete_and_quiet() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    let before = entries(&api, &admin).await.len(); // the tokens made at setup
    assert_eq!(count(&api, &admin, "token.created").await, 2);

    // Three saves under one lock: one version, one entry.
    let lock = |id: &str| {
        let call = api
            .request("POST", "/api/tf-states/net/lock")
            .bearer(&operator)
            .body(lock_doc(id));
        async move { call.send().await }
    };
    assert_eq!(lock("L1").await.status, 200);
    for serial in 1..=3 {
        let r = api
            .request("POST", "/api/tf-states/net/state?ID=L1")
            .bearer(&operator)
            .body(state_doc(serial, "lin", &serial.to_string()))
            .send()
            .await;
        assert_eq!(r.status, 200);
    }
    api.request("DELETE", "/api/tf-states/net/lock")
        .bearer(&operator)
        .body(lock_doc("L1"))
        .send()
        .await;
    assert_eq!(count(&api, &admin, "version.created").await, 1);

    // Reads of every kind: no entry.
    for path in [
        "/api/tf-states",
        "/api/tf-states/net",
        "/api/tf-states/net/versions",
        "/api/tf-states/net/state",
    ] {
        api.json("GET", path, &operator).await;
    }
    assert_eq!(entries(&api, &admin).await.len(), before + 1);

    let send = |method: &str, path: &str, token: &str, body: &str| {
        let call = api.request(method, path).bearer(token).body(body);
        async move { call.send().await.status }
    };
    let imported = send(
        "POST",
        "/api/tf-states/imported/import",
        &operator,
        &state_doc(4, "imp", "x"),
    );
    assert_eq!(imported.await, 201);
    let rolled = send(
        "POST",
        "/api/tf-states/net/rollback",
        &operator,
        r#"{"version":1}"#,
    );
    assert_eq!(rolled.await, 200);
    let downloaded = send(
        "GET",
        "/api/tf-states/net/versions/1/content",
        &operator,
        "",
    );
    assert_eq!(downloaded.await, 200);
    lock("L2").await;
    let forced = send("POST", "/api/tf-states/net/force-unlock", &admin, "");
    assert_eq!(forced.await, 200);
    let deleted = send("DELETE", "/api/tf-states/imported", &admin, "");
    assert_eq!(deleted.await, 204);
    let permissions = send(
        "PUT",
        "/api/org/permissions",
        &admin,
        r#"{"tf_state:write":"operator","tf_state:read":"viewer"}"#,
    );
    assert_eq!(permissions.await, 200);
    // As `hegemony-state token revoke` does (the command itself: tests/commands.rs).
    api.revoke("alice").await;
    let revoked = api
        .request("GET", "/api/tf-states")
        .bearer(&operator)
        .send()
        .await;
    assert_eq!(
        revoked.status, 401,
        "a revocation takes effect at the next request"
    );

    for action in [
        "version.created",
        "state.imported",
        "state.rolled_back",
        "version.downloaded",
        "lock.force_unlocked",
        "state.deleted",
        "permissions.changed",
        "token.revoked",
    ] {
        assert_eq!(count(&api, &admin, action).await, 1, "{action}");
    }
    assert_eq!(entries(&api, &admin).await.len(), before + 8);
    // Each names who, when, the state and the version.
    let rollback = entries(&api, &admin)
        .await
        .into_iter()
        .find(|e| e["action"] == "state.rolled_back")
        .unwrap();
    assert_eq!(rollback["actor"], json!({"kind": "user", "user": "alice"}));
    assert_eq!(
        (rollback["state"].as_str(), rollback["version"].as_u64()),
        (Some("net"), Some(2))
    );
    assert_eq!(rollback["detail"]["from"], 1);
    // Filters and pages.
    let only = api
        .json("GET", "/api/audit?action=state.deleted", &admin)
        .await;
    assert_eq!(only["entries"].as_array().unwrap().len(), 1);
    // A deleted state's entries stay in the org's log under its name; the route under the
    // name answers 404 with every other route under it.
    let of_state = api.json("GET", "/api/audit?state=imported", &admin).await;
    let actions: Vec<&str> = of_state["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["state.deleted", "state.imported"]);
    let gone = api
        .request("GET", "/api/tf-states/imported/audit")
        .bearer(&admin)
        .send()
        .await
        .error();
    assert_eq!((gone.status, gone.code.as_str()), (404, "not_found"));
    let page = api.json("GET", "/api/audit?limit=2", &admin).await;
    let next = page["next_cursor"].as_str().unwrap();
    let rest = api
        .json(
            "GET",
            &format!("/api/audit?limit=500&cursor={next}"),
            &admin,
        )
        .await;
    assert_eq!(
        rest["entries"].as_array().unwrap().len() + 2,
        entries(&api, &admin).await.len()
    );
}

/// A cursor past every number there is, or past what SQLite's integers hold, reads from the
/// newest entry, as no cursor does: never a retried 503.
#[tokio::test]
async fn a_cursor_past_every_entry_reads_from_the_newest() {
    for adapter in [Adapter::Memory, Adapter::Local] {
        let api = Api::on(adapter, server_limits());
        let (admin, _) = org(&api).await;
        let all = entries(&api, &admin).await.len();
        assert!(all > 0);
        for huge in ["9223372036854775808", "99999999999999999999999"] {
            let page = api
                .json(
                    "GET",
                    &format!("/api/audit?limit=500&cursor={huge}"),
                    &admin,
                )
                .await;
            assert_eq!(page["entries"].as_array().unwrap().len(), all, "{huge}");
        }
    }
}
