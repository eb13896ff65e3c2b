//! `hegemony-state backup --to DIR`, `backup verify DIR` and `restore DIR --data-dir NEW`:
//! a backup of the local store taken while the server runs, checked by opening everything
//! in it, and put back as a new store. The copying and the manifest are the local store's
//! (`adapters::local::backup`); opening every version is the service's (`service::verify`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use hegemony_state::adapters::local::backup::{self, BackupKey, KEY_FILE};
use hegemony_state::adapters::local::{key_file, BLOB_DIR, CATALOG_FILE};
use hegemony_state::config::{Config, KeySetting};
use hegemony_state::crypto::PlatformKey;
use hegemony_state::service::keys::{org_deleted_states, org_states, Holder};
use hegemony_state::service::verify::{app_items, check_app, check_state, Checked};
use hegemony_state::service::{app_keys::org_apps, App};
use hegemony_state::wiring;
use indicatif::{ProgressBar, ProgressStyle};
use time::format_description::well_known::Rfc3339;

/// `backup`: take one (`--to`), or check one (`verify`).
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Backup {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    take: Take,
}

/// Taking a backup.
#[derive(Args)]
struct Take {
    /// The folder to write the backup into: new, or empty.
    #[arg(long, required = true)]
    to: Option<PathBuf>,
    /// The local store's data folder, as `serve` has it.
    #[arg(
        long,
        env = "HEGEMONY_TF_STATE_DATA_DIR",
        default_value = "./.hegemony"
    )]
    data_dir: PathBuf,
    /// The platform key file, when HEGEMONY_TF_STATE_ENCRYPTION_KEY is not set. Default:
    /// beside the data folder (<data-dir>.key).
    #[arg(long)]
    key_file: Option<PathBuf>,
    /// Write the platform key into the backup too (platform.key): the backup then opens
    /// without it being kept elsewhere, and anyone who reads the backup can open it.
    #[arg(long)]
    include_key: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Check a backup: every file against its manifest, then every version and app state
    /// file opened with the key and its SHA-256 compared with its record.
    Verify {
        dir: PathBuf,
        /// The platform key file that opens it, when the backup holds none and
        /// HEGEMONY_TF_STATE_ENCRYPTION_KEY is not set.
        #[arg(long)]
        key_file: Option<PathBuf>,
        /// The data folder whose key opens it, as `serve` finds it: the key file beside it
        /// (<data-dir>.key), when neither --key-file nor the backup gives one.
        #[arg(long, env = "HEGEMONY_TF_STATE_DATA_DIR")]
        data_dir: Option<PathBuf>,
    },
}

/// `restore`: a backup put back as a new store.
#[derive(Args)]
pub struct Restore {
    /// The backup's folder.
    dir: PathBuf,
    /// The new store's data folder: it must not hold a store.
    #[arg(long)]
    data_dir: PathBuf,
    /// Where the backup's key goes, when it holds one. Default: beside the data folder
    /// (<data-dir>.key), where `serve` looks for it.
    #[arg(long)]
    key_file: Option<PathBuf>,
}

fn config() -> anyhow::Result<Config> {
    Ok(Config::from_env(&|name| std::env::var(name).ok())?)
}

pub async fn run(backup: Backup) -> anyhow::Result<()> {
    match backup.command {
        Some(Command::Verify {
            dir,
            key_file,
            data_dir,
        }) => {
            // The key beside the data folder, as `serve` finds it, when nothing names one.
            let beside = data_dir
                .map(|d| key_file::default_key_file(&d))
                .filter(|f| f.exists());
            verify(&dir, key_file, beside).await
        }
        None => take(backup.take),
    }
}

/// The platform key that seals the store in `data_dir`: the configured one, or its key file.
fn platform_key(data_dir: &Path, file: Option<&Path>) -> anyhow::Result<Option<PlatformKey>> {
    if let KeySetting::Platform(key) = config()?.key {
        return Ok(Some(key));
    }
    let file = file.map_or_else(|| key_file::default_key_file(data_dir), Path::to_owned);
    if !file.exists() {
        return Ok(None);
    }
    Ok(Some(
        key_file::read_or_create(&file, data_dir).map_err(anyhow::Error::msg)?,
    ))
}

fn bar(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    let template = format!("{{spinner}} [{{elapsed_precise}}] {{wide_bar}} {{pos}}/{{len}} {what}");
    bar.set_style(ProgressStyle::with_template(&template).expect("a valid template"));
    bar
}

fn take(options: Take) -> anyhow::Result<()> {
    let to = options.to.context("--to names the backup's folder")?;
    let key = platform_key(&options.data_dir, options.key_file.as_deref())?;
    if options.include_key && key.is_none() {
        bail!("--include-key: this store is not sealed by a platform key (its key is in a Transit engine: back that up with the engine)");
    }
    let taken_at = time::OffsetDateTime::now_utc().format(&Rfc3339)?;
    let progress = bar(0, "blobs");
    let manifest = backup::take(
        &options.data_dir,
        &to,
        BackupKey {
            id: key.as_ref().map(PlatformKey::key_id),
            include: key.as_ref().filter(|_| options.include_key),
        },
        &taken_at,
        &|done, total| {
            progress.set_length(total);
            progress.set_position(done);
        },
    )
    .map_err(anyhow::Error::msg)?;
    progress.finish_and_clear();
    let c = manifest.counts;
    let bytes: u64 = manifest.files.iter().map(|f| f.bytes).sum();
    println!(
        "Backed up {} states ({} versions), {} deleted states and {} app states as of {}: {} files, {bytes} bytes, in {}.",
        c.states,
        c.versions,
        c.deleted_states,
        c.app_states,
        manifest.taken_at,
        manifest.files.len(),
        to.display()
    );
    match (&manifest.key_id, options.include_key) {
        (Some(id), false) => println!("It opens with the key {id}, which it does not hold: keep that key with your backups (or back up with --include-key)."),
        (Some(_), true) => println!("It holds its key (platform.key): keep it as safe as the key itself."),
        (None, _) => println!("It is sealed by a Transit engine: keep that engine's keys as long as the backup."),
    }
    Ok(())
}

