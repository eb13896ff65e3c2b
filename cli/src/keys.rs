//! `hegemony-state keys report | rewrap` on the local or the AWS store: which keys wrap the
//! versions, and moving every version's data key to the key in use (after a rotation, or to
//! another backend with `--to`), while the service runs. The content is never opened.

use anyhow::bail;
use clap::{Args, Subcommand};
use hegemony_state::domain::record::StateRecord;
use hegemony_state::service::keys::{org_states, rewrap_state, state_report};
use hegemony_state::service::App;
use indicatif::{ProgressBar, ProgressStyle};

use crate::store::Store;

/// Which states a command covers.
#[derive(Args, Clone)]
pub struct Scope {
    /// One org only. Default: every org with a token in the store.
    #[arg(long)]
    org: Option<String>,
    /// One state only (with --org).
    #[arg(long, requires = "org")]
    state: Option<String>,
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
    /// behind the key in use.
    Report {
        #[command(flatten)]
        scope: Scope,
        #[arg(long)]
        json: bool,
    },
    /// Re-wrap every version's data key under the key in use (the newest version of its
    /// key), or move it to another backend with --to. Safe beside live writes, and to run
    /// again after an interruption: versions already on the key in use are skipped.
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

/// The states in scope, by org.
async fn states(app: &App, scope: &Scope) -> anyhow::Result<Vec<StateRecord>> {
    let orgs = match &scope.org {
        Some(org) => vec![org.clone()],
        None => {
            let mut orgs: Vec<String> = app
                .catalog
                .tokens()
                .await?
                .into_iter()
                .map(|t| t.org)
                .filter(|o| !o.is_empty())
                .collect();
            orgs.sort();
            orgs.dedup();
            orgs
        }
    };
    let mut states = Vec::new();
    for org in orgs {
        let mut found = org_states(app, &org).await?;
        if let Some(name) = &scope.state {
            found.retain(|r| &r.name == name);
            if found.is_empty() {
                bail!("{org} has no state {name}");
            }
        }
        states.extend(found);
    }
    Ok(states)
}

async fn report(app: &App, scope: &Scope, json: bool) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    let mut entries = Vec::new();
    let (mut total, mut behind) = (0, 0);
    for record in states(app, scope).await? {
        let keys = state_report(app, &record).await?;
        for k in &keys.keys {
            total += k.versions;
            if k.behind {
                behind += k.versions;
            }
            rows.push(vec![
                record.org.clone(),
                record.name.clone(),
                k.key.clone(),
                k.key_backend.clone(),
                k.versions.to_string(),
                if k.behind { "behind" } else { "current" }.to_owned(),
            ]);
        }
        entries.push(serde_json::json!({"org": record.org, "state": keys.state, "current_key": keys.current_key, "keys": keys.keys}));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&entries)?);
        return Ok(());
    }
    crate::table::print(
        &["ORG", "STATE", "KEY", "BACKEND", "VERSIONS", "KEY IN USE"],
        &rows,
    );
    println!();
    println!("{total} versions, {behind} behind the key in use (keys rewrap moves them)");
    Ok(())
}

async fn rewrap(app: &App, scope: &Scope, dry_run: bool) -> anyhow::Result<()> {
    let states = states(app, scope).await?;
    let mut total = 0;
    for record in &states {
        total += app
            .catalog
            .versions(&record.org, &record.name, &record.incarnation)
            .await?
            .len() as u64;
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} versions {msg}",
        )
        .expect("a valid template"),
    );
    let mut rows = Vec::new();
    let (mut moved, mut current, mut failed) = (0, 0, 0);
    for record in &states {
        bar.set_message(format!("{}/{}", record.org, record.name));
        let done = rewrap_state(app, record, dry_run, &|| bar.inc(1)).await?;
        moved += done.rewrapped;
        current += done.current;
        failed += done.failed.len();
        let why: Vec<String> = done
            .failed
            .iter()
            .map(|(n, e)| format!("v{n}: {e}"))
            .collect();
        rows.push(vec![
            record.org.clone(),
            record.name.clone(),
            done.rewrapped.to_string(),
            done.current.to_string(),
            done.failed.len().to_string(),
            done.to,
            why.join("; "),
        ]);
    }
    bar.finish_and_clear();
    let moved_header = if dry_run { "WOULD MOVE" } else { "MOVED" };
    crate::table::print(
        &[
            "ORG",
            "STATE",
            moved_header,
            "ALREADY",
            "FAILED",
            "TO",
            "WHY",
        ],
        &rows,
    );
    println!();
    if dry_run {
        println!("dry run: {moved} versions would be re-wrapped, {current} are already on the key in use; nothing was written");
    } else {
        println!(
            "re-wrapped {moved} versions, {current} already on the key in use, {failed} failed"
        );
    }
    if failed > 0 {
        bail!(
            "{failed} versions could not be re-wrapped (run again once their key service answers)"
        );
    }
    Ok(())
}
