//! Moving a deployment's records from one store to another (`hegemony-state migrate`), through
//! the ports of both, so it goes either way (local to AWS, and back). Each kind of record is
//! copied by one step of its own: orgs with their permissions, the audit log, runs with their
//! ends (before the tokens, so a step token of an ended run never works on the target), tokens
//! (by hash: every token keeps working), trust policies, states with every version, app states
//! (Octo's remote state) with every archive, deleted states kept for their retention with
//! every version. A version's or a file's sealed bytes are copied
//! as they are and its data key is unwrapped by the source's key service and wrapped by the
//! target's, in memory, under the same context: the content is never opened. What the target already holds identically is skipped and a record it holds
//! differently is an error naming it, so a migration stopped part way is run again and
//! copies each version once. A state that is locked or held, or an app state that is
//! locked, is refused (or skipped, when asked). The verify pass opens every version and file on
//! the target and compares its SHA-256 with the source's record; the last pass reads the
//! source again and names what changed there during the move (a lock, a version, a token),
//! so a run that missed a write never reports success.

use std::collections::BTreeMap;

use serde::Serialize;

use super::app_changes::key_state;
use super::app_keys::{archives, org_apps};
use super::keys::{org_deleted_states, org_records, Holder, PAGE};
use super::verify::{check_app, check_state};
use super::{App, Error};
use crate::crypto;
use crate::domain::app::{AppRecord, ArchiveRecord, FileRef};
use crate::domain::audit::AuditAction;
use crate::domain::deleted::DeletedState;
use crate::domain::record::StateRecord;
use crate::domain::version::{KeySlot, VersionRecord};
use crate::domain::Actor;
use crate::ports::{
    AppCommit, AuditEntry, AuditQuery, Commit, InlineContent, KeyContext, OrgRecord, RunRecord,
    StoreError, TokenRecord, TrustWrite,
};

/// The two stores: records are read from `from` and written to `to`.
#[derive(Clone, Copy)]
pub struct Sides<'a> {
    pub from: &'a App,
    pub to: &'a App,
}

/// What a migration does besides copying.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Count what would be copied, write nothing.
    pub dry_run: bool,
    /// Copy the other states when some are locked or held, and list those skipped.
    pub skip_locked: bool,
}

/// Where a migration is with one version or archive, as `on_step` hears it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The target holds it already: skipped.
    Present,
    /// Its sealed bytes are written on the target, the commit that names them not yet made:
    /// a crash here leaves them pending there, for the next run to commit.
    Sealed,
    /// Committed on the target.
    Copied,
}

/// Why a migration stopped.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The target holds a different record under the same name: copying over it would lose
    /// one of them.
    #[error("the target holds a different {0}: it was not copied; move or remove it there, then run the migration again")]
    Differs(String),
    /// States that are locked or held (a run under way): their versions may change during
    /// the copy.
    #[error("states locked or held ({}): {}; release them (or pass --skip-locked to copy the rest)", .0.len(), .0.join(", "))]
    Locked(Vec<String>),
    #[error(transparent)]
    Service(#[from] Error),
}

impl From<StoreError> for MigrateError {
    fn from(e: StoreError) -> Self {
        MigrateError::Service(e.into())
    }
}

impl From<crate::ports::KeyError> for MigrateError {
    fn from(e: crate::ports::KeyError) -> Self {
        MigrateError::Service(e.into())
    }
}

/// How many records of one kind were copied and how many the target already held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Count {
    /// Copied (with `--dry-run`: that would be).
    pub copied: u64,
    /// Already on the target, identical: skipped.
    pub present: u64,
}

impl Count {
    fn add(&mut self, copied: bool) {
        if copied {
            self.copied += 1;
        } else {
            self.present += 1;
        }
    }
}

/// What a migration did, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub orgs: Count,
    /// Runs with their ends.
    pub runs: Count,
    pub tokens: Count,
    pub trust_policies: Count,
    pub protections: Count,
    pub states: Count,
    pub versions: Count,
    /// Deleted states kept for their retention (their versions are counted in `versions`).
    pub deleted_states: Count,
    /// App states (Octo's remote state), new on the target or not.
    pub app_states: Count,
    /// Their archives.
    pub archives: Count,
    pub audit_entries: Count,
    /// States and app states skipped because they are locked or held (`--skip-locked`):
    /// `org/name (why)`, `app state org/name (why)`.
    pub skipped: Vec<String>,
    /// Versions and app-state files opened on the target by the verify pass, their SHA-256
    /// equal to the source's.
    pub verified: u64,
    /// Versions and files the verify pass found missing or different, with why.
    pub mismatched: Vec<String>,
    /// What moved of each org.
    pub by_org: BTreeMap<String, OrgReport>,
    /// What changed on the source while it was copied and is not on the target as the
    /// source now has it (a lock taken, a version written, a token made or revoked, a run
    /// ended): the migration is not complete until a run finds none.
    pub changed: Vec<String>,
}

/// What a migration did of one org.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OrgReport {
    pub tokens: Count,
    pub states: Count,
    pub versions: Count,
    pub deleted_states: Count,
    pub app_states: Count,
    pub archives: Count,
}

/// What the source holds: its orgs' states and their versions (oldest first), their app
/// states and archives (oldest first), their deleted states and versions, read before anything is copied, so a progress bar
/// knows its length and locked states are found first.
pub struct Survey {
    pub orgs: Vec<String>,
    pub states: Vec<(StateRecord, Vec<VersionRecord>)>,
    pub apps: Vec<(AppRecord, Vec<ArchiveRecord>)>,
    /// Deleted states kept for their retention, with their versions (oldest first).
    pub deleted: Vec<(DeletedState, Vec<VersionRecord>)>,
    /// Locked or held states and locked app states: `org/name (why)`.
    pub blocked: Vec<String>,
}

