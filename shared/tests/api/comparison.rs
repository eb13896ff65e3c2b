//! `GET .../versions/{version}/changes?since=`: its shape, which version it compares with,
//! what it refuses (unknown or pruned versions, OpenTofu-encrypted ones, bad numbers), a
//! different lineage compared and flagged, no value ever in the answer, and its audit entry;
//! and the counts the versions listing shows without opening a version.

use hegemony_state::ports::Commit;
use hegemony_state::service::sweep::sweep;
use serde_json::{json, Value};

use crate::authorization::org;
use crate::support::api::{server_limits, Api};
use crate::support::Adapter;

const SECRET: &str = "planted-secret-9c41";

/// A state holding a bucket, a role with `policy` and `tags`, an optional queue, and two
/// outputs (the second sensitive).
fn state(serial: u64, lineage: &str, policy: &str, queue: bool, bucket: bool) -> String {
    let mut resources = vec![format!(
        r#"{{"mode":"managed","type":"aws_iam_role","name":"app","provider":"p","instances":[{{"schema_version":0,"attributes":{{"name":"app","policy":"{policy}","password":"{SECRET}-{serial}","tags":{{"team":"{policy}","env":"prod"}}}},"sensitive_attributes":[[{{"type":"get_attr","value":"password"}}]]}}]}}"#
    )];
    if queue {
        resources.push(r#"{"module":"module.jobs","mode":"managed","type":"aws_sqs_queue","name":"q","provider":"p","instances":[{"index_key":"a","attributes":{"name":"q"}}]}"#.into());
    }
    if bucket {
        resources.push(r#"{"mode":"managed","type":"aws_s3_bucket","name":"receipts","provider":"p","instances":[{"index_key":0,"attributes":{"bucket":"r"}}]}"#.into());
    }
    format!(
        r#"{{"version":4,"terraform_version":"1.11.4","serial":{serial},"lineage":"{lineage}","outputs":{{"url":{{"value":"{policy}","type":"string"}},"token":{{"value":"{SECRET}-{serial}","type":"string","sensitive":true}}}},"resources":[{}],"check_results":null}}"#,
        resources.join(",")
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

async fn changes(api: &Api, token: &str, path: &str) -> (u16, Value) {
    let r = api.request("GET", path).bearer(token).send().await;
    let text = r.text();
    assert!(!text.contains(SECRET), "a value leaked: {text}");
    (r.status, r.json())
}

#[tokio::test]
async fn names_what_was_added_changed_and_removed_against_the_version_before() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    save(&api, &operator, "net", state(1, "lin", "p1", true, false)).await;
    save(&api, &operator, "net", state(2, "lin", "p2", false, true)).await;
    let (status, body) = changes(&api, &operator, "/api/tf-states/net/versions/2/changes").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({
            "state": "net",
            "version": {"version": 2, "serial": 2, "lineage": "lin", "terraform_version": "1.11.4"},
            "since": {"version": 1, "serial": 1, "lineage": "lin", "terraform_version": "1.11.4"},
            "same_lineage": true,
            "counts": {"added": 1, "changed": 1, "removed": 1},
            "resources": {
                "added": [{"address": "aws_s3_bucket.receipts[0]", "module": null, "mode": "managed", "type": "aws_s3_bucket", "name": "receipts", "index_key": 0, "deposed": null}],
                "changed": [{"address": "aws_iam_role.app", "module": null, "mode": "managed", "type": "aws_iam_role", "name": "app", "index_key": null, "deposed": null,
                    "attributes": ["password", "policy", "tags.team"], "sensitive": ["password"], "sensitive_only": false, "other": []}],
                "removed": [{"address": "module.jobs.aws_sqs_queue.q[\"a\"]", "module": "module.jobs", "mode": "managed", "type": "aws_sqs_queue", "name": "q", "index_key": "a", "deposed": null}]
            },
            "outputs": {
                "added": [],
                "changed": [
                    {"name": "token", "sensitive": true, "was_sensitive": true, "value_changed": true},
                    {"name": "url", "sensitive": false, "was_sensitive": false, "value_changed": true}
                ],
                "removed": []
            }
        })
    );
    // Any other version, older or newer, may be named; the first is compared with nothing.
    let (_, back) = changes(
        &api,
        &operator,
        "/api/tf-states/net/versions/1/changes?since=2",
    )
    .await;
    assert_eq!(
        back["counts"],
        json!({"added": 1, "changed": 1, "removed": 1})
    );
    assert_eq!(back["resources"]["added"][0]["type"], "aws_sqs_queue");
    let (_, first) = changes(&api, &operator, "/api/tf-states/net/versions/1/changes").await;
    assert_eq!(first["since"], Value::Null);
    assert_eq!(
        first["counts"],
        json!({"added": 2, "changed": 0, "removed": 0})
    );
    assert_eq!(
        first["outputs"]["added"][1],
        json!({"name": "url", "sensitive": false})
    );
    let (_, same) = changes(
        &api,
        &operator,
        "/api/tf-states/net/versions/2/changes?since=2",
    )
    .await;
    assert_eq!(
        same["counts"],
        json!({"added": 0, "changed": 0, "removed": 0})
    );

    let audit = api.json("GET", "/api/tf-states/net/audit", &admin).await;
    let compared: Vec<&Value> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "versions.compared")
        .collect();
    assert_eq!(compared.len(), 4, "{audit}");
    assert_eq!(compared[3]["version"], 2);
    assert_eq!(compared[3]["detail"], json!({"since": 1}));
    assert_eq!(
        compared[3]["actor"],
        json!({"kind": "user", "user": "alice"})
    );
}

/// Another lineage is in one state's history only where it was written past a version that
/// had none (an OpenTofu-encrypted one without plaintext serial and lineage) before the
/// state record kept the last lineage carried: compared all the same. Such a record is
/// made here by storing the record without what it carried, as one stored then was.
#[tokio::test]
async fn a_different_lineage_is_compared_and_said() {
    let api = Api::new();
    let (_, operator) = org(&api).await;
    save(&api, &operator, "a", state(1, "one", "p", true, false)).await;
    save(
        &api,
        &operator,
        "a",
        r#"{"encrypted_data":"AA","encryption_version":"v0"}"#.into(),
    )
    .await;
    let catalog = &api.fx.catalog;
    let record = catalog.state("acme", "a").await.unwrap().unwrap();
    let mut earlier = record.successor();
    earlier.carried = Default::default();
    catalog
        .commit(Commit::over(&record, record.created_at, Some(earlier)))
        .await
        .unwrap();
    save(&api, &operator, "a", state(1, "two", "p", true, true)).await;
    let (status, body) = changes(
        &api,
        &operator,
        "/api/tf-states/a/versions/3/changes?since=1",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["same_lineage"], false);
    assert_eq!(
        (&body["since"]["lineage"], &body["version"]["lineage"]),
        (&json!("one"), &json!("two"))
    );
    assert_eq!(
        body["counts"],
        json!({"added": 1, "changed": 0, "removed": 0})
    );
}

#[tokio::test]
async fn unknown_pruned_and_badly_numbered_versions_are_refused() {
    let mut limits = server_limits();
    limits.keep_versions = 2;
    let api = Api::on(Adapter::Memory, limits);
    let (_, operator) = org(&api).await;
    for serial in 1..=4 {
        save(
            &api,
            &operator,
            "net",
            state(serial, "lin", &format!("p{serial}"), false, false),
        )
        .await;
    }
    sweep(&api.fx.app, api.fx.app.clock.now()).await.unwrap();
    for (path, status, code) in [
        ("/api/tf-states/net/versions/9/changes", 404, "not_found"),
        (
            "/api/tf-states/net/versions/4/changes?since=1",
            404,
            "not_found",
        ),
        ("/api/tf-states/net/versions/2/changes", 404, "not_found"),
        ("/api/tf-states/nope/versions/1/changes", 404, "not_found"),
        (
            "/api/tf-states/net/versions/0/changes",
            400,
            "invalid_request",
        ),
        (
            "/api/tf-states/net/versions/4/changes?since=x",
            400,
            "invalid_request",
        ),
        (
            "/api/tf-states/net/versions/4/changes?since=-1",
            400,
            "invalid_request",
        ),
    ] {
        let r = api
            .request("GET", path)
            .bearer(&operator)
            .send()
            .await
            .error();
        assert_eq!(
            (r.status, r.code.as_str()),
            (status, code),
            "{path}: {}",
            r.message
        );
    }
    let pruned = api
        .request("GET", "/api/tf-states/net/versions/4/changes?since=1")
        .bearer(&operator)
        .send()
        .await
        .error();
    assert!(
        pruned.message.contains("version 1 of state net"),
        "{}",
        pruned.message
    );
    let (status, body) = changes(&api, &operator, "/api/tf-states/net/versions/4/changes").await;
    assert_eq!((status, &body["since"]["version"]), (200, &json!(3)));
}

#[tokio::test]
async fn an_opentofu_encrypted_side_is_refused_in_words_with_the_alternative() {
    let api = Api::new();
    let (_, operator) = org(&api).await;
    save(&api, &operator, "enc", state(1, "l", "p", false, false)).await;
    save(
        &api,
        &operator,
        "enc",
        r#"{"serial":2,"lineage":"l","meta":{},"encrypted_data":"AA","encryption_version":"v0"}"#
            .into(),
    )
    .await;
    for path in [
        "/api/tf-states/enc/versions/2/changes",
        "/api/tf-states/enc/versions/1/changes?since=2",
    ] {
        let r = api
            .request("GET", path)
            .bearer(&operator)
            .send()
            .await
            .error();
        assert_eq!(
            (r.status, r.code.as_str()),
            (409, "cannot_compare"),
            "{path}"
        );
        assert!(
            r.message.contains("version 2")
                && r.message.contains("OpenTofu-encrypted")
                && r.message.contains("download both versions"),
            "{}",
            r.message
        );
    }
    let versions = api
        .json("GET", "/api/tf-states/enc/versions", &operator)
        .await;
    assert_eq!(versions["versions"][0]["instances"], Value::Null);
    assert_eq!(versions["versions"][1]["instances"], 1);
}

#[tokio::test]
async fn the_versions_listing_shows_each_versions_terraform_version_and_instances() {
    let api = Api::new();
    let (_, operator) = org(&api).await;
    save(&api, &operator, "net", state(1, "lin", "p", true, true)).await;
    save(&api, &operator, "net", state(2, "lin", "p", false, false)).await;
    let versions = api
        .json("GET", "/api/tf-states/net/versions", &operator)
        .await;
    let facts: Vec<(Value, Value)> = versions["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["terraform_version"].clone(), v["instances"].clone()))
        .collect();
    assert_eq!(
        facts,
        [(json!("1.11.4"), json!(1)), (json!("1.11.4"), json!(3))]
    );
}
