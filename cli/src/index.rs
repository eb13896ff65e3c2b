//! `hegemony-state index rebuild` on the local or the AWS store: the inventory of every
//! state whose entry is missing or behind its latest version built again from that version
//! (`service::reindex`), org by org, with a progress bar and a summary. Safe beside live
//! writes (each entry is written only while its state is as read) and to run again after an
//! interruption: a state already indexed at its latest version is skipped. A state whose
//! latest version does not open is named with why, the others go on, and the run fails at
//! its end.

use clap::{Args, Subcommand};
use hegemony_state::service::migrate;
use hegemony_state::service::reindex::{self, Entries, Outcome, Rebuilt};
use hegemony_state::service::App;
use indicatif::{ProgressBar, ProgressStyle};

use crate::store::Store;

#[derive(Subcommand)]
pub enum Command {
    /// Index every state whose entry is missing or older than its latest version (with
    /// --all, every state): after an upgrade from a release without the inventory or one
    /// that changed its rules, or a migration.
    Rebuild(Options),
}

#[derive(Args)]
pub struct Options {
    /// One org only. Default: every org the store holds a record of.
    #[arg(long)]
    org: Option<String>,
    /// Every state's entry built again, current or not: after an upgrade whose release notes
    /// say the inventory's rules changed (how an identity is read), so that conflicts are
    /// found by the new rules at once rather than as each state is next saved.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    store: Store,
    /// The platform key file of the local store, when HEGEMONY_TF_STATE_ENCRYPTION_KEY is
    /// not set. Default: beside the data folder (<data-dir>.key).
    #[arg(long)]
    key_file: Option<std::path::PathBuf>,
}

pub async fn run(command: Command) -> anyhow::Result<()> {
    let Command::Rebuild(options) = command;
    let app = options.store.app(options.key_file.as_deref()).await?;
    let orgs = orgs(&app, &options).await?;
    let mut total = Rebuilt::default();
    for org in &orgs {
        let records = reindex::states_of(&app, org).await?;
        let progress = ProgressBar::new(records.len() as u64);
        let template = "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} states of {msg}";
        progress.set_style(ProgressStyle::with_template(template).expect("a valid template"));
        progress.set_message(org.clone());
        let done = |state: &str, outcome: &Outcome| {
            if let Outcome::Unopened(why) = outcome {
                progress.println(format!("{org}: state {state} left as it was: {why}"));
            }
            progress.inc(1);
        };
        let which = if options.all {
            Entries::All
        } else {
            Entries::Behind
        };
        let rebuilt = reindex::rebuild(&app, org, records, which, &done).await;
        progress.finish_and_clear();
        let rebuilt = rebuilt?;
        println!(
            "{org}: indexed {}, already current {}, not readable {}, changed meanwhile {}, not opened {}",
            rebuilt.indexed, rebuilt.current, rebuilt.not_indexed, rebuilt.moved_on, rebuilt.unopened
        );
        total.indexed += rebuilt.indexed;
        total.current += rebuilt.current;
        total.not_indexed += rebuilt.not_indexed;
        total.moved_on += rebuilt.moved_on;
        total.unopened += rebuilt.unopened;
    }
    println!(
        "{} orgs: indexed {} states, {} already current, {} not readable (OpenTofu-encrypted or another format: listed as not indexed), {} changed meanwhile (their saves indexed them)",
        orgs.len(),
        total.indexed,
        total.current,
        total.not_indexed,
        total.moved_on
    );
    if total.unopened > 0 {
        anyhow::bail!(
            "{} states left as they were: their latest version does not open (each named above, with why); mend them and run again",
            total.unopened
        );
    }
    Ok(())
}

/// The orgs to rebuild: the one named, or every org the store holds a record of (its
/// tokens may all be gone: its states are not).
async fn orgs(app: &App, options: &Options) -> anyhow::Result<Vec<String>> {
    if let Some(org) = &options.org {
        return Ok(vec![org.clone()]);
    }
    Ok(migrate::orgs(app).await?)
}
