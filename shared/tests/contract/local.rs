//! The local adapter's own cases (included by ../contract.rs), beside the contract every
//! adapter passes: its folder private to its owner, two processes on one folder sharing one
//! truth, and a catalog of an older schema brought up to date.

use super::*;

/// The folder holds state names, sizes and the audit log in the clear: a new one, its
/// catalog (with SQLite's journal files) and its blobs are the owner's alone.
#[tokio::test]
async fn a_new_local_store_is_readable_by_its_owner_only() {
    use hegemony_state::ports::{BlobStore, StateCatalog};
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    let (catalog, blobs) = local::open(&dir).unwrap();
    let record = StateRecord::fresh("acme", "net", "inc", NOW);
    catalog
        .commit(commit(&record, 0, vec![version(1, "b1")]))
        .await
        .unwrap();
    blobs.put("orgs/acme/b1", b"sealed".to_vec()).await.unwrap();
    assert_eq!(mode(&dir), 0o700, "the data folder");
    for entry in walk(&dir) {
        let expected = if entry.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(&entry), expected, "{}", entry.display());
    }
    assert!(walk(&dir).iter().any(|p| p.ends_with("catalog.sqlite-wal")));
}

/// Every file and folder under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(walk(&path));
        }
        found.push(path);
    }
    found
}

/// Two connections on one folder, as `serve` and `token create` are two processes: a commit
/// through one is seen by the other at once, and their compare-and-swaps exclude each other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_local_catalogs_on_one_folder_share_one_truth() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = local::open(dir.path()).unwrap();
    let (b, _) = local::open(dir.path()).unwrap();
    let record = StateRecord::fresh("acme", "net", "inc", NOW);
    use hegemony_state::ports::StateCatalog;
    a.commit(commit(&record, 0, vec![])).await.unwrap();
    assert_eq!(b.state("acme", "net").await.unwrap().unwrap().revision, 1);
    assert!(matches!(
        b.commit(commit(&record, 0, vec![])).await,
        Err(StoreError::Conflict)
    ));
}

/// A catalog made before inline content existed opens, gains the `contents` table, and reads
/// its blob versions as before; new inline versions go beside them. Every older schema: 2
/// (before app states and inline content), 3 (app states, no `contents`), 4 (no
/// `deleted_states`), 5 (no trust policies) and 6 (no protected states).
#[tokio::test]
async fn a_catalog_from_before_inline_content_opens_and_reads_as_before() {
    for older in [
        "DROP TABLE contents; DROP TABLE apps; DROP TABLE archives; DROP TABLE deleted_states; DROP TABLE trust_policies; DROP TABLE protected_states; PRAGMA user_version = 2;",
        "DROP TABLE contents; DROP TABLE deleted_states; DROP TABLE trust_policies; DROP TABLE protected_states; PRAGMA user_version = 3;",
        "DROP TABLE deleted_states; DROP TABLE trust_policies; DROP TABLE protected_states; PRAGMA user_version = 4;",
        "DROP TABLE trust_policies; DROP TABLE protected_states; PRAGMA user_version = 5;",
        "DROP TABLE protected_states; PRAGMA user_version = 6;",
    ] {
        an_older_catalog_opens_and_reads_as_before(older).await;
    }
}

async fn an_older_catalog_opens_and_reads_as_before(older: &str) {
    use hegemony_state::ports::StateCatalog;
    let dir = tempfile::tempdir().unwrap();
    let mut record = StateRecord::fresh("acme", "net", "inc", NOW);
    record.latest = Some(version(1, "b1"));
    record.next_version = 2;
    {
        let (catalog, _) = local::open(dir.path()).unwrap();
        catalog
            .commit(commit(&record, 0, vec![version(1, "b1")]))
            .await
            .unwrap();
    }
    let file = dir.path().join(local::CATALOG_FILE);
    let old = rusqlite::Connection::open(&file).unwrap();
    old.execute_batch(older).unwrap();
    let stored: String = old
        .query_row("SELECT record FROM versions", [], |r| r.get(0))
        .unwrap();
    assert!(
        !stored.contains("inline"),
        "a blob version's record is as before: {stored}"
    );
    drop(old);
    let (catalog, _) = local::open(dir.path()).unwrap();
    let (_, state) = catalog
        .org_and_state_with_content("acme", "net")
        .await
        .unwrap();
    let (read, content) = state.unwrap();
    assert_eq!(
        (read.latest, content),
        (Some(version(1, "b1")), None),
        "{older}"
    );
    record.latest = Some(inline_version(2));
    record.next_version = 3;
    let mut c = commit(&record, 1, vec![inline_version(2)]);
    c.contents.push(sealed(2, 100));
    catalog.commit(c).await.unwrap();
    assert_eq!(
        catalog
            .content("acme", "net", "inc", 2)
            .await
            .unwrap()
            .map(|c| c.len()),
        Some(100)
    );
    let version: i64 = rusqlite::Connection::open(&file)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 17, "brought up to date from: {older}");
}

