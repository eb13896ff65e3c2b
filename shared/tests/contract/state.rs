//! The state port's cases of the contract (included by ../contract.rs): a state record
//! created once and compared and swapped on its revision, committed with its versions under
//! its incarnation, removed, listed by page, read with its org's settings, and the audit log
//! the port keeps beside it; racing writers that lose no update.

use super::*;
use hegemony_state::domain::permission::Allocation;
use hegemony_state::ports::OrgRecord;

pub async fn creating_twice_conflicts(f: Fixture) {
    let record = StateRecord::fresh("acme", "net", "inc", NOW);
    f.catalog.commit(commit(&record, 0, vec![])).await.unwrap();
    let again = f.catalog.commit(commit(&record, 0, vec![])).await;
    assert!(matches!(again, Err(StoreError::Conflict)));
    assert_eq!(
        f.catalog
            .state("acme", "net")
            .await
            .unwrap()
            .unwrap()
            .revision,
        1
    );
}

pub async fn a_stale_revision_conflicts_and_writes_nothing(f: Fixture) {
    let mut record = StateRecord::fresh("acme", "net", "inc", NOW);
    f.catalog.commit(commit(&record, 0, vec![])).await.unwrap();
    record.next_version = 2;
    f.catalog
        .commit(commit(&record, 1, vec![version(1, "b1")]))
        .await
        .unwrap();
    let mut stale = commit(&record, 1, vec![version(2, "b2")]);
    stale.audit.push(audit("acme", "should.not.appear"));
    assert!(matches!(
        f.catalog.commit(stale).await,
        Err(StoreError::Conflict)
    ));
    assert!(f
        .catalog
        .version("acme", "net", "inc", 2)
        .await
        .unwrap()
        .is_none());
    assert!(f
        .catalog
        .audit("acme", &query(10))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        f.catalog
            .state("acme", "net")
            .await
            .unwrap()
            .unwrap()
            .revision,
        2
    );
}

pub async fn versions_commit_with_their_state_under_its_incarnation(f: Fixture) {
    let record = StateRecord::fresh("acme", "net", "inc", NOW);
    f.catalog
        .commit(commit(&record, 0, vec![version(1, "b1"), version(2, "b2")]))
        .await
        .unwrap();
    assert_eq!(
        f.catalog.version("acme", "net", "inc", 2).await.unwrap(),
        Some(version(2, "b2"))
    );
    let listed: Vec<u64> = f
        .catalog
        .versions("acme", "net", "inc")
        .await
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(listed, [2, 1], "newest first");
    assert!(f
        .catalog
        .versions("acme", "net", "other")
        .await
        .unwrap()
        .is_empty());
    assert!(f
        .catalog
        .version("acme", "net", "other", 2)
        .await
        .unwrap()
        .is_none());
    // A number past what a store keeps (SQLite's integers stop at 2^63-1) names no
    // version: not a fault a client would retry.
    for n in [i64::MAX as u64 + 1, u64::MAX] {
        assert!(
            f.catalog
                .version("acme", "net", "inc", n)
                .await
                .unwrap()
                .is_none(),
            "version {n}"
        );
    }
    let mut replaced = version(2, "b3");
    replaced.serial = Some(9);
    f.catalog
        .commit(commit(&record, 1, vec![replaced.clone()]))
        .await
        .unwrap();
    assert_eq!(
        f.catalog.version("acme", "net", "inc", 2).await.unwrap(),
        Some(replaced)
    );
}

/// The Terraform version and instance count read back as stored, and unknown ones
/// (an OpenTofu-encrypted version) as unknown, in the version and the state's copy.
pub async fn versions_keep_their_terraform_version_and_instance_count(f: Fixture) {
    let record = StateRecord::fresh("acme", "net", "inc", NOW);
    let mut unknown = version(2, "b2");
    unknown.terraform_version = None;
    unknown.instances = None;
    let mut stored = record.clone();
    stored.latest = Some(unknown.clone());
    f.catalog
        .commit(commit(&stored, 0, vec![version(1, "b1"), unknown.clone()]))
        .await
        .unwrap();
    let first = f
        .catalog
        .version("acme", "net", "inc", 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (first.terraform_version.as_deref(), first.instances),
        (Some("1.11.4"), Some(3))
    );
    assert_eq!(
        f.catalog.version("acme", "net", "inc", 2).await.unwrap(),
        Some(unknown.clone())
    );
    let latest = f
        .catalog
        .state("acme", "net")
        .await
        .unwrap()
        .unwrap()
        .latest;
    assert_eq!(latest, Some(unknown));
}

pub async fn a_record_can_be_removed_by_revision(f: Fixture) {
    let record = StateRecord::fresh("acme", "net", "inc", NOW);
    f.catalog.commit(commit(&record, 0, vec![])).await.unwrap();
    let mut remove = commit(&record, 1, vec![]);
    remove.state = None;
    f.catalog.commit(remove.clone()).await.unwrap();
    assert!(f.catalog.state("acme", "net").await.unwrap().is_none());
    // Removing again expects revision 1, which no longer exists.
    assert!(matches!(
        f.catalog.commit(remove).await,
        Err(StoreError::Conflict)
    ));
}

