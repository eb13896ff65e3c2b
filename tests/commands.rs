//! The `hegemony-state` commands against the real server: the import script over a tree of
//! state files, and the management commands (`states ...`).

use std::path::Path;
use std::process::Output;

use hegemony_state_blackbox::*;
use serde_json::Value;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The row of the summary table for `name`.
fn row<'a>(summary: &'a str, name: &str) -> &'a str {
    summary
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row for {name} in\n{summary}"))
}

/// 200 state files across nested folders, some broken, some colliding, some
/// `terraform.tfstate` in folders: the names, the summary and the exit code are right, and
/// a second run imports nothing new.
#[test]
fn the_import_script_names_checks_and_imports_a_tree() {
    let server = Server::start();
    let token = server.token("acme", "alice", "operator");
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    for i in 0..100 {
        write(
            &root.join(format!("flat/s{i:03}.tfstate")),
            &state_doc(i + 1, &format!("lin-s{i}"), "x"),
        );
    }
    for i in 0..60 {
        write(
            &root.join(format!("deep/er/t{i:02}.json")),
            &state_doc(3, &format!("lin-t{i}"), "y"),
        );
    }
    for i in 0..20 {
        write(
            &root.join(format!("envs/env{i:02}/terraform.tfstate")),
            &state_doc(1, &format!("lin-e{i}"), "z"),
        );
    }
    for i in 0..10 {
        write(
            &root.join(format!("broken/b{i}.tfstate")),
            if i % 2 == 0 {
                "{not json"
            } else {
                r#"{"version":4}"#
            },
        );
    }
    for i in 0..5 {
        write(
            &root.join(format!("dup1/same{i}.tfstate")),
            &state_doc(1, "d", "1"),
        );
        write(
            &root.join(format!("dup2/same{i}.json")),
            &state_doc(1, "d", "2"),
        );
    }
    write(&root.join("ignored/notes.txt"), "not a state file");
    let root_arg = root.to_str().unwrap();

    let dry = server.cli(&token, &["import", root_arg, "--dry-run", "--jobs", "8"]);
    let summary = stdout(&dry);
    assert!(
        !dry.status.success(),
        "refusals make the exit code non-zero"
    );
    assert!(
        summary.contains(
            "dry run: 180 would be imported, 0 already there, 20 refused; nothing was written"
        ),
        "{summary}"
    );
    let api = Api::new(&server);
    let listed = api.list(&token);
    assert!(
        listed["states"].as_array().unwrap().is_empty(),
        "a dry run writes nothing"
    );

    let first = server.cli(&token, &["import", root_arg, "--jobs", "8"]);
    let summary = stdout(&first);
    assert!(!first.status.success());
    assert!(
        summary.contains("imported 180, already there 0, refused 20"),
        "{summary}"
    );
    assert!(row(&summary, "s007").contains("imported"));
    assert!(row(&summary, "t59").contains("imported"));
    assert!(
        row(&summary, "envs-env03").contains("imported"),
        "terraform.tfstate is named after its folders"
    );
    assert!(row(&summary, "b0").contains("invalid JSON"));
    assert!(row(&summary, "b1").contains("no \"serial\""));
    assert!(row(&summary, "same3").contains("name collision with"));
    // Every imported state kept its file's serial and lineage.
    let net = api.json("GET", "/api/tf-states/s041", &token);
    assert_eq!(
        (net["serial"].as_u64(), net["lineage"].as_str()),
        (Some(42), Some("lin-s41"))
    );

    let second = server.cli(&token, &["import", root_arg]);
    let summary = stdout(&second);
    assert!(
        summary.contains("imported 0, already there 180, refused 20"),
        "{summary}"
    );
    assert!(row(&summary, "s007").contains("already there"));

    // Once the refused files are gone, a third run has nothing new and says so.
    std::fs::remove_dir_all(root.join("broken")).unwrap();
    std::fs::remove_dir_all(root.join("dup2")).unwrap();
    let third = server.cli(&token, &["import", root_arg]);
    let summary = stdout(&third);
    assert!(third.status.success(), "{summary}");
    assert!(
        summary.contains("imported 5, already there 180, refused 0"),
        "the dup1 names are free now: {summary}"
    );
    let fourth = server.cli(&token, &["import", root_arg]);
    let summary4 = stdout(&fourth);
    assert!(fourth.status.success(), "{summary}\n{summary4}");
    assert!(
        summary4.contains("nothing new to import: all 185 states are already there"),
        "{summary4}"
    );
}

