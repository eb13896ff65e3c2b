//! Blob files: one file per blob in one folder, named after the blob key (made of ids, never
//! of state names). A put writes a temporary file, fsyncs it, renames it into place and
//! fsyncs the folder, so once `put` returns the blob survives a power cut, and a crash
//! mid-write leaves only a temporary file, never a torn blob. A failed put removes its
//! temporary file; those a crash left are removed when the store is next opened, and by the
//! sweeper, so a server that runs for months does not keep them either.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use crate::domain::Timestamp;
use crate::ports::{BlobStore, OpenedBlob, StoreError, WriteObject};

/// The suffix of a blob file being written.
const TEMP_SUFFIX: &str = ".tmp";

/// A temporary file this old was left by a crash: a put writes its file in seconds, and a
/// younger one may be another process's put under way.
const STALE_TEMP: Duration = Duration::from_secs(3600);

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
        let before = SystemTime::now()
            .checked_sub(STALE_TEMP)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        match remove_temp_files_before(dir, before) {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(folder = %dir.display(), removed = n, "removed temporary blob files a crash left")
            }
            // Only space is at stake: serving goes on.
            Err(e) => {
                tracing::error!(folder = %dir.display(), error = %e, "cannot remove temporary blob files a crash left")
            }
        }
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

/// Removes the temporary files in `dir` last changed before `before`; returns how many.
fn remove_temp_files_before(dir: &Path, before: SystemTime) -> std::io::Result<usize> {
    let mut removed = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if !entry.file_name().to_string_lossy().ends_with(TEMP_SUFFIX) {
            continue;
        }
        // Another process's put may rename its file away meanwhile: that one is not ours.
        let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
        let changed = match entry.metadata().and_then(|m| m.modified()) {
            Ok(changed) => changed,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(e),
        };
        if changed <= before {
            match fs::remove_file(entry.path()) {
                Ok(()) => removed += 1,
                Err(e) if gone(&e) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(removed)
}

/// Writes the file `write` fills at `path`, durably: a temporary file synced, renamed into
/// place, the folder synced.
fn write_durably(
    dir: &Path,
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), StoreError> {
    // Appended, not `with_extension`: keys may hold dots.
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(TEMP_SUFFIX);
    let tmp = PathBuf::from(tmp);
    let written = write_and_rename(dir, &tmp, path, write);
    if written.is_err() {
        // A full disk must not also keep the partial file's space; it may not exist.
        let _ = fs::remove_file(&tmp);
    }
    written
}

fn write_and_rename(
    dir: &Path,
    tmp: &Path,
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), StoreError> {
    let mut file = super::disk::private_file()
        .create(true)
        .truncate(true)
        .open(tmp)
        .map_err(|e| unavailable("creating a blob file", e))?;
    write(&mut file)
        .and_then(|()| file.sync_all())
        .map_err(|e| unavailable("writing a blob file", e))?;
    fs::rename(tmp, path).map_err(|e| unavailable("renaming a blob file", e))?;
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
        blocking(move || write_durably(&dir, &path, |file| file.write_all(&bytes))).await
    }

    /// Written to its temporary file as it is made, a segment at a time.
    async fn put_written(&self, key: &str, write: WriteObject) -> Result<(), StoreError> {
        let path = self.path(key)?;
        let dir = self.dir.clone();
        blocking(move || write_durably(&dir, &path, write)).await
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

    /// The file's first `head` bytes and the open file after them. Once open, the file
    /// reads to its end even if the sweeper removes its name meanwhile.
    async fn open(&self, key: &str, head: usize) -> Result<Option<OpenedBlob>, StoreError> {
        let path = self.path(key)?;
        blocking(move || {
            let mut file = match fs::File::open(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(unavailable("opening a blob file", e)),
            };
            let len = file
                .metadata()
                .map_err(|e| unavailable("reading a blob file's size", e))?
                .len();
            let mut first = Vec::with_capacity(head.min(len as usize));
            (&mut file)
                .take(head as u64)
                .read_to_end(&mut first)
                .map_err(|e| unavailable("reading a blob file", e))?;
            if first.len() as u64 >= len {
                return Ok(Some(OpenedBlob::Whole(first)));
            }
            Ok(Some(OpenedBlob::Reading {
                head: first,
                rest: Box::new(file),
                len,
            }))
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

    async fn remove_leftovers(&self, before: Timestamp) -> Result<usize, StoreError> {
        let dir = self.dir.clone();
        blocking(move || {
            remove_temp_files_before(&dir, before.into())
                .map_err(|e| unavailable("removing temporary blob files", e))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, name: &str, age: Duration) -> PathBuf {
        let path = dir.join(name);
        let f = fs::File::create(&path).unwrap();
        f.set_modified(SystemTime::now() - age).unwrap();
        path
    }

    /// A kill mid-seal left a 30 MiB temporary file that nothing ever removed.
    #[test]
    fn opening_removes_the_temporary_files_a_crash_left_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("blobs");
        fs::create_dir(&dir).unwrap();
        let left = file(&dir, "orgs+a+states+i+1-ab.tmp", Duration::from_secs(7200));
        let under_way = file(&dir, "orgs+a+states+i+2-cd.tmp", Duration::from_secs(5));
        let blob = file(&dir, "orgs+a+states+i+1-ef", Duration::from_secs(7200));
        FileBlobs::open(&dir).unwrap();
        assert!(!left.exists(), "a crash's leftover goes");
        assert!(under_way.exists(), "a put under way stays");
        assert!(blob.exists(), "blobs stay, however old");
    }

    /// Only the open removed them, so a server that ran for months kept every one a failed
    /// seal left meanwhile; the sweeper removes them too.
    #[tokio::test]
    async fn the_sweeper_removes_the_temporary_files_a_dead_put_left() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("blobs");
        let blobs = FileBlobs::open(&dir).unwrap();
        let left = file(&dir, "orgs+a+states+i+1-ab.tmp", Duration::from_secs(7200));
        let under_way = file(&dir, "orgs+a+states+i+2-cd.tmp", Duration::from_secs(5));
        let blob = file(&dir, "orgs+a+states+i+1-ef", Duration::from_secs(7200));
        let cutoff = time::OffsetDateTime::now_utc() - time::Duration::hours(1);
        assert_eq!(blobs.remove_leftovers(cutoff).await.unwrap(), 1);
        assert!(!left.exists() && under_way.exists() && blob.exists());
        assert_eq!(
            blobs.remove_leftovers(cutoff).await.unwrap(),
            0,
            "idempotent"
        );
    }

    #[tokio::test]
    async fn a_failed_put_leaves_no_temporary_file() {
        let root = tempfile::tempdir().unwrap();
        let blobs = FileBlobs::open(&root.path().join("blobs")).unwrap();
        // A folder where the blob should go makes the rename fail after the write.
        fs::create_dir(root.path().join("blobs/orgs+a+1-ab")).unwrap();
        assert!(blobs.put("orgs/a/1-ab", b"sealed".to_vec()).await.is_err());
        let names: Vec<String> = fs::read_dir(root.path().join("blobs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["orgs+a+1-ab"]);
    }
}
