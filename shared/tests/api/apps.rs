//! App states (Octo's remote state, docs/octo.md) through the API: one change locked,
//! uploaded to, sealed and read back; a held lock refusing others; a retried seal; a change
//! given up or force-unlocked keeping its journal; every bad upload refused with nothing
//! stored; readers never seeing an open change; who may do what; an old archive deleted and
//! its blobs swept.

use serde_json::{json, Value};

use crate::authorization::org;
use crate::support::api::{state_doc, Answer, Api};

const APPLY: &str = "journal.1791692257972-3e0cd513.apply.json";
const COMMIT: &str = "journal.1791692267354-d74b1acd.commit.json";

async fn lock(api: &Api, token: &str, app: &str) -> Answer {
    api.request("POST", &format!("/api/apps/{app}/lock"))
        .bearer(token)
        .json(&json!({"who": "alice@laptop"}))
        .send()
        .await
}

/// Takes the lock, which must succeed; its lock ID.
async fn locked(api: &Api, token: &str, app: &str) -> String {
    let r = lock(api, token, app).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["lock_id"].as_str().unwrap().to_owned()
}

async fn upload(
    api: &Api,
    token: &str,
    app: &str,
    lock_id: &str,
    file: &str,
    body: &str,
) -> Answer {
    api.request(
        "PUT",
        &format!("/api/apps/{app}/locks/{lock_id}/files/{file}"),
    )
    .bearer(token)
    .body(body.to_owned())
    .send()
    .await
}

async fn end(api: &Api, token: &str, app: &str, lock_id: &str, how: &str) -> Answer {
    api.request("POST", &format!("/api/apps/{app}/locks/{lock_id}/{how}"))
        .bearer(token)
        .send()
        .await
}

async fn get(api: &Api, token: &str, path: &str) -> Answer {
    api.request("GET", path).bearer(token).send().await
}

