//! The apps on the local embedded store: the server's, sealed by a platform key (the
//! configured one, or the key file beside the data folder), and the sweeper's, with no key.

use std::path::Path;
use std::sync::Arc;

use super::{assemble, limits, links, warn_at_start, FrontDoor};
use crate::adapters::local;
use crate::config::{Config, KeySetting};
use crate::service::App;

/// The app on the local store in `data_dir`, sealed by the configured platform key or, when
/// none is configured, by the key file (`key_file`, by default beside the data folder),
/// created for a folder that holds nothing yet.
///
/// # Errors
/// A KMS key setting (the local store seals with a platform key only), a key file that
/// cannot be read or is missing for a folder that holds states, or a store that cannot be
/// opened; each message names what to fix.
pub fn app(config: Config, data_dir: &Path, key_file: Option<&Path>) -> Result<App, String> {
    warn_at_start(&config, false);
    let (limits, links) = (limits(&config, FrontDoor::Container), links(&config));
    let key = match config.key {
        KeySetting::Platform(key) => key,
        KeySetting::Kms { .. } => return Err(
            "HEGEMONY_TF_STATE_KEY_BACKEND=kms:... needs the AWS store (--store aws); the local store seals with a platform key".into()
        ),
        KeySetting::Unset => {
            let path =
                key_file.map_or_else(|| local::key_file::default_key_file(data_dir), Path::to_owned);
            local::key_file::read_or_create(&path, data_dir)?
        }
    };
    tracing::info!(
        data_dir = %data_dir.display(),
        key = key.key_id(),
        max_state_bytes = config.max_state_bytes,
        keep_versions = config.keep_versions,
        "local store"
    );
    let (catalog, blobs) = local::open(data_dir)?;
    Ok(assemble(catalog, blobs, Some(Arc::new(key)), limits, links))
}

/// The sweeper's app on the local store in `data_dir`: no key, and no store created.
///
/// # Errors
/// A folder that holds no store, or a store that cannot be opened.
pub fn sweeper(config: Config, data_dir: &Path) -> Result<App, String> {
    if !local::exists(data_dir) {
        return Err(format!("{} holds no store to sweep", data_dir.display()));
    }
    let (catalog, blobs) = local::open(data_dir)?;
    Ok(assemble(
        catalog,
        blobs,
        None,
        // A sweeper answers no requests, so no front door's clamp applies.
        limits(&config, FrontDoor::Container),
        links(&config),
    ))
}