/// A catalog at schema 6 (trust policies, no protected states) opens, keeps its org's
/// settings, and takes protected-state rules, which its settings then read with them.
#[tokio::test]
async fn a_schema_6_catalog_gains_protected_states() {
    use hegemony_state::domain::permission::{Allocation, Role};
    use hegemony_state::domain::protection::Protection;
    use hegemony_state::ports::{AccessCatalog, ProtectionCatalog};
    let dir = tempfile::tempdir().unwrap();
    let allocation = Allocation {
        manage: Some(Role::Operator),
        ..Allocation::default()
    };
    {
        let (catalog, _) = local::open(dir.path()).unwrap();
        catalog
            .set_allocation(
                "acme",
                &Allocation::default(),
                &allocation,
                &audit("acme", "permissions.changed"),
            )
            .await
            .unwrap();
    }
    let file = dir.path().join(local::CATALOG_FILE);
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute_batch("DROP TABLE protected_states; PRAGMA user_version = 6;")
        .unwrap();
    let (catalog, _) = local::open(dir.path()).unwrap();
    let rule = Protection {
        pattern: "prod-*".into(),
        policies: vec!["deploy".into()],
    };
    catalog
        .put_protection("acme", None, &rule, &audit("acme", "protection.set"))
        .await
        .unwrap();
    let settings = catalog.org("acme").await.unwrap().unwrap();
    assert_eq!(
        (settings.allocation, settings.protections),
        (allocation, vec![rule])
    );
    let version: i64 = rusqlite::Connection::open(&file)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 17);
}

/// A catalog at schema 7 (no inventory) opens up to date: its states are there, its index empty
/// until a rebuild, and a commit indexes its state as on a new catalog.
#[tokio::test]
async fn a_schema_7_catalog_gains_the_inventory() {
    use hegemony_state::domain::inventory::StateInventory;
    use hegemony_state::ports::{InventoryCatalog, InventoryChange, ResourceQuery, StateCatalog};
    let dir = tempfile::tempdir().unwrap();
    let mut record = StateRecord::fresh("acme", "net", "inc", NOW);
    record.latest = Some(version(1, "b1"));
    record.next_version = 2;
    {
        let (catalog, _) = local::open(dir.path()).unwrap();
        catalog
            .commit(commit(&record, 0, vec![version(1, "b1")]))
            .await
            .unwrap();
    }
    let file = dir.path().join(local::CATALOG_FILE);
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute_batch(
            "DROP TABLE inventory; DROP TABLE inventory_states; DROP TABLE inventory_text;
             PRAGMA user_version = 7;",
        )
        .unwrap();
    let (catalog, _) = local::open(dir.path()).unwrap();
    assert!(catalog.indexed_states("acme").await.unwrap().is_empty());
    let stored = catalog.state("acme", "net").await.unwrap().unwrap();
    let mut c = commit(&stored, stored.revision, vec![]);
    c.inventory = Some(InventoryChange::Replace(StateInventory {
        version: 1,
        indexed: false,
        instances: Vec::new(),
        tags: None,
    }));
    catalog.commit(c).await.unwrap();
    assert_eq!(catalog.indexed_states("acme").await.unwrap().len(), 1);
    let query = ResourceQuery {
        limit: 10,
        ..ResourceQuery::default()
    };
    assert!(catalog.resources("acme", &query).await.unwrap().is_empty());
    let version: i64 = rusqlite::Connection::open(&file)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 17);
}

