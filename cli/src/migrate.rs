//! `hegemony-state migrate --from local --to aws` (and back): everything one store holds
//! copied to the other, through the service's migration (`service::migrate`), with a
//! progress bar, a dry run, and a report of what it copied, skipped and verified; then the
//! target's inventory is built from what was copied.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use hegemony_state::adapters::local::{backup, CATALOG_FILE};
use hegemony_state::service::migrate::{self, Count, Options as Run, Report, Sides};
use hegemony_state::service::reindex::{self, Outcome};
use hegemony_state::service::App;
use indicatif::{ProgressBar, ProgressStyle};

use crate::store::{Store, StoreKind};

/// Set (to a number) only by tests: the process stops dead once it has copied that many
/// versions and archives, as a crash would stop it, so the next run's resumption can be checked.
const CRASH_AFTER: &str = "HEGEMONY_MIGRATE_CRASH_AFTER_VERSIONS";

/// `migrate`: which store to copy from and to, and how.
#[derive(Args)]
pub struct Options {
    /// The store to copy from: local or aws.
    #[arg(long, value_enum)]
    from: StoreKind,
    /// The store to copy to: aws or local (the other one).
    #[arg(long, value_enum)]
    to: StoreKind,
    /// The local store's data folder, as `serve` has it.
    #[arg(
        long,
        env = "HEGEMONY_TF_STATE_DATA_DIR",
        default_value = "./.hegemony"
    )]
    data_dir: PathBuf,
    /// The local store's platform key file, when HEGEMONY_TF_STATE_ENCRYPTION_KEY is not set.
    /// Default: beside the data folder (<data-dir>.key); created for a new local store.
    #[arg(long)]
    key_file: Option<PathBuf>,
    /// The local store's key backend, as HEGEMONY_TF_STATE_KEY_BACKEND takes it (that
    /// variable names the AWS store's): `none` (the platform key) or a Transit engine's tag.
    #[arg(long, default_value = "none")]
    local_key_backend: String,
    /// Count what would be copied, write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Copy the other states when some are locked or held, and list those skipped (the
    /// command then exits with an error: the migration is not complete).
    #[arg(long)]
    skip_locked: bool,
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    if options.from == options.to {
        bail!("--from and --to name the same store: migrate moves between the local store and the AWS store");
    }
    let from = open(&options, options.from).await?;
    let to = open(&options, options.to).await?;
    let mut orgs = migrate::token_orgs(&from).await?;
    let catalog = options.data_dir.join(CATALOG_FILE);
    if options.from == StoreKind::Local && catalog.exists() {
        // The local catalog names every org that holds a state, tokens or not.
        orgs.extend(backup::orgs(&catalog).map_err(anyhow::Error::msg)?);
        orgs.sort();
        orgs.dedup();
    }
    let survey = migrate::survey(&from, &orgs).await?;
    let progress = ProgressBar::new(survey.versions());
    let template = "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} versions and archives";
    progress.set_style(ProgressStyle::with_template(template).expect("a valid template"));
    let crash_after: Option<u64> = std::env::var(CRASH_AFTER).ok().and_then(|n| n.parse().ok());
    let copied = std::sync::atomic::AtomicU64::new(0);
    let on_version = |was_copied: bool| {
        progress.inc(1);
        if was_copied {
            let n = copied.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            if crash_after == Some(n) {
                std::process::exit(75);
            }
        }
    };
    let run = Run {
        dry_run: options.dry_run,
        skip_locked: options.skip_locked,
    };
    let sides = Sides {
        from: &from,
        to: &to,
    };
    let report = migrate::migrate(sides, &survey, run, &on_version).await;
    progress.finish_and_clear();
    let report = report?;
    print(&report, options.dry_run);
    if !options.dry_run {
        index_target(&to, &orgs).await?;
    }
    if !report.mismatched.is_empty() {
        for failure in &report.mismatched {
            eprintln!("{failure}");
        }
        bail!(
            "the verify pass found {} versions or files that differ or do not open on the target",
            report.mismatched.len()
        );
    }
    if !report.skipped.is_empty() {
        bail!(
            "the migration is not complete: {} states or app states were skipped ({}); run it again once they are released",
            report.skipped.len(),
            report.skipped.join(", ")
        );
    }
    Ok(())
}

/// One side's app: the local store with its own key backend, or the AWS store as the
/// environment configures it.
async fn open(options: &Options, kind: StoreKind) -> anyhow::Result<App> {
    let store = Store {
        kind,
        data_dir: options.data_dir.clone(),
    };
    match kind {
        StoreKind::Local => {
            store
                .app_with_key_backend(
                    options.key_file.as_deref(),
                    Some(&options.local_key_backend),
                )
                .await
        }
        StoreKind::Aws => store.app(None).await,
    }
}

/// Builds the target's inventory (the copy carries none: its digests are made under the
/// target's own inventory key), as `index rebuild` does: a state already indexed at its
/// latest version, by an earlier run, is skipped.
async fn index_target(to: &App, orgs: &[String]) -> anyhow::Result<()> {
    let (mut indexed, mut unopened) = (0, 0);
    for org in orgs {
        let records = reindex::states_of(to, org).await?;
        let done = |state: &str, outcome: &Outcome| {
            if let Outcome::Unopened(why) = outcome {
                println!("inventory: {org}: state {state} not indexed, its latest version does not open: {why}");
            }
        };
        let rebuilt = reindex::rebuild(to, org, records, &done).await?;
        indexed += rebuilt.indexed;
        unopened += rebuilt.unopened;
    }
    println!("inventory: indexed {indexed} states on the target");
    if unopened > 0 {
        // The copy itself is done; the index of these waits for them to be mended.
        println!("inventory: {unopened} states not indexed (named above): mend them, then run index rebuild");
    }
    Ok(())
}

fn print(report: &Report, dry_run: bool) {
    let verb = if dry_run { "would copy" } else { "copied" };
    let line = |kind: &str, count: Count| {
        println!(
            "{kind}: {verb} {}, already on the target {}",
            count.copied, count.present
        );
    };
    line("orgs", report.orgs);
    line("tokens", report.tokens);
    line("trust policies", report.trust_policies);
    line("protected-state rules", report.protections);
    line("states", report.states);
    line("versions", report.versions);
    line("deleted states", report.deleted_states);
    line("app states", report.app_states);
    line("archives", report.archives);
    line("audit entries", report.audit_entries);
    for skipped in &report.skipped {
        println!("skipped: {skipped}");
    }
    if dry_run {
        println!("Dry run: nothing was written.");
    } else {
        println!(
            "Verified {} versions and files on the target: each opens to the SHA-256 the source records.",
            report.verified
        );
    }
}
