//! The backend protocol (state, lock, unlock): statuses and bodies exactly as DESIGN section
//! 4 pins them, every bad input refused with a message that names the problem, nothing bad
//! stored, and one winner per lock race. OpenTofu cases use request fixtures taken from the
//! protocol reference (no OpenTofu binary can run here).

use std::io::Read;
use std::sync::Arc;

use serde_json::json;

use crate::support::api::{lock_doc, state_doc, Api};
use crate::support::{logs, Adapter};

#[tokio::test]
async fn a_state_reads_back_exactly_as_written_and_is_404_before() {
    let api = Api::new();
    let t = api.token("acme", "alice", "operator").await;
    assert_eq!(api.get_state(&t, "net").await.status, 404);
    let body = state_doc(1, "lin-1", "hello");
    assert_eq!(
        api.post_state(&t, "net", None, body.clone()).await.status,
        200
    );
    let r = api.get_state(&t, "net").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), body);
}

#[tokio::test]
async fn reads_are_gzipped_when_accepted() {
    let api = Api::new();
    let t = api.token("acme", "alice", "operator").await;
    let body = state_doc(1, "lin", &"x".repeat(5000));
    api.post_state(&t, "net", None, body.clone()).await;
    let r = api
        .request("GET", "/api/tf-states/net/state")
        .basic(&t)
        .header("Accept-Encoding", "gzip")
        .send()
        .await;
    assert_eq!(r.header("content-encoding"), "gzip");
    let gz = &r.body;
    assert!(gz.len() < body.len() / 5);
    let mut plain = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut plain)
        .unwrap();
    assert_eq!(plain, body);
}

#[tokio::test]
async fn lock_is_exactly_200_and_a_conflict_is_423_with_the_holders_document() {
    let api = Api::new();
    let alice = api.token("acme", "alice", "operator").await;
    let bob = api.token("acme", "bob", "admin").await;
    let r = api.lock(&alice, "net", &lock_doc("L-alice")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 0);
    // The same holder retrying with the same ID: 200.
    assert_eq!(
        api.lock(&alice, "net", &lock_doc("L-alice")).await.status,
        200
    );
    let r = api.lock(&bob, "net", &lock_doc("L-bob")).await;
    assert_eq!(r.status, 423);
    assert_eq!(r.header("content-type"), "application/json");
    let holder = r.json();
    assert_eq!(holder["ID"], "L-alice");
    assert_eq!(holder["Who"], "tester@host");
    let info = holder["Info"].as_str().unwrap();
    assert!(info.starts_with("user alice since 20"), "{info}");
    // Alice with another ID is refused too: one lock at a time.
    assert_eq!(
        api.lock(&alice, "net", &lock_doc("L-other")).await.status,
        423
    );
}