/// A catalog at schema 8 (the inventory keyed by its addresses, without the row ids its
/// trigram index needs) opens up to date with every row it held: found by a substring few
/// addresses hold (answered from the new index) and by one they all hold, and changed by a
/// commit as on a new catalog.
#[tokio::test]
async fn a_schema_8_catalog_keeps_its_inventory_and_indexes_its_addresses() {
    use hegemony_state::domain::inventory::{Instance, Mode, ResourceTag, StateInventory};
    use hegemony_state::ports::{InventoryCatalog, InventoryChange, ResourceQuery, StateCatalog};
    let dir = tempfile::tempdir().unwrap();
    let mut record = StateRecord::fresh("acme", "net", "inc", NOW);
    record.latest = Some(version(1, "b1"));
    record.next_version = 2;
    {
        let (catalog, _) = local::open(dir.path()).unwrap();
        catalog
            .commit(commit(&record, 0, vec![version(1, "b1")]))
            .await
            .unwrap();
    }
    let file = dir.path().join(local::CATALOG_FILE);
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute_batch(
            r#"DROP TABLE inventory; DROP TABLE inventory_text; DROP TABLE inventory_states;
            DROP TABLE inventory_text_behind; DROP TABLE inventory_pending;
            CREATE TABLE inventory_states (
                org TEXT NOT NULL, state TEXT NOT NULL, version INTEGER NOT NULL,
                indexed INTEGER NOT NULL, instances INTEGER NOT NULL,
                PRIMARY KEY (org, state)) WITHOUT ROWID;
            CREATE TABLE inventory (
                org TEXT NOT NULL, state TEXT NOT NULL, address TEXT NOT NULL,
                module TEXT NOT NULL, mode TEXT NOT NULL, type TEXT NOT NULL,
                provider TEXT NOT NULL, digest TEXT,
                PRIMARY KEY (org, state, address)) WITHOUT ROWID;
            CREATE INDEX inventory_by_address ON inventory (org, state, address);
            CREATE INDEX inventory_by_type ON inventory (org, type, state, address);
            CREATE INDEX inventory_by_provider ON inventory (org, provider, state, address);
            CREATE INDEX inventory_by_module ON inventory (org, module, state, address);
            CREATE INDEX inventory_by_digest ON inventory (org, digest, state)
                WHERE digest IS NOT NULL;
            INSERT INTO inventory VALUES
                ('acme', 'net', 'aws_s3_bucket.logs', '', 'managed', 'aws_s3_bucket',
                 'registry.terraform.io/hashicorp/aws', 'd1'),
                ('acme', 'net', 'aws_vpc.main', '', 'managed', 'aws_vpc',
                 'registry.terraform.io/hashicorp/aws', NULL);
            INSERT INTO inventory_states VALUES ('acme', 'net', 1, 1, 2);
            PRAGMA user_version = 8;"#,
        )
        .unwrap();
    let (catalog, _) = local::open(dir.path()).unwrap();
    let search = |q: &str| ResourceQuery {
        q: Some(q.into()),
        limit: 10,
        ..ResourceQuery::default()
    };
    let found = |rows: Vec<hegemony_state::ports::ResourceRow>| {
        rows.into_iter().map(|r| r.address).collect::<Vec<_>>()
    };
    assert_eq!(
        found(
            catalog
                .resources("acme", &search("S3_BUCKET"))
                .await
                .unwrap()
        ),
        ["aws_s3_bucket.logs"]
    );
    assert_eq!(
        found(catalog.resources("acme", &search("aws")).await.unwrap()),
        ["aws_s3_bucket.logs", "aws_vpc.main"]
    );
    let stored = catalog.state("acme", "net").await.unwrap().unwrap();
    let mut c = commit(&stored, stored.revision, vec![]);
    c.inventory = Some(InventoryChange::Replace(StateInventory {
        version: 1,
        indexed: true,
        instances: vec![Instance {
            address: "aws_vpc.main".into(),
            module: "".into(),
            mode: Mode::Managed,
            resource_type: "aws_vpc".into(),
            provider: "registry.terraform.io/hashicorp/aws".into(),
            digest: Some("d2".into()),
            resource: ResourceTag(1),
        }],
        tags: Some(vec![ResourceTag(1)]),
    }));
    catalog.commit(c).await.unwrap();
    assert!(catalog
        .resources("acme", &search("bucket"))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        found(
            catalog
                .resources("acme", &search("vpc.MAIN"))
                .await
                .unwrap()
        ),
        ["aws_vpc.main"]
    );
    let conn = rusqlite::Connection::open(&file).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 17);
    let aside: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name = 'inventory_8'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(aside, 0, "the old table is gone");
}

