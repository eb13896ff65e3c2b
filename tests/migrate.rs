//! `hegemony-state migrate` between a local store and an AWS deployment on the emulator: a
//! store made by real Terraform moved to AWS, where Terraform continues with the same token
//! and plans no changes; a migration killed part way (between commits and inside one) and run
//! again copies each version once; ended runs, an org without a token and a write during the
//! move, after which nothing refused on the source is allowed on the target;
//! a dry run writes nothing; a locked state is refused, then skipped with `--skip-locked`;
//! and the way back, from AWS to a new local store, keeps the states and the tokens. An Octo
//! app state sealed on the local server reads the same through the AWS-backed server, every
//! archive, with the same token, and a deleted state moved there is restored there.

use std::process::{Command, Stdio};

use hegemony_state_blackbox::aws::Deployment;
use hegemony_state_blackbox::*;
use serde_json::Value;

/// Runs `hegemony-state migrate ARGS` with the deployment's settings (and `extra`), the local
/// store's key in its key file; returns whether it succeeded and what it printed.
fn migrate(deployment: &Deployment, args: &[&str], extra: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(bin());
    cmd.arg("migrate")
        .args(args)
        .env_remove("HEGEMONY_TF_STATE_ENCRYPTION_KEY")
        .env_remove("HEGEMONY_TF_STATE_DATA_DIR")
        .envs(deployment.env())
        .envs(extra.iter().copied())
        .stdin(Stdio::null());
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// A state's versions as the API lists them: (version, serial, SHA-256).
fn versions(api: &Api, token: &str, name: &str) -> Vec<(u64, u64, String)> {
    let listed = api.json("GET", &format!("/api/tf-states/{name}/versions"), token);
    listed["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v: &Value| {
            (
                v["version"].as_u64().unwrap(),
                v["serial"].as_u64().unwrap(),
                v["sha256"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn data_dir(server: &Server) -> String {
    server.data_dir().to_str().unwrap().to_owned()
}

#[test]
fn terraform_continues_on_aws_after_a_migration_killed_part_way_and_run_again() {
    let server = Server::start();
    let token = server.token("default", "alice", "operator");
    let tf = Tf::new(TfVersion::V1_11, &server, "net", &token);
    tf.init();
    for value in ["one", "two", "three"] {
        let var = format!("value={value}");
        tf.ok(&["apply", "-auto-approve", "-no-color", "-var", &var]);
    }
    let api = Api::new(&server);
    for serial in 1..=3 {
        let doc = state_doc(serial, "other", &format!("v{serial}"));
        assert_eq!(api.post_state(&token, "other", None, doc).status(), 200);
    }
    let (net, other) = (
        versions(&api, &token, "net"),
        versions(&api, &token, "other"),
    );
    let total = net.len() + other.len();
    assert!(net.len() >= 3, "{net:?}");
    let dir = data_dir(&server);
    let aws = Deployment::create();
    let args = ["--from", "local", "--to", "aws", "--data-dir", &dir];

    let dry: Vec<&str> = args.iter().copied().chain(["--dry-run"]).collect();
    let (ok, said) = migrate(&aws, &dry, &[]);
    assert!(ok, "{said}");
    assert!(
        said.contains(&format!(
            "versions: would copy {total}, already on the target 0"
        )),
        "{said}"
    );
    let listed = Command::new(bin())
        .args(["token", "list", "--json"])
        .envs(aws.env())
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed, serde_json::json!([]), "a dry run writes nothing");

    // Dead between two commits, then inside one (the third version's sealed bytes written,
    // its commit not made).
    let crash = [("HEGEMONY_MIGRATE_CRASH_AT", "copied:1")];
    let (ok, said) = migrate(&aws, &args, &crash);
    assert!(!ok, "the first run stops dead after one version: {said}");
    let crash = [("HEGEMONY_MIGRATE_CRASH_AT", "sealed:2")];
    let (ok, said) = migrate(&aws, &args, &crash);
    assert!(
        !ok,
        "the second stops dead inside its second commit: {said}"
    );
    let (ok, said) = migrate(&aws, &args, &[]);
    assert!(ok, "{said}");
    assert!(
        said.contains(&format!(
            "versions: copied {}, already on the target 2",
            total - 2
        )),
        "each version is copied once, over the three runs: {said}"
    );
    assert!(
        said.contains(&format!("Verified {total} versions")),
        "{said}"
    );

    let container = aws.container(&[]);
    let api = Api::new(&container);
    assert_eq!(versions(&api, &token, "net"), net, "the same versions");
    assert_eq!(versions(&api, &token, "other"), other);
    let tf = Tf::new(TfVersion::V1_11, &container, "net", &token);
    tf.init();
    let plan = tf.run(&[
        "plan",
        "-detailed-exitcode",
        "-no-color",
        "-var",
        "value=three",
    ]);
    assert!(
        plan.ok,
        "the migrated state is the configuration's: no changes\n{}",
        plan.output()
    );
    tf.ok(&["apply", "-auto-approve", "-no-color", "-var", "value=four"]);
    let (ok, said) = migrate(&aws, &args, &[]);
    assert!(ok, "{said}");
    assert!(
        said.contains(&format!(
            "versions: copied 0, already on the target {total}"
        )),
        "a third run copies nothing: {said}"
    );
}

#[test]
fn a_locked_state_is_refused_then_skipped_and_the_way_back_keeps_states_and_tokens() {
    let server = Server::start();
    let token = server.token("acme", "alice", "operator");
    let api = Api::new(&server);
    for serial in 1..=3 {
        let doc = state_doc(serial, "net", &format!("v{serial}"));
        assert_eq!(api.post_state(&token, "net", None, doc).status(), 200);
    }
    let doc = state_doc(1, "busy", "b");
    assert_eq!(api.post_state(&token, "busy", None, doc).status(), 200);
    assert_eq!(api.lock(&token, "busy", &lock_doc("l-1")).status(), 200);
    let net = versions(&api, &token, "net");
    let latest = api.get_state(&token, "net").text().unwrap();
    let dir = data_dir(&server);
    let aws = Deployment::create();
    let args = ["--from", "local", "--to", "aws", "--data-dir", &dir];

    let (ok, said) = migrate(&aws, &args, &[]);
    assert!(!ok, "{said}");
    assert!(
        said.contains("acme/busy (locked, lock ID l-1)") && said.contains("--skip-locked"),
        "{said}"
    );
    let skip: Vec<&str> = args.iter().copied().chain(["--skip-locked"]).collect();
    let (ok, said) = migrate(&aws, &skip, &[]);
    assert!(
        !ok,
        "a migration that skipped a state is not complete: {said}"
    );
    assert!(said.contains("skipped: acme/busy"), "{said}");
    assert!(
        said.contains("versions: copied 3, already on the target 0"),
        "{said}"
    );
    drop(server);

    let back = tempfile::tempdir().unwrap();
    let home = back.path().join("data");
    let home = home.to_str().unwrap();
    let args = ["--from", "aws", "--to", "local", "--data-dir", home];
    let (ok, said) = migrate(&aws, &args, &[]);
    assert!(ok, "{said}");
    assert!(
        said.contains("versions: copied 3, already on the target 0"),
        "{said}"
    );
    let local = Server::start_in(back);
    let api = Api::new(&local);
    assert_eq!(
        versions(&api, &token, "net"),
        net,
        "the same token reads them"
    );
    assert_eq!(api.get_state(&token, "net").text().unwrap(), latest);
    assert_eq!(
        api.get_state(&token, "busy").status(),
        404,
        "the skipped state was never copied"
    );
}

/// Takes an app state's lock, uploads `files`, seals the change: its commit ID.
fn seal_change(api: &Api, token: &str, app: &str, files: &[(&str, &str)]) -> String {
    let r = api
        .request("POST", &format!("/api/apps/{app}/lock"), Some(token))
        .json(&serde_json::json!({"who": "ci"}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let lock: Value = r.json().unwrap();
    let lock_id = lock["lock_id"].as_str().unwrap();
    for (file, body) in files {
        let path = format!("/api/apps/{app}/locks/{lock_id}/files/{file}");
        let r = api
            .request("PUT", &path, Some(token))
            .body(body.to_string())
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "{file}");
    }
    let path = format!("/api/apps/{app}/locks/{lock_id}/seal");
    let r = api.request("POST", &path, Some(token)).send().unwrap();
    assert_eq!(r.status(), 200);
    let sealed: Value = r.json().unwrap();
    sealed["commit_id"].as_str().unwrap().to_owned()
}

fn read(api: &Api, token: &str, path: &str) -> (u16, String) {
    let r = api.request("GET", path, Some(token)).send().unwrap();
    (r.status().as_u16(), r.text().unwrap())
}

#[test]
fn an_octo_app_state_and_a_deleted_state_move_to_aws_and_read_back_there() {
    let server = Server::start();
    let token = server.token("acme", "alice", "admin");
    let api = Api::new(&server);
    for serial in 1..=2 {
        let doc = state_doc(serial, "gone", &format!("v{serial}"));
        assert_eq!(api.post_state(&token, "gone", None, doc).status(), 200);
    }
    let last = api.get_state(&token, "gone").text().unwrap();
    let deleted = api
        .request("DELETE", "/api/tf-states/gone", Some(&token))
        .send()
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let listed = api.json("GET", "/api/deleted-states", &token);
    let id = listed["deleted_states"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let first_state = state_doc(1, "checkout", "one");
    let first = seal_change(
        &api,
        &token,
        "checkout",
        &[
            ("checkout.tfstate", &first_state),
            ("notes.json", "{\"n\":1}"),
        ],
    );
    let second_state = state_doc(2, "checkout", "two");
    let second = seal_change(
        &api,
        &token,
        "checkout",
        &[("checkout.tfstate", &second_state)],
    );
    let paths = [
        format!("/api/apps/checkout/archives/{first}/files/checkout.tfstate"),
        format!("/api/apps/checkout/archives/{second}/files/notes.json"),
        "/api/apps/checkout/files/checkout.tfstate".to_owned(),
    ];
    let before: Vec<(u16, String)> = paths.iter().map(|p| read(&api, &token, p)).collect();
    assert!(
        before.iter().all(|(status, _)| *status == 200),
        "{before:?}"
    );
    assert_eq!(before[2].1, second_state);
    let dir = data_dir(&server);
    let aws = Deployment::create();
    let args = ["--from", "local", "--to", "aws", "--data-dir", &dir];

    let (ok, said) = migrate(&aws, &args, &[]);
    assert!(ok, "{said}");
    assert!(
        said.contains("app states: copied 1, already on the target 0"),
        "{said}"
    );
    assert!(
        said.contains("archives: copied 2, already on the target 0"),
        "{said}"
    );
    let container = aws.container(&[]);
    let api = Api::new(&container);
    let after: Vec<(u16, String)> = paths.iter().map(|p| read(&api, &token, p)).collect();
    assert_eq!(
        after, before,
        "every archive's files read the same, with the same token"
    );
    assert!(
        said.contains("deleted states: copied 1, already on the target 0"),
        "{said}"
    );
    assert!(
        said.contains("versions: copied 2, already on the target 0"),
        "{said}"
    );
    let listed = api.json("GET", "/api/deleted-states", &token);
    assert_eq!(listed["deleted_states"][0]["id"], id.as_str(), "{listed}");
    let (ok, said) = migrate(&aws, &args, &[]);
    assert!(ok, "{said}");
    assert!(
        said.contains("deleted states: copied 0, already on the target 1"),
        "{said}"
    );
    let restored = api.json("POST", &format!("/api/deleted-states/{id}/restore"), &token);
    assert_eq!(restored["versions"], 2, "{restored}");
    assert_eq!(api.get_state(&token, "gone").text().unwrap(), last);
    let (ok, said) = migrate(&aws, &args, &[]);
    assert!(ok, "{said}");
    assert!(
        said.contains("archives: copied 0, already on the target 2"),
        "{said}"
    );
}

/// The whole move: a store with an ended run (its step token refused), an org whose
/// only token is gone (swept after it expired), and a version written while the migration
/// runs. The run that missed the write fails naming it; the next copies it; then every
/// source version reads back on the target, and what the source refuses the target refuses.
#[test]
fn ended_runs_an_org_without_tokens_and_a_write_during_the_move_all_arrive() {
    let server = Server::start_with(&[("HEGEMONY_TF_STATE_RUN_END_GRACE_SECONDS", "0")]);
    let admin = server.token("acme", "alice", "admin");
    let platform = server.platform_token();
    let api = Api::new(&server);
    for serial in 1..=3 {
        let doc = state_doc(serial, "net", &format!("v{serial}"));
        assert_eq!(api.post_state(&admin, "net", None, doc).status(), 200);
    }
    let quiet = server.token("quiet", "bob", "operator");
    let doc = state_doc(1, "dns", "q");
    assert_eq!(api.post_state(&quiet, "dns", None, doc).status(), 200);
    let mint = |run: &str| {
        let body = serde_json::json!({"org": "acme", "state": "net", "step": "plan", "attempt": 1, "kind": "plan", "timeout_seconds": 600});
        let r = api.post_json(
            &format!("/api/runs/{run}/tf-state-tokens"),
            &platform,
            &body,
        );
        assert_eq!(r.status(), 201, "{}", r.text().unwrap());
        r.json::<Value>().unwrap()["token"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let step = mint("run-1");
    let end = api.post_json("/api/runs/run-1/end", &platform, &serde_json::json!({}));
    assert_eq!(end.status().as_u16(), 200, "{}", end.text().unwrap());
    assert_eq!(
        api.get_state(&step, "net").status(),
        401,
        "refused on the source"
    );
    let dir = data_dir(&server);
    // quiet's only token swept, as the sweeper drops an expired one: the org holds a state
    // and no token.
    let catalog = server
        .data_dir()
        .join(hegemony_state::adapters::local::CATALOG_FILE);
    let conn = rusqlite::Connection::open(&catalog).unwrap();
    let gone = conn
        .execute(
            "DELETE FROM tokens WHERE json_extract(record, '$.org') = 'quiet'",
            [],
        )
        .unwrap();
    assert_eq!(gone, 1);
    drop(conn);

    let aws = Deployment::create();
    let args = ["--from", "local", "--to", "aws", "--data-dir", &dir];
    let mut paused = Command::new(bin())
        .arg("migrate")
        .args(args)
        .env_remove("HEGEMONY_TF_STATE_ENCRYPTION_KEY")
        .env_remove("HEGEMONY_TF_STATE_DATA_DIR")
        .envs(aws.env())
        .env("HEGEMONY_MIGRATE_PAUSE_AT", "copied:1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(paused.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("paused") {
        line.clear();
        let read = std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
        assert!(read > 0, "the migration ended before its pause");
    }
    // During the move: a fourth version of net, whose first versions are being copied.
    let doc = state_doc(4, "net", "v4");
    assert_eq!(api.post_state(&admin, "net", None, doc).status(), 200);
    std::io::Write::write_all(&mut paused.stdin.take().unwrap(), b"\n").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let out = paused.wait_with_output().unwrap();
    let said = format!("{}{rest}", String::from_utf8_lossy(&out.stdout));
    assert!(
        !out.status.success(),
        "a run that missed a write is not complete: {said}"
    );
    assert!(
        said.contains("changed during the move: state acme/net: version 4 on the source"),
        "{said}"
    );
    let (ok, said) = migrate(&aws, &args, &[]);
    assert!(ok, "{said}");
    assert!(
        said.contains("versions: copied 1, already on the target 4"),
        "{said}"
    );
    assert!(
        said.contains("org quiet: copied/already there: tokens 0/0, states 0/1"),
        "{said}"
    );
    assert!(
        said.contains("runs: copied 0, already on the target 1"),
        "{said}"
    );

    // The target runs with the source's settings: the same grace after a run's end.
    let container = aws.container(&[("HEGEMONY_TF_STATE_RUN_END_GRACE_SECONDS", "0")]);
    let there = Api::new(&container);
    assert_eq!(
        versions(&there, &admin, "net"),
        versions(&api, &admin, "net")
    );
    for v in versions(&api, &admin, "net") {
        let path = format!("/api/tf-states/net/versions/{}/content", v.0);
        assert_eq!(
            read(&there, &admin, &path),
            read(&api, &admin, &path),
            "version {}",
            v.0
        );
    }
    let quiet_admin = aws.token("quiet", "root", "admin");
    assert_eq!(
        there.get_state(&quiet_admin, "dns").status(),
        200,
        "quiet's state moved"
    );
    assert_eq!(
        there.get_state(&step, "net").status(),
        401,
        "refused on the target too"
    );
    let again = there.post_json("/api/runs/run-1/tf-state-tokens", &platform, &serde_json::json!({"org": "acme", "state": "net", "step": "apply", "attempt": 1, "kind": "apply", "timeout_seconds": 600}));
    assert_eq!(
        again.status(),
        409,
        "an ended run is not started again on the target"
    );
}
