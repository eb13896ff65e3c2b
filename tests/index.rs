//! `hegemony-state index rebuild` through the binary, on a local store a running server
//! writes to: a store whose index lost its entries (as one brought up from a release
//! without the inventory has none) gets them back from each state's latest version, the
//! same digests the saves made; a second run finds everything current and writes nothing,
//! and one with `--all` builds every entry again.

use std::process::{Command, Stdio};

use hegemony_state::adapters::local::SqliteCatalog;
use hegemony_state::ports::{InventoryCatalog, ResourceQuery};
use hegemony_state_blackbox::*;

fn state(serial: u64, bucket: &str) -> String {
    format!(
        r#"{{"version":4,"serial":{serial},"lineage":"lin","resources":[{{"mode":"managed","type":"aws_s3_bucket","name":"b","provider":"provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{{"attributes":{{"arn":"arn:aws:s3:::{bucket}"}}}}]}}]}}"#
    )
}

fn rebuild(server: &Server, args: &[&str]) -> String {
    let out = Command::new(bin())
        .args(["index", "rebuild", "--data-dir"])
        .arg(server.data_dir())
        .args(args)
        .env_remove("HEGEMONY_TF_STATE_ENCRYPTION_KEY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "index rebuild: {text}");
    text
}

/// Every row of the org's index, with the conflicts found, as the catalog answers.
fn index_of(server: &Server, org: &str) -> (Vec<String>, usize) {
    let catalog = SqliteCatalog::open(
        &server
            .data_dir()
            .join(hegemony_state::adapters::local::CATALOG_FILE),
    )
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let query = ResourceQuery {
            limit: 100,
            ..ResourceQuery::default()
        };
        let rows = catalog.resources(org, &query).await.unwrap();
        let conflicts = catalog.conflicts(org, None).await.unwrap();
        (
            rows.iter()
                .map(|r| format!("{}@{} {}", r.state, r.version, r.address))
                .collect(),
            conflicts.len(),
        )
    })
}

#[test]
fn a_rebuild_brings_back_a_lost_index_and_a_second_run_skips_it() {
    let server = Server::start();
    let token = server.token("acme", "alice", "operator");
    let api = Api::new(&server);
    for (name, bucket) in [("net", "shared"), ("app", "shared"), ("web", "own")] {
        let r = api.post_state(&token, name, None, state(1, bucket));
        assert_eq!(r.status(), 200, "{name}");
    }
    let r = api.post_state(&token, "net", None, state(2, "shared"));
    assert_eq!(r.status(), 200);
    let saved = index_of(&server, "acme");
    assert_eq!(
        saved,
        (
            vec![
                "app@1 aws_s3_bucket.b".to_owned(),
                "net@2 aws_s3_bucket.b".to_owned(),
                "web@1 aws_s3_bucket.b".to_owned()
            ],
            1
        )
    );
    let file = server
        .data_dir()
        .join(hegemony_state::adapters::local::CATALOG_FILE);
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute_batch("DELETE FROM inventory; DELETE FROM inventory_states;")
        .unwrap();
    assert_eq!(index_of(&server, "acme"), (Vec::new(), 0));

    let first = rebuild(&server, &[]);
    assert!(
        first.contains("acme: indexed 3, already current 0"),
        "{first}"
    );
    assert_eq!(
        index_of(&server, "acme"),
        saved,
        "the digests the saves made"
    );
    let second = rebuild(&server, &["--org", "acme"]);
    assert!(
        second.contains("acme: indexed 0, already current 3"),
        "{second}"
    );
    // `--all` builds every entry again, current or not (after an upgrade that changed the
    // index's rules), to the same rows.
    let all = rebuild(&server, &["--org", "acme", "--all"]);
    assert!(all.contains("acme: indexed 3, already current 0"), "{all}");
    assert_eq!(index_of(&server, "acme"), saved);
    // A save after the rebuild keeps the index current, as before.
    let r = api.post_state(&token, "web", None, state(2, "shared"));
    assert_eq!(r.status(), 200);
    assert_eq!(index_of(&server, "acme").1, 1);
    assert_eq!(index_of(&server, "acme").0[2], "web@2 aws_s3_bucket.b");
}
