//! The apps on the local embedded store: the server's, sealed by a platform key (the
//! configured one, or the key file beside the data folder), and the sweeper's, with no key.

use std::path::Path;
use std::sync::Arc;

use super::{
    assemble, issuers, key_cache, key_ring, limits, links, warn_at_start, FrontDoor, Wrapping,
};
use crate::adapters::local;
use crate::config::{Config, KeySetting};
use crate::ports::KeyService;
use crate::service::issuers::Issuers;
use crate::service::App;

/// The app on the local store in `data_dir`, sealed by a Transit engine (a named backend or
/// the internal OpenBao), or by the configured platform key or, when none is configured, by
/// the key file (`key_file`, by default beside the data folder), created for a folder that
/// holds nothing yet. Beside Transit, the key file, when it exists, still opens the versions
/// it wrapped.
///
/// # Errors
/// A KMS key setting (KMS needs the AWS store), a key file that cannot be read or is missing
/// for a folder that holds states, a Transit CA file the client does not accept, or a store
/// that cannot be opened; each message names what to fix.
pub fn app(config: Config, data_dir: &Path, key_file: Option<&Path>) -> Result<App, String> {
    warn_at_start(&config, false);
    let (limits, links) = (limits(&config, FrontDoor::Container), links(&config));
    let issuers = issuers(&config, true)?;
    let key_file = key_file.map_or_else(
        || local::key_file::default_key_file(data_dir),
        Path::to_owned,
    );
    let cache = key_cache(&config);
    let wrapping = match config.key {
        KeySetting::Platform(key) => Wrapping::Platform(key),
        KeySetting::Kms { .. } => return Err(
            "HEGEMONY_TF_STATE_KEY_BACKEND=kms:... needs the AWS store (--store aws); the local store seals with Transit or a platform key".into()
        ),
        KeySetting::Transit { backend, platform } => {
            let platform = match platform {
                Some(key) => Some(key),
                None if key_file.exists() => Some(local::key_file::read_or_create(&key_file, data_dir)?),
                None => None,
            };
            Wrapping::Transit { backend, platform }
        }
        KeySetting::Unset => Wrapping::Platform(local::key_file::read_or_create(&key_file, data_dir)?),
    };
    let key_name = wrapping.name();
    let keys: Arc<dyn KeyService> = Arc::new(key_ring(
        wrapping,
        config.internal_openbao,
        None,
        config.retired_keys,
    )?);
    tracing::info!(
        data_dir = %data_dir.display(),
        key = key_name,
        max_state_bytes = config.max_state_bytes,
        keep_versions = config.keep_versions,
        "local store"
    );
    let (catalog, blobs) = local::open(data_dir)?;
    Ok(assemble(
        catalog,
        Arc::new(blobs),
        Some((keys, cache)),
        limits,
        links,
        issuers,
    ))
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
        Arc::new(blobs),
        None,
        // A sweeper answers no requests, so no front door's clamp applies.
        limits(&config, FrontDoor::Container),
        links(&config),
        Issuers::off(),
    ))
}
