//! `GET .../outputs` and `GET .../outputs/state`: their exact answers, no sensitive value
//! in either for anyone, the same bytes and tag for the same version, the 304 that tag
//! earns, who may read them (and the allocation moved and disabled), what they refuse
//! (no version, OpenTofu-encrypted, an old format), and that nothing of them is audited or
//! logged with a secret.

use serde_json::{json, Value};

use crate::authorization::org;
use crate::support::api::{Answer, Api};
use crate::support::logs;

const SECRET: &str = "planted-secret-51e7";

/// A state with a plain output, an object output written with its members out of order,
/// a sensitive output, and a resource attribute holding the planted secret, padded by
/// `padding` bytes in that resource.
fn state(serial: u64, endpoint: &str, padding: usize) -> String {
    format!(
        r#"{{"version":4,"terraform_version":"1.11.4","serial":{serial},"lineage":"lin-1","outputs":{{"password":{{"value":"{SECRET}","type":"string","sensitive":true}},"endpoint":{{"value":"{endpoint}","type":"string"}},"zone":{{"value":{{"name":"z","id":7}},"type":["object",{{"name":"string","id":"number"}}]}}}},"resources":[{{"mode":"managed","type":"random_password","name":"db","provider":"p","instances":[{{"schema_version":0,"attributes":{{"result":"{SECRET}","pad":"{}"}},"sensitive_attributes":[]}}]}}],"check_results":null}}"#,
        "x".repeat(padding)
    )
}

async fn save(api: &Api, token: &str, name: &str, body: String) {
    let r = api
        .request("POST", &format!("/api/tf-states/{name}/state"))
        .bearer(token)
        .body(body)
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

/// A GET of `path` as Bearer `token`, checked for the secret.
async fn get(api: &Api, token: &str, path: &str) -> Answer {
    let r = api.request("GET", path).bearer(token).send().await;
    assert!(!r.text().contains(SECRET), "a secret crossed: {}", r.text());
    r
}

const CONSUMER: &str = r#"{
  "version": 4,
  "terraform_version": "1.11.4",
  "serial": 2,
  "lineage": "lin-1",
  "outputs": {
    "endpoint": {
      "value": "db.example.com",
      "type": "string"
    },
    "zone": {
      "value": {
        "id": 7,
        "name": "z"
      },
      "type": [
        "object",
        {
          "id": "number",
          "name": "string"
        }
      ]
    }
  },
  "resources": []
}"#;

#[tokio::test]
async fn outputs_name_every_output_and_never_a_sensitive_value() {
    let api = Api::new();
    let (_, operator) = org(&api).await;
    let viewer = api.token("acme", "vic", "viewer").await;
    save(&api, &operator, "db", state(1, "old.example.com", 0)).await;
    save(&api, &operator, "db", state(2, "db.example.com", 0)).await;
    for token in [&viewer, &operator] {
        let r = get(&api, token, "/api/tf-states/db/outputs").await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("content-type"), "application/json");
        assert_eq!(
            r.json(),
            json!({"serial": 2, "lineage": "lin-1", "outputs": {
                "endpoint": {"type": "string", "value": "db.example.com"},
                "password": {"type": "string", "sensitive": true},
                "zone": {"type": ["object", {"id": "number", "name": "string"}], "value": {"id": 7, "name": "z"}}
            }})
        );
    }
}

#[tokio::test]
async fn the_consumer_state_is_the_plain_outputs_as_a_state_the_same_bytes_each_time() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    let viewer = api.token("acme", "vic", "viewer").await;
    save(&api, &operator, "db", state(1, "old.example.com", 0)).await;
    save(&api, &operator, "db", state(2, "db.example.com", 0)).await;
    let first = get(&api, &viewer, "/api/tf-states/db/outputs/state").await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.text(), CONSUMER);
    // Basic, as Terraform's http backend sends the token, and any other caller: the same.
    let basic = api
        .request("GET", "/api/tf-states/db/outputs/state")
        .basic(&viewer)
        .send()
        .await;
    assert_eq!(
        (basic.status, basic.body.as_slice()),
        (200, first.body.as_slice())
    );
    let again = get(&api, &admin, "/api/tf-states/db/outputs/state").await;
    assert_eq!(again.body, first.body);
    assert_eq!(again.header("etag"), first.header("etag"));
    // The full state stays behind tf_state:read.
    assert_eq!(api.get_state(&viewer, "db").await.status, 403);
}

