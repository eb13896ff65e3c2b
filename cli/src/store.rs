//! Which store a command works on: the local embedded store in a data folder (the default),
//! or the AWS store of a deployment (the table, bucket and key its settings name), so the
//! container front door and a deployment's first tokens use the same commands as `make run`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, ValueEnum};
use hegemony_state::adapters::aws;
use hegemony_state::adapters::local::{SqliteCatalog, CATALOG_FILE};
use hegemony_state::config::Config;
use hegemony_state::ports::{Catalog, LockCensus};
use hegemony_state::service::App;
use hegemony_state::wiring::{self, FrontDoor};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StoreKind {
    /// SQLite and blob files in --data-dir, sealed by a platform key.
    Local,
    /// DynamoDB, S3 and KMS, from HEGEMONY_TF_STATE_TABLE, HEGEMONY_TF_STATE_BUCKET,
    /// HEGEMONY_TF_STATE_KEY_BACKEND and the AWS SDK's own settings.
    Aws,
}

/// The store a command works on.
#[derive(Args, Clone)]
pub struct Store {
    /// Which store: local or aws.
    #[arg(
        long = "store",
        env = "HEGEMONY_TF_STATE_STORE",
        default_value = "local"
    )]
    pub kind: StoreKind,
    /// The local store's data folder (SQLite catalog and blob files).
    #[arg(
        long,
        env = "HEGEMONY_TF_STATE_DATA_DIR",
        default_value = "./.hegemony"
    )]
    pub data_dir: PathBuf,
}

fn config() -> anyhow::Result<Config> {
    Ok(Config::from_env(&|name| std::env::var(name).ok())?)
}

/// The settings with `key_backend` in place of HEGEMONY_TF_STATE_KEY_BACKEND when given (a
/// re-wrap's `--to`), checked as that variable is.
fn config_with(key_backend: Option<&str>) -> anyhow::Result<Config> {
    Ok(Config::from_env(&|name| match key_backend {
        Some(backend) if name == "HEGEMONY_TF_STATE_KEY_BACKEND" => Some(backend.to_owned()),
        _ => std::env::var(name).ok(),
    })?)
}

impl Store {
    /// The catalog alone: what the token commands need (no key).
    pub async fn catalog(&self) -> anyhow::Result<Arc<dyn Catalog>> {
        match self.kind {
            StoreKind::Local => {
                std::fs::create_dir_all(&self.data_dir)?;
                let catalog = SqliteCatalog::open(&self.data_dir.join(CATALOG_FILE))
                    .map_err(anyhow::Error::msg)?;
                Ok(Arc::new(catalog))
            }
            StoreKind::Aws => {
                let settings = wiring::aws::settings(&config()?)?;
                let catalog = aws::catalog(&aws::sdk_config().await, &settings);
                Ok(Arc::new(catalog))
            }
        }
    }

    /// The app that serves requests: on AWS, as the container front door.
    pub async fn app(&self, key_file: Option<&Path>) -> anyhow::Result<App> {
        self.app_with_key_backend(key_file, None).await
    }

    /// [`Store::app`] wrapping new data keys with `key_backend` (as
    /// HEGEMONY_TF_STATE_KEY_BACKEND takes it) when given, instead of the setting.
    pub async fn app_with_key_backend(
        &self,
        key_file: Option<&Path>,
        key_backend: Option<&str>,
    ) -> anyhow::Result<App> {
        let config = config_with(key_backend)?;
        match self.kind {
            StoreKind::Local => {
                wiring::local::app(config, &self.data_dir, key_file).map_err(anyhow::Error::msg)
            }
            StoreKind::Aws => {
                let app = wiring::aws::app(config, &aws::sdk_config().await, FrontDoor::Container)?;
                tracing::info!(
                    max_state_bytes = app.limits.max_state_bytes,
                    keep_versions = app.limits.keep_versions,
                    "AWS store"
                );
                Ok(app)
            }
        }
    }

    /// What counts the store's locks and holds for the metrics: the local catalog (one more
    /// reader of its file). `None` on AWS, where it would take a scan of the table.
    pub fn census(&self) -> anyhow::Result<Option<Arc<dyn LockCensus>>> {
        match self.kind {
            StoreKind::Local => {
                let catalog = SqliteCatalog::open(&self.data_dir.join(CATALOG_FILE))
                    .map_err(anyhow::Error::msg)?;
                Ok(Some(Arc::new(catalog)))
            }
            StoreKind::Aws => Ok(None),
        }
    }

    /// The app of a sweeper pass, which never opens content and so needs no key.
    pub async fn sweeper_app(&self) -> anyhow::Result<App> {
        match self.kind {
            StoreKind::Local => {
                wiring::local::sweeper(config()?, &self.data_dir).map_err(anyhow::Error::msg)
            }
            StoreKind::Aws => Ok(wiring::aws::sweeper(config()?, &aws::sdk_config().await)?),
        }
    }
}
