//! The sweeper over the memory and local adapters, with a clock the tests move: pruning
//! keeps exactly the newest N (the current among them), a never-committed blob is deleted
//! and a committed one never is, deleted states go whole once their retention passes (at
//! once without one; the retention in force, so a changed setting moves the date of states
//! deleted already), and two sweepers at once do no harm;
//! each with small versions (inline in the catalog: nothing to delete but their records) and
//! large ones (in blobs).

use hegemony_state::domain::permission::Role;
use hegemony_state::domain::{Actor, Principal};
use hegemony_state::ports::{AuditQuery, INLINE_MAX_BYTES};
use hegemony_state::service::deleted::list;
use hegemony_state::service::manage::{delete, download};
use hegemony_state::service::state::write;
use hegemony_state::service::sweep::sweep;
use time::Duration;

mod support;

use support::{net, plaintext, read, user, Fixture};

fn alice() -> Principal {
    user("alice", Role::Admin)
}

fn doc(serial: u64) -> Vec<u8> {
    format!(r#"{{"version":4,"serial":{serial},"lineage":"l","outputs":{{}}}}"#).into_bytes()
}

/// A state whose sealed form is too large to be inline: hex noise compresses to about half.
fn large(serial: u64) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ serial;
    let noise: String = (0..INLINE_MAX_BYTES * 3)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from_digit((x % 16) as u32, 16).unwrap()
        })
        .collect();
    format!(r#"{{"version":4,"serial":{serial},"lineage":"l","outputs":{{"n":{{"value":"{noise}","type":"string"}}}}}}"#).into_bytes()
}

/// Which versions a case writes: small (inline) or large (blobs).
#[derive(Clone, Copy)]
enum Size {
    Inline,
    Blob,
}

impl Size {
    fn doc(self, serial: u64) -> Vec<u8> {
        match self {
            Size::Inline => doc(serial),
            Size::Blob => large(serial),
        }
    }

    /// How many blobs dropping `versions` versions leaves to delete.
    fn blobs(self, versions: usize) -> usize {
        match self {
            Size::Inline => 0,
            Size::Blob => versions,
        }
    }
}

async fn versions(f: &Fixture) -> Vec<u64> {
    let record = f.catalog.state("acme", "net").await.unwrap().unwrap();
    f.catalog
        .versions("acme", "net", &record.incarnation)
        .await
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect()
}

mod cases {
    use super::*;

    pub async fn pruning_keeps_exactly_the_newest_n_and_their_blobs(f: Fixture) {
        pruning_keeps_exactly_the_newest_n(f, Size::Blob).await
    }

    pub async fn pruning_keeps_exactly_the_newest_n_inline(f: Fixture) {
        pruning_keeps_exactly_the_newest_n(f, Size::Inline).await
    }

    async fn pruning_keeps_exactly_the_newest_n(f: Fixture, size: Size) {
        let doc = |serial| size.doc(serial);
        for serial in 1..=6 {
            write(&f.app, &alice(), &net(), None, doc(serial))
                .await
                .unwrap();
        }
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(report.versions_dropped, 3);
        assert_eq!(report.blobs_deleted, 0, "dropped blobs wait out the grace");
        assert_eq!(versions(&f).await, [6, 5, 4]);
        f.advance(Duration::minutes(6));
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(report.blobs_deleted, size.blobs(3));
        for v in [4, 5, 6] {
            assert_eq!(
                plaintext(download(&f.app, &alice(), &net(), v).await.unwrap()),
                doc(v),
                "kept version {v} still reads"
            );
        }
        assert!(
            download(&f.app, &alice(), &net(), 3).await.is_err(),
            "a pruned version is gone"
        );
        assert_eq!(read(&f.app, &alice(), &net()).await.unwrap(), Some(doc(6)));
        let again = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(
            (again.versions_dropped, again.blobs_deleted),
            (0, 0),
            "idempotent"
        );
    }

    pub async fn a_never_committed_blob_goes_after_an_hour_and_a_committed_one_never(f: Fixture) {
        write(&f.app, &alice(), &net(), None, doc(1)).await.unwrap();
        // A write that died between its blob and its commit.
        let orphan = "orgs/acme/states/x/2-orphan";
        f.catalog
            .add_pending_blob(orphan, f.app.clock.now())
            .await
            .unwrap();
        f.blobs.put(orphan, b"sealed".to_vec()).await.unwrap();
        f.advance(Duration::minutes(59));
        assert_eq!(
            sweep(&f.app, f.app.clock.now())
                .await
                .unwrap()
                .uncommitted_blobs_deleted,
            0
        );
        f.advance(Duration::minutes(2));
        assert_eq!(
            sweep(&f.app, f.app.clock.now())
                .await
                .unwrap()
                .uncommitted_blobs_deleted,
            1
        );
        assert!(f.blobs.get(orphan).await.unwrap().is_none());
        f.advance(Duration::days(30));
        sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(
            read(&f.app, &alice(), &net()).await.unwrap(),
            Some(doc(1)),
            "committed content stays"
        );
    }