impl Survey {
    /// How many versions and archives there are to copy: a progress bar's length.
    pub fn versions(&self) -> u64 {
        let versions: usize = self.states.iter().map(|(_, v)| v.len()).sum::<usize>()
            + self.deleted.iter().map(|(_, v)| v.len()).sum::<usize>();
        let archives: usize = self.apps.iter().map(|(_, a)| a.len()).sum();
        (versions + archives) as u64
    }
}

/// Every org `app`'s store holds a record of (a state, a deleted state, an app state, its
/// settings, a trust policy, a token, its audit log), in order: an org whose tokens all
/// expired still holds its states.
///
/// # Errors
/// `StorageFault` when the catalog fails.
pub async fn orgs(app: &App) -> Result<Vec<String>, Error> {
    Ok(app.catalog.orgs().await?)
}

/// Whether a record of `org` moves with `orgs`: a deployment's own records (no org: the
/// platform's tokens, a run only ever reported ended) move with any.
fn moves(orgs: &[String], org: &str) -> bool {
    org.is_empty() || orgs.iter().any(|o| o == org)
}

/// Reads what `orgs` hold on `app`.
///
/// # Errors
/// `StorageFault` when the catalog fails.
pub async fn survey(app: &App, orgs: &[String]) -> Result<Survey, Error> {
    let now = app.clock.now();
    let mut survey = Survey {
        orgs: orgs.to_vec(),
        states: Vec::new(),
        apps: Vec::new(),
        deleted: Vec::new(),
        blocked: Vec::new(),
    };
    for org in orgs {
        // Every record, not only states with a version: a first apply's lock is in use too.
        for record in org_records(app, org).await? {
            let why = match (record.live_lock(now), &record.hold) {
                (Some(lock), _) => Some(format!("locked, lock ID {}", lock.document.id)),
                (None, Some(hold)) => Some(format!("held by run {}", hold.run)),
                (None, None) => None,
            };
            if let Some(why) = why {
                survey
                    .blocked
                    .push(format!("{}/{} ({why})", record.org, record.name));
                continue;
            }
            if !record.is_visible() {
                continue;
            }
            let mut versions = app
                .catalog
                .versions(&record.org, record.home(), &record.incarnation)
                .await?;
            versions.reverse();
            survey.states.push((record, versions));
        }
        // An app state's lock has no expiry: it stands until its holder seals or gives up
        // the change, or an admin ends it.
        for record in org_apps(app, org).await? {
            if let Some(lock) = &record.lock {
                survey.blocked.push(format!(
                    "app state {}/{} (locked, change {})",
                    record.org, record.name, lock.commit_id
                ));
                continue;
            }
            let mut held = archives(app, &record).await?;
            held.reverse();
            survey.apps.push((record, held));
        }
        for deleted in org_deleted_states(app, org).await? {
            let record = &deleted.record;
            let mut versions = app
                .catalog
                .versions(&record.org, record.home(), &record.incarnation)
                .await?;
            versions.reverse();
            survey.deleted.push((deleted, versions));
        }
    }
    Ok(survey)
}

/// Copies everything `survey` found from one side to the other, step by step, then verifies
/// the states on the target and records the migration in each org's audit log.
/// `on_step` hears of each version and archive: present, or sealed then copied.
///
/// # Errors
/// `Locked` when states are locked or held and `skip_locked` is not set (nothing is
/// written); `Differs` when the target holds a different record; what either store or key
/// service answers. A version that does not verify is listed in the report, not raised.
pub async fn migrate(
    sides: Sides<'_>,
    survey: &Survey,
    options: Options,
    on_step: &(dyn Fn(Step) + Sync),
) -> Result<Report, MigrateError> {
    if !survey.blocked.is_empty() && !options.skip_locked {
        return Err(MigrateError::Locked(survey.blocked.clone()));
    }
    let dry = options.dry_run;
    let mut report = Report {
        skipped: survey.blocked.clone(),
        ..Report::default()
    };
    for org in &survey.orgs {
        report.orgs.add(copy_org(sides, org, dry).await?);
        report.audit_entries = add(report.audit_entries, copy_audit(sides, org, dry).await?);
        report.by_org.insert(org.clone(), OrgReport::default());
    }
    // Runs before tokens: a step token never lands on the target without its run's end.
    report.runs = copy_runs(sides, &survey.orgs, dry).await?;
    copy_tokens(sides, &survey.orgs, dry, &mut report).await?;
    for org in &survey.orgs {
        report.trust_policies = add(report.trust_policies, copy_trust(sides, org, dry).await?);
        report.protections = add(report.protections, copy_protections(sides, org, dry).await?);
    }
    for (record, versions) in &survey.states {
        let (state, copied) = copy_state(sides, record, versions, dry, on_step).await?;
        report.states.add(state);
        report.versions = add(report.versions, copied);
        let of_org = report.by_org.entry(record.org.clone()).or_default();
        of_org.states.add(state);
        of_org.versions = add(of_org.versions, copied);
    }
    for (record, held) in &survey.apps {
        let (new_app, copied) = copy_app(sides, record, held, dry, on_step).await?;
        report.app_states.add(new_app);
        report.archives = add(report.archives, copied);
        let of_org = report.by_org.entry(record.org.clone()).or_default();
        of_org.app_states.add(new_app);
        of_org.archives = add(of_org.archives, copied);
    }
    for (deleted, versions) in &survey.deleted {
        let (kept, copied) = copy_deleted(sides, deleted, versions, dry, on_step).await?;
        report.deleted_states.add(kept);
        report.versions = add(report.versions, copied);
        let of_org = report.by_org.entry(deleted.record.org.clone()).or_default();
        of_org.deleted_states.add(kept);
        of_org.versions = add(of_org.versions, copied);
    }
    if dry {
        return Ok(report);
    }
    for (record, versions) in &survey.states {
        verify_state(sides, record, versions, &mut report).await?;
    }
    for (record, held) in &survey.apps {
        verify_app(sides, record, held, &mut report).await?;
    }
    for (deleted, versions) in &survey.deleted {
        verify_deleted(sides, deleted, versions, &mut report).await?;
    }
    report.changed = changed_meanwhile(sides, survey).await?;
    for org in &survey.orgs {
        record_migration(sides, org, survey, &report).await?;
    }
    Ok(report)
}

