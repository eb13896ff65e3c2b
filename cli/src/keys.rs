//! `hegemony-state keys report | rewrap` on the local or the AWS store: which keys wrap the
//! versions and app states' files, and moving every data key to the key in use (after a
//! rotation, or to another backend with `--to`), while the service runs. The content is never
//! opened.

use anyhow::bail;
use clap::{Args, Subcommand};
use hegemony_state::domain::app::AppRecord;
use hegemony_state::domain::deleted::DeletedState;
use hegemony_state::domain::record::StateRecord;
use hegemony_state::service::app_keys::{app_report, file_count, org_apps, rewrap_app};
use hegemony_state::service::keys::{
    org_deleted_states, org_states, rewrap_inventory_key, rewrap_state, state_report, Holder,
    InventoryKeyRewrap,
};
use hegemony_state::service::App;
use indicatif::{ProgressBar, ProgressStyle};

use crate::store::Store;

/// Which states a command covers.
#[derive(Args, Clone)]
pub struct Scope {
    /// One org only. Default: every org the store holds a record of.
    #[arg(long)]
    org: Option<String>,
    /// One state only (with --org): no app state.
    #[arg(long, requires = "org")]
    state: Option<String>,
    /// One app state (Octo's remote state) only (with --org): no state.
    #[arg(long, requires = "org", conflicts_with = "state")]
    app: Option<String>,
    #[command(flatten)]
    store: Store,
    /// The platform key file of the local store, when HEGEMONY_TF_STATE_ENCRYPTION_KEY is
    /// not set. Default: beside the data folder (<data-dir>.key).
    #[arg(long)]
    key_file: Option<std::path::PathBuf>,
}

#[derive(Subcommand)]
pub enum Command {
    /// How many versions each key and key version wraps, per org and state, and which are
    /// behind the key in use; the same for the files of each app state.
    Report {
        #[command(flatten)]
        scope: Scope,
        #[arg(long)]
        json: bool,
    },
    /// Re-wrap every version's and app state file's data key under the key in use (the
    /// newest version of its key), or move it to another backend with --to. Safe beside
    /// live writes, and to run again after an interruption: what is already on the key in
    /// use is skipped.
    Rewrap {
        #[command(flatten)]
        scope: Scope,
        /// The backend to move to, as HEGEMONY_TF_STATE_KEY_BACKEND takes it
        /// (transit:<tag>, kms:<key>, or platform for the platform key); default: the one
        /// the settings name.
        #[arg(long)]
        to: Option<String>,
        /// Count what would move and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

pub async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Report { scope, json } => {
            let app = scope.store.app(scope.key_file.as_deref()).await?;
            report(&app, &scope, json).await
        }
        Command::Rewrap { scope, to, dry_run } => {
            let to = to.map(|t| {
                if t == "platform" {
                    "none".to_owned()
                } else {
                    t
                }
            });
            let app = scope
                .store
                .app_with_key_backend(scope.key_file.as_deref(), to.as_deref())
                .await?;
            rewrap(&app, &scope, dry_run).await
        }
    }
}

/// The orgs in scope.
async fn orgs(app: &App, scope: &Scope) -> anyhow::Result<Vec<String>> {
    if let Some(org) = &scope.org {
        return Ok(vec![org.clone()]);
    }
    // Every org with a record, not only those with tokens: an org whose tokens all expired
    // still holds states sealed under the old key.
    Ok(hegemony_state::service::migrate::orgs(app).await?)
}

/// What a command covers: states, deleted states kept for their retention (their versions
/// are moved too, so a restore finds them on the key in use), app states.
#[derive(Default)]
struct InScope {
    states: Vec<StateRecord>,
    deleted: Vec<DeletedState>,
    apps: Vec<AppRecord>,
}

impl InScope {
    /// The states and deleted states, as the key service walks them.
    fn holders(&self) -> impl Iterator<Item = Holder<'_>> {
        let states = self.states.iter().map(Holder::State);
        states.chain(self.deleted.iter().map(Holder::Deleted))
    }
}

