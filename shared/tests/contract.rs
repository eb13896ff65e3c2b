//! The contract every storage adapter passes: the same cases, run against the memory, the
//! local (SQLite + files) and the AWS (DynamoDB, S3 on the emulator) adapters. An adapter that
//! passes them can carry the services.

#[path = "support/aws.rs"]
mod aws;

use std::sync::Arc;

use hegemony_state::adapters::{local, memory::MemoryStore};
use hegemony_state::domain::permission::{Allocation, Role};
use hegemony_state::domain::record::StateRecord;
use hegemony_state::domain::version::{ChangeRecord, KeySlot, Source, VersionRecord};
use hegemony_state::domain::{Actor, Timestamp};
use hegemony_state::ports::{
    AuditEntry, AuditQuery, BlobStore, Catalog, Commit, InlineContent, OpenedBlob, OrgRecord,
    StoreError, TokenKind, TokenRecord, VersionMark, INLINE_MAX_BYTES,
};
use time::macros::datetime;

const NOW: Timestamp = datetime!(2026-11-30 01:00:00 UTC);

/// One adapter's catalog and blob store, and whatever keeps them alive.
struct Fixture {
    catalog: Arc<dyn Catalog>,
    blobs: Arc<dyn BlobStore>,
    _dir: Option<tempfile::TempDir>,
}

fn memory() -> Fixture {
    let store = Arc::new(MemoryStore::new());
    Fixture {
        catalog: store.clone(),
        blobs: store,
        _dir: None,
    }
}

fn local_store() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, blobs) = local::open(&dir.path().join("data")).unwrap();
    Fixture {
        catalog: Arc::new(catalog),
        blobs: Arc::new(blobs),
        _dir: Some(dir),
    }
}

fn aws_store() -> Fixture {
    let (catalog, blobs) = aws::block_on(async {
        let config = aws::sdk_config().await;
        let (catalog, blobs, _) = aws::fresh_store(&config).await;
        (catalog, blobs)
    });
    Fixture {
        catalog: Arc::new(catalog),
        blobs: Arc::new(blobs),
        _dir: None,
    }
}

fn user() -> Actor {
    Actor::User {
        user: "alice".into(),
    }
}

fn version(n: u64, blob: &str) -> VersionRecord {
    VersionRecord {
        version: n,
        serial: Some(n),
        lineage: Some("l".into()),
        size: 10,
        sha256: format!("{n:064x}"),
        source: Source::Write,
        key: "platform:test".into(),
        wrapped_key: Some(vec![n as u8; 60]),
        opentofu_encrypted: false,
        terraform_version: Some("1.11.4".into()),
        instances: Some(n * 3),
        created_at: NOW,
        writer: user(),
        change: ChangeRecord::first_save(None, NOW),
        blob: blob.into(),
        inline: false,
    }
}

/// A version whose sealed content is inline in the catalog.
fn inline_version(n: u64) -> VersionRecord {
    VersionRecord {
        inline: true,
        ..version(n, &format!("i{n}"))
    }
}

/// Sealed bytes as an inline version carries them (opaque to storage).
fn sealed(n: u64, len: usize) -> InlineContent {
    InlineContent {
        version: n,
        sealed: Arc::new((0..len).map(|i| (i as u64 * 31 + n) as u8).collect()),
    }
}

fn audit(org: &str, action: &str) -> AuditEntry {
    AuditEntry {
        org: org.into(),
        at: NOW,
        action: action.into(),
        actor: user(),
        state: Some("net".into()),
        version: None,
        detail: serde_json::Value::Null,
    }
}

/// A commit that stores `record` (at `expected + 1`) with the given versions.
fn commit(record: &StateRecord, expected: u64, versions: Vec<VersionRecord>) -> Commit {
    let mut stored = record.clone();
    stored.revision = expected + 1;
    Commit {
        org: record.org.clone(),
        name: record.name.clone(),
        expected_revision: expected,
        at: NOW,
        state: Some(stored),
        versions,
        contents: Vec::new(),
        committed_blobs: Vec::new(),
        doomed_blobs: Vec::new(),
        run_items: Vec::new(),
        step: None,
        version_marks: Vec::new(),
        audit: Vec::new(),
    }
}

fn query(limit: usize) -> AuditQuery {
    AuditQuery {
        limit,
        ..AuditQuery::default()
    }
}

#[path = "contract/apps.rs"]
mod app_cases;