fn add(a: Count, b: Count) -> Count {
    Count {
        copied: a.copied + b.copied,
        present: a.present + b.present,
    }
}

/// The entry a migration's write is audited with on the target.
fn migration_entry(app: &App, org: &str, detail: serde_json::Value) -> AuditEntry {
    AuditEntry {
        org: org.to_owned(),
        at: app.clock.now(),
        action: AuditAction::StoreMigrated.as_str().into(),
        actor: Actor::Cli,
        state: None,
        version: None,
        detail,
    }
}

/// Step: an org's record, with its allocation of permissions to roles. Returns whether it was
/// copied (`false`: the target holds it, or the source has none, its default).
async fn copy_org(sides: Sides<'_>, org: &str, dry: bool) -> Result<bool, MigrateError> {
    let Some(record) = sides.from.catalog.org(org).await? else {
        return Ok(false);
    };
    match sides.to.catalog.org(org).await? {
        Some(there) if there.allocation == record.allocation => Ok(false),
        Some(_) => Err(MigrateError::Differs(format!(
            "allocation of permissions for org {org}"
        ))),
        None if dry => Ok(true),
        // Its protected-state rules follow in a step of their own, each written (and
        // audited) as one rule, whichever way a store keeps them. Its inventory key is the
        // source's key service's to open: the target makes its own when it indexes.
        None => Ok(sides
            .to
            .catalog
            .create_org(&OrgRecord {
                protections: Vec::new(),
                inventory_key: None,
                ..record
            })
            .await?),
    }
}

/// An org's audit log, oldest first.
async fn audit_log(app: &App, org: &str) -> Result<Vec<AuditEntry>, Error> {
    let mut entries = Vec::new();
    let mut before = None;
    loop {
        let query = AuditQuery {
            before,
            limit: PAGE,
            ..AuditQuery::default()
        };
        let page = app.catalog.audit(org, &query).await?;
        let full = page.len() == PAGE;
        before = page.last().map(|r| r.seq);
        entries.extend(page.into_iter().map(|r| r.entry));
        if !full {
            break;
        }
    }
    entries.reverse();
    Ok(entries)
}

/// What makes two audit entries the same one: all of it, the time to the second (the stores
/// keep it at different precisions).
fn audit_identity(entry: &AuditEntry) -> String {
    serde_json::json!([
        entry.at.unix_timestamp(),
        entry.action,
        entry.actor,
        entry.state,
        entry.version,
        entry.detail
    ])
    .to_string()
}

/// Step: an org's audit log, with its original times and actors, oldest first. The entries
/// the target holds already (a migration run before) are skipped, one for one.
async fn copy_audit(sides: Sides<'_>, org: &str, dry: bool) -> Result<Count, MigrateError> {
    let mut held: BTreeMap<String, usize> = BTreeMap::new();
    for entry in audit_log(sides.to, org).await? {
        *held.entry(audit_identity(&entry)).or_default() += 1;
    }
    let mut count = Count::default();
    for entry in audit_log(sides.from, org).await? {
        if let Some(n) = held.get_mut(&audit_identity(&entry)).filter(|n| **n > 0) {
            *n -= 1;
            count.add(false);
            continue;
        }
        if !dry {
            sides.to.catalog.append_audit(&entry).await?;
        }
        count.add(true);
    }
    Ok(count)
}

/// Step: the tokens of `orgs` (and the deployment's own), by hash (no token is ever stored,
/// so each keeps working), each audited on the target. A token revoked on the source since
/// an earlier run is revoked on the target too.
async fn copy_tokens(
    sides: Sides<'_>,
    orgs: &[String],
    dry: bool,
    report: &mut Report,
) -> Result<(), MigrateError> {
    for token in sides.from.catalog.tokens().await? {
        if !moves(orgs, &token.org) {
            continue;
        }
        let copy = match sides.to.catalog.token(&token.hash).await? {
            None => true,
            Some(there) if there == token => false,
            Some(there) if revoked_since(&there, &token) => true,
            Some(_) => {
                return Err(MigrateError::Differs(format!(
                    "token {} (org {})",
                    token.id, token.org
                )))
            }
        };
        if copy && !dry {
            let entry = migration_entry(
                sides.to,
                &token.org,
                serde_json::json!({"token": token.id, "revoked": token.revoked}),
            );
            sides.to.catalog.put_token(&token, &entry).await?;
        }
        report.tokens.add(copy);
        if let Some(of_org) = report.by_org.get_mut(&token.org) {
            of_org.tokens.add(copy);
        }
    }
    Ok(())
}

