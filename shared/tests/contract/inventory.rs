//! The inventory port's cases of the contract (included by ../contract.rs): a commit replaces
//! or removes its state's entry in the same transaction, a search filters and pages in
//! (state, address) order, conflicts are equal digests across states, a rebuild's write is
//! conditional on the state's revision, one org never sees another's, and a search answers as
//! of one commit while commits land (on the adapters whose atomicity is real here).

use super::*;
use hegemony_state::domain::inventory::{Instance, Mode, ResourceTag, StateInventory};
use hegemony_state::ports::{
    IndexedState, InventoryChange, InventoryKey, InventoryPatch, ResourceQuery, ResourceRow,
};

const AWS: &str = "registry.terraform.io/hashicorp/aws";
const GOOGLE: &str = "registry.terraform.io/hashicorp/google";

fn instance(address: &str, kind: &str, provider: &str, digest: Option<&str>) -> Instance {
    let module = address
        .rsplit_once(&format!(".{kind}."))
        .map(|(m, _)| m.to_owned())
        .unwrap_or_default();
    Instance {
        address: address.into(),
        module: module.into(),
        mode: if address.contains("data.") {
            Mode::Data
        } else {
            Mode::Managed
        },
        resource_type: kind.into(),
        provider: provider.into(),
        digest: digest.map(str::to_owned),
        resource: tag(address, digest),
    }
}

/// One resource an instance: its tag stands for its fields.
fn tag(address: &str, digest: Option<&str>) -> ResourceTag {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    (address, digest).hash(&mut hasher);
    ResourceTag(hasher.finish())
}

/// An entry kept by resource: each instance its own.
fn inventory(version: u64, mut instances: Vec<Instance>) -> StateInventory {
    instances.sort_by(|a, b| a.address.cmp(&b.address));
    StateInventory {
        version,
        indexed: true,
        tags: Some(instances.iter().map(|i| i.resource).collect()),
        instances,
    }
}

/// Creates state `name` of `org` at version `n` with `change` to its entry; returns its
/// record as stored.
async fn created(
    f: &Fixture,
    org: &str,
    name: &str,
    n: u64,
    change: InventoryChange,
) -> StateRecord {
    let mut record = StateRecord::fresh(org, name, &format!("inc-{name}"), NOW);
    record.latest = Some(version(n, &format!("b{n}")));
    record.next_version = n + 1;
    let mut c = commit(&record, 0, vec![version(n, &format!("b{n}"))]);
    c.inventory = Some(change);
    f.catalog.commit(c).await.unwrap();
    f.catalog.state(org, name).await.unwrap().unwrap()
}

/// Creates state `name` of `org` at version 1 with `entry` as its inventory; returns its
/// record as stored.
async fn indexed(f: &Fixture, org: &str, name: &str, entry: StateInventory) -> StateRecord {
    created(f, org, name, 1, InventoryChange::Replace(entry)).await
}

fn addresses(rows: &[ResourceRow]) -> Vec<String> {
    rows.iter()
        .map(|r| format!("{}:{}", r.state, r.address))
        .collect()
}

fn query(limit: usize) -> ResourceQuery {
    ResourceQuery {
        limit,
        ..ResourceQuery::default()
    }
}

async fn search(f: &Fixture, q: ResourceQuery) -> Vec<String> {
    addresses(&f.catalog.resources("acme", &q).await.unwrap())
}

/// Two states: `app` (aws bucket and instance in a module, a data source) and `net` (a
/// google network and an aws bucket).
async fn two_states(f: &Fixture) {
    indexed(
        f,
        "acme",
        "net",
        inventory(
            1,
            vec![
                instance("aws_s3_bucket.logs", "aws_s3_bucket", AWS, Some("d-logs")),
                instance(
                    "google_compute_network.main",
                    "google_compute_network",
                    GOOGLE,
                    Some("d-net"),
                ),
            ],
        ),
    )
    .await;
    indexed(
        f,
        "acme",
        "app",
        inventory(
            1,
            vec![
                instance(
                    "aws_s3_bucket.Assets",
                    "aws_s3_bucket",
                    AWS,
                    Some("d-assets"),
                ),
                instance("data.aws_ami.base", "aws_ami", AWS, None),
                instance(
                    "module.web[\"a\"].aws_instance.this[0]",
                    "aws_instance",
                    AWS,
                    Some("d-i"),
                ),
            ],
        ),
    )
    .await;
}

/// How many instances `org`'s index holds, as the overview counts them.
async fn instances_in(f: &Fixture, org: &str) -> u64 {
    let summary = f.catalog.inventory_summary(org).await.unwrap();
    summary.counts.instances
}

