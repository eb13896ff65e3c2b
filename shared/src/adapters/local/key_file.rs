//! The local store's platform key file, when no key is configured: where it lives (beside
//! the data folder, never inside it) and how it is read, or created for a folder that holds
//! nothing yet. A folder that already has a catalog never gets a new key silently: its
//! versions were sealed under the old one.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::exists;
use crate::crypto::PlatformKey;

/// Where the platform key lives for a data folder when none is configured: beside it, not
/// inside it (`./.hegemony.key` for `./.hegemony`), so copying the data folder alone never
/// copies the key that opens it.
pub fn default_key_file(data_dir: &Path) -> PathBuf {
    let name = data_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "hegemony".into());
    let parent = data_dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    parent.join(format!("{name}.key"))
}

/// Reads the key file at `path`, or creates it (mode 0600, fsynced) when `data_dir` holds no
/// catalog yet.
///
/// # Errors
/// A message naming the key file: unreadable, not a platform key, missing for a folder that
/// holds states, or not creatable.
pub fn read_or_create(path: &Path, data_dir: &Path) -> Result<PlatformKey, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let mode = std::fs::metadata(path)
                .map_err(|e| e.to_string())?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                tracing::warn!(key_file = %path.display(), "the key file is readable by other users; chmod 600 it");
            }
            PlatformKey::from_base64(&text)
                .map_err(|e| format!("the key file {}: {e}", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if exists(data_dir) {
                return Err(format!(
                    "the data folder {} holds states, but its key file {} is missing: restore the key from your backup (or set HEGEMONY_TF_STATE_ENCRYPTION_KEY); a new key could not open them",
                    data_dir.display(),
                    path.display()
                ));
            }
            create(path)
        }
        Err(e) => Err(format!("cannot read the key file {}: {e}", path.display())),
    }
}

/// Writes a new key to `path`, which must not exist yet (two processes starting on one new
/// folder cannot both create it).
fn create(path: &Path) -> Result<PlatformKey, String> {
    let key = PlatformKey::generate();
    let mut file = super::disk::private_file()
        .create_new(true)
        .open(path)
        .map_err(|e| format!("cannot create the key file {}: {e}", path.display()))?;
    let written = file
        .write_all(key.to_base64().as_bytes())
        .and_then(|()| file.write_all(b"\n"))
        .and_then(|()| file.sync_all())
        // The key's directory entry too: without it a power cut could lose the new file,
        // and with it every state sealed under the key.
        .and_then(|()| super::disk::sync_dir(super::disk::folder_of(path)));
    written.map_err(|e| e.to_string())?;
    tracing::warn!(
        key_file = %path.display(),
        key = key.key_id(),
        "created a new platform key beside the data folder: back it up together with the data folder; a lost key means lost states"
    );
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_file_sits_beside_the_data_folder() {
        assert_eq!(
            default_key_file(Path::new("./.hegemony")),
            Path::new("./.hegemony.key")
        );
        assert_eq!(
            default_key_file(Path::new(".hegemony")),
            Path::new("./.hegemony.key")
        );
        assert_eq!(
            default_key_file(Path::new("/var/lib/hs")),
            Path::new("/var/lib/hs.key")
        );
    }
}