/// The states, deleted states and app states in scope, by org.
async fn in_scope(app: &App, scope: &Scope) -> anyhow::Result<InScope> {
    let mut found = InScope::default();
    for org in orgs(app, scope).await? {
        if scope.app.is_none() {
            let mut states = org_states(app, &org).await?;
            let mut deleted = org_deleted_states(app, &org).await?;
            if let Some(name) = &scope.state {
                states.retain(|r| &r.name == name);
                deleted.retain(|d| &d.name == name);
                if states.is_empty() && deleted.is_empty() {
                    bail!("{org} has no state {name}");
                }
            }
            found.states.extend(states);
            found.deleted.extend(deleted);
        }
        if scope.state.is_none() {
            let mut apps = org_apps(app, &org).await?;
            if let Some(name) = &scope.app {
                apps.retain(|r| &r.name == name);
                if apps.is_empty() {
                    bail!("{org} has no app state {name}");
                }
            }
            found.apps.extend(apps);
        }
    }
    Ok(found)
}

/// One part of the report: states' versions or app states' files, per key id.
struct KeyRows {
    /// `STATE` or `APP STATE`.
    name_header: &'static str,
    /// `VERSIONS` or `FILES`.
    count_header: &'static str,
    /// `versions` or `app state files`.
    noun: &'static str,
    rows: Vec<Vec<String>>,
    total: u64,
    behind: u64,
}

impl KeyRows {
    fn new(name_header: &'static str, count_header: &'static str, noun: &'static str) -> Self {
        Self {
            name_header,
            count_header,
            noun,
            rows: Vec::new(),
            total: 0,
            behind: 0,
        }
    }

    fn add(&mut self, org: &str, name: &str, key: &str, backend: &str, count: u64, behind: bool) {
        self.total += count;
        if behind {
            self.behind += count;
        }
        self.rows.push(vec![
            org.to_owned(),
            name.to_owned(),
            key.to_owned(),
            backend.to_owned(),
            count.to_string(),
            if behind { "behind" } else { "current" }.to_owned(),
        ]);
    }

    fn print(&self) {
        crate::table::print(
            &[
                "ORG",
                self.name_header,
                "KEY",
                "BACKEND",
                self.count_header,
                "KEY IN USE",
            ],
            &self.rows,
        );
        println!();
    }

    fn summary(&self) {
        println!(
            "{} {}, {} behind the key in use (keys rewrap moves them)",
            self.total, self.noun, self.behind
        );
    }
}

async fn report(app: &App, scope: &Scope, json: bool) -> anyhow::Result<()> {
    let scoped = in_scope(app, scope).await?;
    let apps = &scoped.apps;
    let mut entries = Vec::new();
    let mut versions = KeyRows::new("STATE", "VERSIONS", "versions");
    for holder in scoped.holders() {
        let keys = state_report(app, holder).await?;
        let org = &holder.record().org;
        for k in &keys.keys {
            versions.add(
                org,
                &holder.label(),
                &k.key,
                &k.key_backend,
                k.versions,
                k.behind,
            );
        }
        entries.push(serde_json::json!({"org": org, "state": keys.state, "deleted_id": keys.deleted_id, "current_key": keys.current_key, "keys": keys.keys}));
    }
    let mut files = KeyRows::new("APP STATE", "FILES", "app state files");
    for record in apps {
        let keys = app_report(app, record).await?;
        for k in &keys.keys {
            files.add(
                &record.org,
                &record.name,
                &k.key,
                &k.key_backend,
                k.files,
                k.behind,
            );
        }
        entries.push(serde_json::json!({"org": record.org, "app": keys.app, "current_key": keys.current_key, "keys": keys.keys}));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&entries)?);
        return Ok(());
    }
    // The states' part unless only an app state was asked for; the app states' when any.
    let parts: Vec<&KeyRows> = [(scope.app.is_none(), &versions), (!apps.is_empty(), &files)]
        .into_iter()
        .filter_map(|(shown, part)| shown.then_some(part))
        .collect();
    for part in &parts {
        part.print();
    }
    for part in &parts {
        part.summary();
    }
    Ok(())
}

/// One part of the re-wrap's summary: states' versions or app states' files.
struct Moves {
    name_header: &'static str,
    noun: &'static str,
    rows: Vec<Vec<String>>,
    moved: u64,
    current: u64,
    failed: usize,
}

impl Moves {
    fn new(name_header: &'static str, noun: &'static str) -> Self {
        Self {
            name_header,
            noun,
            rows: Vec::new(),
            moved: 0,
            current: 0,
            failed: 0,
        }
    }

    /// One state's or app state's run; `why` says what failed, one entry each.
    fn add(&mut self, org: &str, name: &str, moved: u64, current: u64, why: &[String], to: String) {
        self.moved += moved;
        self.current += current;
        self.failed += why.len();
        self.rows.push(vec![
            org.to_owned(),
            name.to_owned(),
            moved.to_string(),
            current.to_string(),
            why.len().to_string(),
            to,
            why.join("; "),
        ]);
    }

