//! `GET /api/deleted-states`, `POST .../{id}/restore`, `DELETE .../{id}`: a delete kept for
//! its retention and listed exactly, restored under its name with every version (clients
//! continue from it) or under a new one when a state took the name (the taken name refused
//! in words), purged for good, counted by the key report, every step audited, admins only,
//! and every bad input answered before any read.

use serde_json::{json, Value};

use crate::authorization::{org, write};
use crate::support::api::{lock_doc, state_doc, Api};

/// Deletes state `name` as `admin` (204) and answers its entry in the deleted list.
async fn delete(api: &Api, admin: &str, name: &str) -> Value {
    let r = api
        .request("DELETE", &format!("/api/tf-states/{name}"))
        .bearer(admin)
        .send()
        .await;
    assert_eq!(r.status, 204, "{}", r.text());
    let listed = api.json("GET", "/api/deleted-states", admin).await;
    let items = listed["deleted_states"].as_array().unwrap();
    items
        .iter()
        .rev()
        .find(|d| d["name"] == name)
        .cloned()
        .expect("the deleted state is listed")
}

fn versions(list: &Value) -> Vec<u64> {
    list["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_u64().unwrap())
        .collect()
}

async fn restore(
    api: &Api,
    admin: &str,
    id: &str,
    body: Option<Value>,
) -> crate::support::api::Answer {
    let call = api
        .request("POST", &format!("/api/deleted-states/{id}/restore"))
        .bearer(admin);
    match body {
        Some(body) => call.json(&body),
        None => call,
    }
    .send()
    .await
}

#[tokio::test]
async fn a_deleted_state_is_listed_and_comes_back_whole_under_its_name() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    write(&api, &operator, "net", 1, "one").await;
    write(&api, &operator, "net", 2, "two").await;
    let now = api.fx.app.clock.now();
    let item = delete(&api, &admin, "net").await;
    let keys: Vec<&str> = item
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "id",
            "name",
            "deleted_at",
            "deleted_by",
            "versions",
            "bytes",
            "purge_at"
        ]
    );
    assert_eq!(item["deleted_by"], json!({"kind": "user", "user": "root"}));
    assert_eq!(
        (item["versions"].as_u64(), item["name"].as_str()),
        (Some(2), Some("net"))
    );
    assert!(item["bytes"].as_u64().unwrap() > 0);
    let purge_at = time::OffsetDateTime::parse(
        item["purge_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert_eq!(purge_at - now, time::Duration::days(7));
    let id = item["id"].as_str().unwrap().to_owned();
    assert!(api.json("GET", "/api/tf-states", &operator).await["states"]
        .as_array()
        .unwrap()
        .is_empty());
    let r = api
        .request("GET", "/api/deleted-states")
        .bearer(&operator)
        .send()
        .await;
    assert_eq!(r.error().expect(403).0, "forbidden", "admins only");
    let r = restore(&api, &operator, &id, None).await;
    assert_eq!(r.error().expect(403).0, "forbidden");

    let r = restore(&api, &admin, &id, None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"name": "net", "version": 2, "versions": 2})
    );
    let read = api.get_state(&operator, "net").await;
    assert_eq!(read.text(), state_doc(2, "lin", "two"));
    let list = api
        .json("GET", "/api/tf-states/net/versions", &operator)
        .await;
    assert_eq!(versions(&list), [2, 1]);
    let old = api
        .request("GET", "/api/tf-states/net/versions/1/content")
        .bearer(&operator)
        .send()
        .await;
    assert_eq!(old.text(), state_doc(1, "lin", "one"));
    // The next save continues the lineage and the numbering.
    write(&api, &operator, "net", 3, "three").await;
    let list = api
        .json("GET", "/api/tf-states/net/versions", &operator)
        .await;
    assert_eq!(versions(&list), [3, 2, 1]);
    let listed = api.json("GET", "/api/deleted-states", &admin).await;
    assert_eq!(listed, json!({"deleted_states": [], "next_cursor": null}));
    assert_eq!(
        restore(&api, &admin, &id, None).await.error().expect(404).0,
        "not_found"
    );

    let audit = api.json("GET", "/api/audit?state=net", &admin).await;
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions[..4],
        [
            "version.created",
            "version.downloaded",
            "state.restored",
            "state.deleted"
        ]
    );
    let restored = &audit["entries"][2];
    assert_eq!(restored["detail"]["id"], id.as_str());
    assert_eq!(restored["version"], 2);
}

#[tokio::test]
async fn a_taken_name_is_refused_in_words_and_a_new_name_takes_every_version() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    write(&api, &operator, "net", 1, "one").await;
    write(&api, &operator, "net", 2, "two").await;
    let id = delete(&api, &admin, "net").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    write(&api, &operator, "net", 1, "newcomer").await;
    let (code, message) = restore(&api, &admin, &id, None).await.error().expect(409);
    assert_eq!(code, "name_taken");
    assert!(message.contains("state net exists"), "{message}");
    assert!(message.contains("another name"), "{message}");

    let r = restore(&api, &admin, &id, Some(json!({"name": "net-old"}))).await;
    assert_eq!(
        r.json(),
        json!({"name": "net-old", "version": 2, "versions": 2})
    );
    let list = api
        .json("GET", "/api/tf-states/net-old/versions", &operator)
        .await;
    assert_eq!(versions(&list), [2, 1]);
    let old = api
        .request("GET", "/api/tf-states/net-old/versions/1/content")
        .bearer(&operator)
        .send()
        .await;
    assert_eq!(old.text(), state_doc(1, "lin", "one"));
    write(&api, &operator, "net-old", 3, "three").await;
    assert_eq!(
        api.get_state(&operator, "net-old").await.text(),
        state_doc(3, "lin", "three")
    );
    assert_eq!(
        api.get_state(&operator, "net").await.text(),
        state_doc(1, "lin", "newcomer"),
        "the state that took the name is untouched"
    );
    // Deleted and restored again, under a third name: still every version, still readable.
    let again = delete(&api, &admin, "net-old").await;
    assert_eq!(again["versions"], 3);
    let id = again["id"].as_str().unwrap();
    let r = restore(&api, &admin, id, Some(json!({"name": "net-older"}))).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        api.get_state(&operator, "net-older").await.text(),
        state_doc(3, "lin", "three")
    );
    let list = api
        .json("GET", "/api/tf-states/net-older/versions", &operator)
        .await;
    assert_eq!(versions(&list), [3, 2, 1]);
}