#[test]
fn the_import_script_refuses_a_taken_name_with_other_content_and_names_single_files() {
    let server = Server::start();
    let token = server.token("acme", "alice", "operator");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("prod.tfstate");
    write(&file, &state_doc(5, "lin", "a"));
    let out = server.cli(
        &token,
        &["import", file.to_str().unwrap(), "--name", "network-core"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(row(&stdout(&out), "network-core").contains("imported"));
    write(&file, &state_doc(6, "lin", "b"));
    let out = server.cli(
        &token,
        &["import", file.to_str().unwrap(), "--name", "network-core"],
    );
    assert!(!out.status.success());
    assert!(row(&stdout(&out), "network-core").contains("other content"));
    write(&dir.path().join("other.tfstate"), &state_doc(1, "o", "c"));
    let out = server.cli(
        &token,
        &[
            "import",
            dir.path().to_str().unwrap(),
            "--name",
            "x",
            "--dry-run",
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--name names one state"));
    let bad = server.cli("hgs_wrong", &["import", file.to_str().unwrap()]);
    assert!(!bad.status.success());
    assert!(stdout(&bad).contains("unknown token"), "{}", stdout(&bad));
}

#[test]
fn the_states_commands_show_tables_json_and_confirm_destructive_actions() {
    let server = Server::start();
    let op = server.token("acme", "alice", "operator");
    let admin = server.token("acme", "root", "admin");
    let api = Api::new(&server);
    for serial in 1..=2 {
        api.post_state(
            &op,
            "net",
            None,
            state_doc(serial, "lin", &serial.to_string()),
        );
    }
    let list = server.cli(&op, &["states", "list"]);
    let text = stdout(&list);
    assert!(
        text.starts_with("NAME") && row(&text, "net").contains(" 2 "),
        "{text}"
    );
    let json: Value =
        serde_json::from_slice(&server.cli(&op, &["states", "list", "--json"]).stdout).unwrap();
    assert_eq!(json["states"][0]["name"], "net");
    let show = stdout(&server.cli(&op, &["states", "show", "net"]));
    assert!(
        show.contains("latest version") && show.contains("download, outputs, rollback"),
        "{show}"
    );
    let versions = stdout(&server.cli(&op, &["states", "versions", "net"]));
    assert!(
        versions.lines().count() == 3 && versions.contains("unlocked_write"),
        "{versions}"
    );
    let download = server.cli(&op, &["states", "download", "net", "--version", "1"]);
    assert_eq!(stdout(&download), state_doc(1, "lin", "1"));

    // Destructive commands need --yes without a terminal.
    let refused = server.cli(&op, &["states", "rollback", "net", "1"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--yes"));
    let rolled = server.cli(&op, &["states", "rollback", "net", "1", "--yes"]);
    assert!(
        stdout(&rolled).contains("it is now version 3 with serial 3"),
        "{}",
        stdout(&rolled)
    );
    let audit = stdout(&server.cli(&admin, &["states", "audit", "net"]));
    assert!(
        audit.contains("state.rolled_back") && audit.contains("version.downloaded"),
        "{audit}"
    );
    let forbidden = server.cli(&op, &["states", "delete", "net", "--yes"]);
    assert!(!forbidden.status.success());
    assert!(String::from_utf8_lossy(&forbidden.stderr).contains("tf_state:manage"));
    assert!(server
        .cli(&admin, &["states", "force-unlock", "net", "--yes"])
        .status
        .success());
    assert!(server
        .cli(&admin, &["states", "delete", "net", "--yes"])
        .status
        .success());
    let gone = server.cli(&op, &["states", "show", "net"]);
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("state net not found"));
}

/// `states deleted` lists what a delete kept, `states restore` brings it back (under a new
/// name when a state took its name, the taken name refused in words), `states purge` asks
/// to confirm and ends it; operators are refused all three.
#[test]
fn the_deleted_states_commands_list_restore_and_purge() {
    let server = Server::start();
    let op = server.token("acme", "alice", "operator");
    let admin = server.token("acme", "root", "admin");
    let api = Api::new(&server);
    for serial in 1..=2 {
        let doc = state_doc(serial, "lin", &serial.to_string());
        api.post_state(&op, "net", None, doc);
    }
    let deleted = server.cli(&admin, &["states", "delete", "net", "--yes"]);
    assert!(
        stdout(&deleted).contains("states deleted"),
        "{}",
        stdout(&deleted)
    );
    let listed = stdout(&server.cli(&admin, &["states", "deleted"]));
    let net = listed
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("net"))
        .unwrap_or_else(|| panic!("no row for net in\n{listed}"));
    assert!(listed.starts_with("ID") && net.contains(" 2 "), "{listed}");
    let id = net.split_whitespace().next().unwrap().to_owned();
    let refused = server.cli(&op, &["states", "deleted"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("admin role"));

    api.post_state(&op, "net", None, state_doc(1, "other", "newcomer"));
    let taken = server.cli(&admin, &["states", "restore", &id]);
    assert!(!taken.status.success());
    let why = String::from_utf8_lossy(&taken.stderr);
    assert!(why.contains("state net exists"), "{why}");
    let restored = server.cli(&admin, &["states", "restore", &id, "--name", "net-old"]);
    assert_eq!(
        stdout(&restored),
        "Restored net-old with its 2 versions; version 2 is current.\n"
    );
    let versions = stdout(&server.cli(&op, &["states", "versions", "net-old"]));
    assert_eq!(versions.lines().count(), 3, "{versions}");

    assert!(server
        .cli(&admin, &["states", "delete", "net-old", "--yes"])
        .status
        .success());
    let json: Value =
        serde_json::from_slice(&server.cli(&admin, &["states", "deleted", "--json"]).stdout)
            .unwrap();
    let id = json["deleted_states"][0]["id"].as_str().unwrap().to_owned();
    let unconfirmed = server.cli(&admin, &["states", "purge", &id]);
    assert!(String::from_utf8_lossy(&unconfirmed.stderr).contains("--yes"));
    let purged = stdout(&server.cli(&admin, &["states", "purge", &id, "--yes"]));
    assert!(
        purged.starts_with("Purged net-old (2 versions)"),
        "{purged}"
    );
    let none = stdout(&server.cli(&admin, &["states", "deleted"]));
    assert_eq!(none, "No deleted states are kept.\n");
}

/// The first run of a new state holds it before any version exists: `states list` and
/// `states show` name the state, no version, and the hold with its run, so the 423 everyone
/// else gets has a visible cause; `states force-unlock` ends it.
#[test]
fn the_states_commands_show_a_hold_on_a_state_with_no_version_yet() {
    let server = Server::start();
    let admin = server.token("acme", "root", "admin");
    let platform = server.platform_token();
    let api = Api::new(&server);
    let minted = api.post_json(
        "/api/runs/r1/tf-state-tokens",
        &platform,
        &serde_json::json!({"org": "acme", "state": "net", "step": "plan", "attempt": 1, "kind": "plan", "timeout_seconds": 600, "hold": true}),
    );
    assert_eq!(minted.status(), 201);
    let plan = minted.json::<Value>().unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(api.lock(&plan, "net", &lock_doc("P")).status(), 200);
    assert_eq!(api.unlock(&plan, "net", &lock_doc("P")).status(), 200);

    let list = stdout(&server.cli(&admin, &["states", "list"]));
    let net = row(&list, "net");
    assert!(net.contains("hold-r1 (run r1) since"), "{list}");
    let show = stdout(&server.cli(&admin, &["states", "show", "net"]));
    assert!(show.contains("latest version      -"), "{show}");
    assert!(
        show.contains("hold                hold-r1 (run r1) since"),
        "{show}"
    );
    assert!(show.contains("you may             force_unlock"), "{show}");
    assert!(server
        .cli(&admin, &["states", "force-unlock", "net", "--yes"])
        .status
        .success());
    let list = stdout(&server.cli(&admin, &["states", "list"]));
    assert!(!list.contains("net"), "nothing is left to list: {list}");
}

/// An OpenTofu-encrypted state file, imported by the command and by the import route, is
/// stored exactly as it is and marked as such in the list, the state and its versions.
#[test]
fn an_imported_opentofu_encrypted_file_is_stored_as_it_is_and_marked() {
    let server = Server::start();
    let op = server.token("acme", "alice", "operator");
    let api = Api::new(&server);
    let encrypted = "{\"serial\":3,\"lineage\":\"4e2f-uuid\",\"meta\":{\"key_provider.pbkdf2.main\":\"eyJzYWx0IjoiYSJ9\"},\"encrypted_data\":\"q83vEjRWeJA=\",\"encryption_version\":\"v0\"}\n";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("vault.tfstate");
    write(&file, encrypted);
    let imported = server.cli(&op, &["import", file.to_str().unwrap()]);
    assert!(imported.status.success(), "{}", stdout(&imported));
    let routed = api
        .request("POST", "/api/tf-states/vault-b/import", Some(&op))
        .body(encrypted)
        .send()
        .unwrap();
    assert_eq!(routed.status(), 201);

    for name in ["vault", "vault-b"] {
        let read = api.get_state(&op, name);
        assert_eq!(read.status(), 200);
        assert_eq!(read.text().unwrap(), encrypted, "{name}: stored as it is");
        let listed = api.listed(&op, name);
        assert_eq!(listed["opentofu_encrypted"], true, "{listed}");
        assert_eq!(listed["serial"], 3);
        assert_eq!(listed["lineage"], "4e2f-uuid");
        let state = api.json("GET", &format!("/api/tf-states/{name}"), &op);
        assert_eq!(state["opentofu_encrypted"], true, "{state}");
        let versions = api.json("GET", &format!("/api/tf-states/{name}/versions"), &op);
        assert_eq!(versions["versions"][0]["opentofu_encrypted"], true);
        assert_eq!(versions["versions"][0]["source"], "import");
        let download = server.cli(&op, &["states", "download", name]);
        assert_eq!(stdout(&download), encrypted);
    }
    let show = stdout(&server.cli(&op, &["states", "show", "vault"]));
    assert!(show.contains("opentofu-encrypted  true"), "{show}");
}

/// A state of a role with `policy` and `tags` and, when asked, a queue and a bucket.
fn infra_state(serial: u64, policy: &str, queue: bool, bucket: bool) -> String {
    let mut resources = vec![format!(
        r#"{{"mode":"managed","type":"aws_iam_role","name":"app","provider":"p","instances":[{{"attributes":{{"policy":"{policy}","tags":{{"team":"{policy}"}}}}}}]}}"#
    )];
    if queue {
        resources.push(r#"{"mode":"managed","type":"aws_sqs_queue","name":"old","provider":"p","instances":[{"attributes":{"name":"q"}}]}"#.into());
    }
    if bucket {
        resources.push(r#"{"mode":"managed","type":"aws_s3_bucket","name":"receipts","provider":"p","instances":[{"attributes":{"bucket":"r"}}]}"#.into());
    }
    format!(
        r#"{{"version":4,"terraform_version":"1.11.4","serial":{serial},"lineage":"lin","outputs":{{"url":{{"value":"{policy}","type":"string","sensitive":{}}}}},"resources":[{}]}}"#,
        serial > 1,
        resources.join(",")
    )
}

/// `states outputs` prints the latest version's outputs as a table, a sensitive one marked
/// and never its value; `--json` gives the API's answer; a token whose role the allocation
/// leaves out is refused, naming the permission.
#[test]
fn the_outputs_command_shows_names_types_and_plain_values() {
    let server = Server::start();
    let op = server.token("acme", "alice", "operator");
    let admin = server.token("acme", "root", "admin");
    let viewer = server.token("acme", "vic", "viewer");
    let api = Api::new(&server);
    let secret = "planted-secret-c3a9";
    let body = format!(
        r#"{{"version":4,"terraform_version":"1.11.4","serial":4,"lineage":"lin","outputs":{{"password":{{"value":"{secret}","type":"string","sensitive":true}},"subnets":{{"value":["a","b"],"type":["list","string"]}},"url":{{"value":"https://db.example.com","type":"string"}}}},"resources":[]}}"#
    );
    assert_eq!(api.post_state(&op, "db", None, body).status(), 200);
    let out = server.cli(&viewer, &["states", "outputs", "db"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout(&out),
        "db: serial 4, lineage lin

NAME      TYPE          VALUE
password  string        (sensitive)
subnets   list(string)  [\"a\",\"b\"]
url       string        https://db.example.com
"
    );
    let json = server.cli(&viewer, &["states", "outputs", "db", "--json"]);
    let answer: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        answer,
        serde_json::json!({"serial": 4, "lineage": "lin", "outputs": {
            "password": {"type": "string", "sensitive": true},
            "subnets": {"type": ["list", "string"], "value": ["a", "b"]},
            "url": {"type": "string", "value": "https://db.example.com"}
        }})
    );
    assert!(!stdout(&json).contains(secret) && !stdout(&out).contains(secret));
    let moved = api
        .request("PUT", "/api/org/permissions", Some(&admin))
        .body(r#"{"tf_state:outputs": "operator"}"#)
        .send()
        .unwrap();
    assert_eq!(moved.status(), 200);
    let refused = server.cli(&viewer, &["states", "outputs", "db"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("tf_state:outputs"), "{stderr}");
}

/// `states changes` prints the latest version's changes like a plan, `--since` names the
/// other side, `--json` gives the API's answer, and `states versions` shows the counts.
#[test]
fn the_changes_command_reads_like_a_plan() {
    let server = Server::start();
    let op = server.token("acme", "alice", "operator");
    let api = Api::new(&server);
    for body in [
        infra_state(1, "p1", true, false),
        infra_state(2, "p2", false, true),
    ] {
        assert_eq!(api.post_state(&op, "net", None, body).status(), 200);
    }
    let out = server.cli(&op, &["states", "changes", "net"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout(&out),
        "net: version 2 (serial 2) since version 1 (serial 1)

~ aws_iam_role.app (policy, tags.team)
+ aws_s3_bucket.receipts
- aws_sqs_queue.old

Outputs:
  ~ url (now sensitive)

+1 ~1 -1  (resource instances added, changed, removed)
"
    );
    let back = stdout(&server.cli(&op, &["states", "changes", "net", "1", "--since", "2"]));
    assert!(
        back.contains("+ aws_sqs_queue.old") && back.contains("- aws_s3_bucket.receipts"),
        "{back}"
    );
    let json: Value = serde_json::from_slice(
        &server
            .cli(&op, &["states", "changes", "net", "2", "--json"])
            .stdout,
    )
    .unwrap();
    assert_eq!(json["counts"]["changed"], 1);
    assert_eq!(
        json["resources"]["changed"][0]["attributes"],
        serde_json::json!(["policy", "tags.team"])
    );
    let versions = stdout(&server.cli(&op, &["states", "versions", "net"]));
    let header = versions.lines().next().unwrap();
    assert!(
        header.contains("TERRAFORM") && header.contains("INSTANCES"),
        "{versions}"
    );
    assert!(row(&versions, "1").contains(" 1.11.4 "), "{versions}");
    let counts: Vec<&str> = versions
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().nth(4).unwrap())
        .collect();
    assert_eq!(counts, ["2", "2"], "{versions}");
    let missing = server.cli(&op, &["states", "changes", "net", "9"]);
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("version 9 of state net not found"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
}

/// `hegemony-state sweep` runs one pass on the store the server uses, while it runs.
#[test]
fn the_sweep_command_prunes_past_the_kept_versions() {
    let server = Server::start_with(&[("HEGEMONY_TF_STATE_KEEP_VERSIONS", "2")]);
    let op = server.token("acme", "alice", "operator");
    let api = Api::new(&server);
    for serial in 1..=4 {
        let r = api.post_state(&op, "net", None, state_doc(serial, "lin", "x"));
        assert_eq!(r.status(), 200);
    }
    let out = server.cli(&op, &["sweep"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout(&out).contains("dropped 2 versions"),
        "{}",
        stdout(&out)
    );
    let versions = api.json("GET", "/api/tf-states/net/versions", &op);
    let numbers: Vec<u64> = versions["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [4, 3]);
    let again = server.cli(&op, &["sweep"]);
    assert!(stdout(&again).contains("dropped 0 versions"));
}

/// `token list --json` names each token's owner and id, and `token revoke` with that id
/// stops the token at the server's next request, while it runs.
#[test]
fn token_revoke_stops_a_listed_token_at_the_next_request() {
    let server = Server::start();
    let alice = server.token("acme", "alice", "operator");
    let api = Api::new(&server);
    let list = |token: &str| {
        api.request("GET", "/api/tf-states", Some(token))
            .send()
            .unwrap()
            .status()
    };
    assert_eq!(list(&alice), 200);
    let tokens = server.cli("", &["token", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&tokens.stdout).unwrap();
    let id = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["user"] == "alice")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(server.cli("", &["token", "revoke", &id]).status.success());
    assert_eq!(
        list(&alice),
        401,
        "a revocation takes effect at the next request"
    );
}

/// A state of S3 buckets with the `buckets` names (each its `id`, the identity) beside a
/// VPC in a module, with a planted secret in their attributes.
fn bucket_state(buckets: &[&str], secret: &str) -> String {
    let instances: Vec<String> = buckets
        .iter()
        .enumerate()
        .map(|(i, b)| {
            format!(
                r#"{{"index_key":{i},"attributes":{{"id":"{b}","bucket":"{b}","policy":"{secret}"}}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"lin","outputs":{{}},"resources":[
            {{"mode":"managed","type":"aws_s3_bucket","name":"logs","provider":"provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{}]}},
            {{"module":"module.net","mode":"managed","type":"aws_vpc","name":"main","provider":"provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{{"attributes":{{"arn":"arn:aws:ec2:eu-west-1:123456789012:vpc/vpc-{secret}","id":"vpc-{secret}"}}}}]}}
        ]}}"#,
        instances.join(",")
    )
}

/// `resources search` finds instances by part of an address and by filters, as a table and
/// as JSON; `resources conflicts` names the object two states manage; `overview` counts the
/// org; no attribute value (a planted secret) appears in any of them.
#[test]
fn the_inventory_commands_search_list_conflicts_and_print_the_overview() {
    let server = Server::start();
    let op = server.token("acme", "alice", "operator");
    let viewer = server.token("acme", "vic", "viewer");
    let api = Api::new(&server);
    let secret = "planted-secret-5e1f";
    let network = bucket_state(&["b-shared", "b-net"], secret);
    let app = bucket_state(&["b-shared"], secret).replace("vpc-", "vpc-app-");
    assert_eq!(api.post_state(&op, "network", None, network).status(), 200);
    assert_eq!(api.post_state(&op, "app", None, app).status(), 200);

    let found = server.cli(&viewer, &["resources", "search", "VPC"]);
    assert!(
        found.status.success(),
        "{}",
        String::from_utf8_lossy(&found.stderr)
    );
    assert_eq!(
        stdout(&found),
        "STATE    ADDRESS                  TYPE     PROVIDER                             VERSION
app      module.net.aws_vpc.main  aws_vpc  registry.terraform.io/hashicorp/aws  1
network  module.net.aws_vpc.main  aws_vpc  registry.terraform.io/hashicorp/aws  1
"
    );
    let json = server.cli(
        &viewer,
        &[
            "resources",
            "search",
            "--type",
            "aws_s3_bucket",
            "--state",
            "network",
            "--json",
        ],
    );
    let answer: Value = serde_json::from_slice(&json.stdout).unwrap();
    let addresses: Vec<&str> = answer["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["address"].as_str().unwrap())
        .collect();
    assert_eq!(
        addresses,
        ["aws_s3_bucket.logs[0]", "aws_s3_bucket.logs[1]"]
    );
    let first = server.cli(&viewer, &["resources", "search", "--limit", "2", "--json"]);
    let answer: Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(answer["resources"].as_array().unwrap().len(), 2);
    assert!(String::from_utf8_lossy(&first.stderr).contains("the first 2 instances; more match"));
    let none = server.cli(&viewer, &["resources", "search", "no-such-thing"]);
    assert!(none.status.success());
    assert_eq!(stdout(&none), "");
    assert!(String::from_utf8_lossy(&none.stderr).contains("no resource matches"));

    let conflicts = server.cli(&viewer, &["resources", "conflicts"]);
    assert!(
        conflicts.status.success(),
        "{}",
        String::from_utf8_lossy(&conflicts.stderr)
    );
    assert_eq!(
        stdout(&conflicts),
        "1 object managed by more than one state:

aws_s3_bucket
  STATE    ADDRESS
  app      aws_s3_bucket.logs[0]
  network  aws_s3_bucket.logs[0]
"
    );
    let for_app = server.cli(
        &viewer,
        &["resources", "conflicts", "--state", "app", "--json"],
    );
    let answer: Value = serde_json::from_slice(&for_app.stdout).unwrap();
    assert_eq!(answer["conflicts"].as_array().unwrap().len(), 1);

    let overview = server.cli(&viewer, &["overview"]);
    assert!(
        overview.status.success(),
        "{}",
        String::from_utf8_lossy(&overview.stderr)
    );
    let text = stdout(&overview);
    assert!(
        text.starts_with("org acme: 2 states, 2 versions, 5 resources, 1 managed by two states\n"),
        "{text}"
    );
    assert!(text.contains("aws_s3_bucket  3"), "{text}");
    let json = server.cli(&viewer, &["overview", "--json"]);
    let view: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(view["resources"], 5);

    for out in [&found, &json, &conflicts, &for_app, &overview] {
        let all = format!("{}{}", stdout(out), String::from_utf8_lossy(&out.stderr));
        assert!(!all.contains(secret), "{all}");
    }

    // As many asked for as match: nothing more is said to match.
    let every = server.cli(&viewer, &["resources", "search", "--limit", "5", "--json"]);
    let answer: Value = serde_json::from_slice(&every.stdout).unwrap();
    assert_eq!(answer["resources"].as_array().unwrap().len(), 5);
    let said = String::from_utf8_lossy(&every.stderr);
    assert!(!said.contains("more match"), "{said}");

    // A name carrying an escape sequence (a writer retitling the reader's terminal) is
    // shown escaped, in a search's table and in a conflict's heading alike.
    let odd = r#"{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"lin","outputs":{},"resources":[
        {"mode":"managed","type":"aws_vpc\u001b[2J","name":"x\u001b]0;owned\u0007","provider":"provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{"attributes":{"arn":"arn:aws:ec2:eu-west-1:1:vpc/vpc-odd"}}]}]}"#;
    assert_eq!(api.post_state(&op, "odd", None, odd).status(), 200);
    assert_eq!(api.post_state(&op, "odd-copy", None, odd).status(), 200);
    let found = server.cli(&viewer, &["resources", "search", "owned"]);
    assert!(found.status.success());
    let conflicts = server.cli(&viewer, &["resources", "conflicts", "--state", "odd"]);
    assert!(conflicts.status.success());
    for out in [&found, &conflicts] {
        let text = stdout(out);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text:?}"
        );
        assert!(text.contains(r"aws_vpc\u{1b}[2J"), "{text}");
    }
    assert!(
        stdout(&found).contains(r"aws_vpc\u{1b}[2J.x\u{1b}]0;owned\u{7}"),
        "{}",
        stdout(&found)
    );
}
