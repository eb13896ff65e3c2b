//! Reading back everything a store holds, as a backup's check does: every version of every
//! state and of every deleted state kept for a restore, and every file of every app state
//! (each key slot it is recorded under), opened with its key and its SHA-256 compared with
//! what its record says. It only reads: nothing is written, nothing audited.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

use super::app_changes::open_file;
use super::app_keys::{archives, copies};
use super::keys::Holder;
use super::state::open_version_into;
use super::{App, Error};
use crate::domain::app::AppRecord;
use crate::ids::hex;

/// What a check found: how many pieces of content opened whole, and each that did not, with
/// why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checked {
    pub opened: u64,
    pub failed: Vec<String>,
}

impl Checked {
    /// Counts `plaintext` as opened when its SHA-256 is `sha256`, else as failed.
    fn compare(&mut self, what: &str, plaintext: &[u8], sha256: &str) {
        let found = hex(&Sha256::digest(plaintext));
        if found == sha256 {
            self.opened += 1;
        } else {
            self.failed.push(format!(
                "{what}: opened to SHA-256 {found}, its record says {sha256}"
            ));
        }
    }
}

/// Opens every version of a state or deleted state; `on_item` is called once per version.
///
/// # Errors
/// `NoKey` without a key service; `Unavailable` when the catalog cannot list the versions.
/// A version that does not open is counted, not raised.
pub async fn check_state(
    app: &App,
    holder: Holder<'_>,
    on_item: &(dyn Fn() + Sync),
) -> Result<Checked, Error> {
    let keys = app.keys()?;
    let record = holder.record();
    let versions = app
        .catalog
        .versions(&record.org, record.home(), &record.incarnation)
        .await?;
    let mut checked = Checked::default();
    let mut buffer = Vec::new();
    for version in versions {
        let what = format!("version {} of state {}", version.version, holder.label());
        match open_version_into(app, keys, record, &version, std::mem::take(&mut buffer)).await {
            Ok(plaintext) => {
                checked.compare(&what, &plaintext, &version.sha256);
                buffer = plaintext;
            }
            Err(e) => checked.failed.push(format!("{what}: {e}")),
        }
        on_item();
    }
    Ok(checked)
}

/// How many pieces of content [`check_app`] opens for `record`: its progress bar's length.
///
/// # Errors
/// `Unavailable` when the catalog fails.
pub async fn app_items(app: &App, record: &AppRecord) -> Result<u64, Error> {
    let archives = archives(app, record).await?;
    let distinct: BTreeSet<_> = copies(&archives, record).map(|f| f.slot_key()).collect();
    Ok(distinct.len() as u64)
}

/// Opens every file of an app state under each key slot it is recorded with (its archives,
/// its newest files, its open change); `on_item` is called once per file and slot.
///
/// # Errors
/// `NoKey` without a key service; `Unavailable` when the catalog fails. A file that does not
/// open is counted, not raised.
pub async fn check_app(
    app: &App,
    record: &AppRecord,
    on_item: &(dyn Fn() + Sync),
) -> Result<Checked, Error> {
    let keys = app.keys()?;
    let archives = archives(app, record).await?;
    let mut seen = BTreeSet::new();
    let mut checked = Checked::default();
    for file in copies(&archives, record) {
        if !seen.insert(file.slot_key()) {
            continue;
        }
        let what = format!("file {} of app state {}", file.name, record.name);
        match open_file(app, keys, record, file).await {
            Ok(plaintext) => checked.compare(&what, &plaintext, &file.sha256),
            Err(e) => checked.failed.push(format!("{what}: {e}")),
        }
        on_item();
    }
    Ok(checked)
}
