//! The management routes' semantics: versions and downloads and their shapes, rollback,
//! delete, force-unlock, what cannot be rolled back, every bad input refused with a clear
//! message and nothing stored, and the OpenAPI document.

use serde_json::{json, Value};

use crate::authorization::{org, write};
use crate::support::api::{lock_doc, server_limits, state_doc, Api};
use crate::support::Adapter;

#[tokio::test]
async fn versions_show_download_and_their_shapes() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    write(&api, &operator, "net", 1, "one").await;
    write(&api, &operator, "net", 2, "two").await;
    let versions = api
        .json("GET", "/api/tf-states/net/versions", &operator)
        .await;
    let list = versions["versions"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    let v = &list[0];
    assert_eq!(
        (v["version"].as_u64(), v["serial"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(v["source"], "write");
    assert!(v["key"].as_str().unwrap().starts_with("platform:"));
    assert_eq!(v["writer"], json!({"kind": "user", "user": "alice"}));
    assert_eq!(v["change"]["ended"], "unlocked_write");
    assert_eq!(v["sha256"].as_str().unwrap().len(), 64);
    assert!(
        v.get("blob").is_none(),
        "where content lives is never shown"
    );
    let r = api
        .request("GET", "/api/tf-states/net/versions/1/content")
        .bearer(&operator)
        .send()
        .await;
    assert_eq!(r.text(), state_doc(1, "lin", "one"));
    let show = api.json("GET", "/api/tf-states/net", &operator).await;
    assert_eq!(show["latest_version"], 2);
    assert_eq!(
        show["allowed_actions"],
        json!({"download": true, "outputs": true, "import": false, "rollback": true, "force_unlock": false, "delete": false})
    );
    let show = api.json("GET", "/api/tf-states/net", &admin).await;
    assert_eq!(show["allowed_actions"]["delete"], true);
}

#[tokio::test]
async fn rollback_makes_an_old_version_current_with_a_higher_serial_byte_for_byte() {
    let api = Api::new();
    let (_, operator) = org(&api).await;
    for (serial, value) in [(1, "one"), (2, "two"), (3, "three")] {
        write(&api, &operator, "net", serial, value).await;
    }
    let r = rollback(&api, &operator, "net", r#"{"version": 1}"#).await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(
        (
            v["version"].as_u64(),
            v["serial"].as_u64(),
            v["source"].as_str()
        ),
        (Some(4), Some(4), Some("rollback"))
    );
    assert_eq!(v["change"]["rolled_back_from"], 1);
    assert_eq!(v["change"]["ended"], "rollback");
    let now = api
        .request("GET", "/api/tf-states/net/state")
        .bearer(&operator)
        .send()
        .await
        .text();
    assert_eq!(
        now,
        state_doc(1, "lin", "one").replace("\"serial\": 1,", "\"serial\": 4,")
    );
    // A client still holding serial 3 is refused as stale; one at serial 4 forks.
    let save = |serial: u64, value: &str| {
        let call = api
            .request("POST", "/api/tf-states/net/state")
            .bearer(&operator)
            .body(state_doc(serial, "lin", value));
        async move { call.send().await.error().code }
    };
    assert_eq!(save(3, "late").await, "stale_serial");
    assert_eq!(save(4, "three").await, "fork");
}

#[tokio::test]
async fn delete_then_a_new_state_of_the_name_starts_at_a_higher_version() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    write(&api, &operator, "net", 1, "one").await;
    write(&api, &operator, "net", 2, "two").await;
    let send = |method: &str, path: &str, token: &str| {
        let call = api.request(method, path).bearer(token);
        async move { call.send().await }
    };
    let lock = api
        .request("POST", "/api/tf-states/net/lock")
        .bearer(&operator)
        .body(lock_doc("L"))
        .send()
        .await;
    assert_eq!(lock.status, 200);
    let refused = send("DELETE", "/api/tf-states/net", &admin).await.error();
    assert_eq!(
        (refused.status, refused.code.as_str()),
        (423, ""),
        "refused while locked, with the lock document"
    );
    api.request("DELETE", "/api/tf-states/net/lock")
        .bearer(&operator)
        .body(lock_doc("L"))
        .send()
        .await;
    assert_eq!(
        send("DELETE", "/api/tf-states/net", &admin).await.status,
        204
    );
    assert_eq!(
        send("GET", "/api/tf-states/net/state", &operator)
            .await
            .status,
        404
    );
    assert_eq!(
        send("GET", "/api/tf-states/net", &operator).await.status,
        404
    );
    assert!(api.json("GET", "/api/tf-states", &operator).await["states"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(
        send("DELETE", "/api/tf-states/net", &admin).await.status,
        404
    );
    // Any lineage is accepted again, and numbering continues.
    let r = api
        .request("POST", "/api/tf-states/net/state")
        .bearer(&operator)
        .body(state_doc(1, "fresh-lineage", "new"))
        .send()
        .await;
    assert_eq!(r.status, 200);
    let versions = api
        .json("GET", "/api/tf-states/net/versions", &operator)
        .await;
    let list = versions["versions"].as_array().unwrap();
    assert_eq!(
        list.len(),
        1,
        "the old versions belong to the deleted state"
    );
    assert_eq!(list[0]["version"], 3);
}

#[tokio::test]
async fn force_unlock_releases_any_lock_and_says_what() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    write(&api, &operator, "net", 1, "one").await;
    let force = || {
        let call = api
            .request("POST", "/api/tf-states/net/force-unlock")
            .bearer(&admin);
        async move { call.send().await.json() }
    };
    assert_eq!(
        force().await,
        json!({"released": {"lock": null, "hold": null}})
    );
    api.request("POST", "/api/tf-states/net/lock")
        .bearer(&operator)
        .body(lock_doc("L9"))
        .send()
        .await;
    let released = force().await;
    assert_eq!(released["released"]["lock"]["id"], "L9");
    assert_eq!(released["released"]["lock"]["holder"]["user"], "alice");
    let r = api
        .request("POST", "/api/tf-states/net/lock")
        .bearer(&admin)
        .body(lock_doc("mine"))
        .send()
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn opentofu_encrypted_versions_cannot_be_rolled_back_and_say_what_to_do() {
    let api = Api::new();
    let (_, operator) = org(&api).await;
    let enc = |serial: u64, data: &str| {
        format!(
            r#"{{"serial":{serial},"lineage":"l","meta":{{}},"encrypted_data":"{data}","encryption_version":"v0"}}"#
        )
    };
    for (serial, data) in [(1, "AA"), (2, "BB")] {
        let r = api
            .request("POST", "/api/tf-states/enc/state")
            .bearer(&operator)
            .body(enc(serial, data))
            .send()
            .await;
        assert_eq!(r.status, 200);
    }
    let refused = rollback(&api, &operator, "enc", r#"{"version":1}"#)
        .await
        .error();
    assert_eq!(
        (refused.status, refused.code.as_str()),
        (409, "rollback_encrypted")
    );
    let message = refused.message;
    assert!(
        message.contains("tofu state push") && message.contains("download"),
        "{message}"
    );
}

/// method, path, Content-Type, body, token, status, error code, words the message names.
type BadCase<'a> = (
    &'a str,
    String,
    Option<&'a str>,
    Option<String>,
    &'a str,
    u16,
    &'a str,
    &'a str,
);

#[tokio::test]
async fn bad_input_on_every_management_route_is_a_clear_4xx_and_stores_nothing() {
    let limits = hegemony_state::service::Limits {
        max_state_bytes: 4096,
        ..server_limits()
    };
    let api = Api::on(Adapter::Memory, limits);
    let (admin, operator) = org(&api).await;
    write(&api, &operator, "net", 1, "one").await;
    let op = operator.clone();
    let cases: Vec<BadCase<'_>> = vec![
        (
            "GET",
            "/api/tf-states/.bad/versions".into(),
            None,
            None,
            &op,
            400,
            "invalid_name",
            "'.'",
        ),
        (
            "GET",
            "/api/tf-states/net/versions/0/content".into(),
            None,
            None,
            &op,
            400,
            "invalid_request",
            "positive",
        ),
        (
            "GET",
            "/api/tf-states/net/versions/abc/content".into(),
            None,
            None,
            &op,
            400,
            "invalid_request",
            "positive",
        ),
        (
            "GET",
            "/api/tf-states/net/versions/99/content".into(),
            None,
            None,
            &op,
            404,
            "not_found",
            "version 99",
        ),
        (
            "GET",
            "/api/tf-states/nope/versions".into(),
            None,
            None,
            &op,
            404,
            "not_found",
            "state nope",
        ),
        (
            "POST",
            "/api/tf-states/net/rollback".into(),
            None,
            Some("not json".into()),
            &op,
            400,
            "invalid_request",
            "version",
        ),
        (
            "POST",
            "/api/tf-states/net/rollback".into(),
            None,
            Some(r#"{"version":0}"#.into()),
            &op,
            400,
            "invalid_request",
            "1 or more",
        ),
        (
            "POST",
            "/api/tf-states/net/rollback".into(),
            None,
            Some(r#"{"version":"1"}"#.into()),
            &op,
            400,
            "invalid_request",
            "version",
        ),
        (
            "POST",
            "/api/tf-states/net/rollback".into(),
            None,
            Some(r#"{"version":1,"x":2}"#.into()),
            &op,
            400,
            "invalid_request",
            "x",
        ),
        (
            "POST",
            "/api/tf-states/net/rollback".into(),
            None,
            Some(r#"{"version":7}"#.into()),
            &op,
            404,
            "not_found",
            "version 7",
        ),
        (
            "POST",
            "/api/tf-states/new/import".into(),
            None,
            Some("[1,2]".into()),
            &op,
            400,
            "not_a_state",
            "JSON object",
        ),
        (
            "POST",
            "/api/tf-states/new/import".into(),
            Some("text/plain"),
            Some(state_doc(1, "l", "x")),
            &op,
            415,
            "unsupported_media_type",
            "text/plain",
        ),
        (
            "POST",
            "/api/tf-states/new/import".into(),
            None,
            Some(state_doc(1, "l", &"x".repeat(5000))),
            &op,
            413,
            "too_large",
            "4096",
        ),
        (
            "POST",
            "/api/tf-states/net/import".into(),
            None,
            Some(state_doc(1, "l", "x")),
            &op,
            409,
            "state_exists",
            "delete it first",
        ),
        (
            "PUT",
            "/api/org/permissions".into(),
            None,
            Some(r#"{"tf_state:read":"root"}"#.into()),
            &admin,
            400,
            "invalid_request",
            "viewer, operator or admin",
        ),
        (
            "PUT",
            "/api/org/permissions".into(),
            None,
            Some(r#"{"tf_state:fly":"admin"}"#.into()),
            &admin,
            400,
            "invalid_request",
            "unknown permission",
        ),
        (
            "PUT",
            "/api/org/permissions".into(),
            None,
            Some("[]".into()),
            &admin,
            400,
            "invalid_request",
            "JSON object",
        ),
        (
            "GET",
            "/api/audit?limit=0".into(),
            None,
            None,
            &admin,
            400,
            "invalid_request",
            "limit",
        ),
        (
            "GET",
            "/api/audit?cursor=abc".into(),
            None,
            None,
            &admin,
            400,
            "invalid_request",
            "cursor",
        ),
        (
            "GET",
            "/api/audit?cursor=+5".into(),
            None,
            None,
            &admin,
            400,
            "invalid_request",
            "cursor",
        ),
        (
            "GET",
            "/api/audit?action=state.renamed".into(),
            None,
            None,
            &admin,
            400,
            "invalid_request",
            "state.imported",
        ),
        (
            "GET",
            "/api/audit?state=..".into(),
            None,
            None,
            &admin,
            400,
            "invalid_name",
            "name",
        ),
        (
            "POST",
            "/api/tf-states/net/force-unlock".into(),
            None,
            Some("x".repeat(2 << 20)),
            &admin,
            413,
            "too_large",
            "1048576",
        ),
    ];
    for (method, path, content_type, body, token, status, code, words) in cases {
        let mut r = api.request(method, &path).bearer(token);
        if let Some(ct) = content_type {
            r = r.header("Content-Type", ct);
        }
        if let Some(b) = body {
            r = r.body(b);
        }
        let refused = r.send().await.error();
        let message = refused.message;
        assert_eq!(
            (refused.status, refused.code.as_str()),
            (status, code),
            "{method} {path}: {message}"
        );
        assert!(
            message.contains(words),
            "{method} {path}: {message:?} should name {words:?}"
        );
    }
    // Nothing was stored: one state, one version, no new state, permissions unchanged.
    let states = api.json("GET", "/api/tf-states", &op).await;
    assert_eq!(states["states"].as_array().unwrap().len(), 1);
    assert_eq!(states["states"][0]["latest_version"], 1);
    assert_eq!(
        api.json("GET", "/api/org/permissions", &admin).await["tf_state:read"],
        "operator"
    );
    // Import takes application/octet-stream and no Content-Type too.
    let r = api
        .request("POST", "/api/tf-states/bin/import")
        .bearer(&op)
        .header("Content-Type", "application/octet-stream")
        .body(state_doc(7, "b", "x"))
        .send()
        .await;
    assert_eq!(r.status, 201);
    let v: Value = r.json();
    assert_eq!(
        (
            v["serial"].as_u64(),
            v["lineage"].as_str(),
            v["source"].as_str()
        ),
        (Some(7), Some("b"), Some("import"))
    );
    // And while a lock is live on the name, an import is refused with the lock document.
    api.request("POST", "/api/tf-states/locked/lock")
        .bearer(&op)
        .body(lock_doc("L"))
        .send()
        .await;
    let r = api
        .request("POST", "/api/tf-states/locked/import")
        .bearer(&op)
        .body(state_doc(1, "l", "x"))
        .send()
        .await;
    assert_eq!(r.status, 423);
    assert_eq!(r.json()["ID"], "L");
}

#[tokio::test]
async fn the_openapi_document_is_served_without_credentials() {
    let api = Api::new();
    let doc = api.request("GET", "/api/openapi.json").send().await.json();
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"]["/api/tf-states/{name}/rollback"]["post"].is_object());
}

/// Numbers no store can hold name no version: a clear 404, never a retried 503, on the local
/// store too, whose integers stop at 2^63-1.
#[tokio::test]
async fn versions_past_what_a_store_holds_are_not_found() {
    let api = Api::on(Adapter::Local, server_limits());
    let (_, operator) = org(&api).await;
    write(&api, &operator, "net", 1, "one").await;
    for n in ["9223372036854775808", "18446744073709551615"] {
        let download = api
            .request("GET", &format!("/api/tf-states/net/versions/{n}/content"))
            .bearer(&operator)
            .send()
            .await
            .error();
        assert_eq!(
            (download.status, download.code.as_str()),
            (404, "not_found")
        );
        let refused = rollback(&api, &operator, "net", &format!(r#"{{"version":{n}}}"#))
            .await
            .error();
        assert_eq!((refused.status, refused.code.as_str()), (404, "not_found"));
    }
}

/// A rollback raises the serial; at the largest one there is nothing above, and wrapping to
/// 0 would let every stale write in over it.
#[tokio::test]
async fn a_rollback_at_the_largest_serial_is_refused_in_words() {
    let api = Api::new();
    let (_, operator) = org(&api).await;
    write(&api, &operator, "net", 1, "one").await;
    write(&api, &operator, "net", u64::MAX, "two").await;
    let refused = rollback(&api, &operator, "net", r#"{"version":1}"#)
        .await
        .error();
    assert_eq!(
        (refused.status, refused.code.as_str()),
        (409, "serial_exhausted")
    );
    assert!(
        refused.message.contains("18446744073709551615"),
        "{}",
        refused.message
    );
    let versions = api
        .json("GET", "/api/tf-states/net/versions", &operator)
        .await;
    assert_eq!(
        versions["versions"].as_array().unwrap().len(),
        2,
        "nothing made"
    );
}

/// JSON has one kind of number, and the OpenAPI document's JSON Schema counts `2.0` as the
/// integer 2: a client whose JSON library writes it so rolls back like any other.
#[tokio::test]
async fn a_version_written_with_a_zero_fraction_is_that_version() {
    let api = Api::new();
    let (_, operator) = org(&api).await;
    write(&api, &operator, "net", 1, "one").await;
    write(&api, &operator, "net", 2, "two").await;
    let r = rollback(&api, &operator, "net", r#"{"version": 1.0}"#).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["change"]["rolled_back_from"], 1);
    let refused = rollback(&api, &operator, "net", r#"{"version": 1.5}"#)
        .await
        .error();
    assert_eq!(
        (refused.status, refused.code.as_str()),
        (400, "invalid_request")
    );
}

/// `POST .../rollback` of state `name` with `body`, as `token`.
async fn rollback(api: &Api, token: &str, name: &str, body: &str) -> crate::support::api::Answer {
    api.request("POST", &format!("/api/tf-states/{name}/rollback"))
        .bearer(token)
        .body(body.to_owned())
        .send()
        .await
}