    fn print(&self, dry_run: bool) {
        let moved_header = if dry_run { "WOULD MOVE" } else { "MOVED" };
        crate::table::print(
            &[
                "ORG",
                self.name_header,
                moved_header,
                "ALREADY",
                "FAILED",
                "TO",
                "WHY",
            ],
            &self.rows,
        );
        println!();
    }

    fn summary(&self, dry_run: bool) {
        let Self {
            noun,
            moved,
            current,
            failed,
            ..
        } = self;
        if dry_run {
            println!("dry run: {moved} {noun} would be re-wrapped, {current} are already on the key in use; nothing was written");
        } else {
            println!(
                "re-wrapped {moved} {noun}, {current} already on the key in use, {failed} failed"
            );
        }
    }
}

async fn rewrap(app: &App, scope: &Scope, dry_run: bool) -> anyhow::Result<()> {
    let scoped = in_scope(app, scope).await?;
    let apps = &scoped.apps;
    let mut total = 0;
    for holder in scoped.holders() {
        let record = holder.record();
        total += app
            .catalog
            .versions(&record.org, record.home(), &record.incarnation)
            .await?
            .len() as u64;
    }
    for record in apps {
        total += file_count(app, record).await?;
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} versions and files {msg}",
        )
        .expect("a valid template"),
    );
    let mut versions = Moves::new("STATE", "versions");
    for holder in scoped.holders() {
        let record = holder.record();
        bar.set_message(format!("{}/{}", record.org, holder.label()));
        let done = rewrap_state(app, holder, dry_run, &|| bar.inc(1)).await?;
        let why: Vec<String> = done
            .failed
            .iter()
            .map(|(n, e)| format!("v{n}: {e}"))
            .collect();
        versions.add(
            &record.org,
            &holder.label(),
            done.rewrapped,
            done.current,
            &why,
            done.to,
        );
    }
    let mut files = Moves::new("APP STATE", "app state files");
    for record in apps {
        bar.set_message(format!("{}/app {}", record.org, record.name));
        let done = rewrap_app(app, record, dry_run, &|| bar.inc(1)).await?;
        let why: Vec<String> = done
            .failed
            .iter()
            .map(|(what, e)| format!("{what}: {e}"))
            .collect();
        files.add(
            &record.org,
            &record.name,
            done.rewrapped,
            done.current,
            &why,
            done.to,
        );
    }
    // Each org's inventory key too, unless one state or app state was asked for: left on
    // a retired key, it would stop the org's saves from indexing.
    let mut inventory_keys = (0, 0, Vec::new());
    if scope.state.is_none() && scope.app.is_none() {
        for org in orgs(app, scope).await? {
            bar.set_message(format!("{org}: inventory key"));
            match rewrap_inventory_key(app, &org, dry_run).await {
                Ok(InventoryKeyRewrap::Rewrapped) => inventory_keys.0 += 1,
                Ok(InventoryKeyRewrap::Current) => inventory_keys.1 += 1,
                Ok(InventoryKeyRewrap::NoKey) => {}
                Err(e) => inventory_keys.2.push(format!("{org}: {e}")),
            }
        }
    }
    bar.finish_and_clear();
    // The states' part unless only an app state was asked for; the app states' when any.
    let parts: Vec<&Moves> = [(scope.app.is_none(), &versions), (!apps.is_empty(), &files)]
        .into_iter()
        .filter_map(|(shown, part)| shown.then_some(part))
        .collect();
    for part in &parts {
        part.print(dry_run);
    }
    for part in &parts {
        part.summary(dry_run);
    }
    let (moved, current, failed_keys) = inventory_keys;
    if moved + current + failed_keys.len() > 0 {
        let verb = if dry_run {
            "would be re-wrapped"
        } else {
            "re-wrapped"
        };
        println!(
            "orgs' inventory keys: {moved} {verb}, {current} already on the key in use, {} failed",
            failed_keys.len()
        );
        for why in &failed_keys {
            eprintln!("inventory key of org {why}");
        }
    }
    let failed = versions.failed + files.failed + failed_keys.len();
    if failed > 0 {
        bail!(
            "{failed} versions, files or inventory keys could not be re-wrapped (run again once their key service answers)"
        );
    }
    Ok(())
}
