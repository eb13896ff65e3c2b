//! The list of states: what it shows (latest versions, locks, never content), its pages,
//! and DESIGN section 6's folding rule seen through its latest version numbers.

use serde_json::json;

use crate::support::api::{lock_doc, state_doc, Api};

#[tokio::test]
async fn the_list_shows_latest_versions_and_locks_but_not_lock_only_states() {
    let api = Api::new();
    let t = api.token("acme", "alice", "operator").await;
    api.post_state(&t, "b-state", None, state_doc(3, "lin", "x"))
        .await;
    api.lock(&t, "b-state", &lock_doc("LB")).await;
    api.lock(&t, "a-never-written", &lock_doc("LA")).await;
    let listed = api.list(&t).await;
    let states = listed["states"].as_array().unwrap();
    assert_eq!(states.len(), 1);
    assert_eq!(states[0]["name"], "b-state");
    assert_eq!(states[0]["serial"], 3);
    assert_eq!(states[0]["lock"]["id"], "LB");
    assert_eq!(
        states[0]["lock"]["holder"],
        json!({"kind": "user", "user": "alice"})
    );
    assert!(!listed.to_string().contains("\"x\""), "never any content");
    let r = api
        .request("GET", "/api/tf-states?limit=0")
        .bearer(&t)
        .send()
        .await;
    assert_eq!(r.error().expect(400).0, "invalid_request");
}

#[tokio::test]
async fn pages_of_the_list_follow_the_cursor() {
    let api = Api::new();
    let t = api.token("acme", "alice", "operator").await;
    for name in ["s1", "s2", "s3"] {
        api.post_state(&t, name, None, state_doc(1, "lin", name))
            .await;
    }
    let page = api.json("GET", "/api/tf-states?limit=2", &t).await;
    assert_eq!(page["states"].as_array().unwrap().len(), 2);
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    let next = api
        .json(
            "GET",
            &format!("/api/tf-states?limit=2&cursor={cursor}"),
            &t,
        )
        .await;
    assert_eq!(next["states"][0]["name"], "s3");
    assert!(next["next_cursor"].is_null());
}

/// DESIGN section 6's folding rule, seen through the list's latest version number.
#[tokio::test]
async fn writes_under_one_lock_fold_into_one_version() {
    let api = Api::new();
    let t = api.token("acme", "alice", "operator").await;
    let latest = || async {
        let listed = api.list(&t).await;
        let s = &listed["states"][0];
        (
            s["latest_version"].as_u64().unwrap(),
            s["serial"].as_u64().unwrap(),
        )
    };
    api.lock(&t, "net", &lock_doc("L1")).await;
    for serial in 1..=3 {
        let r = api
            .post_state(
                &t,
                "net",
                Some("L1"),
                state_doc(serial, "lin", &serial.to_string()),
            )
            .await;
        assert_eq!(r.status, 200);
    }
    assert_eq!(
        latest().await,
        (1, 3),
        "three writes under one lock: one version, the last serial"
    );
    api.unlock(&t, "net", &lock_doc("L1")).await;
    api.lock(&t, "net", &lock_doc("L1")).await;
    api.post_state(&t, "net", Some("L1"), state_doc(4, "lin", "4"))
        .await;
    assert_eq!(
        latest().await,
        (2, 4),
        "relocking with the same ID starts a new version"
    );
    api.post_state(&t, "net", None, state_doc(5, "lin", "5"))
        .await;
    assert_eq!(
        latest().await,
        (3, 5),
        "the holder's write without ID is a version of its own"
    );
    api.post_state(&t, "net", Some("L1"), state_doc(6, "lin", "6"))
        .await;
    assert_eq!(
        latest().await,
        (4, 6),
        "and the next ?ID= write starts another"
    );
    api.post_state(&t, "net", Some("L1"), state_doc(7, "lin", "7"))
        .await;
    assert_eq!(latest().await, (4, 7));
}

/// A prefix lists the states whose name starts with it, in pages like any list, and never a
/// name outside it (the pages' name filter).
#[tokio::test]
async fn a_prefix_lists_only_the_names_that_start_with_it() {
    let api = Api::new();
    let t = api.token("acme", "alice", "operator").await;
    for name in [
        "net", "net-a", "net-b", "net.c", "nes", "nesz", "neu", "other",
    ] {
        api.post_state(&t, name, None, state_doc(1, "lin", name))
            .await;
    }
    let names = |page: &serde_json::Value| -> Vec<String> {
        page["states"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = api.json("GET", "/api/tf-states?prefix=net", &t).await;
    assert_eq!(names(&all), ["net", "net-a", "net-b", "net.c"]);
    assert!(all["next_cursor"].is_null());
    let first = api
        .json("GET", "/api/tf-states?prefix=net&limit=3", &t)
        .await;
    assert_eq!(names(&first), ["net", "net-a", "net-b"]);
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    let rest = api
        .json(
            "GET",
            &format!("/api/tf-states?prefix=net&limit=3&cursor={cursor}"),
            &t,
        )
        .await;
    assert_eq!(names(&rest), ["net.c"]);
    assert!(rest["next_cursor"].is_null());
    let none = api.json("GET", "/api/tf-states?prefix=zz", &t).await;
    assert!(names(&none).is_empty());
    let r = api
        .request("GET", "/api/tf-states?prefix=a%2Fb")
        .bearer(&t)
        .send()
        .await;
    assert_eq!(r.error().expect(400).0, "invalid_name");
}