#[tokio::test]
async fn the_tag_names_the_version_and_if_none_match_is_a_304_until_a_new_version() {
    let api = Api::new();
    let (_, operator) = org(&api).await;
    save(&api, &operator, "db", state(1, "a.example.com", 0)).await;
    for path in [
        "/api/tf-states/db/outputs",
        "/api/tf-states/db/outputs/state",
    ] {
        let r = get(&api, &operator, path).await;
        let tag = r.header("etag").to_owned();
        assert!(tag.starts_with('"') && tag.contains("-1-"), "{tag}");
        assert_eq!(r.header("cache-control"), "private, no-cache");
        let unchanged = api
            .request("GET", path)
            .bearer(&operator)
            .header("if-none-match", &tag)
            .send()
            .await;
        assert_eq!(unchanged.status, 304, "{path}");
        assert!(unchanged.body.is_empty());
        assert_eq!(unchanged.header("etag"), tag);
        let other = api
            .request("GET", path)
            .bearer(&operator)
            .header("if-none-match", "\"outputs-0-00\"")
            .send()
            .await;
        assert_eq!(other.status, 200, "{path}");
    }
    let tag = |r: Answer| r.header("etag").to_owned();
    let before = tag(get(&api, &operator, "/api/tf-states/db/outputs/state").await);
    save(&api, &operator, "db", state(2, "b.example.com", 0)).await;
    let r = api
        .request("GET", "/api/tf-states/db/outputs/state")
        .bearer(&operator)
        .header("if-none-match", &before)
        .send()
        .await;
    assert_eq!(r.status, 200, "a new version is a new answer");
    assert_ne!(tag(r), before);
}

/// A large version is stored as a blob and opened segment by segment: read the same.
#[tokio::test]
async fn a_large_version_reads_the_same_as_a_small_one() {
    let api = Api::new();
    let (_, operator) = org(&api).await;
    save(&api, &operator, "db", state(1, "old.example.com", 0)).await;
    save(&api, &operator, "db", state(2, "db.example.com", 3 << 20)).await;
    let r = get(&api, &operator, "/api/tf-states/db/outputs/state").await;
    assert_eq!((r.status, r.text().as_str()), (200, CONSUMER));
    let gzip = api
        .request("GET", "/api/tf-states/db/outputs/state")
        .bearer(&operator)
        .header("accept-encoding", "gzip")
        .send()
        .await;
    assert_eq!(gzip.status, 200);
    assert_eq!(gzip.header("etag"), r.header("etag"));
}

#[tokio::test]
async fn a_state_without_a_version_is_404_as_the_backend_says_it() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    save(&api, &operator, "gone", state(1, "a", 0)).await;
    let r = api
        .request("DELETE", "/api/tf-states/gone")
        .bearer(&admin)
        .send()
        .await;
    assert_eq!(r.status, 204);
    for name in ["nothing", "gone"] {
        for path in ["outputs", "outputs/state"] {
            let (code, message) = get(&api, &operator, &format!("/api/tf-states/{name}/{path}"))
                .await
                .error()
                .expect(404);
            assert_eq!(code, "not_found");
            assert_eq!(message, format!("state {name} has no version yet"));
        }
    }
}

#[tokio::test]
async fn an_opentofu_encrypted_state_is_409_in_words() {
    let api = Api::new();
    let (_, operator) = org(&api).await;
    save(&api, &operator, "enc", state(1, "a", 0)).await;
    save(
        &api,
        &operator,
        "enc",
        r#"{"serial":2,"lineage":"lin-1","meta":{},"encrypted_data":"AA","encryption_version":"v0"}"#
            .into(),
    )
    .await;
    for path in ["outputs", "outputs/state"] {
        let (code, message) = get(&api, &operator, &format!("/api/tf-states/enc/{path}"))
            .await
            .error()
            .expect(409);
        assert_eq!(code, "cannot_read_outputs");
        assert!(
            message.contains("version 2") && message.contains("OpenTofu-encrypted"),
            "{message}"
        );
    }
}

#[tokio::test]
async fn a_state_of_an_old_format_is_409_naming_it() {
    let api = Api::new();
    let (_, operator) = org(&api).await;
    save(
        &api,
        &operator,
        "old",
        r#"{"version":3,"terraform_version":"0.11.14","serial":4,"lineage":"l","modules":[]}"#
            .into(),
    )
    .await;
    let (code, message) = get(&api, &operator, "/api/tf-states/old/outputs")
        .await
        .error()
        .expect(409);
    assert_eq!(code, "cannot_read_outputs");
    assert!(message.contains("format 3"), "{message}");
}