/// Indexes `org`'s `state` as holding the logs bucket of [`two_states`]' `net` alone.
async fn logs_bucket_in(f: &Fixture, org: &str, state: &str) {
    let logs = instance("aws_s3_bucket.logs", "aws_s3_bucket", AWS, Some("d-logs"));
    indexed(f, org, state, inventory(1, vec![logs])).await;
}

pub async fn a_commit_replaces_and_removes_its_states_inventory(f: Fixture) {
    let record = indexed(
        &f,
        "acme",
        "net",
        inventory(
            1,
            vec![
                instance("aws_s3_bucket.a", "aws_s3_bucket", AWS, None),
                instance("aws_vpc.kept", "aws_vpc", AWS, Some("d1")),
                instance("aws_vpc.moved", "aws_vpc", AWS, Some("d2")),
            ],
        ),
    )
    .await;
    // One instance gone, one new, one whose identity changed, one as it was.
    next_version(
        &f,
        &record,
        InventoryChange::Replace(inventory(
            2,
            vec![
                instance("aws_s3_bucket.b", "aws_s3_bucket", AWS, None),
                instance("aws_vpc.kept", "aws_vpc", AWS, Some("d1")),
                instance("aws_vpc.moved", "aws_vpc", GOOGLE, Some("d3")),
            ],
        )),
    )
    .await;
    let rows = f.catalog.resources("acme", &query(10)).await.unwrap();
    assert_eq!(
        addresses(&rows),
        [
            "net:aws_s3_bucket.b",
            "net:aws_vpc.kept",
            "net:aws_vpc.moved"
        ]
    );
    assert!(rows.iter().all(|r| r.version == 2), "{rows:?}");
    assert_eq!(rows[0].provider, AWS);
    assert_eq!(rows[0].mode, Mode::Managed);
    assert_eq!(rows[2].provider, GOOGLE);
    let other = indexed(
        &f,
        "acme",
        "other",
        inventory(1, vec![instance("aws_vpc.x", "aws_vpc", AWS, Some("d3"))]),
    )
    .await;
    let conflicts = f.catalog.conflicts("acme", None).await.unwrap();
    assert_eq!(conflicts.len(), 1, "the changed digest is the one stored");
    assert_eq!(
        addresses(&conflicts[0]),
        ["net:aws_vpc.moved", "other:aws_vpc.x"]
    );
    let mut removal = commit(&other, other.revision, vec![]);
    removal.inventory = Some(InventoryChange::Remove);
    f.catalog.commit(removal).await.unwrap();
    // A commit without a change (a lock) leaves the entry; a lost one writes nothing.
    let stored = f.catalog.state("acme", "net").await.unwrap().unwrap();
    f.catalog
        .commit(commit(&stored, stored.revision, vec![]))
        .await
        .unwrap();
    let mut stale = commit(&stored, stored.revision, vec![]);
    stale.inventory = Some(InventoryChange::Remove);
    assert!(matches!(
        f.catalog.commit(stale).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(f.catalog.indexed_states("acme").await.unwrap().len(), 1);
    let stored = f.catalog.state("acme", "net").await.unwrap().unwrap();
    let mut removal = commit(&stored, stored.revision, vec![]);
    removal.inventory = Some(InventoryChange::Remove);
    f.catalog.commit(removal).await.unwrap();
    assert!(f
        .catalog
        .resources("acme", &query(10))
        .await
        .unwrap()
        .is_empty());
    assert!(f.catalog.indexed_states("acme").await.unwrap().is_empty());
}

/// A commit that keeps the entry moves its version and leaves its instances, conflicts and
/// counts as they were; kept where there is no entry, it leaves one listed as not indexed.
pub async fn a_commit_that_keeps_the_entry_moves_only_its_version(f: Fixture) {
    let record = indexed(
        &f,
        "acme",
        "net",
        inventory(
            1,
            vec![
                instance("aws_s3_bucket.a", "aws_s3_bucket", AWS, Some("d1")),
                instance("aws_vpc.main", "aws_vpc", AWS, Some("d2")),
            ],
        ),
    )
    .await;
    indexed(
        &f,
        "acme",
        "app",
        inventory(1, vec![instance("aws_vpc.x", "aws_vpc", AWS, Some("d2"))]),
    )
    .await;
    assert!(f.catalog.holds_version("acme", "net", 1).await.unwrap());
    next_version(&f, &record, InventoryChange::Keep { version: 2 }).await;
    assert!(f.catalog.holds_version("acme", "net", 2).await.unwrap());
    // A store that keeps entries whole (no tags to patch) answers unread (see the port).
    let reads = f
        .catalog
        .resource_tags("acme", "net")
        .await
        .unwrap()
        .is_some();
    assert_eq!(
        f.catalog.holds_version("acme", "net", 1).await.unwrap(),
        !reads
    );
    assert_eq!(
        f.catalog.holds_version("acme", "gone", 1).await.unwrap(),
        !reads
    );
    let rows = f.catalog.resources("acme", &query(10)).await.unwrap();
    assert_eq!(
        addresses(&rows),
        ["app:aws_vpc.x", "net:aws_s3_bucket.a", "net:aws_vpc.main"]
    );
    assert_eq!(
        rows.iter().map(|r| r.version).collect::<Vec<_>>(),
        [1, 2, 2]
    );
    let conflicts = f.catalog.conflicts("acme", Some("net")).await.unwrap();
    assert_eq!(
        addresses(&conflicts[0]),
        ["app:aws_vpc.x", "net:aws_vpc.main"]
    );
    assert_eq!(conflicts[0][1].version, 2);
    assert_eq!(
        f.catalog.indexed_states("acme").await.unwrap()[1],
        IndexedState {
            state: "net".into(),
            version: 2,
            indexed: true,
            instances: 2,
        }
    );
    assert_eq!(instances_in(&f, "acme").await, 3);
    // No entry to keep (dropped outside the service): a store that can tell refuses the
    // commit, whole, so the save sends the entry; one that does not lists the gap.
    let mut lost = StateRecord::fresh("acme", "lost", "inc-lost", NOW);
    lost.latest = Some(version(4, "b4"));
    lost.next_version = 5;
    let mut c = commit(&lost, 0, vec![version(4, "b4")]);
    c.inventory = Some(InventoryChange::Keep { version: 4 });
    let kept = f.catalog.commit(c).await;
    let entries = f.catalog.indexed_states("acme").await.unwrap();
    if reads {
        assert!(matches!(kept, Err(StoreError::Conflict)), "{kept:?}");
        assert!(f.catalog.state("acme", "lost").await.unwrap().is_none());
        assert_eq!(entries.len(), 2, "{entries:?}");
    } else {
        kept.unwrap();
        assert_eq!(
            entries[1],
            IndexedState {
                state: "lost".into(),
                version: 4,
                indexed: false,
                instances: 0,
            },
            "{entries:?}"
        );
    }
    assert_eq!(
        f.catalog.holds_version("acme", "lost", 4).await.unwrap(),
        !reads
    );
    assert_eq!(
        f.catalog.resources("acme", &query(10)).await.unwrap().len(),
        3
    );
}

/// A save that changed a few resources sends only theirs: the rows of the resources whose
/// tags the entry holds stay, those of the others go, and what it sends is added, as if
/// the whole entry had been replaced. A store that keeps entries whole holds no tags, and
/// a patch over an entry without tags leaves it listed as not indexed.
pub async fn a_patch_keeps_the_rows_of_the_resources_still_there(f: Fixture) {
    let (a, b, c) = (
        instance("aws_s3_bucket.a", "aws_s3_bucket", AWS, Some("d-a")),
        instance("aws_s3_bucket.b", "aws_s3_bucket", AWS, Some("d-b")),
        instance("aws_s3_bucket.c", "aws_s3_bucket", AWS, Some("d-c")),
    );
    let record = indexed(
        &f,
        "acme",
        "net",
        inventory(1, vec![a.clone(), b.clone(), c.clone()]),
    )
    .await;
    indexed(
        &f,
        "acme",
        "app",
        inventory(
            1,
            vec![instance(
                "aws_s3_bucket.x",
                "aws_s3_bucket",
                AWS,
                Some("d-c2"),
            )],
        ),
    )
    .await;
    let stored = f.catalog.resource_tags("acme", "net").await.unwrap();
    let changed = instance("aws_s3_bucket.c", "aws_s3_bucket", AWS, Some("d-c2"));
    let added = instance("module.m.aws_s3_bucket.zed", "aws_s3_bucket", AWS, None);
    let tags = vec![added.resource, a.resource, changed.resource];
    next_version(
        &f,
        &record,
        InventoryChange::Patch(InventoryPatch {
            version: 2,
            tags: tags.clone(),
            gone: vec![b.resource, c.resource],
            instances: vec![changed, added],
        }),
    )
    .await;
    let entry = |entries: Vec<IndexedState>| entries.into_iter().find(|e| e.state == "net");
    let Some(stored) = stored else {
        assert_eq!(
            entry(f.catalog.indexed_states("acme").await.unwrap()),
            Some(IndexedState {
                state: "net".into(),
                version: 2,
                indexed: false,
                instances: 0,
            })
        );
        return;
    };
    assert_eq!(
        stored,
        [a.resource, b.resource, c.resource],
        "in the entry's order"
    );
    assert_eq!(
        search(&f, query(10)).await,
        [
            "app:aws_s3_bucket.x",
            "net:aws_s3_bucket.a",
            "net:aws_s3_bucket.c",
            "net:module.m.aws_s3_bucket.zed"
        ]
    );
    let found = |q: &str| ResourceQuery {
        q: Some(q.into()),
        limit: 10,
        ..ResourceQuery::default()
    };
    assert_eq!(
        search(&f, found("BUCKET.ZED")).await,
        ["net:module.m.aws_s3_bucket.zed"]
    );
    assert!(search(&f, found("bucket.b")).await.is_empty());
    let conflicts = f.catalog.conflicts("acme", None).await.unwrap();
    assert_eq!(
        addresses(&conflicts[0]),
        ["app:aws_s3_bucket.x", "net:aws_s3_bucket.c"]
    );
    assert_eq!(
        entry(f.catalog.indexed_states("acme").await.unwrap()),
        Some(IndexedState {
            state: "net".into(),
            version: 2,
            indexed: true,
            instances: 3,
        })
    );
    assert_eq!(
        f.catalog.resource_tags("acme", "net").await.unwrap(),
        Some(tags)
    );
    // An entry replaced whole (no tags): a patch over it cannot be applied.
    let whole = indexed(
        &f,
        "acme",
        "whole",
        StateInventory {
            tags: None,
            ..inventory(1, vec![a.clone()])
        },
    )
    .await;
    assert_eq!(
        f.catalog.resource_tags("acme", "whole").await.unwrap(),
        None
    );
    next_version(
        &f,
        &whole,
        InventoryChange::Patch(InventoryPatch {
            version: 2,
            tags: vec![a.resource],
            gone: Vec::new(),
            instances: Vec::new(),
        }),
    )
    .await;
    let entries = f.catalog.indexed_states("acme").await.unwrap();
    assert_eq!(
        entries.iter().find(|e| e.state == "whole"),
        Some(&IndexedState {
            state: "whole".into(),
            version: 2,
            indexed: false,
            instances: 0,
        })
    );
    assert_eq!(search(&f, found("whole")).await, Vec::<String>::new());
}

pub async fn a_search_filters_and_pages_in_state_then_address_order(f: Fixture) {
    two_states(&f).await;
    assert_eq!(
        search(&f, query(100)).await,
        [
            "app:aws_s3_bucket.Assets",
            "app:data.aws_ami.base",
            "app:module.web[\"a\"].aws_instance.this[0]",
            "net:aws_s3_bucket.logs",
            "net:google_compute_network.main",
        ]
    );
    let q = |text: &str| ResourceQuery {
        q: Some(text.into()),
        ..query(100)
    };
    assert_eq!(
        search(&f, q("BUCKET.a")).await,
        ["app:aws_s3_bucket.Assets"],
        "a case-insensitive substring"
    );
    assert_eq!(search(&f, q("[\"a\"]")).await.len(), 1);
    assert_eq!(search(&f, q("s3_b")).await.len(), 2);
    for literal in ["s3%b", "s3_%", "%", "s3\\_b"] {
        assert!(
            search(&f, q(literal)).await.is_empty(),
            "{literal} is no pattern"
        );
    }
    let of_type = ResourceQuery {
        resource_type: Some("aws_s3_bucket".into()),
        ..query(100)
    };
    assert_eq!(
        search(&f, of_type).await,
        ["app:aws_s3_bucket.Assets", "net:aws_s3_bucket.logs"]
    );
    let in_module = ResourceQuery {
        module: Some("module.web[\"a\"]".into()),
        ..query(100)
    };
    assert_eq!(search(&f, in_module).await.len(), 1);
    let root = ResourceQuery {
        module: Some(String::new()),
        state: Some("net".into()),
        ..query(100)
    };
    assert_eq!(search(&f, root).await.len(), 2);
    for spelling in [GOOGLE, "hashicorp/google", "google"] {
        let by = ResourceQuery {
            provider: Some(spelling.into()),
            ..query(100)
        };
        assert_eq!(
            search(&f, by).await,
            ["net:google_compute_network.main"],
            "{spelling}"
        );
    }
    for other in ["oogle", "registry.terraform.io", "other/google"] {
        let by = ResourceQuery {
            provider: Some(other.into()),
            ..query(100)
        };
        assert!(search(&f, by).await.is_empty(), "{other}");
    }
    // Pages of two, each after the last row of the one before.
    let mut pages = Vec::new();
    let mut after = None;
    loop {
        let page = f
            .catalog
            .resources(
                "acme",
                &ResourceQuery {
                    after: after.clone(),
                    ..query(2)
                },
            )
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        after = page.last().map(|r| (r.state.clone(), r.address.clone()));
        pages.push(addresses(&page));
    }
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 1]);
    assert_eq!(pages.concat(), search(&f, query(100)).await);
}