mod cases {
    pub use super::app_cases::*;
    use super::*;

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

    /// A version's key slot (key id and wrapped key) reads back as stored, in the version and
    /// the state's copy; a record without one (written before the slot was kept) reads back
    /// without one.
    pub async fn versions_keep_their_key_slot(f: Fixture) {
        let record = StateRecord::fresh("acme", "net", "inc", NOW);
        let mut slotted = version(2, "b2");
        slotted.key = "transit:bao:tf-acme:v3".into();
        slotted.wrapped_key = Some(b"vault:v3:\x00\xffwrapped".to_vec());
        let mut older = version(1, "b1");
        older.wrapped_key = None;
        let mut stored = record.clone();
        stored.latest = Some(slotted.clone());
        f.catalog
            .commit(commit(&stored, 0, vec![older.clone(), slotted.clone()]))
            .await
            .unwrap();
        assert_eq!(
            f.catalog.versions("acme", "net", "inc").await.unwrap(),
            vec![slotted.clone(), older]
        );
        let latest = f
            .catalog
            .state("acme", "net")
            .await
            .unwrap()
            .unwrap()
            .latest;
        assert_eq!(latest, Some(slotted));
    }

    /// A key slot is replaced only while it is still the one the caller read: in the
    /// version and the state's copy, with the state's revision raised (so a commit decided
    /// before it conflicts); a stale `old`, a missing version or another incarnation
    /// conflicts and writes nothing.
    pub async fn a_key_slot_is_replaced_only_while_it_is_the_old_one(f: Fixture) {
        let record = StateRecord::fresh("acme", "net", "inc", NOW);
        let mut stored = record.clone();
        stored.latest = Some(version(2, "b2"));
        let c = commit(&stored, 0, vec![version(1, "b1"), version(2, "b2")]);
        f.catalog.commit(c).await.unwrap();
        let new = KeySlot {
            key: "transit:bao:tf:v2".into(),
            wrapped_key: Some(b"vault:v2:abc".to_vec()),
        };
        for n in [1, 2] {
            let old = version(n, "").slot();
            f.catalog
                .replace_key_slot("acme", "net", "inc", n, &old, &new)
                .await
                .unwrap();
            let again = f
                .catalog
                .replace_key_slot("acme", "net", "inc", n, &old, &new)
                .await;
            assert!(matches!(again, Err(StoreError::Conflict)), "{again:?}");
            let back = f.catalog.version("acme", "net", "inc", n).await.unwrap();
            assert_eq!(back.unwrap().slot(), new);
        }
        let state = f.catalog.state("acme", "net").await.unwrap().unwrap();
        assert_eq!(state.revision, 3, "each replacement raises the revision");
        assert_eq!(state.latest.unwrap().slot(), new);
        let stale = commit(&stored, 1, Vec::new());
        assert!(matches!(
            f.catalog.commit(stale).await,
            Err(StoreError::Conflict)
        ));
        for (incarnation, n) in [("inc", 9), ("other", 1)] {
            let r = f
                .catalog
                .replace_key_slot("acme", "net", incarnation, n, &new, &new)
                .await;
            assert!(matches!(r, Err(StoreError::Conflict)), "{r:?}");
        }
        let first = f.catalog.version("acme", "net", "inc", 1).await.unwrap();
        assert_eq!(first.unwrap().version, 1, "an untouched version stays");
    }