/// Step: the runs of `orgs` (and those only ever reported ended, of no org) with their
/// ends, so a run that ended on the source has ended on the target: its step tokens are
/// refused there as here once its grace has passed, and no mint starts it again. A run that
/// ended on the source since an earlier run ends on the target too (the first end wins on
/// both). Its steps' items stay behind: the locks they name are not copied.
async fn copy_runs(sides: Sides<'_>, orgs: &[String], dry: bool) -> Result<Count, MigrateError> {
    let mut count = Count::default();
    let mut runs = sides.from.catalog.runs().await?;
    runs.sort_by(|a, b| a.run.cmp(&b.run));
    for run in runs.into_iter().filter(|r| moves(orgs, &r.org)) {
        let there = sides.to.catalog.run(&run.run).await?;
        let (bind, end) = match &there {
            None => (true, run.ended_at.is_some()),
            Some(t) if t.org != run.org => {
                return Err(MigrateError::Differs(format!(
                    "run {} (of org {:?} there, {:?} here)",
                    run.run, t.org, run.org
                )))
            }
            Some(t) => (false, t.ended_at.is_none() && run.ended_at.is_some()),
        };
        if !dry {
            copy_run(sides, &run, bind, end).await?;
        }
        count.add(bind || end);
    }
    Ok(count)
}

/// Writes one run on the target as the source has it: bound (as a first mint binds it, so
/// the target's sweeper lists it as its own), then ended at the source's time.
async fn copy_run(
    sides: Sides<'_>,
    run: &RunRecord,
    bind: bool,
    end: bool,
) -> Result<(), MigrateError> {
    if bind && !run.org.is_empty() {
        let open = RunRecord {
            ended_at: None,
            status: None,
            ..run.clone()
        };
        sides.to.catalog.bind_run(&open).await?;
    }
    if let (true, Some(at)) = (end, run.ended_at) {
        sides
            .to
            .catalog
            .end_run(&run.run, at, run.status.as_deref())
            .await?;
    }
    Ok(())
}

/// Whether `source` is `target` revoked.
fn revoked_since(target: &TokenRecord, source: &TokenRecord) -> bool {
    source.revoked
        && *target
            == TokenRecord {
                revoked: false,
                ..source.clone()
            }
}

/// Step: an org's trust policies, each audited on the target.
async fn copy_trust(sides: Sides<'_>, org: &str, dry: bool) -> Result<Count, MigrateError> {
    let there = sides.to.catalog.trust_policies(org).await?;
    let mut count = Count::default();
    for policy in sides.from.catalog.trust_policies(org).await? {
        match there.iter().find(|p| p.name == policy.name) {
            Some(p) if *p == policy => {
                count.add(false);
                continue;
            }
            Some(_) => {
                return Err(MigrateError::Differs(format!(
                    "trust policy {} of org {org}",
                    policy.name
                )))
            }
            None => {}
        }
        if !dry {
            let entry = migration_entry(
                sides.to,
                org,
                serde_json::json!({"trust_policy": policy.name}),
            );
            let written = sides
                .to
                .catalog
                .put_trust_policy(org, None, &policy, &entry)
                .await?;
            if let TrustWrite::PairTaken { org: other } = written {
                return Err(MigrateError::Differs(format!(
                    "trust policy for the issuer {} and audience {} (org {other}'s, not {org}'s)",
                    policy.issuer, policy.audience
                )));
            }
        }
        count.add(true);
    }
    Ok(count)
}

/// Step: an org's protected-state rules, after its trust policies (which they name), each
/// with a `store.migrated` entry as a trust policy has.
async fn copy_protections(sides: Sides<'_>, org: &str, dry: bool) -> Result<Count, MigrateError> {
    let Some(record) = sides.from.catalog.org(org).await? else {
        return Ok(Count::default());
    };
    let there = match sides.to.catalog.org(org).await? {
        Some(there) => there.protections,
        None => Vec::new(),
    };
    let mut count = Count::default();
    for protection in &record.protections {
        match there.iter().find(|p| p.pattern == protection.pattern) {
            Some(p) if p == protection => {
                count.add(false);
                continue;
            }
            Some(_) => {
                return Err(MigrateError::Differs(format!(
                    "protected-state rule {} of org {org}",
                    protection.pattern
                )))
            }
            None => {}
        }
        if !dry {
            let entry = migration_entry(
                sides.to,
                org,
                serde_json::json!({"protection": protection.pattern}),
            );
            sides
                .to
                .catalog
                .put_protection(org, None, protection, &entry)
                .await?;
        }
        count.add(true);
    }
    Ok(count)
}

/// Step: one state with every version, oldest first, one commit per version (its record and
/// its state's record, which then names it as the latest), so a migration stopped part way
/// leaves whole versions only and the next run copies the rest. Returns whether the state
/// was new on the target and how many versions were copied.
async fn copy_state(
    sides: Sides<'_>,
    record: &StateRecord,
    versions: &[VersionRecord],
    dry: bool,
    on_step: &(dyn Fn(Step) + Sync),
) -> Result<(bool, Count), MigrateError> {
    let (org, home) = (&record.org, record.home());
    let what = |detail: &str| format!("state {org}/{} ({detail})", record.name);
    let there = sides.to.catalog.state(org, &record.name).await?;
    // The target's own latest version: versions below it that it no longer holds were
    // dropped by its retention, and are not copied back (the record would name them latest).
    let mut target_latest = 0;
    if let Some(there) = &there {
        if there.incarnation != record.incarnation || there.home() != home {
            return Err(MigrateError::Differs(what("another state of that name")));
        }
        // A state in use on the target is not written over: its lock or hold would be lost.
        if there.live_lock(sides.to.clock.now()).is_some() || there.hold.is_some() {
            return Err(MigrateError::Differs(what("locked or held on the target")));
        }
        // A target that has moved on (written since the switch) keeps its newer versions:
        // what the source has is there already, or below them and not copied back.
        target_latest = there.latest.as_ref().map_or(0, |l| l.version);
    }
    let new_state = there.is_none();
    let mut revision = there.map_or(0, |t| t.revision);
    let mut count = Count::default();
    for version in versions {
        let number = version.version;
        let held = sides
            .to
            .catalog
            .version(org, home, &record.incarnation, number)
            .await?;
        match held {
            Some(v) if v.sha256 == version.sha256 => {
                count.add(false);
                on_step(Step::Present);
                continue;
            }
            Some(_) => return Err(MigrateError::Differs(what(&format!("version {number}")))),
            None if number < target_latest => {
                count.add(false);
                on_step(Step::Present);
                continue;
            }
            None => {}
        }
        if !dry {
            copy_version(sides, record, version, revision, on_step).await?;
            revision += 1;
        }
        count.add(true);
        on_step(Step::Copied);
    }
    Ok((new_state, count))
}

