//! Who may call what: every route against every kind of caller, and the org's permission
//! allocation moved, disabled and restored.

use serde_json::{json, Value};

use crate::support::api::{lock_doc, state_doc, Api};

/// An org's admin (root) and operator (alice), the callers most cases need.
pub async fn org(api: &Api) -> (String, String) {
    let admin = api.token("acme", "root", "admin").await;
    let operator = api.token("acme", "alice", "operator").await;
    (admin, operator)
}

/// Saves `value` as serial `serial` of state `name`, which must succeed.
pub async fn write(api: &Api, token: &str, name: &str, serial: u64, value: &str) {
    let r = api
        .request("POST", &format!("/api/tf-states/{name}/state"))
        .bearer(token)
        .body(state_doc(serial, "lin", value))
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

/// Who calls, in the matrix's columns.
#[derive(Clone, Copy, Debug)]
enum Who {
    Nobody,
    Garbage,
    Viewer,
    Operator,
    Admin,
    OtherOrgAdmin,
    Platform,
    BasicAdmin,
}

const COLUMNS: [Who; 8] = [
    Who::Nobody,
    Who::Garbage,
    Who::Viewer,
    Who::Operator,
    Who::Admin,
    Who::OtherOrgAdmin,
    Who::Platform,
    Who::BasicAdmin,
];

/// Every route x every kind of caller -> the status, each cell on a fresh state written in
/// two versions, so destructive cells do not disturb each other.
#[tokio::test]
async fn authorization_matrix() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    let viewer = api.token("acme", "vic", "viewer").await;
    let stranger = api.token("other", "sam", "admin").await;
    let platform = api.platform_token().await;
    // (method, path with {s}, body, statuses for COLUMNS in order)
    let rows: Vec<(&str, &str, Option<String>, [u16; 8])> = vec![
        (
            "GET",
            "/api/tf-states/{s}/state",
            None,
            [401, 401, 403, 200, 200, 404, 403, 200],
        ),
        (
            "POST",
            "/api/tf-states/{s}/state",
            Some(state_doc(3, "lin", "new")),
            [401, 401, 403, 200, 200, 200, 403, 200],
        ),
        (
            "POST",
            "/api/tf-states/{s}/lock",
            Some(lock_doc("L")),
            [401, 401, 403, 200, 200, 200, 403, 200],
        ),
        (
            "DELETE",
            "/api/tf-states/{s}/lock",
            Some(lock_doc("L")),
            [401, 401, 403, 200, 200, 200, 403, 200],
        ),
        (
            "GET",
            "/api/tf-states",
            None,
            [401, 401, 200, 200, 200, 200, 403, 401],
        ),
        (
            "GET",
            "/api/tf-states/{s}",
            None,
            [401, 401, 200, 200, 200, 404, 403, 401],
        ),
        (
            "GET",
            "/api/tf-states/{s}/versions",
            None,
            [401, 401, 200, 200, 200, 404, 403, 401],
        ),
        (
            "GET",
            "/api/tf-states/{s}/versions/1/content",
            None,
            [401, 401, 403, 200, 200, 404, 403, 401],
        ),
        (
            "GET",
            "/api/tf-states/{s}/versions/2/changes",
            None,
            [401, 401, 403, 200, 200, 404, 403, 401],
        ),
        (
            "GET",
            "/api/tf-states/{s}/outputs",
            None,
            [401, 401, 200, 200, 200, 404, 403, 401],
        ),
        (
            "GET",
            "/api/tf-states/{s}/outputs/state",
            None,
            [401, 401, 200, 200, 200, 404, 403, 200],
        ),
        (
            "POST",
            "/api/tf-states/{s}-new/import",
            Some(state_doc(1, "imp", "x")),
            [401, 401, 403, 201, 201, 201, 403, 401],
        ),
        (
            "POST",
            "/api/tf-states/{s}/rollback",
            Some(r#"{"version": 1}"#.into()),
            [401, 401, 403, 200, 200, 404, 403, 401],
        ),
        (
            "POST",
            "/api/tf-states/{s}/force-unlock",
            None,
            [401, 401, 403, 403, 200, 404, 403, 401],
        ),
        (
            "DELETE",
            "/api/tf-states/{s}",
            None,
            [401, 401, 403, 403, 204, 404, 403, 401],
        ),
        (
            "GET",
            "/api/tf-states/{s}/audit",
            None,
            [401, 401, 403, 403, 200, 404, 403, 401],
        ),
        (
            "GET",
            "/api/audit",
            None,
            [401, 401, 403, 403, 200, 200, 403, 401],
        ),
        (
            "GET",
            "/api/org/permissions",
            None,
            [401, 401, 403, 403, 200, 200, 403, 401],
        ),
        (
            "PUT",
            "/api/org/permissions",
            Some("{}".into()),
            [401, 401, 403, 403, 200, 200, 403, 401],
        ),
        // The inventory's reads: any role of the org, of its own org's states alone.
        (
            "GET",
            "/api/resources?state={s}",
            None,
            [401, 401, 200, 200, 200, 200, 403, 401],
        ),
        (
            "GET",
            "/api/resources/conflicts?state={s}",
            None,
            [401, 401, 200, 200, 200, 200, 403, 401],
        ),
        (
            "GET",
            "/api/overview",
            None,
            [401, 401, 200, 200, 200, 200, 403, 401],
        ),
        (
            "GET",
            "/api/openapi.json",
            None,
            [200, 200, 200, 200, 200, 200, 200, 200],
        ),
        (
            "POST",
            "/api/runs/run-{s}/tf-state-tokens",
            Some(r#"{"org":"acme","state":"net","step":"plan","attempt":1,"kind":"plan","timeout_seconds":60}"#.into()),
            [401, 401, 403, 403, 403, 403, 201, 401],
        ),
        (
            "POST",
            "/api/runs/run-{s}/end",
            None,
            [401, 401, 403, 403, 403, 403, 200, 401],
        ),
        (
            "POST",
            "/api/runs/run-{s}/steps/plan/gone",
            Some(r#"{"attempt":1}"#.into()),
            [401, 401, 403, 403, 403, 403, 200, 401],
        ),
    ];
    let mut cell = 0;
    for (method, path, body, expected) in &rows {
        for (who, want) in COLUMNS.iter().zip(expected) {
            cell += 1;
            let name = format!("m{cell}");
            write(&api, &operator, &name, 1, "one").await;
            write(&api, &operator, &name, 2, "two").await;
            let mut r = api.request(method, &path.replace("{s}", &name));
            r = match who {
                Who::Nobody => r,
                Who::Garbage => r.bearer("hgs_not-a-real-token"),
                Who::Viewer => r.bearer(&viewer),
                Who::Operator => r.bearer(&operator),
                Who::Admin => r.bearer(&admin),
                Who::OtherOrgAdmin => r.bearer(&stranger),
                Who::Platform => r.bearer(&platform),
                Who::BasicAdmin => r.basic(&admin),
            };
            if let Some(b) = body {
                r = r.body(b.clone());
            }
            let got = r.send().await.status;
            assert_eq!(got, *want, "{method} {path} as {who:?}");
        }
    }
}

#[tokio::test]
async fn moving_and_disabling_permissions_refuses_accordingly_and_admins_keep_the_route() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    write(&api, &operator, "net", 1, "x").await;
    let get = |token: &str| {
        let call = api.request("GET", "/api/tf-states/net/state").bearer(token);
        async move { call.send().await.status }
    };
    assert_eq!(get(&operator).await, 200);
    let put = |body: &str| {
        let call = api
            .request("PUT", "/api/org/permissions")
            .bearer(&admin)
            .body(body);
        async move { call.send().await }
    };
    let r = put(r#"{"tf_state:read": "admin"}"#).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json(),
        json!({"tf_state:read": "admin", "tf_state:write": "operator", "tf_state:manage": "admin", "tf_state:outputs": "viewer"})
    );
    assert_eq!(get(&operator).await, 403);
    assert_eq!(get(&admin).await, 200);
    assert_eq!(put(r#"{"tf_state:read": null}"#).await.status, 200);
    assert_eq!(get(&admin).await, 403, "disabled refuses everyone");
    // The admin role still reaches the permissions route, and can turn reads back on.
    assert_eq!(
        api.json("GET", "/api/org/permissions", &admin).await["tf_state:read"],
        Value::Null
    );
    assert_eq!(put(r#"{"tf_state:read": "operator"}"#).await.status, 200);
    assert_eq!(get(&operator).await, 200);
    let audit = api.json("GET", "/api/audit?limit=500", &admin).await;
    let changes: Vec<&Value> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "permissions.changed")
        .collect();
    assert_eq!(changes.len(), 3);
    assert_eq!(changes[2]["detail"]["old"]["tf_state:read"], "operator");
    assert_eq!(changes[2]["detail"]["new"]["tf_state:read"], "admin");
    // Moving manage to operators lets them force-unlock.
    assert_eq!(put(r#"{"tf_state:manage": "operator"}"#).await.status, 200);
    let r = api
        .request("POST", "/api/tf-states/net/force-unlock")
        .bearer(&operator)
        .send()
        .await;
    assert_eq!(r.status, 200);
}