/// A catalog at schema 9 (rows and entries without their resources' tags) opens up to date with
/// every row it held; its entries hold no tags, so a state's next save replaces its entry
/// whole, after which the entry holds the tags it was sent.
#[tokio::test]
async fn a_schema_9_catalog_keeps_its_inventory_and_gains_the_resources_tags() {
    use hegemony_state::domain::inventory::{Instance, Mode, ResourceTag, StateInventory};
    use hegemony_state::ports::{InventoryCatalog, InventoryChange, ResourceQuery, StateCatalog};
    let dir = tempfile::tempdir().unwrap();
    let mut record = StateRecord::fresh("acme", "net", "inc", NOW);
    record.latest = Some(version(1, "b1"));
    record.next_version = 2;
    let row = |address: &str, tag: u64| Instance {
        address: address.into(),
        module: "".into(),
        mode: Mode::Managed,
        resource_type: "aws_vpc".into(),
        provider: "registry.terraform.io/hashicorp/aws".into(),
        digest: None,
        resource: ResourceTag(tag),
    };
    {
        let (catalog, _) = local::open(dir.path()).unwrap();
        let mut c = commit(&record, 0, vec![version(1, "b1")]);
        c.inventory = Some(InventoryChange::Replace(StateInventory {
            version: 1,
            indexed: true,
            instances: vec![row("aws_vpc.a", 1), row("aws_vpc.b", 2)],
            tags: Some(vec![ResourceTag(1), ResourceTag(2)]),
        }));
        catalog.commit(c).await.unwrap();
        // A read writes the rows the commit recorded, as a schema 9 commit wrote them.
        let all = ResourceQuery {
            limit: 10,
            ..ResourceQuery::default()
        };
        assert_eq!(catalog.resources("acme", &all).await.unwrap().len(), 2);
    }
    let file = dir.path().join(local::CATALOG_FILE);
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute_batch(
            "DROP TABLE inventory_text_behind; DROP TABLE inventory_pending;
             DROP INDEX inventory_by_resource;
             ALTER TABLE inventory DROP COLUMN resource;
             ALTER TABLE inventory_states DROP COLUMN tags;
             PRAGMA user_version = 9;",
        )
        .unwrap();
    let (catalog, _) = local::open(dir.path()).unwrap();
    let all = ResourceQuery {
        limit: 10,
        ..ResourceQuery::default()
    };
    let addresses = |rows: Vec<hegemony_state::ports::ResourceRow>| {
        rows.into_iter().map(|r| r.address).collect::<Vec<_>>()
    };
    assert_eq!(
        addresses(catalog.resources("acme", &all).await.unwrap()),
        ["aws_vpc.a", "aws_vpc.b"]
    );
    assert_eq!(catalog.resource_tags("acme", "net").await.unwrap(), None);
    let stored = catalog.state("acme", "net").await.unwrap().unwrap();
    let mut c = commit(&stored, stored.revision, vec![]);
    c.inventory = Some(InventoryChange::Replace(StateInventory {
        version: 1,
        indexed: true,
        instances: vec![row("aws_vpc.a", 1), row("aws_vpc.c", 3)],
        tags: Some(vec![ResourceTag(1), ResourceTag(3)]),
    }));
    catalog.commit(c).await.unwrap();
    assert_eq!(
        addresses(catalog.resources("acme", &all).await.unwrap()),
        ["aws_vpc.a", "aws_vpc.c"]
    );
    assert_eq!(
        catalog.resource_tags("acme", "net").await.unwrap(),
        Some(vec![ResourceTag(1), ResourceTag(3)])
    );
    assert_eq!(
        catalog.indexed_states("acme").await.unwrap()[0].instances,
        2
    );
    let version: i64 = rusqlite::Connection::open(&file)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 17);
}