/// A store may answer a substring that few addresses hold from an index of them, and one
/// that many hold by walking its rows in order (the local store looks up at most 2,000):
/// either way the answer is the same, in the same order, paged and filtered alike, its case
/// folded for ASCII letters alone.
pub async fn a_substring_is_found_alike_however_many_addresses_hold_it(f: Fixture) {
    let many = (0..2100)
        .map(|i| {
            instance(
                &format!("aws_s3_bucket.b{i:04}"),
                "aws_s3_bucket",
                AWS,
                None,
            )
        })
        .collect();
    indexed(&f, "acme", "big", inventory(1, many)).await;
    indexed(
        &f,
        "acme",
        "small",
        inventory(
            1,
            vec![
                instance("aws_s3_bucket.Été", "aws_s3_bucket", AWS, None),
                instance("aws_vpc.b0042x", "aws_vpc", AWS, None),
            ],
        ),
    )
    .await;
    let q = |text: &str, limit: usize| ResourceQuery {
        q: Some(text.into()),
        ..query(limit)
    };
    assert_eq!(
        search(&f, q("BUCKET", 3)).await,
        [
            "big:aws_s3_bucket.b0000",
            "big:aws_s3_bucket.b0001",
            "big:aws_s3_bucket.b0002"
        ]
    );
    let last = ResourceQuery {
        after: Some(("big".into(), "aws_s3_bucket.b2098".into())),
        ..q("bucket", 5)
    };
    assert_eq!(
        search(&f, last).await,
        ["big:aws_s3_bucket.b2099", "small:aws_s3_bucket.Été"]
    );
    assert_eq!(
        search(&f, q("B0042", 10)).await,
        ["big:aws_s3_bucket.b0042", "small:aws_vpc.b0042x"]
    );
    let after = ResourceQuery {
        after: Some(("big".into(), "aws_s3_bucket.b0042".into())),
        ..q("b0042", 10)
    };
    assert_eq!(search(&f, after).await, ["small:aws_vpc.b0042x"]);
    let of_type = ResourceQuery {
        resource_type: Some("aws_vpc".into()),
        ..q("b0042", 10)
    };
    assert_eq!(search(&f, of_type).await, ["small:aws_vpc.b0042x"]);
    assert_eq!(
        search(&f, q("bucket.ÉTÉ", 10)).await,
        Vec::<String>::new(),
        "É and é are not folded"
    );
    assert_eq!(
        search(&f, q("BUCKET.Été", 10)).await,
        ["small:aws_s3_bucket.Été"]
    );
    assert!(search(&f, q("b0042y", 10)).await.is_empty());
}