pub async fn states_list_in_name_order_by_page_within_one_org(f: Fixture) {
    for (org, name) in [
        ("acme", "b"),
        ("acme", "a"),
        ("acme", "c"),
        ("zeta", "a0"),
        ("ac", "z"),
    ] {
        let record = StateRecord::fresh(org, name, "inc", NOW);
        f.catalog.commit(commit(&record, 0, vec![])).await.unwrap();
    }
    let names = |v: Vec<StateRecord>| v.into_iter().map(|r| r.name).collect::<Vec<_>>();
    assert_eq!(
        names(f.catalog.states("acme", None, 2).await.unwrap()),
        ["a", "b"]
    );
    assert_eq!(
        names(f.catalog.states("acme", Some("b"), 2).await.unwrap()),
        ["c"]
    );
    assert_eq!(
        names(f.catalog.states("zeta", None, 10).await.unwrap()),
        ["a0"]
    );
    assert!(f
        .catalog
        .states("nobody", None, 10)
        .await
        .unwrap()
        .is_empty());
}

/// The org's settings and a state's record read together are what each reads alone,
/// either one missing included, and never another org's or state's.
pub async fn an_org_and_its_state_read_together(f: Fixture) {
    assert_eq!(
        f.catalog.org_and_state("acme", "net").await.unwrap(),
        (None, None)
    );
    let record = StateRecord::fresh("acme", "net", "inc", NOW);
    f.catalog.commit(commit(&record, 0, vec![])).await.unwrap();
    let (org, state) = f.catalog.org_and_state("acme", "net").await.unwrap();
    assert_eq!(org, None);
    assert_eq!(state.unwrap().revision, 1);
    let settings = OrgRecord {
        org: "acme".into(),
        allocation: Allocation {
            read: None,
            ..Allocation::default()
        },
        created_at: NOW,
        protections: Vec::new(),
        inventory_key: None,
    };
    assert!(f.catalog.create_org(&settings).await.unwrap());
    let (org, state) = f.catalog.org_and_state("acme", "net").await.unwrap();
    assert_eq!(org, Some(settings.clone()));
    assert_eq!(state, f.catalog.state("acme", "net").await.unwrap());
    let (org, state) = f.catalog.org_and_state("acme", "db").await.unwrap();
    assert_eq!((org, state), (Some(settings.clone()), None));
    assert_eq!(
        f.catalog.org_and_state("other", "net").await.unwrap(),
        (None, None)
    );
    // The read that brings content brings the same records.
    let with = |name: &'static str| {
        let catalog = f.catalog.clone();
        async move {
            catalog
                .org_and_state_with_content("acme", name)
                .await
                .unwrap()
        }
    };
    let (org, state) = with("net").await;
    assert_eq!(org, Some(settings.clone()));
    assert_eq!(
        state,
        Some((f.catalog.state("acme", "net").await.unwrap().unwrap(), None))
    );
    assert_eq!(with("db").await, (Some(settings), None));
}

pub async fn audit_is_per_org_newest_first(f: Fixture) {
    let record = StateRecord::fresh("acme", "net", "inc", NOW);
    let mut c = commit(&record, 0, vec![]);
    c.audit = vec![
        audit("acme", "first"),
        audit("acme", "second"),
        audit("other", "x"),
    ];
    f.catalog.commit(c).await.unwrap();
    let entries = f.catalog.audit("acme", &query(10)).await.unwrap();
    let actions: Vec<_> = entries.iter().map(|e| e.entry.action.as_str()).collect();
    assert_eq!(actions, ["second", "first"]);
    let first_page = f.catalog.audit("acme", &query(1)).await.unwrap();
    assert_eq!(first_page.len(), 1);
    let next = AuditQuery {
        before: Some(first_page[0].seq),
        ..query(10)
    };
    let rest = f.catalog.audit("acme", &next).await.unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].entry.action, "first");
    f.catalog
        .append_audit(&audit("acme", "version.downloaded"))
        .await
        .unwrap();
    let by_action = AuditQuery {
        action: Some("version.downloaded".into()),
        state: Some("net".into()),
        ..query(10)
    };
    assert_eq!(f.catalog.audit("acme", &by_action).await.unwrap().len(), 1);
    let other_state = AuditQuery {
        state: Some("other".into()),
        ..query(10)
    };
    assert!(f
        .catalog
        .audit("acme", &other_state)
        .await
        .unwrap()
        .is_empty());
}

/// Many writers doing read-modify-write with retries: every increment lands exactly
/// once, which only holds if the compare-and-swap is atomic.
pub async fn racing_read_modify_writes_lose_no_update(f: Fixture) {
    let record = StateRecord::fresh("acme", "net", "inc", NOW);
    f.catalog.commit(commit(&record, 0, vec![])).await.unwrap();
    let writers = 8;
    let rounds = 10;
    let mut tasks = Vec::new();
    for _ in 0..writers {
        let catalog = f.catalog.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                loop {
                    let current = catalog.state("acme", "net").await.unwrap().unwrap();
                    let mut next = current.clone();
                    next.next_version += 1;
                    match catalog
                        .commit(commit(&next, current.revision, vec![]))
                        .await
                    {
                        Ok(()) => break,
                        Err(StoreError::Conflict) => continue,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let done = f.catalog.state("acme", "net").await.unwrap().unwrap();
    assert_eq!(done.next_version, 1 + writers * rounds);
    assert_eq!(done.revision, 1 + writers * rounds);
}
