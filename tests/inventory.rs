//! The inventory with real Terraform 1.11 and 1.15: configurations with a module under
//! `for_each`, `count`, `for_each` resources and a data source, applied to the real server;
//! their instances found by search under the addresses Terraform prints; one object in two
//! states (one state's content pushed into another) found as a conflict and gone once one
//! state lets it go; a rollback and a delete changing the index; a planted secret, and the
//! identities the conflicts are found by, never in an answer or the log.

use std::collections::BTreeSet;

use hegemony_state_blackbox::*;
use serde_json::Value;

const SECRET: &str = "s3cr3t-planted-4d9e";

struct Env {
    server: Server,
    api: Api,
    admin: String,
    alice: String,
}

impl Env {
    fn new() -> Env {
        let server = Server::start();
        let admin = server.token("default", "root", "admin");
        let alice = server.token("default", "alice", "operator");
        Env {
            api: Api::new(&server),
            server,
            admin,
            alice,
        }
    }

    /// A GET answered 200 as a viewer would ask, checked for the secret and `ids`.
    fn get(&self, path: &str, ids: &BTreeSet<String>) -> Value {
        let r = self
            .api
            .request("GET", path, Some(&self.admin))
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let text = r.text().unwrap();
        assert!(
            !text.contains(SECRET),
            "the secret crossed in {path}: {text}"
        );
        for id in ids {
            assert!(
                !text.contains(id.as_str()),
                "an identity crossed in {path}: {text}"
            );
        }
        serde_json::from_str(&text).unwrap()
    }

    /// The addresses a search finds in `state`.
    fn addresses(&self, state: &str, ids: &BTreeSet<String>) -> Vec<String> {
        let page = self.get(&format!("/api/resources?state={state}"), ids);
        page["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["address"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Each conflict as its (state, address) pairs.
    fn conflicts(&self, ids: &BTreeSet<String>) -> Vec<Vec<(String, String)>> {
        let answer = self.get("/api/resources/conflicts", ids);
        answer["conflicts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|group| {
                group["instances"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| {
                        (
                            i["state"].as_str().unwrap().to_owned(),
                            i["address"].as_str().unwrap().to_owned(),
                        )
                    })
                    .collect()
            })
            .collect()
    }
}

/// A configuration with a module under `for_each` holding a counted resource, a
/// `for_each` resource holding the secret, and a data source reading a local state file.
fn write_config(tf: &Tf, roles: &[&str]) {
    let dir = tf.path();
    std::fs::create_dir_all(dir.join("net")).unwrap();
    std::fs::write(
        dir.join("net/main.tf"),
        "resource \"terraform_data\" \"subnet\" {\n  count = 2\n  input = count.index\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("shared.tfstate"),
        r#"{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"shared","outputs":{"zone":{"value":"z","type":"string"}},"resources":[]}"#,
    )
    .unwrap();
    let roles = roles
        .iter()
        .map(|r| format!("\"{r}\""))
        .collect::<Vec<_>>()
        .join(", ");
    std::fs::write(
        dir.join("main.tf"),
        format!(
            r#"terraform {{
  backend "http" {{}}
}}
module "net" {{
  source   = "./net"
  for_each = toset(["east"])
}}
resource "terraform_data" "role" {{
  for_each = toset([{roles}])
  input    = {{ name = each.key, password = "{SECRET}" }}
}}
data "terraform_remote_state" "shared" {{
  backend = "local"
  config  = {{ path = "${{path.module}}/shared.tfstate" }}
}}
"#
        ),
    )
    .unwrap();
}

/// Every `id` attribute of the state as the server holds it: the identities conflicts are
/// found by, which no answer may show.
fn identities(env: &Env, state: &str) -> BTreeSet<String> {
    let r = env.api.get_state(&env.admin, state);
    let doc: Value = r.json().unwrap();
    doc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["instances"].as_array().unwrap().clone())
        .filter_map(|i| i["attributes"]["id"].as_str().map(str::to_owned))
        .collect()
}