pub async fn conflicts_are_equal_digests_across_states_never_within_one(f: Fixture) {
    indexed(
        &f,
        "acme",
        "a",
        inventory(
            1,
            vec![
                instance("aws_s3_bucket.x", "aws_s3_bucket", AWS, Some("shared")),
                instance("aws_s3_bucket.y", "aws_s3_bucket", AWS, Some("twice-here")),
                instance("aws_s3_bucket.z", "aws_s3_bucket", AWS, Some("twice-here")),
                instance("data.aws_s3_bucket.r", "aws_s3_bucket", AWS, None),
            ],
        ),
    )
    .await;
    indexed(
        &f,
        "acme",
        "b",
        inventory(
            1,
            vec![instance(
                "aws_s3_bucket.copy",
                "aws_s3_bucket",
                AWS,
                Some("shared"),
            )],
        ),
    )
    .await;
    indexed(
        &f,
        "acme",
        "c",
        inventory(
            1,
            vec![instance(
                "aws_s3_bucket.other",
                "aws_s3_bucket",
                AWS,
                Some("alone"),
            )],
        ),
    )
    .await;
    let groups = f.catalog.conflicts("acme", None).await.unwrap();
    let shown: Vec<_> = groups.iter().map(|g| addresses(g)).collect();
    assert_eq!(shown, [vec!["a:aws_s3_bucket.x", "b:aws_s3_bucket.copy"]]);
    assert_eq!(
        f.catalog.conflicts("acme", Some("b")).await.unwrap(),
        groups
    );
    assert!(f
        .catalog
        .conflicts("acme", Some("c"))
        .await
        .unwrap()
        .is_empty());
    assert!(f.catalog.conflicts("other", None).await.unwrap().is_empty());
}