/// Copies one version: its sealed bytes as they are (into the blob store or beside its
/// record, where the source keeps them), its data key moved to the target's key service,
/// committed with the state's record naming it as the latest, over `revision`.
async fn copy_version(
    sides: Sides<'_>,
    record: &StateRecord,
    version: &VersionRecord,
    revision: u64,
    on_step: &(dyn Fn(Step) + Sync),
) -> Result<(), MigrateError> {
    let (org, home, incarnation) = (&record.org, record.home(), &record.incarnation);
    let what = format!("version {} of state {org}/{}", version.version, record.name);
    let sealed = if version.inline {
        sides
            .from
            .catalog
            .content(org, home, incarnation, version.version)
            .await?
    } else {
        sides.from.blobs.get(&version.blob).await?
    };
    let sealed =
        sealed.ok_or_else(|| Error::Damaged(format!("the content of {what} is missing")))?;
    let slot = move_key(sides, record, version, &sealed, &what).await?;
    let mut copy = version.clone();
    copy.set_slot(&slot);
    let now = sides.to.clock.now();
    let mut state = record.clone();
    state.revision = revision + 1;
    state.latest = Some(copy.clone());
    let snapshot = StateRecord {
        revision,
        ..record.clone()
    };
    let mut commit = Commit::over(&snapshot, now, Some(state));
    if version.inline {
        commit.contents.push(InlineContent {
            version: version.version,
            sealed: std::sync::Arc::new(sealed),
        });
    } else {
        sides
            .to
            .catalog
            .add_pending_blob(&version.blob, now)
            .await?;
        sides.to.blobs.put(&version.blob, sealed).await?;
        commit.committed_blobs.push(version.blob.clone());
    }
    commit.versions.push(copy);
    on_step(Step::Sealed);
    sides.to.catalog.commit(commit).await?;
    Ok(())
}

/// A version's data key unwrapped by the source's key service and wrapped by the target's,
/// under the same context, in this process's memory only: the target's key slot for it.
async fn move_key(
    sides: Sides<'_>,
    record: &StateRecord,
    version: &VersionRecord,
    sealed: &[u8],
    what: &str,
) -> Result<KeySlot, MigrateError> {
    let recorded = KeySlot {
        key: version.key.clone(),
        wrapped_key: version.wrapped_key.clone(),
    };
    let context = KeyContext {
        org: &record.org,
        state: record.home(),
    };
    move_slot(sides, &recorded, &context, sealed, what).await
}

/// A recorded data key (`slot`, of content sealed under `context`) unwrapped by the source's
/// key service and wrapped by the target's under the same context, in memory only: the
/// target's slot. Content recorded before slots were kept has its key in its sealed bytes'
/// header.
async fn move_slot(
    sides: Sides<'_>,
    slot: &KeySlot,
    context: &KeyContext<'_>,
    sealed: &[u8],
    what: &str,
) -> Result<KeySlot, MigrateError> {
    let (key_id, wrapped) = match &slot.wrapped_key {
        Some(wrapped) => (slot.key.clone(), wrapped.clone()),
        None => {
            let header =
                crypto::read_header(sealed).map_err(|e| Error::Damaged(format!("{what}: {e}")))?;
            let key = header.key.ok_or_else(|| {
                Error::Damaged(format!("{what} has no wrapped data key in its record"))
            })?;
            (key.key_id, key.wrapped)
        }
    };
    let plaintext = sides
        .from
        .keys()?
        .unwrap_key(&key_id, &wrapped, context)
        .await?;
    let new = sides.to.keys()?.wrap_key(&plaintext, context).await?;
    Ok(KeySlot {
        key: new.key_id,
        wrapped_key: Some(new.wrapped),
    })
}

/// A deleted state as it is whatever key service wraps its versions' data keys, and however
/// often they were re-wrapped: what makes the source's and the target's the same.
fn bare_deleted(deleted: &DeletedState) -> DeletedState {
    let mut bare = deleted.clone();
    bare.revision = 0;
    if let Some(latest) = &mut bare.record.latest {
        latest.set_slot(&KeySlot {
            key: String::new(),
            wrapped_key: None,
        });
    }
    bare
}