    /// Re-wrapping an inline version's key changes only its slot: its content, beside the
    /// version's record and (for the latest) the state's, reads back as it was.
    pub async fn replacing_an_inline_versions_key_slot_keeps_its_content(f: Fixture) {
        let mut stored = StateRecord::fresh("acme", "net", "inc", NOW);
        stored.latest = Some(inline_version(2));
        let mut c = commit(&stored, 0, vec![inline_version(1), inline_version(2)]);
        c.contents.extend([sealed(1, 500), sealed(2, 700)]);
        f.catalog.commit(c).await.unwrap();
        let new = KeySlot {
            key: "transit:bao:tf:v2".into(),
            wrapped_key: Some(b"vault:v2:abc".to_vec()),
        };
        for n in [1, 2] {
            let old = inline_version(n).slot();
            f.catalog
                .replace_key_slot("acme", "net", "inc", n, &old, &new)
                .await
                .unwrap();
            let content = f.catalog.content("acme", "net", "inc", n).await.unwrap();
            let len = if n == 1 { 500 } else { 700 };
            assert_eq!(content, Some(sealed(n, len).sealed.to_vec()), "version {n}");
        }
        let (_, state) = f
            .catalog
            .org_and_state_with_content("acme", "net")
            .await
            .unwrap();
        let (record, content) = state.unwrap();
        let latest = record.latest.unwrap();
        assert_eq!((latest.slot(), latest.inline), (new, true));
        assert_eq!(content, Some(sealed(2, 700).sealed.to_vec()));
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

    pub async fn tokens_are_found_by_hash(f: Fixture) {
        let token = TokenRecord {
            hash: "ab".repeat(32),
            id: "tok-1".into(),
            kind: TokenKind::Personal,
            org: "acme".into(),
            user: "alice".into(),
            role: Role::Operator,
            created_at: NOW,
            expires_at: None,
            revoked: false,
            step: None,
        };
        f.catalog
            .put_token(&token, &audit("acme", "token.created"))
            .await
            .unwrap();
        assert_eq!(
            f.catalog.token(&token.hash).await.unwrap(),
            Some(token.clone())
        );
        assert!(f.catalog.token(&"cd".repeat(32)).await.unwrap().is_none());
        let revoked = TokenRecord {
            revoked: true,
            ..token.clone()
        };
        f.catalog
            .put_token(&revoked, &audit("acme", "token.revoked"))
            .await
            .unwrap();
        assert!(f.catalog.token(&token.hash).await.unwrap().unwrap().revoked);
        assert_eq!(f.catalog.tokens().await.unwrap(), vec![revoked]);
        let actions: Vec<_> = f
            .catalog
            .audit("acme", &query(10))
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.entry.action)
            .collect();
        assert_eq!(
            actions,
            ["token.revoked", "token.created"],
            "each with its audit entry"
        );
    }

