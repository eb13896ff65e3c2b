//! Blob files: one file per blob in one folder, named after the blob key (made of ids, never
//! of state names). A put writes a temporary file, fsyncs it, renames it into place and
//! fsyncs the folder, so once `put` returns the blob survives a power cut, and a crash
//! mid-write leaves only a temporary file, never a torn blob.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use crate::ports::{BlobStore, StoreError};

/// Blob files in one folder.
#[derive(Debug, Clone)]
pub struct FileBlobs {
    dir: PathBuf,
}

impl FileBlobs {
    /// # Errors
    /// A message naming the folder when it cannot be created.
    pub fn open(dir: &Path) -> Result<Self, String> {
        super::disk::private_dir(dir)
            .map_err(|e| format!("cannot create the blob folder {}: {e}", dir.display()))?;
        Ok(Self {
            dir: dir.to_owned(),
        })
    }

    /// Blob keys hold `/`; files live flat in one folder so only that folder needs fsync.
    fn path(&self, key: &str) -> Result<PathBuf, StoreError> {
        if key.is_empty()
            || !key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'))
        {
            return Err(StoreError::Corrupt(format!("not a blob key: {key:?}")));
        }
        Ok(self.dir.join(key.replace('/', "+")))
    }
}

fn unavailable(what: &str, e: std::io::Error) -> StoreError {
    StoreError::Unavailable(format!("{what}: {e}"))
}

fn write_durably(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    // Appended, not `with_extension`: keys may hold dots.
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = super::disk::private_file()
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| unavailable("creating a blob file", e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| unavailable("writing a blob file", e))?;
    fs::rename(&tmp, path).map_err(|e| unavailable("renaming a blob file", e))?;
    super::disk::sync_dir(dir).map_err(|e| unavailable("syncing the blob folder", e))
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Unavailable(format!("blob task failed: {e}")))?
}

#[async_trait]
impl BlobStore for FileBlobs {
    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        let path = self.path(key)?;
        let dir = self.dir.clone();
        blocking(move || write_durably(&dir, &path, &bytes)).await
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.path(key)?;
        blocking(move || match fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(unavailable("reading a blob file", e)),
        })
        .await
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        let path = self.path(key)?;
        blocking(move || match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(unavailable("deleting a blob file", e)),
        })
        .await
    }
}