/// Step: one deleted state kept for its retention, with every version under its home name,
/// each version's sealed bytes copied as they are and its data key moved as a state's is;
/// its record (the same id, deleted time and actor, purge date) last, with its latest
/// version's new key slot, audited on the target, so a run stopped part way leaves no
/// deleted state that a restore would find short of versions. Returns whether its record
/// was new on the target and how many versions were copied.
async fn copy_deleted(
    sides: Sides<'_>,
    deleted: &DeletedState,
    versions: &[VersionRecord],
    dry: bool,
    on_step: &(dyn Fn(Step) + Sync),
) -> Result<(bool, Count), MigrateError> {
    let record = &deleted.record;
    let (org, home, incarnation) = (&record.org, record.home(), &record.incarnation);
    let what = |detail: &str| {
        format!(
            "deleted state {org}/{} {} ({detail})",
            deleted.name, deleted.id
        )
    };
    let there = sides.to.catalog.deleted_state(org, &deleted.id).await?;
    if let Some(there) = &there {
        if bare_deleted(there) != bare_deleted(deleted) {
            return Err(MigrateError::Differs(what("another record")));
        }
    }
    let mut count = Count::default();
    for version in versions {
        let number = version.version;
        match sides
            .to
            .catalog
            .version(org, home, incarnation, number)
            .await?
        {
            Some(v) if v.sha256 == version.sha256 => {
                count.add(false);
                on_step(Step::Present);
                continue;
            }
            Some(_) => return Err(MigrateError::Differs(what(&format!("version {number}")))),
            None => {}
        }
        if !dry {
            let label = format!("version {number} of {}", what("deleted"));
            let sealed = if version.inline {
                sides
                    .from
                    .catalog
                    .content(org, home, incarnation, number)
                    .await?
            } else {
                sides.from.blobs.get(&version.blob).await?
            };
            let sealed = sealed
                .ok_or_else(|| Error::Damaged(format!("the content of {label} is missing")))?;
            let slot = move_key(sides, record, version, &sealed, &label).await?;
            let mut copy = version.clone();
            copy.set_slot(&slot);
            let inline = if version.inline {
                Some(sealed.as_slice())
            } else {
                let now = sides.to.clock.now();
                sides
                    .to
                    .catalog
                    .add_pending_blob(&version.blob, now)
                    .await?;
                sides.to.blobs.put(&version.blob, sealed.clone()).await?;
                None
            };
            on_step(Step::Sealed);
            sides
                .to
                .catalog
                .put_deleted_version(deleted, &copy, inline)
                .await?;
        }
        count.add(true);
        on_step(Step::Copied);
    }
    if there.is_some() {
        return Ok((false, count));
    }
    if !dry {
        let mut copy = deleted.clone();
        if let Some(latest) = &mut copy.record.latest {
            let stored = sides
                .to
                .catalog
                .version(org, home, incarnation, latest.version)
                .await?
                .ok_or_else(|| Error::Damaged(what("its latest version is missing")))?;
            latest.set_slot(&stored.slot());
        }
        let entry = migration_entry(
            sides.to,
            org,
            serde_json::json!({"deleted_state": deleted.id, "name": deleted.name}),
        );
        match sides.to.catalog.put_deleted(&copy, &entry).await {
            Err(StoreError::Conflict) => return Err(MigrateError::Differs(what("another record"))),
            written => written?,
        }
    }
    Ok((true, count))
}

/// The verify pass of one deleted state: every version the source listed is on the target
/// with the same SHA-256, and opens there (with the target's key) to it.
async fn verify_deleted(
    sides: Sides<'_>,
    deleted: &DeletedState,
    versions: &[VersionRecord],
    report: &mut Report,
) -> Result<(), MigrateError> {
    let label = format!(
        "deleted state {}/{} {}",
        deleted.org, deleted.name, deleted.id
    );
    let Some(there) = sides
        .to
        .catalog
        .deleted_state(&deleted.org, &deleted.id)
        .await?
    else {
        report
            .mismatched
            .push(format!("{label}: missing on the target"));
        return Ok(());
    };
    let record = &there.record;
    let held = sides
        .to
        .catalog
        .versions(&record.org, record.home(), &record.incarnation)
        .await?;
    for version in versions {
        if !held
            .iter()
            .any(|v| v.version == version.version && v.sha256 == version.sha256)
        {
            report.mismatched.push(format!(
                "version {} of {label}: missing or different on the target",
                version.version
            ));
        }
    }
    let checked = check_state(sides.to, Holder::Deleted(&there), &|| {}).await?;
    report.verified += checked.opened;
    report.mismatched.extend(
        checked
            .failed
            .into_iter()
            .map(|f| format!("org {}: {f}", deleted.org)),
    );
    Ok(())
}

/// An archive as it is whatever key service wraps its files' data keys: what makes the
/// source's and the target's copies the same archive.
fn without_slots(archive: &ArchiveRecord) -> ArchiveRecord {
    let mut bare = archive.clone();
    for file in &mut bare.files {
        file.key.clear();
        file.wrapped_key = None;
    }
    bare
}

