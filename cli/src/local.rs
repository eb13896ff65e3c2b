//! Wiring of the local embedded store: settings, the platform key (created beside the data
//! folder on first start), the SQLite catalog and blob files, assembled into an `App`.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use hegemony_state::adapters::local;
use hegemony_state::config::{Config, KeySetting};
use hegemony_state::crypto::PlatformKey;
use hegemony_state::service::{App, SystemClock};

/// Builds the app on the local store in `data_dir`.
pub fn app(data_dir: &Path, key_file: Option<&Path>) -> anyhow::Result<App> {
    let config = Config::from_env(&|name| std::env::var(name).ok())?;
    if let Some(warning) = config.grace_warning() {
        tracing::warn!("{warning}");
    }
    let limits = config.limits();
    let key = match config.key {
        KeySetting::Platform(key) => key,
        KeySetting::Kms { .. } => bail!(
            "HEGEMONY_TF_STATE_KEY_BACKEND=kms:... needs the AWS store (--store aws); the local store seals with a platform key"
        ),
        KeySetting::Unset => {
            let path = key_file.map_or_else(|| local::default_key_file(data_dir), Path::to_owned);
            key_from_file(&path, data_dir)?
        }
    };
    tracing::info!(
        data_dir = %data_dir.display(),
        key = key.key_id(),
        max_state_bytes = config.max_state_bytes,
        keep_versions = config.keep_versions,
        "local store"
    );
    let (catalog, blobs) = local::open(data_dir).map_err(anyhow::Error::msg)?;
    Ok(App {
        catalog: Arc::new(catalog),
        blobs: Arc::new(blobs),
        keys: Some(Arc::new(key)),
        clock: Arc::new(SystemClock),
        limits,
        run_url_template: config.run_url_template,
    })
}

/// The app on the local store for the sweeper, which never opens content and so needs no key.
pub fn sweeper_app(data_dir: &Path) -> anyhow::Result<App> {
    let config = Config::from_env(&|name| std::env::var(name).ok())?;
    if !local::exists(data_dir) {
        bail!("{} holds no store to sweep", data_dir.display());
    }
    let (catalog, blobs) = local::open(data_dir).map_err(anyhow::Error::msg)?;
    Ok(App {
        catalog: Arc::new(catalog),
        blobs: Arc::new(blobs),
        keys: None,
        clock: Arc::new(SystemClock),
        limits: config.limits(),
        run_url_template: config.run_url_template,
    })
}

/// Reads the key file, or creates it (mode 0600) for a data folder that holds nothing yet.
/// A folder that already has a catalog never gets a new key silently: its versions were
/// sealed under the old one.
fn key_from_file(path: &Path, data_dir: &Path) -> anyhow::Result<PlatformKey> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let mode = std::fs::metadata(path)?.permissions().mode();
            if mode & 0o077 != 0 {
                tracing::warn!(key_file = %path.display(), "the key file is readable by other users; chmod 600 it");
            }
            PlatformKey::from_base64(&text)
                .map_err(|e| anyhow::anyhow!("the key file {}: {e}", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if local::exists(data_dir) {
                bail!(
                    "the data folder {} holds states, but its key file {} is missing: restore the key from your backup (or set HEGEMONY_TF_STATE_ENCRYPTION_KEY); a new key could not open them",
                    data_dir.display(),
                    path.display()
                );
            }
            let key = PlatformKey::generate();
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .with_context(|| format!("cannot create the key file {}", path.display()))?;
            file.write_all(key.to_base64().as_bytes())?;
            file.write_all(b"\n")?;
            file.sync_all()?;
            tracing::warn!(
                key_file = %path.display(),
                key = key.key_id(),
                "created a new platform key beside the data folder: back it up together with the data folder; a lost key means lost states"
            );
            Ok(key)
        }
        Err(e) => Err(e).with_context(|| format!("cannot read the key file {}", path.display())),
    }
}