fn names(files: &Value) -> Vec<String> {
    files
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn one_change_is_locked_uploaded_sealed_and_read_back_as_the_newest_archive() {
    let api = Api::new();
    let (_, alice) = org(&api).await;
    let r = lock(&api, &alice, "shop").await;
    assert_eq!(r.status, 200);
    let held = r.json();
    let lock_id = held["lock_id"].as_str().unwrap();
    let commit_id = held["commit_id"].as_str().unwrap();
    let (ms, suffix) = commit_id.split_once('-').unwrap();
    let now_ms = (api.fx.app.clock.now().unix_timestamp_nanos() / 1_000_000).to_string();
    assert_eq!((ms, suffix.len()), (now_ms.as_str(), 8), "{commit_id}");
    assert_eq!(held["holder"], json!({"kind": "user", "user": "alice"}));
    let tfstate = state_doc(3, "lin", "receipts");
    for (file, body) in [
        ("checkout.tfstate", tfstate.as_str()),
        ("models.json", r#"{"models": []}"#),
        (APPLY, r#"{"entries": [{"type": "CommandStartedEvent"}]}"#),
    ] {
        let r = upload(&api, &alice, "shop", lock_id, file, body).await;
        assert_eq!(r.status, 200, "{file}: {}", r.text());
    }
    // An upload replaces the change's earlier upload of that name.
    let r = upload(
        &api,
        &alice,
        "shop",
        lock_id,
        "models.json",
        r#"{"models": [1]}"#,
    )
    .await;
    assert_eq!(r.json()["size"], 15);
    let r = upload(&api, &alice, "shop", lock_id, COMMIT, r#"{"entries": []}"#).await;
    assert_eq!(
        (r.json()["kind"].clone(), r.json()["command"].clone()),
        (json!("journal"), json!("commit"))
    );
    let r = end(&api, &alice, "shop", lock_id, "seal").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let archive = r.json();
    assert_eq!(archive["commit_id"], commit_id);
    assert_eq!(archive["ended"], "sealed");
    assert_eq!(
        names(&archive["files"]),
        vec!["checkout.tfstate", APPLY, COMMIT, "models.json"]
    );
    let commands: Vec<Value> = archive["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["command"].clone())
        .collect();
    assert_eq!(
        commands,
        vec![Value::Null, json!("apply"), json!("commit"), Value::Null]
    );
    assert_eq!(archive["files"][0]["serial"], 3);
    assert!(
        archive["files"][0].get("blob").is_none(),
        "where content lives is never shown"
    );
    // The sealed state reads back byte for byte, and the download is audited.
    let r = get(&api, &alice, "/api/apps/shop/files/checkout.tfstate").await;
    assert_eq!((r.status, r.text()), (200, tfstate.clone()));
    let r = get(&api, &alice, "/api/apps/shop/files/models.json").await;
    assert_eq!(r.text(), r#"{"models": [1]}"#);
    let (root, _) = (api.token("acme", "auditor", "admin").await, ());
    let audit = api
        .json("GET", "/api/audit?action=app.file_downloaded", &root)
        .await;
    let entry = &audit["entries"][0];
    assert_eq!(entry["detail"]["app"], "shop");
    assert_eq!(entry["detail"]["commit_id"], commit_id);
    let sealed = api.json("GET", "/api/audit?action=app.sealed", &root).await;
    assert_eq!(sealed["entries"][0]["detail"]["ended"], "sealed");
    // The lock is released: the next change starts.
    let next = locked(&api, &alice, "shop").await;
    assert_ne!(next, lock_id);
}

#[tokio::test]
async fn the_next_archive_carries_the_state_files_but_not_the_journal_of_the_one_before() {
    let api = Api::new();
    let (_, alice) = org(&api).await;
    let first = locked(&api, &alice, "shop").await;
    upload(
        &api,
        &alice,
        "shop",
        &first,
        "net.tfstate",
        &state_doc(1, "lin", "a"),
    )
    .await;
    upload(&api, &alice, "shop", &first, APPLY, "{}").await;
    end(&api, &alice, "shop", &first, "seal").await;
    api.fx.advance(time::Duration::minutes(1));
    let second = locked(&api, &alice, "shop").await;
    upload(&api, &alice, "shop", &second, COMMIT, "{}").await;
    let archive = end(&api, &alice, "shop", &second, "seal").await.json();
    assert_eq!(names(&archive["files"]), vec![COMMIT, "net.tfstate"]);
    let list = api.json("GET", "/api/apps/shop/archives", &alice).await;
    let ids: Vec<&str> = list["archives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["commit_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(
        ids[0] > ids[1],
        "newest first, and commit IDs sort: {ids:?}"
    );
    let old = get(
        &api,
        &alice,
        &format!("/api/apps/shop/archives/{}/files/{APPLY}", ids[1]),
    )
    .await;
    assert_eq!((old.status, old.text()), (200, "{}".to_string()));
    let gone = get(
        &api,
        &alice,
        &format!("/api/apps/shop/archives/{}/files/{APPLY}", ids[0]),
    )
    .await;
    assert_eq!(gone.error().expect(404).0, "not_found");
}

#[tokio::test]
async fn a_held_lock_refuses_another_locker_with_423_naming_the_holder_and_since_when() {
    let api = Api::new();
    let (_, alice) = org(&api).await;
    let bob = api.token("acme", "bob", "operator").await;
    let lock_id = locked(&api, &alice, "shop").await;
    let r = lock(&api, &bob, "shop").await;
    assert_eq!(r.status, 423);
    let body = r.json();
    assert_eq!(body["error"]["code"], "app_locked");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("user alice since 2026-11-30T01:00:00Z"),
        "{message}"
    );
    assert_eq!(
        body["error"]["lock"]["holder"],
        json!({"kind": "user", "user": "alice"})
    );
    assert_eq!(body["error"]["lock"]["who"], "alice@laptop");
    assert!(
        !r.text().contains(&lock_id),
        "the lock ID is the holder's alone"
    );
    // Nor may anyone else upload, seal or give up under it, even naming its ID.
    let r = upload(&api, &bob, "shop", &lock_id, "models.json", "{}").await;
    assert_eq!(r.error().expect(423).0, "app_locked");
    let r = end(&api, &bob, "shop", &lock_id, "seal").await;
    assert_eq!(r.error().expect(423).0, "app_locked");
    let shown = api.json("GET", "/api/apps/shop", &bob).await;
    assert_eq!(shown["lock"]["holder"]["user"], "alice");
    assert!(shown["lock"].get("lock_id").is_none());
}

#[tokio::test]
async fn a_retried_lock_or_seal_is_answered_the_same() {
    let api = Api::new();
    let (_, alice) = org(&api).await;
    let ask = |id: &'static str| {
        api.request("POST", "/api/apps/shop/lock")
            .bearer(&alice)
            .json(&json!({"lock_id": id}))
    };
    let first = ask("octo-1").send().await.json();
    let again = ask("octo-1").send().await;
    assert_eq!((again.status, again.json()), (200, first.clone()));
    assert_eq!(
        ask("octo-2").send().await.error().expect(423).0,
        "app_locked"
    );
    let sealed = end(&api, &alice, "shop", "octo-1", "seal").await.json();
    let resealed = end(&api, &alice, "shop", "octo-1", "seal").await;
    assert_eq!((resealed.status, resealed.json()), (200, sealed));
    let list = api.json("GET", "/api/apps/shop/archives", &alice).await;
    assert_eq!(list["archives"].as_array().unwrap().len(), 1, "sealed once");
}

#[tokio::test]
async fn giving_a_change_up_seals_its_uploads_and_journal_marked_given_up() {
    let api = Api::new();
    let (_, alice) = org(&api).await;
    let lock_id = locked(&api, &alice, "shop").await;
    upload(&api, &alice, "shop", &lock_id, APPLY, r#"{"entries": []}"#).await;
    let r = end(&api, &alice, "shop", &lock_id, "unlock").await;
    assert_eq!(r.status, 200);
    let archive = r.json();
    assert_eq!(archive["ended"], "given_up");
    assert_eq!(names(&archive["files"]), vec![APPLY]);
    let shown = api.json("GET", "/api/apps/shop", &alice).await;
    assert_eq!(shown["lock"], Value::Null);
    assert_eq!(shown["newest"]["ended"], "given_up");
}

#[tokio::test]
async fn readers_never_see_an_open_change_but_its_holder_does_with_its_lock_id() {
    let api = Api::new();
    let (_, alice) = org(&api).await;
    let carol = api.token("acme", "carol", "operator").await;
    let first = locked(&api, &alice, "shop").await;
    upload(&api, &alice, "shop", &first, "models.json", r#"{"v": 1}"#).await;
    end(&api, &alice, "shop", &first, "seal").await;
    let second = locked(&api, &alice, "shop").await;
    upload(&api, &alice, "shop", &second, "models.json", r#"{"v": 2}"#).await;
    upload(&api, &alice, "shop", &second, "new.json", "[]").await;
    let read = get(&api, &carol, "/api/apps/shop/files/models.json").await;
    assert_eq!(read.text(), r#"{"v": 1}"#);
    let r = get(&api, &carol, "/api/apps/shop/files/new.json").await;
    assert_eq!(r.error().expect(404).0, "not_found");
    let own = get(
        &api,
        &alice,
        &format!("/api/apps/shop/locks/{second}/files/models.json"),
    )
    .await;
    assert_eq!(own.text(), r#"{"v": 2}"#);
    let view = api
        .json("GET", &format!("/api/apps/shop/locks/{second}"), &alice)
        .await;
    assert_eq!(names(&view["files"]), vec!["models.json", "new.json"]);
    assert_eq!(view["lock"]["lock_id"], second);
    let r = get(
        &api,
        &carol,
        &format!("/api/apps/shop/locks/{second}/files/models.json"),
    )
    .await;
    assert_eq!(r.error().expect(423).0, "app_locked");
}

#[tokio::test]
async fn an_app_state_with_no_archive_has_no_sealed_state_to_read() {
    let api = Api::new();
    let (_, alice) = org(&api).await;
    let r = get(&api, &alice, "/api/apps/shop/files/models.json").await;
    assert_eq!(r.error().expect(404).0, "not_found");
    locked(&api, &alice, "shop").await;
    let r = get(&api, &alice, "/api/apps/shop/files/models.json").await;
    let (code, message) = r.error().expect(404);
    assert_eq!(code, "not_found");
    assert!(message.contains("sealed archive"), "{message}");
}

#[tokio::test]
async fn bad_uploads_are_refused_in_words_and_nothing_is_stored() {
    let api = Api::new();
    let (_, alice) = org(&api).await;
    let first = locked(&api, &alice, "shop").await;
    upload(
        &api,
        &alice,
        "shop",
        &first,
        "net.tfstate",
        &state_doc(5, "lin", "a"),
    )
    .await;
    end(&api, &alice, "shop", &first, "seal").await;
    let lock_id = locked(&api, &alice, "shop").await;
    let before = api
        .json("GET", &format!("/api/apps/shop/locks/{lock_id}"), &alice)
        .await;
    for (file, body, status, code, says) in [
        (
            "notes.txt",
            "{}".to_string(),
            400,
            "invalid_file_name",
            ".tfstate",
        ),
        (
            "journal.x.apply.json",
            "{}".to_string(),
            400,
            "invalid_file_name",
            "journal",
        ),
        (
            "models.json",
            "{not json".to_string(),
            400,
            "not_json",
            "line 1 column 2",
        ),
        (
            "net.tfstate",
            r#"{"a": 1}"#.to_string(),
            400,
            "not_a_state",
            "version",
        ),
        (
            "net.tfstate",
            state_doc(6, "other", "a"),
            409,
            "lineage_mismatch",
            "other",
        ),
        (
            "net.tfstate",
            state_doc(4, "lin", "a"),
            409,
            "stale_serial",
            "serial 4",
        ),
    ] {
        let r = upload(&api, &alice, "shop", &lock_id, file, &body).await;
        let (got, message) = r.error().expect(status);
        assert_eq!(got, code, "{file}: {message}");
        assert!(message.contains(says), "{file}: {message}");
    }
    let after = api
        .json("GET", &format!("/api/apps/shop/locks/{lock_id}"), &alice)
        .await;
    assert_eq!(before, after, "nothing stored");
    let r = upload(&api, &alice, "shop", "old-lock", "models.json", "{}").await;
    assert_eq!(r.error().expect(409).0, "lock_id_mismatch");
}

#[tokio::test]
async fn roles_list_with_viewer_download_with_operator_and_manage_with_admin() {
    let api = Api::new();
    let (admin, alice) = org(&api).await;
    let viewer = api.token("acme", "val", "viewer").await;
    let lock_id = locked(&api, &alice, "shop").await;
    upload(&api, &alice, "shop", &lock_id, APPLY, "{}").await;
    end(&api, &alice, "shop", &lock_id, "seal").await;
    assert_eq!(
        get(&api, &viewer, "/api/apps").await.json()["apps"][0]["name"],
        "shop"
    );
    let shown = get(&api, &viewer, "/api/apps/shop").await.json();
    assert_eq!(
        shown["allowed_actions"],
        json!({"download": false, "force_unlock": false, "delete_archive": false})
    );
    let r = get(&api, &viewer, &format!("/api/apps/shop/files/{APPLY}")).await;
    assert_eq!(r.error().expect(403).0, "forbidden");
    assert_eq!(
        lock(&api, &viewer, "shop").await.error().expect(403).0,
        "forbidden"
    );
    let r = api
        .request("POST", "/api/apps/shop/force-unlock")
        .bearer(&alice)
        .send()
        .await;
    assert_eq!(r.error().expect(403).0, "forbidden");
    let shown = get(&api, &admin, "/api/apps/shop").await.json();
    assert_eq!(
        shown["allowed_actions"],
        json!({"download": true, "force_unlock": true, "delete_archive": true})
    );
    let other = api.token("elsewhere", "eve", "admin").await;
    assert_eq!(
        get(&api, &other, "/api/apps/shop")
            .await
            .error()
            .expect(404)
            .0,
        "not_found"
    );
}

#[tokio::test]
async fn a_force_unlock_seals_the_change_as_force_unlocked_and_is_audited() {
    let api = Api::new();
    let (admin, alice) = org(&api).await;
    let lock_id = locked(&api, &alice, "shop").await;
    upload(&api, &alice, "shop", &lock_id, APPLY, "{}").await;
    let r = api
        .request("POST", "/api/apps/shop/force-unlock")
        .bearer(&admin)
        .send()
        .await;
    assert_eq!(r.status, 200);
    let body = r.json();
    assert_eq!(body["released"]["holder"]["user"], "alice");
    assert_eq!(body["archive"]["ended"], "force_unlocked");
    assert_eq!(names(&body["archive"]["files"]), vec![APPLY]);
    let again = api
        .request("POST", "/api/apps/shop/force-unlock")
        .bearer(&admin)
        .send()
        .await;
    assert_eq!(again.json(), json!({"released": null, "archive": null}));
    let r = upload(&api, &alice, "shop", &lock_id, "models.json", "{}").await;
    assert_eq!(r.error().expect(409).0, "lock_id_mismatch");
    let audit = api
        .json("GET", "/api/audit?action=app.force_unlocked", &admin)
        .await;
    assert_eq!(audit["entries"][0]["detail"]["holder"]["user"], "alice");
}

#[tokio::test]
async fn an_old_archive_is_deleted_never_the_newest_and_the_sweeper_removes_what_only_it_held() {
    let api = Api::new();
    let (admin, alice) = org(&api).await;
    let mut ids = Vec::new();
    for (i, journal) in [APPLY, COMMIT].iter().enumerate() {
        api.fx.advance(time::Duration::minutes(1));
        let lock_id = locked(&api, &alice, "shop").await;
        if i == 0 {
            upload(
                &api,
                &alice,
                "shop",
                &lock_id,
                "net.tfstate",
                &state_doc(1, "lin", "a"),
            )
            .await;
        }
        upload(&api, &alice, "shop", &lock_id, journal, "{}").await;
        ids.push(
            end(&api, &alice, "shop", &lock_id, "seal").await.json()["commit_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let delete = |id: String, token: String| {
        let api = &api;
        async move {
            api.request("DELETE", &format!("/api/apps/shop/archives/{id}"))
                .bearer(&token)
                .send()
                .await
        }
    };
    let r = delete(ids[1].clone(), admin.clone()).await;
    assert_eq!(r.error().expect(409).0, "newest_archive");
    assert_eq!(
        delete(ids[0].clone(), alice.clone())
            .await
            .error()
            .expect(403)
            .0,
        "forbidden"
    );
    let old = api
        .fx
        .catalog
        .archive("acme", "shop", &ids[0])
        .await
        .unwrap()
        .unwrap();
    let blob_of = |name: &str| {
        old.files
            .iter()
            .find(|f| f.name == name)
            .unwrap()
            .blob
            .clone()
    };
    let (journal, shared) = (blob_of(APPLY), blob_of("net.tfstate"));
    assert_eq!(delete(ids[0].clone(), admin.clone()).await.status, 204);
    let r = get(&api, &alice, &format!("/api/apps/shop/archives/{}", ids[0])).await;
    assert_eq!(r.error().expect(404).0, "not_found");
    let stored = |blob: String| {
        let api = &api;
        async move { api.fx.blobs.get(&blob).await.unwrap().is_some() }
    };
    assert!(
        stored(journal.clone()).await,
        "the sweeper removes it, not the delete"
    );
    api.fx.advance(time::Duration::hours(2));
    let now = api.fx.app.clock.now();
    hegemony_state::service::sweep::sweep(&api.fx.app, now)
        .await
        .unwrap();
    assert!(
        !stored(journal).await,
        "only the deleted archive held its journal file"
    );
    assert!(
        stored(shared).await,
        "the newest archive holds its state file too"
    );
    // The state file it shared with the newest archive still reads.
    let r = get(&api, &alice, "/api/apps/shop/files/net.tfstate").await;
    assert_eq!(r.text(), state_doc(1, "lin", "a"));
    assert_eq!(
        get(&api, &alice, "/api/apps/shop").await.json()["archives"],
        1
    );
}

/// The spec's commit that fails before sealing: "the commit fails and the lock stays held,
/// so running the commit again retries it". Another process holds the local catalog's write
/// lock past the busy timeout, so the seal's one commit cannot happen: the client gets a
/// 503 to retry, nothing is sealed, the lock is still held, and the retry seals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seal_that_cannot_commit_seals_nothing_keeps_the_lock_and_its_retry_seals() {
    use crate::support::{api::server_limits, Adapter};
    let api = Api::on(Adapter::Local, server_limits());
    let (_, alice) = org(&api).await;
    let lock_id = locked(&api, &alice, "shop").await;
    upload(&api, &alice, "shop", &lock_id, COMMIT, "{}").await;
    let catalog = api.fx.data_dir().unwrap().join("catalog.sqlite");
    let mut other = rusqlite::Connection::open(catalog).unwrap();
    let writer = other
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    let r = end(&api, &alice, "shop", &lock_id, "seal").await;
    assert_eq!(r.error().expect(503).0, "unavailable");
    assert!(r.headers.contains_key("retry-after"));
    writer.rollback().unwrap();
    let shown = api.json("GET", "/api/apps/shop", &alice).await;
    assert_eq!(
        shown["lock"]["holder"]["user"], "alice",
        "the lock stays held"
    );
    assert_eq!(shown["newest"], Value::Null, "nothing was sealed");
    let r = end(&api, &alice, "shop", &lock_id, "seal").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(names(&r.json()["files"]), vec![COMMIT]);
}

#[tokio::test]
async fn a_lock_body_or_cursor_outside_the_document_is_refused() {
    let api = Api::new();
    let (_, alice) = org(&api).await;
    for body in [
        json!({"lock_id": null}),
        json!({"lock_id": 7}),
        json!({"lock_id": "a/b"}),
        json!({"who": null}),
        json!({"other": "x"}),
        json!({"who": "x".repeat(1025)}),
    ] {
        let r = api
            .request("POST", "/api/apps/shop/lock")
            .bearer(&alice)
            .json(&body)
            .send()
            .await;
        let (code, _) = r.error().expect(400);
        assert!(
            code == "invalid_request" || code == "invalid_name",
            "{body}: {code}"
        );
    }
    for path in [
        "/api/apps?cursor=",
        "/api/apps?limit=0",
        "/api/apps/shop/archives?cursor=a%2Fb",
    ] {
        assert_eq!(get(&api, &alice, path).await.status, 400, "{path}");
    }
    assert_eq!(
        get(&api, &alice, "/api/apps").await.json()["apps"],
        json!([]),
        "nothing was locked"
    );
}