    /// A step's lock commits only while its token is unrevoked and its run has not ended
    /// before `ended_not_before`; a run ended at or after it, or not at all, lets it through.
    pub async fn a_steps_commit_checks_its_token_and_its_runs_end(f: Fixture) {
        use hegemony_state::domain::actor::{StepGrant, StepKind};
        use hegemony_state::ports::{RunItem, RunRecord, StepCheck};
        let grant = StepGrant {
            token_id: "tok-s".into(),
            run: "r1".into(),
            step: "apply".into(),
            attempt: 1,
            state: "net".into(),
            kind: StepKind::Apply,
            hold: false,
            expires_at: NOW + time::Duration::hours(1),
            token_hash: String::new(),
        };
        let token = TokenRecord {
            hash: "ef".repeat(32),
            id: "tok-s".into(),
            kind: TokenKind::Step,
            org: "acme".into(),
            user: String::new(),
            role: Role::Operator,
            created_at: NOW,
            expires_at: Some(grant.expires_at),
            revoked: false,
            step: Some(grant),
        };
        f.catalog
            .put_token(&token, &audit("acme", "token.created"))
            .await
            .unwrap();
        f.catalog
            .bind_run(&RunRecord {
                run: "r1".into(),
                org: "acme".into(),
                created_at: NOW,
                ended_at: None,
                status: None,
            })
            .await
            .unwrap();
        let record = StateRecord::fresh("acme", "net", "inc1", NOW);
        let step_commit = |expected: u64, not_before: Timestamp| Commit {
            run_items: vec![RunItem {
                run: "r1".into(),
                token_id: "tok-s".into(),
                org: "acme".into(),
                state: "net".into(),
            }],
            step: Some(StepCheck {
                run: "r1".into(),
                token_hash: token.hash.clone(),
                ended_not_before: not_before,
            }),
            ..commit(&record, expected, Vec::new())
        };
        let later = NOW + time::Duration::minutes(50);
        f.catalog.commit(step_commit(0, later)).await.unwrap();
        let ended = NOW + time::Duration::minutes(10);
        f.catalog.end_run("r1", ended, None).await.unwrap();
        assert!(
            matches!(
                f.catalog.commit(step_commit(1, later)).await,
                Err(StoreError::Conflict)
            ),
            "the run ended before the lock's liveness less the grace"
        );
        f.catalog.commit(step_commit(1, ended)).await.unwrap();
        let revoked = TokenRecord {
            revoked: true,
            ..token.clone()
        };
        f.catalog
            .put_token(&revoked, &audit("acme", "token.revoked"))
            .await
            .unwrap();
        assert!(
            matches!(
                f.catalog.commit(step_commit(2, NOW)).await,
                Err(StoreError::Conflict)
            ),
            "the token was revoked"
        );
        assert_eq!(
            f.catalog
                .state("acme", "net")
                .await
                .unwrap()
                .unwrap()
                .revision,
            2
        );
        assert_eq!(f.catalog.run_items("r1").await.unwrap().len(), 1);
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

    pub async fn an_org_is_created_once(f: Fixture) {
        let org = OrgRecord {
            org: "acme".into(),
            allocation: Allocation::default(),
            created_at: NOW,
        };
        assert!(f.catalog.create_org(&org).await.unwrap());
        let other = OrgRecord {
            allocation: Allocation {
                read: None,
                ..Allocation::default()
            },
            ..org.clone()
        };
        assert!(!f.catalog.create_org(&other).await.unwrap());
        assert_eq!(f.catalog.org("acme").await.unwrap(), Some(org.clone()));
        assert!(f.catalog.org("nobody").await.unwrap().is_none());
        f.catalog
            .set_allocation(
                "acme",
                &Allocation::default(),
                &other.allocation,
                &audit("acme", "permissions.changed"),
            )
            .await
            .unwrap();
        assert_eq!(
            f.catalog.org("acme").await.unwrap().unwrap().allocation,
            other.allocation
        );
        assert_eq!(f.catalog.audit("acme", &query(10)).await.unwrap().len(), 1);
        // A change decided on an allocation that is no longer stored loses the race and
        // writes nothing, neither the allocation nor its audit entry.
        let stale = f
            .catalog
            .set_allocation(
                "acme",
                &Allocation::default(),
                &Allocation {
                    write: None,
                    ..Allocation::default()
                },
                &audit("acme", "permissions.changed"),
            )
            .await;
        assert!(matches!(stale, Err(StoreError::Conflict)), "{stale:?}");
        assert_eq!(
            f.catalog.org("acme").await.unwrap().unwrap().allocation,
            other.allocation
        );
        assert_eq!(f.catalog.audit("acme", &query(10)).await.unwrap().len(), 1);
        // An org not created yet has the default allocation to compare with.
        let stale_new = f
            .catalog
            .set_allocation(
                "fresh",
                &other.allocation,
                &Allocation::default(),
                &audit("fresh", "permissions.changed"),
            )
            .await;
        assert!(matches!(stale_new, Err(StoreError::Conflict)));
        assert!(f.catalog.org("fresh").await.unwrap().is_none());
    }

    pub async fn blobs_put_get_delete(f: Fixture) {
        let key = "orgs/acme.x/states/inc/1-abc";
        assert!(f.blobs.get(key).await.unwrap().is_none());
        f.blobs.put(key, b"sealed".to_vec()).await.unwrap();
        assert_eq!(
            f.blobs.get(key).await.unwrap().as_deref(),
            Some(&b"sealed"[..])
        );
        f.blobs.delete(key).await.unwrap();
        assert!(f.blobs.get(key).await.unwrap().is_none());
        f.blobs.delete(key).await.unwrap();
    }

    /// An opened blob reads as the blob it is, whole or with its head at hand and the rest
    /// read after it, whether it is shorter than the head asked for, as long or longer.
    pub async fn an_opened_blob_reads_as_stored(f: Fixture) {
        let key = "orgs/acme.x/states/inc/2-def";
        assert!(f.blobs.open(key, 16).await.unwrap().is_none());
        let stored: Vec<u8> = (0..100_000u32).map(|i| (i * 7919 % 251) as u8).collect();
        f.blobs.put(key, stored.clone()).await.unwrap();
        for head in [0, 16, 99_999, 100_000, 200_000] {
            let read = match f.blobs.open(key, head).await.unwrap().unwrap() {
                OpenedBlob::Whole(bytes) => bytes,
                OpenedBlob::Reading {
                    mut head,
                    mut rest,
                    len,
                } => {
                    assert_eq!(len, stored.len() as u64);
                    std::io::Read::read_to_end(&mut rest, &mut head).unwrap();
                    head
                }
            };
            assert!(read == stored, "head {head}: the bytes read differ");
        }
    }

    /// An object written as it is made is stored as a put stores it; one whose writing fails
    /// part way stores nothing and leaves nothing behind.
    pub async fn an_object_written_as_it_is_made_is_stored_whole_or_not_at_all(f: Fixture) {
        let key = "orgs/acme.x/states/inc/3-ghi";
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i * 31 % 253) as u8).collect();
        let parts = bytes.clone();
        let write = Box::new(move |out: &mut dyn std::io::Write| {
            parts
                .chunks(65_552)
                .try_for_each(|part| out.write_all(part))
        });
        f.blobs.put_written(key, write).await.unwrap();
        assert!(f.blobs.get(key).await.unwrap() == Some(bytes));
        let torn = "orgs/acme.x/states/inc/4-jkl";
        let write = Box::new(|out: &mut dyn std::io::Write| {
            out.write_all(&[1; 70_000])?;
            Err(std::io::Error::other("no space left on device"))
        });
        let failed = f.blobs.put_written(torn, write).await;
        assert!(
            matches!(failed, Err(StoreError::Unavailable(_))),
            "{failed:?}"
        );
        assert!(f.blobs.get(torn).await.unwrap().is_none());
        let long_after = NOW + time::Duration::days(365 * 100);
        assert_eq!(f.blobs.remove_leftovers(long_after).await.unwrap(), 0);
    }

    /// Version marks drop the versions below them (not others, not other incarnations) and
    /// list their blobs for deletion in the same step; blob records are found by age and
    /// forgotten.
    pub async fn marks_drop_versions_and_blobs_are_found_by_age(f: Fixture) {
        let record = StateRecord::fresh("acme", "net", "inc", NOW);
        let versions: Vec<_> = (1..=4).map(|n| version(n, &format!("b{n}"))).collect();
        let mut c = commit(&record, 0, versions);
        c.version_marks = vec![VersionMark {
            incarnation: "inc".into(),
            below: 3,
        }];
        f.catalog.commit(c).await.unwrap();
        // Another state's versions are not touched.
        let other = StateRecord::fresh("acme", "other", "inc", NOW);
        f.catalog
            .commit(commit(&other, 0, vec![version(1, "o1")]))
            .await
            .unwrap();
        let later = NOW + time::Duration::minutes(10);
        assert_eq!(
            f.catalog.drop_marked_versions(1, NOW).await.unwrap(),
            1,
            "bounded"
        );
        assert_eq!(f.catalog.drop_marked_versions(100, NOW).await.unwrap(), 1);
        assert_eq!(
            f.catalog.drop_marked_versions(100, NOW).await.unwrap(),
            0,
            "the mark is spent"
        );
        let left: Vec<u64> = f
            .catalog
            .versions("acme", "net", "inc")
            .await
            .unwrap()
            .iter()
            .map(|v| v.version)
            .collect();
        assert_eq!(left, [4, 3]);
        assert_eq!(
            f.catalog
                .versions("acme", "other", "inc")
                .await
                .unwrap()
                .len(),
            1
        );
        let mut doomed = f.catalog.doomed_blobs(later, 100).await.unwrap();
        doomed.sort();
        assert_eq!(doomed, ["b1", "b2"]);
        assert!(
            f.catalog.doomed_blobs(NOW, 100).await.unwrap().is_empty(),
            "not before the time"
        );
        f.catalog.add_pending_blob("p1", NOW).await.unwrap();
        assert_eq!(
            f.catalog.stale_pending_blobs(later, 100).await.unwrap(),
            ["p1"]
        );
        f.catalog
            .forget_blobs(&["b1".into(), "b2".into(), "p1".into()])
            .await
            .unwrap();
        assert!(f.catalog.doomed_blobs(later, 100).await.unwrap().is_empty());
        assert!(f
            .catalog
            .stale_pending_blobs(later, 100)
            .await
            .unwrap()
            .is_empty());
    }

    /// An inline version's content reads back with the state's record in one read while it
    /// is the latest, and by version afterwards; a blob version has none in the catalog.
    pub async fn inline_content_reads_back_with_the_record_and_by_version(f: Fixture) {
        let mut record = StateRecord::fresh("acme", "net", "inc", NOW);
        record.latest = Some(version(1, "b1"));
        record.next_version = 2;
        f.catalog
            .commit(commit(&record, 0, vec![version(1, "b1")]))
            .await
            .unwrap();
        let (_, content) = f
            .catalog
            .org_and_state_with_content("acme", "net")
            .await
            .unwrap()
            .1
            .unwrap();
        assert_eq!(
            content, None,
            "a blob version's content is not in the catalog"
        );
        record.latest = Some(inline_version(2));
        record.next_version = 3;
        let mut c = commit(&record, 1, vec![inline_version(2)]);
        c.contents.push(sealed(2, 1000));
        f.catalog.commit(c).await.unwrap();
        let (read, content) = f
            .catalog
            .org_and_state_with_content("acme", "net")
            .await
            .unwrap()
            .1
            .unwrap();
        assert_eq!(read.latest, Some(inline_version(2)));
        assert_eq!(content.as_deref(), Some(sealed(2, 1000).sealed.as_slice()));
        assert_eq!(
            f.catalog.content("acme", "net", "inc", 2).await.unwrap(),
            Some(sealed(2, 1000).sealed.to_vec())
        );
        assert_eq!(
            f.catalog.content("acme", "net", "inc", 1).await.unwrap(),
            None
        );
        assert_eq!(
            f.catalog.content("acme", "net", "other", 2).await.unwrap(),
            None,
            "another incarnation's version 2 is not this one"
        );
        let listed = f.catalog.versions("acme", "net", "inc").await.unwrap();
        assert_eq!(listed, [inline_version(2), version(1, "b1")]);
        assert!(f
            .catalog
            .org_and_state_with_content("acme", "none")
            .await
            .unwrap()
            .1
            .is_none());
        let listing = f.catalog.states("acme", None, 10).await.unwrap();
        assert_eq!(listing[0].latest, Some(inline_version(2)));
    }

    /// A commit that only rewrites an inline version's record (closing its change record,
    /// releasing a lock) keeps its content; new content replaces it; a record that is no
    /// longer inline (a replacing save stored as a blob) drops it.
    pub async fn rewriting_a_record_keeps_its_content_until_it_is_a_blob(f: Fixture) {
        let mut record = StateRecord::fresh("acme", "net", "inc", NOW);
        record.latest = Some(inline_version(1));
        record.next_version = 2;
        let mut c = commit(&record, 0, vec![inline_version(1)]);
        c.contents.push(sealed(1, 500));
        f.catalog.commit(c).await.unwrap();
        let content = |f: &Fixture| {
            let catalog = f.catalog.clone();
            async move {
                let (_, latest) = catalog
                    .org_and_state_with_content("acme", "net")
                    .await
                    .unwrap()
                    .1
                    .unwrap();
                let by_version = catalog.content("acme", "net", "inc", 1).await.unwrap();
                (latest.map(|c| c.len()), by_version.map(|c| c.len()))
            }
        };
        let mut closed = inline_version(1);
        closed.change.saves = 2;
        record.latest = Some(closed.clone());
        f.catalog
            .commit(commit(&record, 1, vec![closed.clone()]))
            .await
            .unwrap();
        assert_eq!(content(&f).await, (Some(500), Some(500)), "kept");
        let mut c = commit(&record, 2, vec![closed.clone()]);
        c.contents.push(sealed(1, 700));
        f.catalog.commit(c).await.unwrap();
        assert_eq!(content(&f).await, (Some(700), Some(700)), "replaced");
        f.catalog.commit(commit(&record, 3, vec![])).await.unwrap();
        assert_eq!(
            content(&f).await,
            (Some(700), Some(700)),
            "a commit of the state alone keeps its latest content"
        );
        let blob = version(1, "b1");
        record.latest = Some(blob.clone());
        f.catalog
            .commit(commit(&record, 4, vec![blob]))
            .await
            .unwrap();
        assert_eq!(content(&f).await, (None, None), "dropped");
    }

    /// Marks drop inline versions with their content and list only blob versions' blobs
    /// for deletion: an inline version has no blob to delete.
    pub async fn marks_drop_inline_versions_without_listing_a_blob(f: Fixture) {
        let mut record = StateRecord::fresh("acme", "net", "inc", NOW);
        record.latest = Some(inline_version(3));
        record.next_version = 4;
        let mut c = commit(
            &record,
            0,
            vec![inline_version(1), version(2, "b2"), inline_version(3)],
        );
        c.contents = vec![sealed(1, 10), sealed(3, 30)];
        c.version_marks = vec![VersionMark {
            incarnation: "inc".into(),
            below: 3,
        }];
        f.catalog.commit(c).await.unwrap();
        assert_eq!(f.catalog.drop_marked_versions(100, NOW).await.unwrap(), 2);
        let later = NOW + time::Duration::minutes(10);
        assert_eq!(f.catalog.doomed_blobs(later, 100).await.unwrap(), ["b2"]);
        assert_eq!(
            f.catalog.content("acme", "net", "inc", 1).await.unwrap(),
            None
        );
        assert_eq!(
            f.catalog
                .content("acme", "net", "inc", 3)
                .await
                .unwrap()
                .map(|c| c.len()),
            Some(30),
            "the kept version keeps its content"
        );
    }

    /// The largest inline version commits beside a state record far larger than any real
    /// one (a long lineage in the latest version, which the state record copies): on AWS
    /// both the state item and the version item stay under DynamoDB's 400 KB.
    pub async fn the_largest_inline_version_fits_beside_a_large_record(f: Fixture) {
        let mut large = inline_version(1);
        large.lineage = Some("l".repeat(100_000));
        let mut record = StateRecord::fresh("acme", "net", "inc", NOW);
        record.latest = Some(large.clone());
        record.next_version = 2;
        let mut c = commit(&record, 0, vec![large]);
        c.contents.push(sealed(1, INLINE_MAX_BYTES));
        f.catalog.commit(c).await.unwrap();
        let (_, content) = f
            .catalog
            .org_and_state_with_content("acme", "net")
            .await
            .unwrap()
            .1
            .unwrap();
        assert_eq!(content.map(|c| c.len()), Some(INLINE_MAX_BYTES));
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
}