/// A catalog at schema 14 keyed its deleted states by the purge date the retention at the
/// delete gave; opened, they are keyed by their delete time, read from each record, so the
/// sweeper finds them by the retention in force.
#[tokio::test]
async fn a_schema_14_catalog_keys_its_deleted_states_by_delete_time() {
    use hegemony_state::domain::deleted::DeletedState;
    use hegemony_state::ports::{DeletedChange, StateCatalog, SweepCatalog};
    let dir = tempfile::tempdir().unwrap();
    let deleted_at = NOW + time::Duration::milliseconds(250);
    {
        let (catalog, _) = local::open(dir.path()).unwrap();
        let mut record = StateRecord::fresh("acme", "net", "inc", NOW);
        record.revision = 1;
        let kept = DeletedState::kept(&record, "0001-a", &[], &user(), deleted_at);
        let mut c = commit(&record, 0, Vec::new());
        c.deleted = Some(DeletedChange::Keep(Box::new(kept)));
        catalog.commit(c).await.unwrap();
    }
    let file = dir.path().join(local::CATALOG_FILE);
    // As schema 14 stored it: a week's retention at the delete.
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute_batch(
            "DROP INDEX deleted_states_by_deletion;
             ALTER TABLE deleted_states RENAME COLUMN deleted_at TO purge_at;
             UPDATE deleted_states SET purge_at = purge_at + 604800;
             CREATE INDEX deleted_states_by_purge ON deleted_states (purge_at);
             PRAGMA user_version = 14;",
        )
        .unwrap();
    let (catalog, _) = local::open(dir.path()).unwrap();
    let before = deleted_at - time::Duration::seconds(1);
    assert!(catalog.deleted_due(before, 10).await.unwrap().is_empty());
    assert_eq!(
        catalog.deleted_due(deleted_at, 10).await.unwrap(),
        [("acme".to_owned(), "0001-a".to_owned())],
        "due by its delete time, not the purge date stored"
    );
    let version: i64 = rusqlite::Connection::open(&file)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 17);
}

/// A catalog before schema 16 stored records without their incarnation's first version;
/// opened, each written state's record has it, taken as the oldest version it holds, and
/// one never written keeps none.
#[tokio::test]
async fn a_schema_15_catalog_gives_its_records_their_first_versions() {
    use hegemony_state::ports::StateCatalog;
    let dir = tempfile::tempdir().unwrap();
    {
        let (catalog, _) = local::open(dir.path()).unwrap();
        let mut record = StateRecord::fresh("acme", "net", "inc", NOW);
        record.next_version = 6;
        record.latest = Some(version(5, "b5"));
        let versions = (3..=5).map(|n| version(n, &format!("b{n}"))).collect();
        catalog.commit(commit(&record, 0, versions)).await.unwrap();
        let lock = StateRecord::fresh("acme", "lock", "inc", NOW);
        catalog.commit(commit(&lock, 0, Vec::new())).await.unwrap();
    }
    let file = dir.path().join(local::CATALOG_FILE);
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute_batch(
            "UPDATE states SET record = json_remove(record, '$.first_version');
             PRAGMA user_version = 15;",
        )
        .unwrap();
    let (catalog, _) = local::open(dir.path()).unwrap();
    let net = catalog.state("acme", "net").await.unwrap().unwrap();
    assert_eq!(net.first_version, Some(3));
    assert_eq!(net.versions_held(50), Some(3));
    let lock = catalog.state("acme", "lock").await.unwrap().unwrap();
    assert_eq!(lock.first_version, None);
}

