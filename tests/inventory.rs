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

both_versions!(search_conflicts_rollback_and_delete);
