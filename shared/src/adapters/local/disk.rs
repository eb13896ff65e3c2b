//! What the local store asks of the file system beyond reads and writes: folders and files
//! only their owner can open (the data is encrypted, but names, sizes and the audit log are
//! not, and the platform key sits beside the folder), and directory entries made durable, so
//! a power cut cannot lose a file that was just created and synced.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// Creates `dir` and any missing parents, each readable by its owner only (0700). A folder
/// that exists already keeps its mode: the operator may have chosen it.
pub(super) fn private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Options that create a file readable and writable by its owner only (0600).
pub(super) fn private_file() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.write(true).mode(0o600);
    options
}

/// Makes the entries of `dir` (a file created, renamed or removed in it) durable.
pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The folder a file's entry lives in (`.` for a bare file name).
pub(super) fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Creates `path` empty and private if it does not exist yet, so that what opens it next
/// (SQLite, which creates files with the process's umask) finds it 0600; SQLite gives its
/// `-wal` and `-shm` files the main file's mode.
pub(super) fn touch_private(path: &Path) -> io::Result<()> {
    match private_file().create_new(true).open(path) {
        Ok(_) => sync_dir(folder_of(path)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn private_folders_and_files_are_the_owners_alone() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        private_dir(&dir).unwrap();
        assert_eq!((mode(&root.path().join("a")), mode(&dir)), (0o700, 0o700));
        let file = dir.join("f");
        touch_private(&file).unwrap();
        assert_eq!(mode(&file), 0o600);
        touch_private(&file).unwrap();
        assert_eq!(mode(&file), 0o600, "an existing file is left as it is");
    }

    #[test]
    fn a_bare_file_name_lives_in_the_current_folder() {
        assert_eq!(folder_of(Path::new("x.key")), Path::new("."));
        assert_eq!(folder_of(Path::new("/a/x.key")), Path::new("/a"));
    }
}