pub async fn another_orgs_inventory_is_never_seen(f: Fixture) {
    two_states(&f).await;
    logs_bucket_in(&f, "other", "net").await;
    assert!(f.catalog.conflicts("acme", None).await.unwrap().is_empty());
    assert_eq!(search(&f, query(100)).await.len(), 5);
    let theirs = f.catalog.resources("other", &query(100)).await.unwrap();
    assert_eq!(addresses(&theirs), ["net:aws_s3_bucket.logs"]);
    assert_eq!(f.catalog.indexed_states("other").await.unwrap().len(), 1);
    assert_eq!(instances_in(&f, "other").await, 1);
}

pub async fn a_rebuilds_write_holds_only_while_the_state_is_as_read(f: Fixture) {
    let record = indexed(&f, "acme", "net", inventory(1, Vec::new())).await;
    let entry = inventory(
        1,
        vec![instance("aws_s3_bucket.a", "aws_s3_bucket", AWS, None)],
    );
    let stale = f
        .catalog
        .put_inventory("acme", "net", record.revision - 1, &entry)
        .await;
    assert!(matches!(stale, Err(StoreError::Conflict)), "{stale:?}");
    let newer = inventory(2, Vec::new());
    let wrong = f
        .catalog
        .put_inventory("acme", "net", record.revision, &newer)
        .await;
    assert!(matches!(wrong, Err(StoreError::Conflict)), "{wrong:?}");
    let missing = f.catalog.put_inventory("acme", "none", 1, &entry).await;
    assert!(matches!(missing, Err(StoreError::Conflict)), "{missing:?}");
    assert!(f
        .catalog
        .resources("acme", &query(10))
        .await
        .unwrap()
        .is_empty());
    f.catalog
        .put_inventory("acme", "net", record.revision, &entry)
        .await
        .unwrap();
    assert_eq!(search(&f, query(10)).await, ["net:aws_s3_bucket.a"]);
}