/// Step: one app state with every archive, oldest first, one commit per archive (it, and the
/// app state's record naming it as the newest), so a migration stopped part way leaves whole
/// archives only and the next run copies the rest. Each file's sealed blob is copied as it
/// is, once, however many archives carry it, and its data key moved to the target's key
/// service under the app state's own key context; every copy of its slot takes the new one,
/// as a re-wrap writes them (`ArchiveRecord::replace_slots`). Returns whether the app state
/// was new on the target and how many archives were copied.
async fn copy_app(
    sides: Sides<'_>,
    record: &AppRecord,
    held: &[ArchiveRecord],
    dry: bool,
    on_step: &(dyn Fn(Step) + Sync),
) -> Result<(bool, Count), MigrateError> {
    let (org, name) = (record.org.as_str(), record.name.as_str());
    let what = |detail: &str| format!("app state {org}/{name} ({detail})");
    let there = sides.to.catalog.app(org, name).await?;
    if let Some(there) = &there {
        if there.incarnation != record.incarnation {
            return Err(MigrateError::Differs(what(
                "another app state of that name",
            )));
        }
        // A change under way on the target: the record the copy commits would end it.
        if there.lock.is_some() {
            return Err(MigrateError::Differs(what("locked on the target")));
        }
    }
    let new_app = there.is_none();
    let mut revision = there.as_ref().map_or(0, |t| t.revision);
    let mut on_target = there.as_ref().map_or(0, |t| t.archives);
    let mut missing = Vec::new();
    for archive in held {
        match sides
            .to
            .catalog
            .archive(org, name, &archive.commit_id)
            .await?
        {
            Some(a) if without_slots(&a) == without_slots(archive) => {
                on_step(Step::Present);
            }
            Some(_) => {
                let id = &archive.commit_id;
                return Err(MigrateError::Differs(what(&format!("archive {id}"))));
            }
            None => missing.push(archive),
        }
    }
    let mut count = Count {
        copied: 0,
        present: (held.len() - missing.len()) as u64,
    };
    if dry {
        for _ in &missing {
            count.add(true);
            on_step(Step::Copied);
        }
        return Ok((new_app, count));
    }
    // Each blob's data key moved once, for every archive (and the record) that lists it.
    let context_state = key_state(name);
    let context = KeyContext {
        org,
        state: &context_state,
    };
    let mut moved: BTreeMap<String, KeySlot> = BTreeMap::new();
    for archive in missing {
        let mut copy = archive.clone();
        let mut committed = Vec::new();
        for file in &archive.files {
            if moved.contains_key(&file.blob) {
                continue;
            }
            let slot = copy_file(sides, record, file, &context).await?;
            moved.insert(file.blob.clone(), slot);
            committed.push(file.blob.clone());
        }
        // No key id is empty: every copy of a moved blob takes its new slot, whichever key
        // id the target's service names.
        copy.replace_slots(&moved, "");
        on_target += 1;
        let mut app = AppRecord {
            revision: revision + 1,
            newest: Some(copy.clone()),
            archives: on_target,
            lock: None,
            ..record.clone()
        };
        app.replace_slots(&moved, "");
        let commit = AppCommit {
            expected_revision: revision,
            at: sides.to.clock.now(),
            app,
            sealed: Some(copy),
            deleted: None,
            committed_blobs: committed,
            doomed_blobs: Vec::new(),
            audit: Vec::new(),
        };
        on_step(Step::Sealed);
        sides.to.catalog.commit_app(commit).await?;
        revision += 1;
        count.add(true);
        on_step(Step::Copied);
    }
    Ok((new_app, count))
}

/// Copies one file's sealed blob as it is (pending on the target until the archive's commit
/// names it) and returns its data key's slot on the target.
async fn copy_file(
    sides: Sides<'_>,
    record: &AppRecord,
    file: &FileRef,
    context: &KeyContext<'_>,
) -> Result<KeySlot, MigrateError> {
    let what = format!(
        "file {} of app state {}/{}",
        file.name, record.org, record.name
    );
    let sealed = sides.from.blobs.get(&file.blob).await?.ok_or_else(|| {
        Error::Damaged(format!(
            "the content of {what} is missing from the blob store"
        ))
    })?;
    let slot = move_slot(sides, &file.slot(), context, &sealed, &what).await?;
    let now = sides.to.clock.now();
    sides.to.catalog.add_pending_blob(&file.blob, now).await?;
    sides.to.blobs.put(&file.blob, sealed).await?;
    Ok(slot)
}

/// The verify pass of one app state: every archive the source listed is on the target with
/// the same files, and every file opens there (with the target's key) to the SHA-256 its
/// record says, under each key slot it is recorded with.
async fn verify_app(
    sides: Sides<'_>,
    record: &AppRecord,
    held: &[ArchiveRecord],
    report: &mut Report,
) -> Result<(), MigrateError> {
    let label = format!("app state {}/{}", record.org, record.name);
    let Some(there) = sides.to.catalog.app(&record.org, &record.name).await? else {
        report
            .mismatched
            .push(format!("{label}: missing on the target"));
        return Ok(());
    };
    let on_target = archives(sides.to, &there).await?;
    for archive in held {
        let id = &archive.commit_id;
        match on_target.iter().find(|a| a.commit_id == *id) {
            Some(a) if without_slots(a) == without_slots(archive) => {}
            Some(_) => report
                .mismatched
                .push(format!("archive {id} of {label}: different on the target")),
            None => report
                .mismatched
                .push(format!("archive {id} of {label}: missing on the target")),
        }
    }
    let checked = check_app(sides.to, &there, &|| {}).await?;
    report.verified += checked.opened;
    report.mismatched.extend(
        checked
            .failed
            .into_iter()
            .map(|f| format!("org {}: {f}", record.org)),
    );
    Ok(())
}

/// The verify pass of one state: every version the source listed is on the target with the
/// same SHA-256 in its record, and opens there (with the target's key) to that SHA-256.
async fn verify_state(
    sides: Sides<'_>,
    record: &StateRecord,
    versions: &[VersionRecord],
    report: &mut Report,
) -> Result<(), MigrateError> {
    let label = format!("{}/{}", record.org, record.name);
    let Some(there) = sides.to.catalog.state(&record.org, &record.name).await? else {
        report
            .mismatched
            .push(format!("state {label}: missing on the target"));
        return Ok(());
    };
    let held = sides
        .to
        .catalog
        .versions(&record.org, there.home(), &there.incarnation)
        .await?;
    for version in versions {
        match held.iter().find(|v| v.version == version.version) {
            Some(v) if v.sha256 == version.sha256 => {}
            Some(v) => report.mismatched.push(format!(
                "version {} of state {label}: SHA-256 {} on the target, {} on the source",
                version.version, v.sha256, version.sha256
            )),
            None => report.mismatched.push(format!(
                "version {} of state {label}: missing on the target",
                version.version
            )),
        }
    }
    let checked = check_state(sides.to, Holder::State(&there), &|| {}).await?;
    report.verified += checked.opened;
    report
        .mismatched
        .extend(checked.failed.into_iter().map(|f| format!("{label}: {f}")));
    Ok(())
}