fn search_conflicts_rollback_and_delete(v: TfVersion) {
    let env = Env::new();
    let tf = Tf::new(v, &env.server, "app", &env.alice);
    write_config(&tf, &["reader", "writer"]);
    tf.init();
    tf.ok(&["apply", "-auto-approve", "-no-color"]);
    let ids = identities(&env, "app");
    assert_eq!(ids.len(), 4, "four managed objects with ids: {ids:?}");
    let first = vec![
        "data.terraform_remote_state.shared",
        "module.net[\"east\"].terraform_data.subnet[0]",
        "module.net[\"east\"].terraform_data.subnet[1]",
        "terraform_data.role[\"reader\"]",
        "terraform_data.role[\"writer\"]",
    ];
    assert_eq!(env.addresses("app", &ids), first);
    let found = env.get("/api/resources?q=SUBNET%5B1&provider=terraform", &ids);
    assert_eq!(
        found["resources"][0],
        serde_json::json!({
            "state": "app", "version": 1,
            "address": "module.net[\"east\"].terraform_data.subnet[1]",
            "module": "module.net[\"east\"]", "mode": "managed", "type": "terraform_data",
            "provider": "terraform.io/builtin/terraform"
        })
    );
    assert_eq!(found["resources"].as_array().unwrap().len(), 1);
    assert!(env.conflicts(&ids).is_empty());

    // The same objects come to be managed by a second state: its content pushed there.
    let pulled = tf.ok(&["state", "pull"]).stdout;
    let copy = Tf::new(v, &env.server, "copy", &env.alice);
    write_config(&copy, &["reader", "writer"]);
    copy.init();
    std::fs::write(copy.path().join("pulled.tfstate"), pulled).unwrap();
    copy.ok(&["state", "push", "pulled.tfstate"]);
    let groups = env.conflicts(&ids);
    assert_eq!(groups.len(), 4, "{groups:?}");
    for group in &groups {
        let states: Vec<&str> = group.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(states, ["app", "copy"], "{groups:?}");
        assert_eq!(group[0].1, group[1].1);
    }
    // One state lets one object go: that conflict is gone, the others stay.
    copy.ok(&[
        "state",
        "rm",
        "-no-color",
        "terraform_data.role[\"writer\"]",
    ]);
    let groups = env.conflicts(&ids);
    assert_eq!(groups.len(), 3, "{groups:?}");
    assert!(groups
        .iter()
        .all(|g| g[0].1 != "terraform_data.role[\"writer\"]"));

    // A new role, then a rollback to the first version: the index follows each.
    write_config(&tf, &["reader", "writer", "admin"]);
    tf.ok(&["apply", "-auto-approve", "-no-color"]);
    assert!(env
        .addresses("app", &ids)
        .contains(&"terraform_data.role[\"admin\"]".to_owned()));
    let r = env
        .api
        .request("POST", "/api/tf-states/app/rollback", Some(&env.alice))
        .body(r#"{"version": 1}"#)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(env.addresses("app", &ids), first);
    let overview = env.get("/api/overview", &ids);
    assert_eq!(overview["states"], 2);
    assert_eq!(overview["resources"], 9);
    assert_eq!(overview["conflicts"], 3);
    assert_eq!(
        overview["by_provider"],
        serde_json::json!([{"provider": "terraform.io/builtin/terraform", "count": 9}])
    );

    // A delete takes the state's instances out, and its conflicts with them.
    let r = env
        .api
        .request("DELETE", "/api/tf-states/copy", Some(&env.admin))
        .send()
        .unwrap();
    assert_eq!(r.status(), 204);
    assert!(env.addresses("copy", &ids).is_empty());
    assert!(env.conflicts(&ids).is_empty());

    let logs = env.server.logs();
    assert!(!logs.contains(SECRET), "the secret reached the log");
    for id in &ids {
        assert!(
            !logs.contains(id.as_str()),
            "an identity reached the log: {id}"
        );
    }
}

/// A state document holding `resources`, in the format Terraform 1.11 and 1.15 both read.
fn document(lineage: &str, resources: &[String]) -> String {
    format!(
        r#"{{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"{lineage}","outputs":{{}},"resources":[{}]}}"#,
        resources.join(",")
    )
}

/// One managed resource of one instance: its `attributes`, and the `identity` object its
/// provider declares (as Terraform 1.12 and later write it, beside `attributes`) if any.
fn resource(
    kind: &str,
    name: &str,
    provider: &str,
    attributes: &str,
    identity: Option<&str>,
) -> String {
    let identity = identity
        .map(|i| format!(r#","identity_schema_version":0,"identity":{i}"#))
        .unwrap_or_default();
    format!(
        r#"{{"mode":"managed","type":"{kind}","name":"{name}","provider":"provider[\"registry.terraform.io/hashicorp/{provider}\"]","instances":[{{"schema_version":0,"attributes":{attributes},"sensitive_attributes":[]{identity}}}]}}"#
    )
}

/// A state of the cluster and account `scope`: a `kubernetes_namespace` "monitoring" (no
/// identity declared; its `id` names it within its cluster alone), the one S3 bucket both
/// scopes' states manage (its identity declared with the members in the scope's own order,
/// and its `arn`), and one IAM role of one account, known by its declared identity
/// alone (its `id` is its name, which each account may have).
fn scope_state(scope: &str, bucket_address: &str) -> String {
    let bucket_identity = if scope == "east" {
        r#"{"region":"eu-west-1","bucket":"shared-logs-7f3a","account_id":"123456789012"}"#
    } else {
        r#"{"account_id":"123456789012","bucket":"shared-logs-7f3a","region":"eu-west-1"}"#
    };
    document(
        &format!("l-{scope}"),
        &[
            resource(
                "kubernetes_namespace",
                "monitoring",
                "kubernetes",
                r#"{"id":"monitoring","metadata":[{"name":"monitoring"}]}"#,
                None,
            ),
            resource(
                "aws_s3_bucket",
                bucket_address,
                "aws",
                r#"{"arn":"arn:aws:s3:::shared-logs-7f3a","bucket":"shared-logs-7f3a","id":"shared-logs-7f3a"}"#,
                Some(bucket_identity),
            ),
            resource(
                "aws_iam_role",
                "deploy",
                "aws",
                r#"{"id":"deployer-5e2c","name":"deployer-5e2c"}"#,
                Some(r#"{"account_id":"123456789012","name":"deployer-5e2c"}"#),
            ),
        ],
    )
}

/// Only what is one object is managed twice. Two states, each of its own cluster, pushed by
/// real Terraform: Terraform 1.15 keeps each instance's declared `identity` as it writes the
/// state, Terraform 1.11 drops it (it predates identities). The bucket is a conflict either
/// way (by its declared identity, whatever its members' order; by its `arn`); the namespace
/// "monitoring" of each cluster is not (its `id` holds within a cluster); the role is one
/// object by its declared identity, found with 1.15 and not by its name with 1.11.
fn conflicts_are_objects_managed_twice_not_names_shared_across_scopes(v: TfVersion) {
    let env = Env::new();
    for (scope, bucket) in [("east", "logs"), ("west", "archive")] {
        let tf = Tf::new(v, &env.server, scope, &env.alice);
        std::fs::write(
            tf.path().join("main.tf"),
            "terraform {\n  backend \"http\" {}\n}\n",
        )
        .unwrap();
        tf.init();
        std::fs::write(tf.path().join("pushed.tfstate"), scope_state(scope, bucket)).unwrap();
        tf.ok(&["state", "push", "pushed.tfstate"]);
        let stored: Value = env.api.get_state(&env.admin, scope).json().unwrap();
        let declared = stored["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["instances"][0].get("identity").is_some())
            .count();
        let expected = if v == TfVersion::V1_15 { 2 } else { 0 };
        assert_eq!(
            declared, expected,
            "identities as Terraform wrote {scope}: {stored}"
        );
    }
    let ids: BTreeSet<String> = ["shared-logs-7f3a", "123456789012", "deployer-5e2c"]
        .map(str::to_owned)
        .into_iter()
        .collect();
    let bucket = vec![
        ("east".to_owned(), "aws_s3_bucket.logs".to_owned()),
        ("west".to_owned(), "aws_s3_bucket.archive".to_owned()),
    ];
    let role = vec![
        ("east".to_owned(), "aws_iam_role.deploy".to_owned()),
        ("west".to_owned(), "aws_iam_role.deploy".to_owned()),
    ];
    let expected = if v == TfVersion::V1_15 {
        vec![role, bucket]
    } else {
        vec![bucket]
    };
    let mut found = env.conflicts(&ids);
    found.sort();
    let mut expected = expected;
    expected.sort();
    assert_eq!(found, expected);
    assert_eq!(
        env.get("/api/overview", &ids)["conflicts"],
        expected.len() as u64
    );
}

macro_rules! both_versions {
    ($($scenario:ident),* $(,)?) => {
        mod terraform_1_11 {
            use super::*;
            $(#[test] fn $scenario() { super::$scenario(TfVersion::V1_11) })*
        }
        mod terraform_1_15 {
            use super::*;
            $(#[test] fn $scenario() { super::$scenario(TfVersion::V1_15) })*
        }
    };
}

both_versions!(
    search_conflicts_rollback_and_delete,
    conflicts_are_objects_managed_twice_not_names_shared_across_scopes,
);