#[tokio::test]
async fn unlock_rules_by_id_empty_body_and_permission() {
    let (logs, _capturing) = logs::capture();
    let api = Api::new();
    let alice = api.token("acme", "alice", "operator").await;
    let carol = api.token("acme", "carol", "operator").await;
    let admin = api.token("acme", "root", "admin").await;
    // Unlocking an unlocked state is 200, even naming an ID.
    assert_eq!(
        api.unlock(&alice, "net", &lock_doc("nothing")).await.status,
        200
    );
    api.lock(&alice, "net", &lock_doc("L1")).await;
    let (code, msg) = api
        .unlock(&alice, "net", &lock_doc("OLD"))
        .await
        .error()
        .expect(409);
    assert_eq!(code, "lock_id_mismatch");
    assert!(msg.contains("OLD") && msg.contains("L1"), "{msg}");
    let (code, _) = api.unlock(&alice, "net", "{}").await.error().expect(400);
    assert_eq!(code, "invalid_unlock");
    let (code, _) = api
        .unlock(&alice, "net", r#"{"ID":""}"#)
        .await
        .error()
        .expect(400);
    assert_eq!(code, "invalid_unlock");
    // Someone else's lock, even with its ID, needs tf_state:manage.
    let (code, msg) = api
        .unlock(&carol, "net", &lock_doc("L1"))
        .await
        .error()
        .expect(403);
    assert_eq!(code, "not_lock_holder");
    assert!(msg.contains("user alice"), "{msg}");
    let (code, _) = api.unlock(&carol, "net", "").await.error().expect(403);
    assert_eq!(code, "not_lock_holder");
    // The holder's empty body releases its own lock.
    assert_eq!(api.unlock(&alice, "net", "").await.status, 200);
    api.lock(&alice, "net", &lock_doc("L2")).await;
    assert_eq!(
        api.unlock(&admin, "net", "").await.status,
        200,
        "an admin forces"
    );
    assert_eq!(api.lock(&carol, "net", &lock_doc("L3")).await.status, 200);
    let logs = logs.text();
    assert!(logs.contains("lock force-unlocked"), "{logs}");
}

#[tokio::test]
async fn opentofu_force_unlock_names_the_id_and_releases_for_an_admin() {
    let api = Api::new();
    let alice = api.token("acme", "alice", "operator").await;
    let admin = api.token("acme", "root", "admin").await;
    api.lock(
        &alice,
        "net",
        &lock_doc("6f1c2a4e-0000-4000-8000-000000000001"),
    )
    .await;
    let fixture = r#"{"ID":"6f1c2a4e-0000-4000-8000-000000000001","Operation":"","Info":"","Who":"","Version":"","Created":"0001-01-01T00:00:00Z","Path":""}"#;
    assert_eq!(api.unlock(&admin, "net", fixture).await.status, 200);
    assert_eq!(api.lock(&admin, "net", &lock_doc("next")).await.status, 200);
}

#[tokio::test]
async fn every_lock_document_check_refuses_with_its_reason_and_stores_nothing() {
    let api = Api::new();
    let t = api.token("acme", "alice", "operator").await;
    let cases: Vec<(String, u16, &str, &str)> = vec![
        (
            format!(r#"{{"ID":"a","Info":"{}"}}"#, "x".repeat(16 * 1024)),
            413,
            "too_large",
            "16384",
        ),
        ("[1,2]".into(), 400, "invalid_lock", "JSON object"),
        ("{not json".into(), 400, "invalid_lock", "not JSON"),
        (
            r#"{"Operation":"x"}"#.into(),
            400,
            "invalid_lock",
            "no \"ID\"",
        ),
        (
            r#"{"ID":""}"#.into(),
            400,
            "invalid_lock",
            "must not be empty",
        ),
        (
            format!(r#"{{"ID":"{}"}}"#, "i".repeat(256)),
            400,
            "invalid_lock",
            "255",
        ),
        (
            r#"{"ID":"hold-run-1"}"#.into(),
            400,
            "invalid_lock",
            "reserved",
        ),
        (
            r#"{"ID":"a","Who":42}"#.into(),
            400,
            "invalid_lock",
            "\"Who\" must be a string",
        ),
        (
            r#"{"ID":"a","Created":false}"#.into(),
            400,
            "invalid_lock",
            "\"Created\"",
        ),
    ];
    for (body, status, code, words) in cases {
        let (got_code, msg) = api.lock(&t, "net", &body).await.error().expect(status);
        assert_eq!(got_code, code, "{body:.60}");
        assert!(msg.contains(words), "{msg} should name {words}");
    }
    assert!(api.list(&t).await["states"].as_array().unwrap().is_empty());
    assert_eq!(
        api.lock(&t, "net", &lock_doc("ok")).await.status,
        200,
        "nothing was left locked"
    );
}

#[tokio::test]
async fn unknown_fields_and_a_non_rfc3339_created_are_dropped_from_the_stored_document() {
    let api = Api::new();
    let alice = api.token("acme", "alice", "operator").await;
    let bob = api.token("acme", "bob", "operator").await;
    api.lock(
        &alice,
        "net",
        r#"{"ID":"L1","Created":"2026-01-02 03:04:05","Extra":{"a":1},"Info":"mine"}"#,
    )
    .await;
    let holder = api.lock(&bob, "net", &lock_doc("L2")).await.json();
    assert_eq!(holder, json!({"ID": "L1", "Info": "mine"}));
}

#[tokio::test]
async fn every_write_check_refuses_in_order_with_its_reason() {
    let (logs, _capturing) = logs::capture();
    let api = Api::new();
    let alice = api.token("acme", "alice", "operator").await;
    let bob = api.token("acme", "bob", "operator").await;
    let post = |token: &str, id: Option<&str>, body: String| {
        let token = token.to_owned();
        let id = id.map(str::to_owned);
        let api = &api;
        async move { api.post_state(&token, "net", id.as_deref(), body).await }
    };
    assert_eq!(
        post(&alice, None, state_doc(5, "lin", "v5")).await.status,
        200
    );

    let (code, msg) = post(&alice, None, "not json at all".into())
        .await
        .error()
        .expect(400);
    assert_eq!(code, "not_a_state");
    assert!(msg.contains("invalid JSON"), "{msg}");
    // A body large enough that its sniff and the escapes' check run on two cores.
    let large = format!(
        r#"{{"version":4,"serial":6,"lineage":"lin","outputs":{{"pad":{{"value":"{}","type":"string"}},"bad":{{"value":"\u00zz"}}}}}}"#,
        "x".repeat(2 << 20)
    );
    let (code, msg) = post(&alice, None, large).await.error().expect(400);
    assert_eq!(code, "not_a_state");
    assert!(msg.contains("\\u escape without four hex digits"), "{msg}");
    let (code, msg) = post(&alice, None, r#"{"version":4,"lineage":"lin"}"#.into())
        .await
        .error()
        .expect(400);
    assert_eq!(code, "not_a_state");
    assert!(msg.contains("\"serial\""), "{msg}");
    let (code, msg) = post(&alice, None, state_doc(6, "other-lineage", "x"))
        .await
        .error()
        .expect(409);
    assert_eq!(code, "lineage_mismatch");
    assert!(msg.contains("another configuration"), "{msg}");
    let (code, msg) = post(&alice, None, state_doc(4, "lin", "x"))
        .await
        .error()
        .expect(409);
    assert_eq!(code, "stale_serial");
    assert!(msg.contains("serial 4") && msg.contains("5"), "{msg}");
    let (code, msg) = post(&alice, None, state_doc(5, "lin", "different"))
        .await
        .error()
        .expect(409);
    assert_eq!(code, "fork");
    assert!(msg.contains("two writers"), "{msg}");
    // The same bytes again: an idempotent 200.
    assert_eq!(
        post(&alice, None, state_doc(5, "lin", "v5")).await.status,
        200
    );

    // A lock: someone else's comes first, before the document is even looked at.
    api.lock(&alice, "net", &lock_doc("L1")).await;
    let r = post(&bob, Some("L1"), "not json".into()).await;
    assert_eq!(r.status, 423);
    assert_eq!(r.json()["ID"], "L1");
    assert_eq!(post(&bob, None, state_doc(6, "lin", "x")).await.status, 423);
    let (code, _) = post(&alice, Some("WRONG"), state_doc(6, "lin", "x"))
        .await
        .error()
        .expect(409);
    assert_eq!(code, "lock_id_mismatch");
    api.unlock(&alice, "net", "").await;
    let (code, msg) = post(&alice, Some("L1"), state_doc(6, "lin", "x"))
        .await
        .error()
        .expect(409);
    assert_eq!(code, "lock_id_mismatch");
    assert!(msg.contains("nothing is locked"), "{msg}");

    // Nothing refused was stored.
    assert_eq!(
        api.get_state(&alice, "net").await.text(),
        state_doc(5, "lin", "v5")
    );
    let listed = api.list(&alice).await;
    assert_eq!(listed["states"][0]["latest_version"], 1);
    let logs = logs.text();
    for reason in [
        "stale state",
        "fork",
        "another configuration",
        "not a Terraform",
    ] {
        assert!(logs.contains(reason), "the log names {reason}");
    }
    assert!(logs.contains("WARN") && logs.contains("state=net") && logs.contains("user bob"));
}

#[tokio::test]
async fn opentofu_documents_are_stored_and_returned_byte_for_byte() {
    let api = Api::new();
    let t = api.token("acme", "alice", "operator").await;
    // OpenTofu writes compact JSON plus a newline.
    let compact = "{\"version\":4,\"terraform_version\":\"1.10.0\",\"serial\":1,\"lineage\":\"3d1c\",\"outputs\":{},\"resources\":[],\"check_results\":null}\n";
    assert_eq!(api.post_state(&t, "plain", None, compact).await.status, 200);
    assert_eq!(api.get_state(&t, "plain").await.text(), compact);
    let encrypted = r#"{"serial":7,"lineage":"3d1c-uuid","meta":{"key_provider.pbkdf2.main":"eyJzYWx0IjoiYSJ9"},"encrypted_data":"q83vEjRWeJA=","encryption_version":"v0"}"#;
    assert_eq!(api.post_state(&t, "enc", None, encrypted).await.status, 200);
    assert_eq!(api.get_state(&t, "enc").await.text(), encrypted);
    let enc = api.listed(&t, "enc").await;
    assert_eq!(enc["opentofu_encrypted"], true);
    assert_eq!(enc["serial"], 7);
    // Its plaintext serial is checked: an older one is stale.
    let older = encrypted
        .replace("\"serial\":7", "\"serial\":6")
        .replace("q83v", "AAAA");
    let (code, _) = api
        .post_state(&t, "enc", None, older)
        .await
        .error()
        .expect(409);
    assert_eq!(code, "stale_serial");
}

/// A bare OpenTofu-encrypted document (no plaintext serial or lineage) in between does not
/// wipe what a write is checked against: the last serial and lineage carried stand. On the
/// local store, so what is kept goes through its stored record.
#[tokio::test]
async fn a_write_after_a_bare_encrypted_version_is_checked_against_the_last_one_carried() {
    let api = Api::on(Adapter::Local, crate::support::api::server_limits());
    let t = api.token("acme", "alice", "operator").await;
    let plain = |serial: u64, lineage: &str, extra: &str| {
        format!(
            r#"{{"version":4,"serial":{serial},"lineage":"{lineage}","outputs":{{}},"resources":[],"x":"{extra}"}}"#
        )
    };
    assert_eq!(
        api.post_state(&t, "net", None, plain(5, "l", ""))
            .await
            .status,
        200
    );
    let bare = r#"{"meta":{},"encrypted_data":"q83vEjRWeJA=","encryption_version":"v0"}"#;
    assert_eq!(api.post_state(&t, "net", None, bare).await.status, 200);
    assert_eq!(
        api.listed(&t, "net").await["serial"],
        serde_json::Value::Null
    );
    for (body, expected) in [
        (plain(4, "l", ""), "stale_serial"),
        (plain(5, "l", "other"), "fork"),
        (plain(6, "other", ""), "lineage_mismatch"),
    ] {
        let (code, _) = api
            .post_state(&t, "net", None, body)
            .await
            .error()
            .expect(409);
        assert_eq!(code, expected);
    }
    assert_eq!(
        api.post_state(&t, "net", None, plain(6, "l", ""))
            .await
            .status,
        200
    );
    assert_eq!(api.listed(&t, "net").await["serial"], 6);
}

/// 32 clients race to lock one state, 200 rounds: exactly one wins each round, and every
/// loser gets 423 with the winner's document.
async fn racing_lockers(api: Api) {
    let api = Arc::new(api);
    let mut tokens = Vec::new();
    for i in 0..4 {
        tokens.push(api.token("acme", &format!("u{i}"), "operator").await);
    }
    let clients = 32;
    let rounds = 200;
    for round in 0..rounds {
        let barrier = Arc::new(tokio::sync::Barrier::new(clients));
        let tasks: Vec<_> = (0..clients)
            .map(|c| {
                let (api, token, barrier) = (
                    api.clone(),
                    tokens[c % tokens.len()].clone(),
                    barrier.clone(),
                );
                tokio::spawn(async move {
                    let id = format!("r{round}-c{c}");
                    barrier.wait().await;
                    let r = api.lock(&token, "race", &lock_doc(&id)).await;
                    let holder = if r.status == 423 {
                        r.json()["ID"].as_str().unwrap().to_owned()
                    } else {
                        String::new()
                    };
                    (id, r.status, holder, token)
                })
            })
            .collect();
        let mut results = Vec::new();
        for task in tasks {
            results.push(task.await.unwrap());
        }
        let winners: Vec<_> = results.iter().filter(|r| r.1 == 200).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let winner = winners[0];
        for loser in results.iter().filter(|r| r.1 != 200) {
            assert_eq!(loser.1, 423, "round {round}");
            assert_eq!(
                loser.2, winner.0,
                "round {round}: a loser sees the winner's document"
            );
        }
        assert_eq!(
            api.unlock(&winner.3, "race", &lock_doc(&winner.0))
                .await
                .status,
            200
        );
    }
}

/// On the local server's store, where the race is decided by SQLite's transactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_lockers_get_exactly_one_winner_per_round() {
    racing_lockers(Api::on(
        Adapter::Local,
        crate::support::api::server_limits(),
    ))
    .await;
}

/// The same race on the memory store the rest of this tier runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_lockers_on_the_memory_store_get_exactly_one_winner_per_round() {
    racing_lockers(Api::new()).await;
}

/// Every refused lock, write or unlock is logged at WARNING with the lock IDs involved: the
/// one the request named first, then the holder's.
#[tokio::test]
async fn refusals_log_the_lock_ids_they_involve() {
    let (logs, _capturing) = logs::capture();
    let api = Api::new();
    let alice = api.token("acme", "alice", "operator").await;
    let bob = api.token("acme", "bob", "operator").await;
    assert_eq!(
        api.lock(&alice, "net", &lock_doc("HELD-1")).await.status,
        200
    );
    assert_eq!(api.lock(&bob, "net", &lock_doc("WANT-2")).await.status, 423);
    assert_eq!(
        api.post_state(&bob, "net", Some("WRITE-3"), state_doc(1, "lin", "x"))
            .await
            .status,
        423
    );
    assert_eq!(
        api.unlock(&alice, "net", &lock_doc("OLD-4")).await.status,
        409
    );
    let text = logs.text();
    let refusals: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("request refused"))
        .collect();
    assert_eq!(refusals.len(), 3, "{text}");
    for (line, ids) in refusals.iter().zip([
        r#"["WANT-2", "HELD-1"]"#,
        r#"["WRITE-3", "HELD-1"]"#,
        r#"["OLD-4", "HELD-1"]"#,
    ]) {
        assert!(line.contains("WARN"), "{line}");
        assert!(line.contains(&format!("lock_ids={ids}")), "{line}");
    }
}

/// Every refusal of a save, lock or unlock is logged with the state, the lock IDs and the
/// caller, whatever refused it and however early: a body over the limit (on Lambda, where
/// the body comes with the request), no valid credentials (said so), the role, no key. The
/// ID a lock or unlock body names is on the line even when the refusal came before the body
/// was checked.
#[tokio::test]
async fn every_refusal_line_names_the_state_the_lock_ids_and_the_caller() {
    let (logs, _capturing) = logs::capture();
    let mut api = Api::on(
        Adapter::Memory,
        hegemony_state::service::Limits {
            max_state_bytes: 1024,
            lambda_ceiling: Some(hegemony_state::http::lambda::PAYLOAD_CEILING),
            ..crate::support::api::server_limits()
        },
    );
    let alice = api.token("acme", "alice", "operator").await;
    let vic = api.token("acme", "vic", "viewer").await;
    let big = state_doc(1, "lin", &"x".repeat(2000));
    assert_eq!(
        api.post_state(&alice, "net", Some("W-1"), big).await.status,
        413
    );
    assert_eq!(
        api.lock("hgs_garbage", "net", &lock_doc("L-2"))
            .await
            .status,
        401
    );
    assert_eq!(api.lock(&vic, "net", &lock_doc("L-3")).await.status, 403);
    assert_eq!(api.unlock(&vic, "net", &lock_doc("U-4")).await.status, 403);
    api.fx.app.keys = None;
    assert_eq!(api.lock(&alice, "net", &lock_doc("L-5")).await.status, 503);
    assert_eq!(
        api.unlock(&alice, "net", &lock_doc("U-6")).await.status,
        503
    );
    let text = logs.text();
    let refusals: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("request refused"))
        .collect();
    assert_eq!(refusals.len(), 6, "{text}");
    let alice = r#"principal="user alice in org acme (operator)""#;
    let vic = r#"principal="user vic in org acme (viewer)""#;
    for (line, (code, ids, caller)) in refusals.iter().zip([
        ("too_large", r#"["W-1"]"#, alice),
        (
            "unauthenticated",
            r#"["L-2"]"#,
            r#"principal="none: no valid credentials""#,
        ),
        ("forbidden", r#"["L-3"]"#, vic),
        ("forbidden", r#"["U-4"]"#, vic),
        ("managed_state_unavailable", r#"["L-5"]"#, alice),
        ("managed_state_unavailable", r#"["U-6"]"#, alice),
    ]) {
        assert!(
            line.contains("WARN") && line.contains(code),
            "{code}: {line}"
        );
        assert!(line.contains(r#"state="net""#), "{line}");
        assert!(line.contains(&format!("lock_ids={ids}")), "{line}");
        assert!(line.contains(caller), "{line}");
    }
}