/// The last pass: the source read again, everything it now holds of the survey's orgs
/// compared with the target, so a write that landed on the source after the survey (or
/// after its record was copied) is named, not lost: a state locked or held there now, a
/// state whose latest version the target does not hold, a state deleted, an app state
/// locked or sealed since, a token made or revoked, a run ended. The skipped (locked at the
/// survey) are reported already. A target that moved on (written since a switch) holds
/// newer versions than the source: that is no change of the source's.
async fn changed_meanwhile(sides: Sides<'_>, survey: &Survey) -> Result<Vec<String>, MigrateError> {
    let now = sides.from.clock.now();
    let skipped = |label: &str| survey.blocked.iter().any(|b| b.starts_with(label));
    let mut changed = Vec::new();
    for org in &survey.orgs {
        let records = org_records(sides.from, org).await?;
        for (seen, _) in survey.states.iter().filter(|(r, _)| r.org == *org) {
            if !records.iter().any(|r| r.name == seen.name) {
                changed.push(format!("state {org}/{}: deleted on the source", seen.name));
            }
        }
        for record in records {
            let label = format!("{org}/{} (", record.name);
            if skipped(&label) {
                continue;
            }
            let state = format!("state {org}/{}", record.name);
            if let Some(lock) = record.live_lock(now) {
                changed.push(format!(
                    "{state}: locked on the source, lock ID {}",
                    lock.document.id
                ));
                continue;
            }
            if let Some(hold) = &record.hold {
                changed.push(format!("{state}: held on the source by run {}", hold.run));
                continue;
            }
            let Some(latest) = record.latest.as_ref().filter(|_| record.is_visible()) else {
                continue;
            };
            let there = sides.to.catalog.state(org, &record.name).await?;
            let target_latest = there
                .as_ref()
                .and_then(|t| t.latest.as_ref())
                .map_or(0, |l| l.version);
            let held = match &there {
                Some(t) if t.incarnation == record.incarnation => {
                    sides
                        .to
                        .catalog
                        .version(org, t.home(), &t.incarnation, latest.version)
                        .await?
                }
                _ => None,
            };
            let on_target = match held {
                Some(v) => v.sha256 == latest.sha256,
                // Dropped by the target's own retention, below its newer versions.
                None => there.is_some() && target_latest > latest.version,
            };
            if !on_target {
                changed.push(format!(
                    "{state}: version {} on the source, {} on the target",
                    latest.version,
                    if target_latest == 0 {
                        "none".to_owned()
                    } else {
                        format!("{target_latest} the latest")
                    }
                ));
            }
        }
        for deleted in org_deleted_states(sides.from, org).await? {
            if sides
                .to
                .catalog
                .deleted_state(org, &deleted.id)
                .await?
                .is_none()
            {
                changed.push(format!(
                    "deleted state {org}/{} {}: not on the target",
                    deleted.name, deleted.id
                ));
            }
        }
        for app in org_apps(sides.from, org).await? {
            let label = format!("app state {org}/{}", app.name);
            if skipped(&format!("{label} (")) {
                continue;
            }
            if let Some(lock) = &app.lock {
                changed.push(format!(
                    "{label}: locked on the source, change {}",
                    lock.commit_id
                ));
                continue;
            }
            if let Some(newest) = &app.newest {
                let held = sides
                    .to
                    .catalog
                    .archive(org, &app.name, &newest.commit_id)
                    .await?;
                if held.is_none() {
                    changed.push(format!(
                        "{label}: archive {} not on the target",
                        newest.commit_id
                    ));
                }
            }
        }
    }
    for token in sides.from.catalog.tokens().await? {
        if !moves(&survey.orgs, &token.org) {
            continue;
        }
        match sides.to.catalog.token(&token.hash).await? {
            None => changed.push(format!(
                "token {} (org {}): not on the target",
                token.id, token.org
            )),
            Some(there) if token.revoked && !there.revoked => changed.push(format!(
                "token {} (org {}): revoked on the source, not on the target",
                token.id, token.org
            )),
            Some(_) => {}
        }
    }
    for run in sides.from.catalog.runs().await? {
        if run.ended_at.is_none() || !moves(&survey.orgs, &run.org) {
            continue;
        }
        let there = sides.to.catalog.run(&run.run).await?;
        if there.is_none_or(|t| t.ended_at.is_none()) {
            changed.push(format!(
                "run {}: ended on the source, not on the target",
                run.run
            ));
        }
    }
    Ok(changed)
}

/// The last step: one entry in each org's audit log on the target saying the migration
/// happened, with what it copied.
async fn record_migration(
    sides: Sides<'_>,
    org: &str,
    survey: &Survey,
    report: &Report,
) -> Result<(), MigrateError> {
    // This org's part only: an org's log never names another org's states.
    let ours = |o: &str| o == org;
    let skipped: Vec<&String> = report
        .skipped
        .iter()
        .filter(|s| {
            let s = s.strip_prefix("app state ").unwrap_or(s);
            s.split_once('/').is_some_and(|(o, _)| ours(o))
        })
        .collect();
    let states: Vec<_> = survey.states.iter().filter(|(r, _)| ours(&r.org)).collect();
    let deleted = survey.deleted.iter().filter(|(d, _)| ours(&d.record.org));
    let apps: Vec<_> = survey.apps.iter().filter(|(a, _)| ours(&a.org)).collect();
    let entry = migration_entry(
        sides.to,
        org,
        serde_json::json!({
            "migration": "completed",
            "states": states.len(),
            "versions": states.iter().map(|(_, v)| v.len()).sum::<usize>(),
            "deleted_states": deleted.count(),
            "app_states": apps.len(),
            "archives": apps.iter().map(|(_, a)| a.len()).sum::<usize>(),
            "skipped": skipped,
        }),
    );
    sides.to.catalog.append_audit(&entry).await?;
    Ok(())
}