/// The app of a check: the backup's catalog (copied, so that opening it writes nothing in
/// the backup) over its blob folder, with the key that opens it: the configured one, else
/// `key_file`, else the one the backup holds, else `beside` (the key file beside the data
/// folder named). Returns it with the platform key's id when one is known.
fn checking_app(
    dir: &Path,
    work: &Path,
    key_file: Option<PathBuf>,
    beside: Option<PathBuf>,
) -> anyhow::Result<(App, Option<String>)> {
    std::fs::copy(dir.join(CATALOG_FILE), work.join(CATALOG_FILE))
        .context("copying the backup's catalog to check it")?;
    std::os::unix::fs::symlink(dir.join(BLOB_DIR).canonicalize()?, work.join(BLOB_DIR))?;
    let config = config()?;
    let held = dir.join(KEY_FILE);
    let key_file = key_file
        .or_else(|| held.exists().then_some(held))
        .or(beside);
    let id = match (&config.key, &key_file) {
        (KeySetting::Platform(key), _) => Some(key.key_id().to_owned()),
        (KeySetting::Unset, None) => bail!("verify needs the key that opens the backup: --key-file, --data-dir (its key beside it, as serve finds it), HEGEMONY_TF_STATE_ENCRYPTION_KEY, or a backup taken with --include-key"),
        (KeySetting::Unset, Some(file)) => {
            let key = key_file::read_or_create(file, work).map_err(anyhow::Error::msg)?;
            Some(key.key_id().to_owned())
        }
        _ => None,
    };
    let app = wiring::local::app(config, work, key_file.as_deref()).map_err(anyhow::Error::msg)?;
    Ok((app, id))
}

async fn verify(
    dir: &Path,
    key_file: Option<PathBuf>,
    beside: Option<PathBuf>,
) -> anyhow::Result<()> {
    let manifest = backup::check(dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "{} files match the manifest ({} taken at {}).",
        manifest.files.len(),
        dir.display(),
        manifest.taken_at
    );
    let work = tempfile::tempdir()?;
    let (app, given) = checking_app(dir, work.path(), key_file, beside)?;
    if let (Some(expected), Some(given)) = (&manifest.key_id, &given) {
        if expected != given {
            bail!("the key given is {given}; this backup is sealed by {expected}");
        }
    }
    let mut states = Vec::new();
    let mut deleted = Vec::new();
    let mut apps = Vec::new();
    for org in backup::orgs(&work.path().join(CATALOG_FILE)).map_err(anyhow::Error::msg)? {
        states.extend(org_states(&app, &org).await?);
        deleted.extend(org_deleted_states(&app, &org).await?);
        apps.extend(org_apps(&app, &org).await?);
    }
    let mut total = manifest.counts.versions;
    for record in &apps {
        total += app_items(&app, record).await?;
    }
    let progress = bar(total, "versions and files");
    let mut checked = Checked::default();
    let holders = states
        .iter()
        .map(Holder::State)
        .chain(deleted.iter().map(Holder::Deleted));
    for holder in holders {
        progress.set_message(holder.label());
        let one = check_state(&app, holder, &|| progress.inc(1)).await?;
        checked.opened += one.opened;
        checked.failed.extend(one.failed);
    }
    for record in &apps {
        progress.set_message(format!("app {}", record.name));
        let one = check_app(&app, record, &|| progress.inc(1)).await?;
        checked.opened += one.opened;
        checked.failed.extend(one.failed);
    }
    progress.finish_and_clear();
    for failure in &checked.failed {
        eprintln!("{failure}");
    }
    if !checked.failed.is_empty() {
        bail!(
            "{} of {} versions and files in {} do not open: this backup cannot be restored whole",
            checked.failed.len(),
            checked.failed.len() as u64 + checked.opened,
            dir.display()
        );
    }
    println!(
        "Opened all {} versions and app state files: {} can be restored.",
        checked.opened,
        dir.display()
    );
    Ok(())
}

pub fn restore(options: Restore) -> anyhow::Result<()> {
    let key_file = options
        .key_file
        .unwrap_or_else(|| key_file::default_key_file(&options.data_dir));
    let manifest =
        backup::restore(&options.dir, &options.data_dir, &key_file).map_err(anyhow::Error::msg)?;
    println!(
        "Restored {} states, {} deleted states and {} app states as of {} into {}.",
        manifest.counts.states,
        manifest.counts.deleted_states,
        manifest.counts.app_states,
        manifest.taken_at,
        options.data_dir.display()
    );
    if manifest.files.iter().any(|f| f.path == KEY_FILE) {
        println!("Its key is in {}.", key_file.display());
    } else if let Some(id) = &manifest.key_id {
        println!("It opens with the key {id}: put that key at {} (or set HEGEMONY_TF_STATE_ENCRYPTION_KEY) before `serve`.", key_file.display());
    }
    Ok(())
}