#[tokio::test]
async fn a_purge_ends_the_retention_and_bad_input_is_refused_before_any_read() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    write(&api, &operator, "net", 1, "one").await;
    let id = delete(&api, &admin, "net").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for (body, code) in [
        (r#"{"name": 7}"#, "invalid_request"),
        (r#"{"other": "x"}"#, "invalid_request"),
        ("not json", "invalid_request"),
        (r#"{"name": "Not A Name!"}"#, "invalid_name"),
    ] {
        let r = api
            .request("POST", &format!("/api/deleted-states/{id}/restore"))
            .bearer(&admin)
            .body(body)
            .send()
            .await;
        assert_eq!(r.error().expect(400).0, code, "{body}");
    }
    for cursor in ["", "ZZ", "a%2Fb"] {
        let path = format!("/api/deleted-states?cursor={cursor}");
        let r = api.request("GET", &path).bearer(&admin).send().await;
        assert_eq!(r.error().expect(400).0, "invalid_request", "{cursor:?}");
    }
    for bad in ["..", "zz", "x%2Fy", &"1".repeat(65)] {
        let r = api
            .request("DELETE", &format!("/api/deleted-states/{bad}"))
            .bearer(&admin)
            .send()
            .await;
        assert_eq!(r.error().expect(404).0, "not_found", "{bad}");
    }
    let r = api
        .request("DELETE", &format!("/api/deleted-states/{id}"))
        .bearer(&operator)
        .send()
        .await;
    assert_eq!(r.error().expect(403).0, "forbidden");
    let r = api
        .request("DELETE", &format!("/api/deleted-states/{id}"))
        .bearer(&admin)
        .send()
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        (r.json()["id"].as_str(), r.json()["name"].as_str()),
        (Some(id.as_str()), Some("net"))
    );
    let again = api
        .request("DELETE", &format!("/api/deleted-states/{id}"))
        .bearer(&admin)
        .send()
        .await;
    assert_eq!(again.error().expect(404).0, "not_found");
    assert_eq!(
        restore(&api, &admin, &id, None).await.error().expect(404).0,
        "not_found"
    );
    let audit = api
        .json("GET", "/api/audit?action=state.purged", &admin)
        .await;
    assert_eq!(audit["entries"][0]["detail"]["id"], id.as_str());
    assert_eq!(
        audit["entries"][0]["actor"],
        json!({"kind": "user", "user": "root"})
    );
}

#[tokio::test]
async fn the_key_report_counts_a_deleted_states_versions() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    write(&api, &operator, "net", 1, "one").await;
    write(&api, &operator, "net", 2, "two").await;
    write(&api, &operator, "app", 1, "one").await;
    let id = delete(&api, &admin, "net").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let report = api.json("GET", "/api/keys", &admin).await;
    let states = report["states"].as_array().unwrap();
    assert_eq!(states.len(), 2);
    assert_eq!(states[0]["state"], "app");
    assert!(states[0].get("deleted_id").is_none());
    assert_eq!(
        (
            states[1]["state"].as_str(),
            states[1]["deleted_id"].as_str()
        ),
        (Some("net"), Some(id.as_str()))
    );
    assert_eq!(states[1]["keys"][0]["versions"], 2);
}

#[tokio::test]
async fn pages_of_deleted_states_follow_their_cursor() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    for name in ["a", "b", "c"] {
        write(&api, &operator, name, 1, "one").await;
        delete(&api, &admin, name).await;
        // Ids sort by the second of the deletion, then at random.
        api.fx.advance(time::Duration::seconds(1));
    }
    let first = api.json("GET", "/api/deleted-states?limit=2", &admin).await;
    let names = |page: &Value| -> Vec<String> {
        page["deleted_states"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&first), ["a", "b"]);
    let cursor = first["next_cursor"].as_str().unwrap();
    let rest = api
        .json(
            "GET",
            &format!("/api/deleted-states?limit=2&cursor={cursor}"),
            &admin,
        )
        .await;
    assert_eq!(names(&rest), ["c"]);
    assert_eq!(rest["next_cursor"], Value::Null);
}

#[tokio::test]
async fn a_restore_onto_a_name_a_first_apply_has_locked_answers_423() {
    let api = Api::new();
    let (admin, operator) = org(&api).await;
    write(&api, &operator, "net", 1, "one").await;
    let id = delete(&api, &admin, "net").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let lock = api.lock(&operator, "net", &lock_doc("first-apply")).await;
    assert_eq!(lock.status, 200, "{}", lock.text());
    let r = restore(&api, &admin, &id, None).await;
    assert_eq!(r.status, 423, "{}", r.text());
    assert!(
        r.text().contains("first-apply"),
        "the holder's lock: {}",
        r.text()
    );
    api.unlock(&operator, "net", &lock_doc("first-apply")).await;
    let r = restore(&api, &admin, &id, None).await;
    assert_eq!(r.status, 200, "once the lock is gone: {}", r.text());
}