/// A catalog at 16 may hold entries an older build left waiting for the next read to derive
/// (`inventory_waiting`): brought up to 17, each is listed as not indexed, its older
/// version's rows gone, for the state's next save (or `index rebuild`) to build whole, and
/// the table is dropped. An entry that did not wait keeps its rows.
#[tokio::test]
async fn a_schema_16_catalog_lists_its_waiting_entries_as_not_indexed() {
    use hegemony_state::domain::inventory::{Instance, Mode, ResourceTag, StateInventory};
    use hegemony_state::ports::{InventoryCatalog, InventoryChange, ResourceQuery, StateCatalog};
    let dir = tempfile::tempdir().unwrap();
    let entry = |address: &str| StateInventory {
        version: 1,
        indexed: true,
        instances: vec![Instance {
            address: address.into(),
            module: "".into(),
            mode: Mode::Managed,
            resource_type: "aws_vpc".into(),
            provider: "registry.terraform.io/hashicorp/aws".into(),
            digest: None,
            resource: ResourceTag(1),
        }],
        tags: Some(vec![ResourceTag(1)]),
    };
    {
        let (catalog, _) = local::open(dir.path()).unwrap();
        for (name, address) in [("net", "aws_vpc.old"), ("app", "aws_vpc.app")] {
            let record = StateRecord::fresh("acme", name, "inc", NOW);
            let mut c = commit(&record, 0, vec![version(1, "b1")]);
            c.inventory = Some(InventoryChange::Replace(entry(address)));
            catalog.commit(c).await.unwrap();
        }
    }
    let file = dir.path().join(local::CATALOG_FILE);
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute_batch(
            "CREATE TABLE inventory_waiting (
                 org TEXT NOT NULL, state TEXT NOT NULL,
                 PRIMARY KEY (org, state)) WITHOUT ROWID;
             INSERT INTO inventory_waiting VALUES ('acme', 'net');
             PRAGMA user_version = 16;",
        )
        .unwrap();
    let (catalog, _) = local::open(dir.path()).unwrap();
    let query = ResourceQuery {
        limit: 10,
        ..ResourceQuery::default()
    };
    let rows = catalog.resources("acme", &query).await.unwrap();
    let found: Vec<_> = rows.iter().map(|r| r.address.as_str()).collect();
    assert_eq!(found, ["aws_vpc.app"]);
    let entries = catalog.indexed_states("acme").await.unwrap();
    let net = entries.iter().find(|e| e.state == "net").unwrap();
    assert_eq!((net.indexed, net.instances), (false, 0), "{entries:?}");
    assert!(!catalog.holds_version("acme", "net", 1).await.unwrap());
    assert!(catalog.holds_version("acme", "app", 1).await.unwrap());
    assert_eq!(catalog.resource_tags("acme", "net").await.unwrap(), None);
    let tables: i64 = rusqlite::Connection::open(&file)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name = 'inventory_waiting'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 0);
}

/// The local store's marks of exchanged ID tokens do not expire by themselves: the sweeper's
/// pass over expired tokens drops those past their time too, and keeps the live ones.
#[tokio::test]
async fn the_sweeper_drops_exchanged_tokens_marks_past_their_time() {
    use hegemony_state::domain::permission::Role;
    use hegemony_state::ports::{
        AccessCatalog, ExchangeMark, SweepCatalog, TokenKind, TokenRecord,
    };
    let dir = tempfile::tempdir().unwrap();
    let (catalog, _) = local::open(dir.path()).unwrap();
    for (n, minutes) in [(1, 5), (2, 60)] {
        let token = TokenRecord {
            hash: format!("{n}").repeat(64),
            id: format!("tok-{n}"),
            kind: TokenKind::Session,
            org: "acme".into(),
            user: "workload job".into(),
            role: Role::Operator,
            created_at: NOW,
            expires_at: Some(NOW + time::Duration::hours(2)),
            revoked: false,
            step: None,
            session: None,
        };
        let mark = ExchangeMark {
            key: format!("{n}").repeat(64),
            until: NOW + time::Duration::minutes(minutes),
        };
        catalog
            .put_session(
                &token,
                &mark,
                &audit("acme", "workload.session_opened"),
                NOW,
            )
            .await
            .unwrap();
    }
    let dropped = catalog
        .drop_expired_tokens(NOW + time::Duration::minutes(30), 100)
        .await
        .unwrap();
    assert_eq!(dropped, 0, "no token expired: the marks go uncounted");
    let keys: Vec<String> = {
        let conn = rusqlite::Connection::open(dir.path().join(local::CATALOG_FILE)).unwrap();
        let mut stmt = conn.prepare("SELECT key FROM exchanged_tokens").unwrap();
        let rows = stmt.query_map([], |r| r.get(0)).unwrap();
        rows.map(Result::unwrap).collect()
    };
    assert_eq!(keys, vec!["2".repeat(64)], "the live mark stays");
}