#[tokio::test]
async fn allocating_outputs_away_from_viewers_refuses_them_and_null_refuses_everyone() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    let viewer = api.token("acme", "vic", "viewer").await;
    save(&api, &operator, "db", state(1, "a", 0)).await;
    let status = |token: String, path: &'static str| {
        let call = api
            .request("GET", &format!("/api/tf-states/db/{path}"))
            .bearer(&token);
        async move { call.send().await.status }
    };
    let put = |body: &'static str| {
        let call = api
            .request("PUT", "/api/org/permissions")
            .bearer(&admin)
            .body(body);
        async move { call.send().await }
    };
    let r = put(r#"{"tf_state:outputs": "operator"}"#).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"tf_state:read": "operator", "tf_state:write": "operator", "tf_state:manage": "admin", "tf_state:outputs": "operator"})
    );
    for path in ["outputs", "outputs/state"] {
        assert_eq!(status(viewer.clone(), path).await, 403, "{path}");
        assert_eq!(status(operator.clone(), path).await, 200, "{path}");
    }
    let (code, message) = api
        .request("GET", "/api/tf-states/db/outputs")
        .bearer(&viewer)
        .send()
        .await
        .error()
        .expect(403);
    assert_eq!(code, "forbidden");
    assert!(
        message.contains("tf_state:outputs needs the operator role"),
        "{message}"
    );
    let page = api.json("GET", "/api/tf-states/db", &viewer).await;
    assert_eq!(page["allowed_actions"]["outputs"], false);
    let me = api.json("GET", "/api/whoami", &viewer).await;
    assert_eq!(me["allowed_actions"]["outputs"], false);

    assert_eq!(put(r#"{"tf_state:outputs": null}"#).await.status, 200);
    for path in ["outputs", "outputs/state"] {
        assert_eq!(status(admin.clone(), path).await, 403, "disabled: {path}");
    }
    assert_eq!(
        api.json("GET", "/api/org/permissions", &admin).await["tf_state:outputs"],
        Value::Null
    );
    let audit = api
        .json("GET", "/api/audit?action=permissions.changed", &admin)
        .await;
    assert_eq!(
        audit["entries"][0]["detail"]["old"]["tf_state:outputs"],
        "operator"
    );
    assert_eq!(
        audit["entries"][0]["detail"]["new"]["tf_state:outputs"],
        Value::Null
    );
    assert_eq!(put(r#"{"tf_state:outputs": "viewer"}"#).await.status, 200);
    assert_eq!(status(viewer.clone(), "outputs/state").await, 200);
    let r = put(r#"{"tf_state:outputz": "viewer"}"#).await;
    let (code, message) = r.error().expect(400);
    assert_eq!(code, "invalid_request");
    assert!(message.contains("tf_state:outputs"), "{message}");
}

#[tokio::test]
async fn nothing_but_get_is_answered_on_the_consumer_state() {
    let api = Api::new();
    let (_, operator) = org(&api).await;
    save(&api, &operator, "db", state(1, "a", 0)).await;
    for method in ["POST", "DELETE", "PUT", "LOCK", "UNLOCK"] {
        let r = api
            .request(method, "/api/tf-states/db/outputs/state")
            .basic(&operator)
            .body(state(2, "b", 0))
            .send()
            .await;
        assert_eq!(r.status, 405, "{method}");
        assert_eq!(r.header("allow"), "GET", "{method}");
    }
    let r = api
        .request("POST", "/api/tf-states/db/outputs/lock")
        .basic(&operator)
        .send()
        .await;
    assert_eq!(r.status, 404);
    let versions = api
        .json("GET", "/api/tf-states/db/versions", &operator)
        .await;
    assert_eq!(
        versions["versions"].as_array().unwrap().len(),
        1,
        "nothing written"
    );
}

/// No secret crosses, so reading outputs is not audited (a download is), and nothing of it
/// reaches the log with a value in it.
#[tokio::test]
async fn reading_outputs_is_neither_audited_nor_logged_with_a_value() {
    let (logs, _capturing) = logs::capture();
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    let viewer = api.token("acme", "vic", "viewer").await;
    save(&api, &operator, "db", state(1, "a", 0)).await;
    get(&api, &viewer, "/api/tf-states/db/outputs").await;
    get(&api, &viewer, "/api/tf-states/db/outputs/state").await;
    let refused = api
        .request("GET", "/api/tf-states/db/state")
        .bearer(&viewer)
        .send()
        .await;
    assert_eq!(refused.status, 403);
    let audit = api.json("GET", "/api/tf-states/db/audit", &admin).await;
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["version.created"]);
    let text = logs.text();
    assert!(text.contains("WARN"), "the refused read is logged: {text}");
    assert!(!text.contains(SECRET), "{text}");
}

/// A state whose writer put a key twice in an output (`"sensitive": false, "sensitive":
/// true`), which the write takes as Terraform does: both outputs routes read it as Terraform
/// reads it, the last key winning, so the output is sensitive and hidden, and neither answers
/// 500 `damaged` for a document that is not damaged.
#[tokio::test]
async fn a_key_written_twice_in_an_output_is_read_as_terraform_reads_it() {
    let api = Api::new();
    let token = api.token("acme", "alice", "operator").await;
    let body = format!(
        r#"{{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"lin-1","outputs":{{"password":{{"value":"{SECRET}","type":"string","sensitive":false,"sensitive":true}},"endpoint":{{"value":"db.example.com","type":"string"}}}},"resources":[]}}"#
    );
    save(&api, &token, "db", body).await;
    let r = get(&api, &token, "/api/tf-states/db/outputs").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["outputs"],
        json!({"password": {"type": "string", "sensitive": true},
               "endpoint": {"type": "string", "value": "db.example.com"}})
    );
    let r = get(&api, &token, "/api/tf-states/db/outputs/state").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!r.text().contains("password"), "{}", r.text());
}
