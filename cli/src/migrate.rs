//! `hegemony-state migrate --from local --to aws` (and back): everything one store holds
//! copied to the other, through the service's migration (`service::migrate`), with a
//! progress bar, a dry run, and a report of what it copied, skipped and verified; then the
//! target's inventory is built from what was copied.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use hegemony_state::service::migrate::{self, Count, Options as Run, Report, Sides, Step};
use hegemony_state::service::reindex::{self, Outcome};
use hegemony_state::service::App;
use indicatif::{ProgressBar, ProgressStyle};

use crate::store::{Store, StoreKind};

/// Read by debug builds only, for tests: `copied:N` stops the process dead once it has
/// committed N versions and archives on the target, `sealed:N` once it has written the N-th's
/// sealed bytes there and before the commit that names them, as a crash would stop it, so the
/// next run's resumption can be checked. A release build has no such switch.
#[cfg(debug_assertions)]
const CRASH_AT: &str = "HEGEMONY_MIGRATE_CRASH_AT";
/// Read by debug builds only, for tests: `copied:N` pauses the run once it has committed N
/// versions and archives (it says so on standard error and goes on at a line on standard
/// input), so a test can write to the source during the move.
#[cfg(debug_assertions)]
const PAUSE_AT: &str = "HEGEMONY_MIGRATE_PAUSE_AT";

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
    /// Move this org only (repeat for several); default: every org the source holds a
    /// record of.
    #[arg(long = "org", value_name = "ORG")]
    orgs: Vec<String>,
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    if options.from == options.to {
        bail!("--from and --to name the same store: migrate moves between the local store and the AWS store");
    }
    let from = open(&options, options.from).await?;
    let to = open(&options, options.to).await?;
    let found = migrate::orgs(&from).await?;
    let orgs = chosen(&found, &options.orgs)?;
    for org in found.iter().filter(|o| !orgs.contains(o)) {
        println!("org {org}: not moved (not named by --org)");
    }
    let survey = migrate::survey(&from, &orgs).await?;
    let progress = ProgressBar::new(survey.versions());
    let template = "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} versions and archives";
    progress.set_style(ProgressStyle::with_template(template).expect("a valid template"));
    let switches = test_switches();
    let on_step = |step: Step| {
        if step != Step::Sealed {
            progress.inc(1);
        }
        switches(step);
    };
    let run = Run {
        dry_run: options.dry_run,
        skip_locked: options.skip_locked,
    };
    let sides = Sides {
        from: &from,
        to: &to,
    };
    let report = migrate::migrate(sides, &survey, run, &on_step).await;
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
    if !report.changed.is_empty() {
        for change in &report.changed {
            eprintln!("changed during the move: {change}");
        }
        bail!(
            "the source took {} writes while it was copied (named above): the migration is not complete; hold writes on the source (docs/migrate.md) and run it again",
            report.changed.len()
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

/// The orgs to move: those named (each must hold a record on the source), else every one
/// found.
fn chosen(found: &[String], named: &[String]) -> anyhow::Result<Vec<String>> {
    if named.is_empty() {
        return Ok(found.to_vec());
    }
    let mut orgs = named.to_vec();
    orgs.sort();
    orgs.dedup();
    if let Some(unknown) = orgs.iter().find(|o| !found.contains(o)) {
        bail!("--org {unknown}: the source holds no record of that org");
    }
    Ok(orgs)
}

/// What the process does at each step: nothing, but in a debug build where a test switch
/// (`CRASH_AT`, `PAUSE_AT`) is set.
fn test_switches() -> impl Fn(Step) + Sync {
    #[cfg(debug_assertions)]
    {
        let crash = Switch::read(CRASH_AT);
        let pause = Switch::read(PAUSE_AT);
        move |step: Step| {
            if crash.as_ref().is_some_and(|c| c.reached(step)) {
                std::process::exit(75);
            }
            if pause.as_ref().is_some_and(|p| p.reached(step)) {
                eprintln!("migrate: paused; a line on standard input goes on");
                let mut line = String::new();
                let _ = std::io::stdin().read_line(&mut line);
            }
        }
    }
    #[cfg(not(debug_assertions))]
    {
        |_: Step| {}
    }
}

/// A test switch: the N-th step of a kind.
#[cfg(debug_assertions)]
struct Switch {
    step: Step,
    at: u64,
    seen: std::sync::atomic::AtomicU64,
}

#[cfg(debug_assertions)]
impl Switch {
    /// `sealed:N` or `copied:N` from the variable `name`, if it is set so.
    fn read(name: &str) -> Option<Switch> {
        let value = std::env::var(name).ok()?;
        let (step, at) = value.split_once(':')?;
        let step = match step {
            "sealed" => Step::Sealed,
            "copied" => Step::Copied,
            _ => return None,
        };
        Some(Switch {
            step,
            at: at.parse().ok()?,
            seen: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Whether `step` is the one the switch waits for.
    fn reached(&self, step: Step) -> bool {
        step == self.step
            && self.seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == self.at
    }
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
        let rebuilt = reindex::rebuild(to, org, records, reindex::Entries::Behind, &done).await?;
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
    line("runs", report.runs);
    line("tokens", report.tokens);
    line("trust policies", report.trust_policies);
    line("protected-state rules", report.protections);
    line("states", report.states);
    line("versions", report.versions);
    line("deleted states", report.deleted_states);
    line("app states", report.app_states);
    line("archives", report.archives);
    line("audit entries", report.audit_entries);
    for (org, moved) in &report.by_org {
        let part = |kind: &str, count: Count| format!("{kind} {}/{}", count.copied, count.present);
        println!(
            "org {org}: {verb}/already there: {}, {}, {}, {}, {}, {}",
            part("tokens", moved.tokens),
            part("states", moved.states),
            part("versions", moved.versions),
            part("deleted states", moved.deleted_states),
            part("app states", moved.app_states),
            part("archives", moved.archives),
        );
    }
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