    pub async fn a_deleted_state_goes_whole_and_a_new_one_is_untouched(f: Fixture) {
        a_deleted_state_goes_whole(f, Size::Blob).await
    }

    pub async fn a_deleted_inline_state_goes_whole_and_a_new_one_is_untouched(f: Fixture) {
        a_deleted_state_goes_whole(f, Size::Inline).await
    }

    /// Kept for its retention whole, then purged by the sweeper with every version and
    /// blob, audited; the state written under the name meanwhile untouched throughout.
    async fn a_deleted_state_goes_whole(f: Fixture, size: Size) {
        let doc = |serial| size.doc(serial);
        for serial in 1..=2 {
            write(&f.app, &alice(), &net(), None, doc(serial))
                .await
                .unwrap();
        }
        let old = f.catalog.state("acme", "net").await.unwrap().unwrap();
        let old_versions = || f.catalog.versions("acme", "net", &old.incarnation);
        let blobs: Vec<String> = old_versions()
            .await
            .unwrap()
            .into_iter()
            .filter(|v| !v.inline)
            .map(|v| v.blob)
            .collect();
        assert_eq!(blobs.len(), size.blobs(2));
        let kept = delete(&f.app, &alice(), &net()).await.unwrap().unwrap();
        write(&f.app, &alice(), &net(), None, doc(1)).await.unwrap();
        f.advance(Duration::days(7) - Duration::seconds(1));
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(
            (report.deleted_states_purged, report.versions_dropped),
            (0, 0),
            "nothing of it goes within its retention"
        );
        assert_eq!(old_versions().await.unwrap().len(), 2);
        f.advance(Duration::seconds(1));
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(
            (report.deleted_states_purged, report.versions_dropped),
            (1, 2)
        );
        assert!(old_versions().await.unwrap().is_empty());
        assert!(f
            .catalog
            .deleted_state("acme", &kept.id)
            .await
            .unwrap()
            .is_none());
        let purged = AuditQuery {
            action: Some("state.purged".into()),
            limit: 10,
            ..AuditQuery::default()
        };
        let entries = f.catalog.audit("acme", &purged).await.unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].entry.actor, Actor::Sweeper);
        f.advance(Duration::minutes(6));
        assert_eq!(
            sweep(&f.app, f.app.clock.now())
                .await
                .unwrap()
                .blobs_deleted,
            size.blobs(2)
        );
        for blob in &blobs {
            assert!(f.blobs.get(blob).await.unwrap().is_none(), "{blob} is gone");
        }
        assert_eq!(versions(&f).await, [3]);
        assert_eq!(read(&f.app, &alice(), &net()).await.unwrap(), Some(doc(1)));
    }

    /// The purge date is the delete time plus the retention in force: raised before the
    /// date, the state is kept (and listed with the later date); lowered, a state deleted
    /// already goes at the next pass once it is past the new date.
    pub async fn a_changed_retention_moves_the_purge_date_of_states_deleted_already(f: Fixture) {
        let mut f = f;
        write(&f.app, &alice(), &net(), None, doc(1)).await.unwrap();
        let kept = delete(&f.app, &alice(), &net()).await.unwrap().unwrap();
        f.advance(Duration::days(6));
        // An operator raises the setting after the mistaken delete, before its purge date.
        f.app.limits.deleted_retention = Duration::days(30);
        let listed = list(&f.app, &alice(), 10, None).await.unwrap();
        assert_eq!(
            listed.deleted_states[0].purge_at,
            kept.deleted_at + Duration::days(30),
            "listed with the date the setting in force gives"
        );
        f.advance(Duration::days(2));
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(report.deleted_states_purged, 0, "past the old date, kept");
        f.advance(Duration::days(22) - Duration::seconds(1));
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(report.deleted_states_purged, 0);
        f.advance(Duration::seconds(1));
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(report.deleted_states_purged, 1, "purged on the new date");

        // Lowered: a state deleted under a week's retention goes once a day has passed.
        write(&f.app, &alice(), &net(), None, doc(2)).await.unwrap();
        delete(&f.app, &alice(), &net()).await.unwrap().unwrap();
        f.app.limits.deleted_retention = Duration::days(7);
        f.advance(Duration::days(1));
        f.app.limits.deleted_retention = Duration::days(1);
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(report.deleted_states_purged, 1, "past the new, nearer date");
    }

    /// With no retention a delete keeps nothing: the versions go at the next pass.
    pub async fn without_a_retention_a_deleted_state_goes_at_once(f: Fixture) {
        let mut f = f;
        f.app.limits.deleted_retention = Duration::ZERO;
        for serial in 1..=2 {
            write(&f.app, &alice(), &net(), None, doc(serial))
                .await
                .unwrap();
        }
        let old = f.catalog.state("acme", "net").await.unwrap().unwrap();
        assert!(delete(&f.app, &alice(), &net()).await.unwrap().is_none());
        let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
        assert_eq!(
            (report.deleted_states_purged, report.versions_dropped),
            (0, 2)
        );
        assert!(f
            .catalog
            .versions("acme", "net", &old.incarnation)
            .await
            .unwrap()
            .is_empty());
        let listed = f.catalog.deleted_states("acme", None, 10).await.unwrap();
        assert!(listed.is_empty());
    }

    /// A kill mid-seal or a full disk leaves a temporary blob file; only the next start
    /// removed it, so a server that ran on kept it. A pass removes it once it is an hour
    /// old, and leaves a younger one (a save under way) and every blob. Only the local store
    /// leaves such files.
    pub async fn a_pass_removes_the_temporary_blob_files_a_dead_save_left(f: Fixture) {
        write(&f.app, &alice(), &net(), None, doc(1)).await.unwrap();
        let Some(dir) = f.data_dir() else {
            let report = sweep(&f.app, f.app.clock.now()).await.unwrap();
            assert_eq!(report.blob_leftovers_removed, 0);
            return;
        };
        let blobs = dir.join(hegemony_state::adapters::local::BLOB_DIR);
        let now = f.app.clock.now();
        let aged = |name: &str, age: Duration| {
            let path = blobs.join(name);
            let file = std::fs::File::create(&path).unwrap();
            file.set_modified((now - age).into()).unwrap();
            path
        };
        let left = aged("orgs+acme+states+i+2-dead.tmp", Duration::hours(2));
        let under_way = aged("orgs+acme+states+i+3-busy.tmp", Duration::seconds(5));
        let report = sweep(&f.app, now).await.unwrap();
        assert_eq!(report.blob_leftovers_removed, 1);
        assert!(!left.exists() && under_way.exists());
        assert_eq!(read(&f.app, &alice(), &net()).await.unwrap(), Some(doc(1)));
        let again = sweep(&f.app, now).await.unwrap();
        assert_eq!(again.blob_leftovers_removed, 0, "idempotent");
    }

    pub async fn two_sweepers_at_once_do_no_harm(f: Fixture) {
        two_sweepers_at_once(f, Size::Blob).await
    }

    pub async fn two_sweepers_at_once_do_no_harm_to_inline_versions(f: Fixture) {
        two_sweepers_at_once(f, Size::Inline).await
    }

    async fn two_sweepers_at_once(f: Fixture, size: Size) {
        let doc = |serial| size.doc(serial);
        for serial in 1..=8 {
            write(&f.app, &alice(), &net(), None, doc(serial))
                .await
                .unwrap();
        }
        let now = f.app.clock.now();
        let (a, b) = tokio::join!(sweep(&f.app, now), sweep(&f.app, now));
        assert_eq!(a.unwrap().versions_dropped + b.unwrap().versions_dropped, 5);
        f.advance(Duration::minutes(6));
        let now = f.app.clock.now();
        let (a, b) = tokio::join!(sweep(&f.app, now), sweep(&f.app, now));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(
            a.blobs_deleted + b.blobs_deleted >= size.blobs(5),
            "each doomed blob deleted at least once: {a:?} {b:?}"
        );
        if let Size::Inline = size {
            assert_eq!(
                a.blobs_deleted + b.blobs_deleted,
                0,
                "inline versions have none"
            );
        }
        assert_eq!(versions(&f).await, [8, 7, 6]);
        assert_eq!(read(&f.app, &alice(), &net()).await.unwrap(), Some(doc(8)));
    }
}

every_adapter!(support::limits(3);
    pruning_keeps_exactly_the_newest_n_and_their_blobs,
    pruning_keeps_exactly_the_newest_n_inline,
    a_never_committed_blob_goes_after_an_hour_and_a_committed_one_never,
    a_deleted_state_goes_whole_and_a_new_one_is_untouched,
    a_deleted_inline_state_goes_whole_and_a_new_one_is_untouched,
    without_a_retention_a_deleted_state_goes_at_once,
    a_changed_retention_moves_the_purge_date_of_states_deleted_already,
    two_sweepers_at_once_do_no_harm,
    two_sweepers_at_once_do_no_harm_to_inline_versions,
    a_pass_removes_the_temporary_blob_files_a_dead_save_left,
);
