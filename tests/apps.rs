//! App states (Octo's remote state, docs/octo.md) through the real server: one change of the
//! spec's (lock, uploads every interval and at the end, the commit's journal file, seal)
//! over HTTP, a reader during the change seeing only the previous seal, and the
//! `hegemony-state apps` commands an operator and an admin use: list, archives, files,
//! download, force-unlock, delete an old archive; a seal retried after newer changes, and a
//! lock body that is not an object. Then the same change on the AWS stores
//! (the emulator): through the container front door, and through the `apps` Lambda
//! function behind the API Gateway emulator.

use std::process::Output;

use hegemony_state_blackbox::aws::Deployment;
use hegemony_state_blackbox::client::Api;
use hegemony_state_blackbox::gateway::Gateway;
use hegemony_state_blackbox::*;
use serde_json::{json, Value};

const APPLY: &str = "journal.1791692257972-3e0cd513.apply.json";
const COMMIT: &str = "journal.1791692267354-d74b1acd.commit.json";

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn lock(api: &Api, token: &str, app: &str) -> String {
    let r = api
        .request("POST", &format!("/api/apps/{app}/lock"), Some(token))
        .json(&json!({"who": "ci"}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json::<Value>().unwrap()["lock_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn upload(api: &Api, token: &str, app: &str, lock_id: &str, file: &str, body: &str) {
    let path = format!("/api/apps/{app}/locks/{lock_id}/files/{file}");
    let r = api
        .request("PUT", &path, Some(token))
        .body(body.to_owned())
        .send()
        .unwrap();
    assert_eq!(r.status(), 200, "{file}: {}", r.text().unwrap());
}

fn seal(api: &Api, token: &str, app: &str, lock_id: &str) -> Value {
    let path = format!("/api/apps/{app}/locks/{lock_id}/seal");
    let r = api.request("POST", &path, Some(token)).send().unwrap();
    assert_eq!(r.status(), 200);
    r.json().unwrap()
}

fn read(api: &Api, token: &str, path: &str) -> (u16, String) {
    let r = api.request("GET", path, Some(token)).send().unwrap();
    (r.status().as_u16(), r.text().unwrap())
}

/// The spec's change: an apply that uploads its module's state and its journal at each
/// interval and at the end, then a commit that writes Octo's records and its own journal
/// file and seals. A reader during the change sees only the previous seal.
fn one_change(api: &Api, token: &str, reader: &str, app: &str, serial: u64) -> Value {
    let sealed_path = format!("/api/apps/{app}/files/checkout.tfstate");
    let before = read(api, reader, &sealed_path);
    let lock_id = lock(api, token, app);
    for copy in 0..3 {
        let state = state_doc(serial + copy, "shop-lineage", &format!("copy {copy}"));
        upload(api, token, app, &lock_id, "checkout.tfstate", &state);
        upload(
            api,
            token,
            app,
            &lock_id,
            APPLY,
            &format!(r#"{{"entries": [{copy}]}}"#),
        );
        // Before the first seal there is none (404); after it, the previous seal's bytes.
        let seen = read(api, reader, &sealed_path);
        assert_eq!(
            seen.0, before.0,
            "a reader sees the sealed state only: {}",
            seen.1
        );
        if before.0 == 200 {
            assert_eq!(seen.1, before.1, "a reader sees the sealed state only");
        }
    }
    upload(
        api,
        token,
        app,
        &lock_id,
        "models.json",
        r#"{"models": ["receipts"]}"#,
    );
    upload(api, token, app, &lock_id, "resources-actual.json", "{}");
    upload(api, token, app, &lock_id, COMMIT, r#"{"entries": []}"#);
    seal(api, token, app, &lock_id)
}

#[test]
fn a_change_is_sealed_read_back_and_managed_with_the_apps_commands() {
    let server = Server::start();
    let op = server.token("acme", "alice", "operator");
    let admin = server.token("acme", "root", "admin");
    let api = Api::new(&server);
    let (status, _) = read(&api, &op, "/api/apps/shop/files/checkout.tfstate");
    assert_eq!(status, 404, "no state before the first seal");
    let first = one_change(&api, &op, &op, "shop", 1);
    assert_eq!(first["ended"], "sealed");
    let (status, text) = read(&api, &op, "/api/apps/shop/files/checkout.tfstate");
    assert_eq!(
        (status, text),
        (200, state_doc(3, "shop-lineage", "copy 2"))
    );
    let second = one_change(&api, &op, &op, "shop", 3);
    let first_id = first["commit_id"].as_str().unwrap();
    let second_id = second["commit_id"].as_str().unwrap();

    let list = stdout(&server.cli(&op, &["apps", "list"]));
    assert!(
        list.starts_with("NAME") && list.contains(second_id),
        "{list}"
    );
    let archives = stdout(&server.cli(&op, &["apps", "archives", "shop"]));
    let rows: Vec<&str> = archives.lines().skip(1).collect();
    assert!(
        rows[0].starts_with(second_id) && rows[1].starts_with(first_id),
        "{archives}"
    );
    let files = stdout(&server.cli(&op, &["apps", "files", "shop"]));
    let journal = files.lines().find(|l| l.starts_with(COMMIT)).unwrap();
    assert!(
        journal.contains("journal") && journal.contains("commit"),
        "{files}"
    );
    let old = server.cli(
        &op,
        &[
            "apps",
            "download",
            "shop",
            "checkout.tfstate",
            "--commit",
            first_id,
        ],
    );
    assert_eq!(stdout(&old), state_doc(3, "shop-lineage", "copy 2"));
    let newest = server.cli(&op, &["apps", "download", "shop", "checkout.tfstate"]);
    assert_eq!(stdout(&newest), state_doc(5, "shop-lineage", "copy 2"));

    // What an admin needs: a lock left by a dead run released, an old archive deleted.
    let stuck = lock(&api, &op, "shop");
    upload(&api, &op, "shop", &stuck, APPLY, "{}");
    let refused = server.cli(&op, &["apps", "force-unlock", "shop", "--yes"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("forbidden"));
    let released = stdout(&server.cli(&admin, &["apps", "force-unlock", "shop", "--yes"]));
    assert!(released.contains("force_unlocked"), "{released}");
    let deleted = server.cli(
        &admin,
        &["apps", "delete-archive", "shop", first_id, "--yes"],
    );
    assert!(stdout(&deleted).contains(first_id));
    let archives = stdout(&server.cli(&op, &["apps", "archives", "shop", "--json"]));
    let archives: Value = serde_json::from_str(&archives).unwrap();
    assert_eq!(archives["archives"].as_array().unwrap().len(), 2);
    let audit = stdout(&server.cli(
        &admin,
        &["states", "audit", "--action", "app.archive_deleted"],
    ));
    assert!(audit.contains("app.archive_deleted"), "{audit}");
}

/// POSTs `path` and answers its status and body.
fn post(api: &Api, token: &str, path: &str, body: &str) -> (u16, Value) {
    let r = api
        .request("POST", path, Some(token))
        .body(body.to_owned())
        .send()
        .unwrap();
    (r.status().as_u16(), r.json().unwrap())
}

/// A seal or give-up whose answer was lost is sent again after someone else sealed newer
/// changes (and while someone else holds the lock): it answers its own archive again, for as
/// long as that archive is kept, and nothing else.
#[test]
fn a_seal_or_give_up_retried_after_newer_changes_answers_its_own_archive() {
    let server = Server::start();
    let alice = server.token("acme", "alice", "operator");
    let bob = server.token("acme", "bob", "operator");
    let admin = server.token("acme", "root", "admin");
    let api = Api::new(&server);
    let ended = |token: &str, lock_id: &str, how: &str| {
        post(
            &api,
            token,
            &format!("/api/apps/shop/locks/{lock_id}/{how}"),
            "",
        )
    };

    let sealed_id = lock(&api, &alice, "shop");
    upload(&api, &alice, "shop", &sealed_id, "models.json", "{}");
    let sealed = seal(&api, &alice, "shop", &sealed_id);
    let given_id = lock(&api, &alice, "shop");
    upload(&api, &alice, "shop", &given_id, APPLY, "{}");
    let (status, given) = ended(&alice, &given_id, "unlock");
    assert_eq!(status, 200, "{given}");

    // Bob's lock held, then his change sealed: each retry answers what it sealed.
    let bobs = lock(&api, &bob, "shop");
    assert_eq!(ended(&alice, &sealed_id, "seal"), (200, sealed.clone()));
    assert_eq!(ended(&alice, &given_id, "unlock"), (200, given.clone()));
    seal(&api, &bob, "shop", &bobs);
    assert_eq!(ended(&alice, &sealed_id, "seal"), (200, sealed.clone()));
    assert_eq!(ended(&alice, &given_id, "unlock"), (200, given.clone()));
    let archives = api.json("GET", "/api/apps/shop/archives", &alice);
    assert_eq!(
        archives["archives"].as_array().unwrap().len(),
        3,
        "sealed once each"
    );

    // Another request is no retry: the other ending, another caller, another lock ID.
    let code = |(status, body): (u16, Value)| (status, body["error"]["code"].clone());
    let mismatch = (409, json!("lock_id_mismatch"));
    assert_eq!(code(ended(&alice, &sealed_id, "unlock")), mismatch);
    assert_eq!(code(ended(&alice, &given_id, "seal")), mismatch);
    assert_eq!(code(ended(&bob, &sealed_id, "seal")), mismatch);
    assert_eq!(code(ended(&alice, "never-locked", "seal")), mismatch);

    // Once its archive is deleted, there is nothing left to answer with.
    let id = sealed["commit_id"].as_str().unwrap();
    let r = api
        .request(
            "DELETE",
            &format!("/api/apps/shop/archives/{id}"),
            Some(&admin),
        )
        .send()
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(code(ended(&alice, &sealed_id, "seal")), mismatch);
}

/// The lock body is a JSON object (docs/octo.md, the OpenAPI document): an array, whose
/// items serde would otherwise read by position, or any other value is refused.
#[test]
fn a_lock_body_that_is_not_a_json_object_is_refused() {
    let server = Server::start();
    let alice = server.token("acme", "alice", "operator");
    let api = Api::new(&server);
    for body in [
        r#"["octo-1", "alice", "x"]"#,
        "[]",
        r#""octo-1""#,
        "7",
        "null",
    ] {
        let (status, answer) = post(&api, &alice, "/api/apps/shop/lock", body);
        assert_eq!(
            (status, &answer["error"]["code"]),
            (400, &json!("invalid_request")),
            "{body}: {answer}"
        );
    }
    let (status, _) = read(&api, &alice, "/api/apps/shop");
    assert_eq!(status, 404, "nothing was locked");
    let (status, answer) = post(
        &api,
        &alice,
        "/api/apps/shop/lock",
        r#"{"lock_id": "octo-1"}"#,
    );
    assert_eq!((status, &answer["lock_id"]), (200, &json!("octo-1")));
}

#[test]
fn a_change_goes_through_the_container_front_door_on_the_aws_stores() {
    let deployment = Deployment::create();
    let server = deployment.container(&[]);
    let op = deployment.token("acme", "alice", "operator");
    let api = Api::new(&server);
    let first = one_change(&api, &op, &op, "shop", 1);
    let second = one_change(&api, &op, &op, "shop", 3);
    let (status, text) = read(&api, &op, "/api/apps/shop/files/checkout.tfstate");
    assert_eq!(
        (status, text),
        (200, state_doc(5, "shop-lineage", "copy 2"))
    );
    let id = first["commit_id"].as_str().unwrap();
    let (status, text) = read(
        &api,
        &op,
        &format!("/api/apps/shop/archives/{id}/files/{APPLY}"),
    );
    assert_eq!((status, text), (200, r#"{"entries": [2]}"#.to_string()));
    let listed = api.json("GET", "/api/apps/shop/archives", &op);
    assert_eq!(listed["archives"][0]["commit_id"], second["commit_id"]);
    assert_eq!(listed["archives"][1]["files"].as_array().unwrap().len(), 5);
}

#[test]
fn a_change_goes_through_the_apps_function_on_lambda() {
    let deployment = Deployment::create();
    let op = deployment.token("acme", "alice", "operator");
    let gateway = Gateway::start(&deployment, &[]);
    let api = Api::new(&gateway);
    let sealed = one_change(&api, &op, &op, "shop", 1);
    assert_eq!(sealed["files"].as_array().unwrap().len(), 5);
    let (status, text) = read(&api, &op, "/api/apps/shop/files/checkout.tfstate");
    assert_eq!(
        (status, text),
        (200, state_doc(3, "shop-lineage", "copy 2"))
    );
    let shown = api.json("GET", "/api/apps/shop", &op);
    assert_eq!(shown["newest"]["commit_id"], sealed["commit_id"]);
}