/// Commits the next version of the state whose record is `record`, with `change` to its
/// entry; returns the record as stored.
async fn next_version(f: &Fixture, record: &StateRecord, change: InventoryChange) -> StateRecord {
    let n = record.next_version;
    let mut next = record.clone();
    next.latest = Some(version(n, &format!("b{n}")));
    next.next_version = n + 1;
    let mut c = commit(&next, record.revision, vec![version(n, &format!("b{n}"))]);
    c.inventory = Some(change);
    f.catalog.commit(c).await.unwrap();
    f.catalog
        .state(&record.org, &record.name)
        .await
        .unwrap()
        .unwrap()
}

/// Every commit's change to an entry is what the next read answers, from the index alone
/// (nothing derives an entry later, nothing opens a version): a whole entry, a keep, a
/// patch (on a store that keeps entries by resource), a whole entry again and a removal,
/// each seen at once by a search, the conflicts, the list of entries and the summary.
pub async fn every_commit_is_answered_by_the_next_read(f: Fixture) {
    let a = instance("aws_s3_bucket.a", "aws_s3_bucket", AWS, Some("d-a"));
    let b = instance("aws_s3_bucket.b", "aws_s3_bucket", AWS, Some("d-b"));
    // `app` holds `a`'s object too: a conflict while `net` holds `a`.
    let app = instance("aws_s3_bucket.shared", "aws_s3_bucket", AWS, Some("d-a"));
    indexed(&f, "acme", "app", inventory(1, vec![app])).await;
    let record = indexed(&f, "acme", "net", inventory(1, vec![a.clone()])).await;
    seen(&f, 1, &["a"], 1).await;
    let record = next_version(&f, &record, InventoryChange::Keep { version: 2 }).await;
    seen(&f, 2, &["a"], 1).await;
    let by_resource = f
        .catalog
        .resource_tags("acme", "net")
        .await
        .unwrap()
        .is_some();
    let record = if by_resource {
        let patch = InventoryPatch {
            version: 3,
            tags: vec![a.resource, b.resource],
            gone: vec![],
            instances: vec![b.clone()],
        };
        let record = next_version(&f, &record, InventoryChange::Patch(patch)).await;
        seen(&f, 3, &["a", "b"], 1).await;
        record
    } else {
        record
    };
    let n = record.next_version;
    let replace = InventoryChange::Replace(inventory(n, vec![b.clone()]));
    let record = next_version(&f, &record, replace).await;
    seen(&f, n, &["b"], 0).await;
    let mut removal = commit(&record, record.revision, vec![]);
    removal.inventory = Some(InventoryChange::Remove);
    f.catalog.commit(removal).await.unwrap();
    assert_eq!(search(&f, query(10)).await, ["app:aws_s3_bucket.shared"]);
    let entries = f.catalog.indexed_states("acme").await.unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(instances_in(&f, "acme").await, 1);
    assert!(f.catalog.conflicts("acme", None).await.unwrap().is_empty());
}