/// Runs every case against one adapter, each in a module named after the adapter.
macro_rules! contract {
    ($adapter:ident, $make:expr, [$($case:ident),* $(,)?]) => {
        mod $adapter {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    cases::$case($make).await
                }
            )*
        }
    };
}

/// Every adapter runs the same list of cases.
macro_rules! every_adapter {
    ($($case:ident),* $(,)?) => {
        contract!(memory_adapter, memory(), [$($case),*]);
        contract!(local_adapter, local_store(), [$($case),*]);
        contract!(aws_adapter, aws_store(), [$($case),*]);
    };
}

// The emulator does not apply concurrent transactions atomically (DynamoDB does): races are
// checked on the adapters whose atomicity is real here.
contract!(
    memory_races,
    memory(),
    [racing_read_modify_writes_lose_no_update]
);
contract!(
    local_races,
    local_store(),
    [racing_read_modify_writes_lose_no_update]
);

every_adapter!(
    creating_twice_conflicts,
    a_stale_revision_conflicts_and_writes_nothing,
    versions_commit_with_their_state_under_its_incarnation,
    versions_keep_their_terraform_version_and_instance_count,
    versions_keep_their_key_slot,
    a_key_slot_is_replaced_only_while_it_is_the_old_one,
    a_record_can_be_removed_by_revision,
    states_list_in_name_order_by_page_within_one_org,
    audit_is_per_org_newest_first,
    tokens_are_found_by_hash,
    a_steps_commit_checks_its_token_and_its_runs_end,
    an_org_is_created_once,
    an_org_and_its_state_read_together,
    blobs_put_get_delete,
    an_opened_blob_reads_as_stored,
    an_object_written_as_it_is_made_is_stored_whole_or_not_at_all,
    marks_drop_versions_and_blobs_are_found_by_age,
    inline_content_reads_back_with_the_record_and_by_version,
    replacing_an_inline_versions_key_slot_keeps_its_content,
    rewriting_a_record_keeps_its_content_until_it_is_a_blob,
    marks_drop_inline_versions_without_listing_a_blob,
    the_largest_inline_version_fits_beside_a_large_record,
    an_app_state_is_created_once_and_swapped_on_its_revision,
    archives_are_stored_with_their_commit_and_listed_newest_first,
    an_archive_stored_again_is_replaced_on_the_revision,
    deleting_an_archive_dooms_its_blobs_and_audits_in_the_same_commit,
    app_states_list_in_name_order_by_page_within_one_org,
);

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
/// its blob versions as before; new inline versions go beside them. Both older schemas: 2
/// (before app states and inline content) and 3 (app states, no `contents`).
#[tokio::test]
async fn a_catalog_from_before_inline_content_opens_and_reads_as_before() {
    for older in [
        "DROP TABLE contents; DROP TABLE apps; DROP TABLE archives; PRAGMA user_version = 2;",
        "DROP TABLE contents; PRAGMA user_version = 3;",
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
    assert_eq!(version, 4, "brought up to date from: {older}");
}
