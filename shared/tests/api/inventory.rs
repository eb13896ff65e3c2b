//! `GET /api/resources`, `GET /api/resources/conflicts` and `GET /api/overview`: the
//! inventory across an org's states, kept by every change of a version (write, rollback,
//! delete, restore), its exact answers, paging and filters, the objects two states manage,
//! the org's overview, who may ask, and that no value (nor the identity a digest is made
//! of) ever appears in an answer or a log.

use serde_json::{json, Value};
use time::Duration;

use crate::authorization::org;
use crate::support::api::{lock_doc, Api};
use crate::support::logs;

const SECRET: &str = "planted-secret-8c21";
const BUCKET_ARN: &str = "arn:aws:s3:::planted-secret-8c21-bucket";

/// A state document with these resources (each `(module, mode, type, name, [(index key,
/// attributes)])`), on the AWS provider.
fn doc(serial: u64, resources: &[Value]) -> String {
    json!({
        "version": 4, "terraform_version": "1.11.4", "serial": serial, "lineage": "lin-inv",
        "outputs": {}, "resources": resources, "check_results": null
    })
    .to_string()
}

fn resource(module: Option<&str>, mode: &str, kind: &str, name: &str, instances: Value) -> Value {
    let mut r = json!({
        "mode": mode, "type": kind, "name": name,
        "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
        "instances": instances,
    });
    if let Some(module) = module {
        r["module"] = json!(module);
        r["provider"] = json!(format!(
            "{module}.provider[\"registry.terraform.io/hashicorp/aws\"].east"
        ));
    }
    r
}

/// The bucket two states manage: its identity is the planted secret's ARN.
fn bucket(name: &str) -> Value {
    resource(
        None,
        "managed",
        "aws_s3_bucket",
        name,
        json!([{"schema_version": 0, "attributes": {"arn": BUCKET_ARN, "id": "b", "policy": SECRET}}]),
    )
}