/// That `net`'s entry is at `version` with the buckets `names`, and the org has `conflicts`
/// objects managed twice, by every read of the index.
async fn seen(f: &Fixture, version: u64, names: &[&str], conflicts: usize) {
    let rows = f.catalog.resources("acme", &query(10)).await.unwrap();
    let ours: Vec<_> = rows.iter().filter(|r| r.state == "net").collect();
    let expected: Vec<String> = names.iter().map(|n| format!("aws_s3_bucket.{n}")).collect();
    assert_eq!(
        ours.iter().map(|r| r.address.clone()).collect::<Vec<_>>(),
        expected
    );
    assert!(ours.iter().all(|r| r.version == version), "{ours:?}");
    let found = f.catalog.conflicts("acme", None).await.unwrap();
    assert_eq!(found.len(), conflicts, "{found:?}");
    assert!(found
        .iter()
        .flatten()
        .all(|r| r.state != "net" || r.version == version));
    let entry = IndexedState {
        state: "net".into(),
        version,
        indexed: true,
        instances: names.len() as u64,
    };
    let entries = f.catalog.indexed_states("acme").await.unwrap();
    assert_eq!(entries[1], entry);
    let summary = f.catalog.inventory_summary("acme").await.unwrap();
    assert_eq!(summary.states[1], entry);
    assert_eq!(summary.counts.instances, names.len() as u64 + 1);
    assert_eq!(summary.conflicts, conflicts as u64);
    assert!(f
        .catalog
        .holds_version("acme", "net", version)
        .await
        .unwrap());
}

/// The overview's summary: states not indexed listed, counts largest first, and the
/// objects two states manage counted.
pub async fn states_not_indexed_are_listed_and_counts_are_largest_first(f: Fixture) {
    two_states(&f).await;
    indexed(
        &f,
        "acme",
        "enc",
        StateInventory {
            version: 1,
            indexed: false,
            instances: Vec::new(),
            tags: None,
        },
    )
    .await;
    assert_eq!(
        f.catalog.indexed_states("acme").await.unwrap(),
        [
            IndexedState {
                state: "app".into(),
                version: 1,
                indexed: true,
                instances: 3
            },
            IndexedState {
                state: "enc".into(),
                version: 1,
                indexed: false,
                instances: 0
            },
            IndexedState {
                state: "net".into(),
                version: 1,
                indexed: true,
                instances: 2
            },
        ]
    );
    let counts = f.catalog.inventory_summary("acme").await.unwrap().counts;
    assert_eq!(counts.instances, 5);
    assert_eq!(
        counts.by_provider,
        [(AWS.to_owned(), 4), (GOOGLE.to_owned(), 1)]
    );
    assert_eq!(
        counts.by_type,
        [
            ("aws_s3_bucket".to_owned(), 2),
            ("aws_ami".to_owned(), 1),
            ("aws_instance".to_owned(), 1),
            ("google_compute_network".to_owned(), 1),
        ]
    );
    assert_eq!(instances_in(&f, "none").await, 0);
    // The summary's parts are the other reads' answers, as of one commit.
    logs_bucket_in(&f, "acme", "copy").await;
    let summary = f.catalog.inventory_summary("acme").await.unwrap();
    assert_eq!(
        summary.states,
        f.catalog.indexed_states("acme").await.unwrap()
    );
    assert_eq!(summary.states.len(), 4);
    assert_eq!(summary.counts.instances, 6);
    assert_eq!(summary.conflicts, 1);
    assert_eq!(f.catalog.conflicts("acme", None).await.unwrap().len(), 1);
}

pub async fn an_orgs_inventory_key_is_replaced_only_as_read(f: Fixture) {
    use hegemony_state::domain::permission::{Allocation, Role};
    let allocation = Allocation {
        manage: Some(Role::Operator),
        ..Allocation::default()
    };
    f.catalog
        .set_allocation(
            "acme",
            &Allocation::default(),
            &allocation,
            &audit("acme", "permissions.changed"),
        )
        .await
        .unwrap();
    let first = InventoryKey {
        key_id: "platform:a".into(),
        wrapped: vec![1; 40],
    };
    let second = InventoryKey {
        key_id: "platform:a".into(),
        wrapped: vec![2; 40],
    };
    f.catalog
        .put_inventory_key("acme", None, &first, NOW)
        .await
        .unwrap();
    let lost = f
        .catalog
        .put_inventory_key("acme", None, &second, NOW)
        .await;
    assert!(matches!(lost, Err(StoreError::Conflict)), "{lost:?}");
    let settings = f.catalog.org("acme").await.unwrap().unwrap();
    assert_eq!(
        (settings.allocation, settings.inventory_key),
        (allocation, Some(first.clone()))
    );
    // A re-wrap replaces the key it read, and only that one.
    let rewrapped = InventoryKey {
        key_id: "platform:b".into(),
        wrapped: vec![3; 40],
    };
    let stale = f
        .catalog
        .put_inventory_key("acme", Some(&second), &rewrapped, NOW)
        .await;
    assert!(matches!(stale, Err(StoreError::Conflict)), "{stale:?}");
    f.catalog
        .put_inventory_key("acme", Some(&first), &rewrapped, NOW)
        .await
        .unwrap();
    let settings = f.catalog.org("acme").await.unwrap().unwrap();
    assert_eq!(
        (settings.allocation, settings.inventory_key),
        (allocation, Some(rewrapped))
    );
    // An org with no settings gets them; the key survives a change of the allocation.
    f.catalog
        .put_inventory_key("new", None, &second, NOW)
        .await
        .unwrap();
    f.catalog
        .set_allocation(
            "new",
            &Allocation::default(),
            &allocation,
            &audit("new", "permissions.changed"),
        )
        .await
        .unwrap();
    let (settings, _) = f.catalog.org_and_state("new", "net").await.unwrap();
    assert_eq!(settings.unwrap().inventory_key, Some(second));
}

