//! Which store a command works on: the local embedded store in a data folder (the default),
//! or the AWS store of a deployment (the table, bucket and key its settings name), so the
//! container front door and a deployment's first tokens use the same commands as `make run`.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use hegemony_state::adapters::aws::{self, deployment};
use hegemony_state::adapters::local::{SqliteCatalog, CATALOG_FILE};
use hegemony_state::config::Config;
use hegemony_state::ports::Catalog;
use hegemony_state::service::App;

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
                let settings = deployment::settings(&config()?)?;
                let (catalog, _) = aws::store(&aws::sdk_config().await, &settings);
                Ok(Arc::new(catalog))
            }
        }
    }

    /// The app that serves requests: on AWS, as the container front door.
    pub async fn app(&self, key_file: Option<&std::path::Path>) -> anyhow::Result<App> {
        match self.kind {
            StoreKind::Local => super::local::app(&self.data_dir, key_file),
            StoreKind::Aws => {
                let config = config()?;
                if let Some(warning) = config.grace_warning() {
                    tracing::warn!("{warning}");
                }
                let app = deployment::app(
                    config,
                    &aws::sdk_config().await,
                    deployment::FrontDoor::Container,
                )?;
                if app.keys.is_none() {
                    tracing::warn!("no key configured (HEGEMONY_TF_STATE_KEY_BACKEND or HEGEMONY_TF_STATE_ENCRYPTION_KEY): every state route answers 503 until one is");
                }
                tracing::info!(
                    max_state_bytes = app.limits.max_state_bytes,
                    keep_versions = app.limits.keep_versions,
                    "AWS store"
                );
                Ok(app)
            }
        }
    }

    /// The app of a sweeper pass, which never opens content and so needs no key.
    pub async fn sweeper_app(&self) -> anyhow::Result<App> {
        match self.kind {
            StoreKind::Local => super::local::sweeper_app(&self.data_dir),
            StoreKind::Aws => {
                let mut app = deployment::app(
                    config()?,
                    &aws::sdk_config().await,
                    deployment::FrontDoor::Container,
                )?;
                app.keys = None;
                Ok(app)
            }
        }
    }
}