/// The network state: a counted subnet in a module, a for_each'd role, a data source.
fn network(serial: u64, with_bucket: bool) -> String {
    let mut resources = vec![
        resource(
            Some("module.vpc"),
            "managed",
            "aws_subnet",
            "this",
            json!([
                {"index_key": 0, "attributes": {"id": "subnet-0", "cidr": SECRET}},
                {"index_key": 1, "attributes": {"id": "subnet-1"}}
            ]),
        ),
        resource(
            None,
            "managed",
            "aws_iam_role",
            "app",
            json!([{"index_key": "web", "attributes": {"arn": "arn:aws:iam::1:role/web"}}]),
        ),
        resource(
            None,
            "data",
            "aws_ami",
            "base",
            json!([{"attributes": {"id": "ami-1"}}]),
        ),
    ];
    if with_bucket {
        resources.push(bucket("logs"));
    }
    doc(serial, &resources)
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

/// A GET answered 200, checked for the secret and for any digest-like text.
async fn get(api: &Api, token: &str, path: &str) -> Value {
    let r = api.request("GET", path).bearer(token).send().await;
    assert_eq!(r.status, 200, "{path}: {}", r.text());
    let text = r.text();
    assert!(!text.contains(SECRET), "a secret crossed in {path}: {text}");
    assert!(
        !text.contains("digest"),
        "a digest crossed in {path}: {text}"
    );
    r.json()
}

fn addresses(page: &Value) -> Vec<(String, String)> {
    page["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["state"].as_str().unwrap().to_owned(),
                r["address"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn pair(state: &str, address: &str) -> (String, String) {
    (state.to_owned(), address.to_owned())
}

#[tokio::test]
async fn a_search_answers_each_instance_with_its_address_type_provider_and_version() {
    let api = Api::new();
    let (_, operator) = org(&api).await;
    let viewer = api.token("acme", "vic", "viewer").await;
    save(&api, &operator, "network", network(1, false)).await;
    save(&api, &operator, "network", network(2, true)).await;
    let all = get(&api, &viewer, "/api/resources").await;
    assert_eq!(all["next_cursor"], Value::Null);
    assert_eq!(
        all["resources"][0],
        json!({
            "state": "network", "version": 2, "address": "aws_iam_role.app[\"web\"]",
            "module": "", "mode": "managed", "type": "aws_iam_role",
            "provider": "registry.terraform.io/hashicorp/aws"
        })
    );
    assert_eq!(
        addresses(&all),
        vec![
            pair("network", "aws_iam_role.app[\"web\"]"),
            pair("network", "aws_s3_bucket.logs"),
            pair("network", "data.aws_ami.base"),
            pair("network", "module.vpc.aws_subnet.this[0]"),
            pair("network", "module.vpc.aws_subnet.this[1]"),
        ]
    );
    let subnet = &all["resources"][3];
    assert_eq!(
        (&subnet["module"], &subnet["mode"], &subnet["provider"]),
        (
            &json!("module.vpc"),
            &json!("managed"),
            &json!("registry.terraform.io/hashicorp/aws")
        )
    );
    assert_eq!(all["resources"][2]["mode"], "data");

    for (query, expected) in [
        (
            "q=SUBNET",
            vec![
                "module.vpc.aws_subnet.this[0]",
                "module.vpc.aws_subnet.this[1]",
            ],
        ),
        ("type=aws_s3_bucket", vec!["aws_s3_bucket.logs"]),
        // `module=` with nothing after it is the root module.
        (
            "module=&q=a",
            vec![
                "aws_iam_role.app[\"web\"]",
                "aws_s3_bucket.logs",
                "data.aws_ami.base",
            ],
        ),
        (
            "module=module.vpc&q=this%5B1",
            vec!["module.vpc.aws_subnet.this[1]"],
        ),
        ("provider=aws&type=aws_ami", vec!["data.aws_ami.base"]),
        (
            "provider=hashicorp%2Faws&q=role",
            vec!["aws_iam_role.app[\"web\"]"],
        ),
        (
            "provider=registry.terraform.io%2Fhashicorp%2Faws&q=logs",
            vec!["aws_s3_bucket.logs"],
        ),
        ("provider=google", vec![]),
        ("provider=ws", vec![]),
        ("state=other", vec![]),
        ("q=nothing-like-it", vec![]),
    ] {
        let page = get(&api, &viewer, &format!("/api/resources?{query}")).await;
        let found: Vec<String> = addresses(&page).into_iter().map(|(_, a)| a).collect();
        assert_eq!(found, expected, "{query}");
    }
}

#[tokio::test]
async fn a_search_pages_in_state_then_address_order_and_refuses_what_it_cannot_read() {
    let api = Api::new();
    let (_, operator) = org(&api).await;
    for name in ["b-state", "a-state"] {
        save(&api, &operator, name, network(1, false)).await;
    }
    let mut seen = Vec::new();
    let mut path = "/api/resources?limit=3".to_owned();
    loop {
        let page = get(&api, &operator, &path).await;
        assert!(page["resources"].as_array().unwrap().len() <= 3);
        seen.extend(addresses(&page));
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/api/resources?limit=3&cursor={cursor}"),
            None => break,
        }
    }
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(seen, sorted);
    assert_eq!(seen.len(), 8);
    assert_eq!(seen[0], pair("a-state", "aws_iam_role.app[\"web\"]"));
    // A page that ends at the last match says so, full or not.
    for limit in [4, 8, 9] {
        let page = get(&api, &operator, &format!("/api/resources?limit={limit}")).await;
        assert_eq!(
            page["next_cursor"].is_null(),
            limit >= 8,
            "limit {limit}: {page}"
        );
        let last = get(
            &api,
            &operator,
            &format!(
                "/api/resources?limit={limit}&cursor={}",
                page["next_cursor"].as_str().unwrap_or("~")
            ),
        )
        .await;
        assert_eq!(addresses(&last).len(), if limit >= 8 { 8 } else { 4 });
        assert!(last["next_cursor"].is_null(), "limit {limit}: {last}");
    }

    for (path, says) in [
        ("/api/resources?limit=0", "limit"),
        ("/api/resources?limit=1001", "limit"),
        ("/api/resources?state=..", "name"),
        ("/api/resources/conflicts?state=a%2Fb", "name"),
    ] {
        let r = api.request("GET", path).bearer(&operator).send().await;
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        assert!(r.error().message.contains(says), "{path}: {}", r.text());
    }
    // A cursor is a position: one not given by a search starts where it names.
    let from = get(&api, &operator, "/api/resources?cursor=b").await;
    let from = addresses(&from);
    assert!(!from.is_empty() && from.len() < 8, "{from:?}");
    assert!(
        from.iter().all(|(state, _)| state.as_str() >= "b"),
        "{from:?}"
    );
    let long = "x".repeat(513);
    let r = api
        .request("GET", &format!("/api/resources?q={long}"))
        .bearer(&operator)
        .send()
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
}

#[tokio::test]
async fn an_object_two_states_manage_is_a_conflict_until_one_lets_it_go() {
    let api = Api::new();
    let (_, operator) = org(&api).await;
    let viewer = api.token("acme", "vic", "viewer").await;
    save(&api, &operator, "network", network(1, true)).await;
    // The same bucket (equal ARN) under another address, and the same data source and a
    // subnet id within one state: neither of those is a conflict.
    save(
        &api,
        &operator,
        "storage",
        doc(
            1,
            &[
                bucket("archive"),
                resource(
                    None,
                    "data",
                    "aws_ami",
                    "base",
                    json!([{"attributes": {"id": "ami-1"}}]),
                ),
            ],
        ),
    )
    .await;
    save(&api, &operator, "lonely", doc(1, &[resource(None, "managed", "aws_subnet", "a", json!([{"index_key": 0, "attributes": {"id": "s"}}, {"index_key": 1, "attributes": {"id": "s"}}]))])).await;

    let conflicts = get(&api, &viewer, "/api/resources/conflicts").await;
    assert_eq!(
        conflicts,
        json!({"conflicts": [{
            "type": "aws_s3_bucket",
            "instances": [
                {"state": "network", "version": 1, "address": "aws_s3_bucket.logs", "module": "",
                 "mode": "managed", "type": "aws_s3_bucket", "provider": "registry.terraform.io/hashicorp/aws"},
                {"state": "storage", "version": 1, "address": "aws_s3_bucket.archive", "module": "",
                 "mode": "managed", "type": "aws_s3_bucket", "provider": "registry.terraform.io/hashicorp/aws"}
            ]
        }]})
    );
    let of_storage = get(&api, &viewer, "/api/resources/conflicts?state=storage").await;
    assert_eq!(of_storage, conflicts);
    let of_lonely = get(&api, &viewer, "/api/resources/conflicts?state=lonely").await;
    assert_eq!(of_lonely, json!({"conflicts": []}));
    assert_eq!(get(&api, &viewer, "/api/overview").await["conflicts"], 1);

    // The network state lets the bucket go: no conflict any more.
    save(&api, &operator, "network", network(2, false)).await;
    let after = get(&api, &viewer, "/api/resources/conflicts").await;
    assert_eq!(after, json!({"conflicts": []}));
}

#[tokio::test]
async fn a_rollback_a_delete_and_a_restore_each_change_the_index_with_the_version() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    save(&api, &operator, "network", network(1, false)).await;
    save(&api, &operator, "network", network(2, true)).await;
    let buckets = "/api/resources?type=aws_s3_bucket";
    assert_eq!(
        get(&api, &operator, buckets).await["resources"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let r = api
        .request("POST", "/api/tf-states/network/rollback")
        .bearer(&operator)
        .body(r#"{"version": 1}"#)
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(get(&api, &operator, buckets).await["resources"], json!([]));
    let all = get(&api, &operator, "/api/resources").await;
    assert!(all["resources"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["version"] == 3));

    let r = api
        .request("DELETE", "/api/tf-states/network")
        .bearer(&admin)
        .send()
        .await;
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(
        get(&api, &operator, "/api/resources").await["resources"],
        json!([])
    );
    assert_eq!(get(&api, &operator, "/api/overview").await["resources"], 0);

    let deleted = api.json("GET", "/api/deleted-states", &admin).await;
    let id = deleted["deleted_states"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = api
        .request("POST", &format!("/api/deleted-states/{id}/restore"))
        .bearer(&admin)
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let restored = get(&api, &operator, "/api/resources").await;
    assert_eq!(restored["resources"].as_array().unwrap().len(), 4);
    assert!(restored["resources"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["version"] == 3));
}

#[tokio::test]
async fn the_overview_counts_the_org_and_names_its_largest_locked_held_stale_and_unindexed_states()
{
    let api = Api::new();
    let (_, operator) = org(&api).await;
    save(&api, &operator, "old", doc(1, &[bucket("old")])).await;
    api.fx.advance(Duration::days(100));
    save(&api, &operator, "network", network(1, true)).await;
    save(&api, &operator, "network", network(2, true)).await;
    let encrypted = r#"{"serial":7,"lineage":"enc","meta":{},"encrypted_data":"q83vEjRWeJA=","encryption_version":"v0"}"#;
    save(&api, &operator, "sealed", encrypted.to_owned()).await;
    let r = api.lock(&operator, "network", &lock_doc("lock-1")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    api.fx.advance(Duration::seconds(30));

    let o = get(&api, &operator, "/api/overview").await;
    assert_eq!(o["org"], "acme");
    assert_eq!(
        (&o["states"], &o["versions"], &o["resources"]),
        (&json!(3), &json!(4), &json!(6))
    );
    assert_eq!(o["conflicts"], 1);
    assert_eq!(
        o["by_provider"],
        json!([{"provider": "registry.terraform.io/hashicorp/aws", "count": 6}])
    );
    assert_eq!(
        o["by_type"][0],
        json!({"type": "aws_s3_bucket", "count": 2})
    );
    assert_eq!(o["by_type"][1], json!({"type": "aws_subnet", "count": 2}));
    assert_eq!(o["largest"][0]["state"], "network");
    assert_eq!(o["largest"][0]["version"], 2);
    assert_eq!(o["largest"].as_array().unwrap().len(), 3);
    assert_eq!(o["locks"].as_array().unwrap().len(), 1);
    assert_eq!(o["locks"][0]["state"], "network");
    assert_eq!(o["locks"][0]["age_seconds"], 30);
    assert!(o["locks"][0]["who"].as_str().unwrap().contains("alice"));
    assert_eq!(o["holds"], json!([]));
    assert_eq!(o["stale"].as_array().unwrap().len(), 1);
    assert_eq!(o["stale"][0]["state"], "old");
    assert_eq!(o["stale"][0]["days"], 100);
    assert_eq!(o["not_indexed"], json!([{"state": "sealed", "version": 1}]));
}

#[tokio::test]
async fn every_role_of_the_org_may_ask_and_no_one_else_sees_its_resources() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    let viewer = api.token("acme", "vic", "viewer").await;
    let other = api.token("globex", "gus", "admin").await;
    save(&api, &operator, "network", network(1, true)).await;
    let other_writer = api.token("globex", "olga", "operator").await;
    save(&api, &other_writer, "network", network(1, true)).await;
    for token in [&viewer, &operator, &admin] {
        let page = get(&api, token, "/api/resources").await;
        assert_eq!(page["resources"].as_array().unwrap().len(), 5);
        assert!(page["resources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["state"] == "network"));
    }
    // The other org's same bucket is not a conflict of either: digests are keyed per org.
    assert_eq!(
        get(&api, &viewer, "/api/resources/conflicts").await,
        json!({"conflicts": []})
    );
    assert_eq!(get(&api, &other, "/api/overview").await["states"], 1);
    assert_eq!(get(&api, &other, "/api/overview").await["org"], "globex");

    let session = api.session("acme", "deploy").await;
    for path in [
        "/api/resources",
        "/api/resources/conflicts",
        "/api/overview",
    ] {
        let r = api.request("GET", path).send().await;
        assert_eq!(r.status, 401, "{path}");
        let r = api.request("GET", path).bearer(&session).send().await;
        assert_eq!(r.status, 403, "{path}: {}", r.text());
        let platform = api.platform_token().await;
        let r = api.request("GET", path).bearer(&platform).send().await;
        assert_eq!(r.status, 403, "{path}: {}", r.text());
    }
}

#[tokio::test]
async fn no_value_nor_identity_reaches_the_log() {
    let (logs, _capturing) = logs::capture();
    let api = Api::new();
    let (_, operator) = org(&api).await;
    save(&api, &operator, "network", network(1, true)).await;
    save(&api, &operator, "storage", doc(1, &[bucket("archive")])).await;
    for path in [
        "/api/resources?q=logs",
        "/api/resources/conflicts",
        "/api/overview",
    ] {
        get(&api, &operator, path).await;
    }
    let text = logs.text();
    assert!(!text.contains(SECRET), "{text}");
    assert!(
        text.contains("state written"),
        "the log was captured: {text}"
    );
}