/// An entry too large for one item on a store that cuts it (tens of thousands of instances
/// with digests that barely compress) reads back whole, and one replaced by a smaller entry
/// reads back as the smaller.
pub async fn a_large_entry_replaced_by_a_small_one_reads_back_as_written(f: Fixture) {
    use sha2::{Digest, Sha256};
    let many: Vec<Instance> = (0..15_000)
        .map(|i| {
            let digest = hegemony_state::ids::hex(&Sha256::digest(format!("{i}")));
            instance(
                &format!("aws_s3_bucket.b[{i:05}]"),
                "aws_s3_bucket",
                AWS,
                Some(&digest),
            )
        })
        .collect();
    let record = indexed(&f, "acme", "big", inventory(1, many.clone())).await;
    let all = f.catalog.resources("acme", &query(20_000)).await.unwrap();
    assert_eq!(all.len(), 15_000);
    assert_eq!(all[14_999].address, many[14_999].address);
    next_version(
        &f,
        &record,
        InventoryChange::Replace(inventory(2, many[..1].to_vec())),
    )
    .await;
    let left = f.catalog.resources("acme", &query(20_000)).await.unwrap();
    assert_eq!(addresses(&left), ["big:aws_s3_bucket.b[00000]"]);
    assert_eq!(instances_in(&f, "acme").await, 1);
}

/// A search answers as of one commit while commits land: every row it returns is of the
/// version it returns them under, never one version's entry over another's rows.
pub async fn a_search_answers_as_of_one_commit_while_commits_land(f: Fixture) {
    const LAST: u64 = 60;
    let rows = |v: u64| -> Vec<Instance> {
        (0..20)
            .map(|i| {
                let digest = format!("d{v}-{i}");
                instance(
                    &format!("aws_vpc.g{v}_{i:02}"),
                    "aws_vpc",
                    AWS,
                    Some(&digest),
                )
            })
            .collect()
    };
    let first = indexed(&f, "acme", "net", inventory(1, rows(1))).await;
    let catalog = f.catalog.clone();
    // Each commit waits for a search more, so the two interleave even where commits are
    // quicker than searches (the memory store's).
    let searches = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let searched = searches.clone();
    let writer = tokio::spawn(async move {
        let mut record = first;
        for v in 2..=LAST {
            let at = searched.load(std::sync::atomic::Ordering::SeqCst);
            while searched.load(std::sync::atomic::Ordering::SeqCst) == at {
                tokio::task::yield_now().await;
            }
            let mut next = record.clone();
            next.latest = Some(version(v, &format!("b{v}")));
            next.next_version = v + 1;
            let mut c = commit(&next, record.revision, vec![version(v, &format!("b{v}"))]);
            // Every resource renamed: the whole entry goes.
            c.inventory = Some(InventoryChange::Replace(inventory(v, rows(v))));
            catalog.commit(c).await.unwrap();
            record = catalog.state("acme", "net").await.unwrap().unwrap();
        }
    });
    let mut seen = std::collections::BTreeSet::new();
    while !writer.is_finished() {
        let found = f.catalog.resources("acme", &query(100)).await.unwrap();
        let v = found[0].version;
        let prefix = format!("aws_vpc.g{v}_");
        assert!(
            found.len() == 20
                && found
                    .iter()
                    .all(|r| r.version == v && r.address.starts_with(&prefix)),
            "an answer under version {v}: {:?}",
            addresses(&found)
        );
        seen.insert(v);
        searches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    writer.await.unwrap();
    assert!(
        seen.len() > 1,
        "the searches ran among the commits: {seen:?}"
    );
}
