//! A copy of a live local store, consistent to one moment, its check, and the way back. The
//! catalog is copied by SQLite's online backup in one step, inside one read transaction: the
//! copy is the catalog as one commit left it, while writers go on (WAL lets them). Then the
//! blob files that copy names are copied: a blob is written and fsynced before the commit
//! naming it and never changed after, so each is there and whole, unless the sweeper deleted
//! it after a later change made it unused, which a very long backup could meet (the backup
//! then fails naming it; run it again). A manifest listing every file with its size and
//! SHA-256 is written last, atomically: a folder without one is an interrupted backup, which
//! the check and a restore refuse. The key is never copied unless asked for.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::disk::{private_dir, private_file, sync_dir};
use super::{BLOB_DIR, CATALOG_FILE};
use crate::crypto::PlatformKey;

/// The manifest's file in a backup folder; written last.
pub const MANIFEST: &str = "manifest.json";
/// The platform key's file in a backup folder, with `--include-key` only.
pub const KEY_FILE: &str = "platform.key";
/// How long the catalog copy waits out writers holding the catalog's lock: tries, and the
/// pause between them.
const BUSY_TRIES: u32 = 1200;
const BUSY_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);
/// The manifest's format: a reader refuses one it does not know.
const FORMAT: u32 = 1;

/// What a backup holds: every file with its size and SHA-256, and what the catalog counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    /// When the catalog was copied (RFC 3339): the moment the backup is consistent to.
    pub taken_at: String,
    /// Relative paths, `/`-separated: the catalog, then the blobs in name order, then the
    /// key when included.
    pub files: Vec<FileEntry>,
    /// The id of the platform key that opens its content (`platform:<fingerprint>`), when
    /// one does; a backup sealed by Transit names none.
    pub key_id: Option<String>,
    pub counts: Counts,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

/// What the copied catalog holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub states: u64,
    pub versions: u64,
    pub deleted_states: u64,
    pub app_states: u64,
}

/// Hex SHA-256 and size of a file, read in pieces.
fn digest(path: &Path) -> io::Result<(u64, String)> {
    let mut file = File::open(path)?;
    let (mut hash, mut bytes) = (Sha256::new(), 0u64);
    let mut buffer = vec![0; 1 << 16];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hash.update(&buffer[..n]);
        bytes += n as u64;
    }
    Ok((bytes, crate::ids::hex(&hash.finalize())))
}

/// Copies `from` to a new private file `to` and makes it durable.
fn copy_durably(from: &Path, to: &Path) -> io::Result<()> {
    let mut source = File::open(from)?;
    let mut target = private_file().create_new(true).open(to)?;
    io::copy(&mut source, &mut target)?;
    target.sync_all()
}

/// A blob's file name in a blob folder: its key with `/` as `+`, as `FileBlobs` stores it.
fn blob_file(blob: &str) -> String {
    blob.replace('/', "+")
}

/// The tables of a catalog file, so that queries of an older catalog leave out what it lacks.
fn tables(conn: &Connection) -> rusqlite::Result<BTreeSet<String>> {
    let mut stmt = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
    let names = stmt.query_map([], |row| row.get(0))?;
    names.collect()
}

/// The blobs a catalog names: those of versions not inline, and every file of app states,
/// their archives and open changes.
fn named_blobs(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let present = tables(conn)?;
    let mut parts = vec!["SELECT json_extract(record, '$.blob') FROM versions
         WHERE coalesce(json_extract(record, '$.inline'), 0) = 0"
        .to_owned()];
    for table in ["apps", "archives"] {
        if present.contains(table) {
            parts.push(format!(
                "SELECT j.value FROM {table}, json_tree({table}.record) j
                 WHERE j.key = 'blob' AND j.type = 'text'"
            ));
        }
    }
    let sql = parts.join(" UNION ");
    let mut stmt = conn.prepare(&sql)?;
    let blobs = stmt.query_map([], |row| row.get::<_, Option<String>>(0))?;
    let mut blobs: Vec<String> = blobs
        .filter_map(Result::transpose)
        .collect::<Result<_, _>>()?;
    blobs.sort();
    Ok(blobs)
}

fn count(conn: &Connection, sql: &str) -> rusqlite::Result<u64> {
    conn.query_row(sql, [], |row| row.get(0))
}

/// What a catalog holds, by kind.
fn counts(conn: &Connection) -> rusqlite::Result<Counts> {
    let present = tables(conn)?;
    let has = |t: &str| present.contains(t);
    Ok(Counts {
        states: count(
            conn,
            "SELECT count(*) FROM states WHERE json_extract(record, '$.latest') IS NOT NULL
             AND json_extract(record, '$.deleted_at') IS NULL",
        )?,
        versions: count(conn, "SELECT count(*) FROM versions")?,
        deleted_states: if has("deleted_states") {
            count(conn, "SELECT count(*) FROM deleted_states")?
        } else {
            0
        },
        app_states: if has("apps") {
            count(conn, "SELECT count(*) FROM apps")?
        } else {
            0
        },
    })
}

/// The orgs a catalog file holds anything of (states, deleted states, app states), in name
/// order: what a check walks.
///
/// # Errors
/// A message naming the catalog when it cannot be read.
pub fn orgs(catalog: &Path) -> Result<Vec<String>, String> {
    let read = || -> rusqlite::Result<Vec<String>> {
        let conn = Connection::open_with_flags(catalog, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        let present = tables(&conn)?;
        let parts: Vec<String> = ["states", "deleted_states", "apps"]
            .into_iter()
            .filter(|t| present.contains(*t))
            .map(|t| format!("SELECT org FROM {t}"))
            .collect();
        let mut stmt = conn.prepare(&format!("{} ORDER BY org", parts.join(" UNION ")))?;
        let orgs = stmt.query_map([], |row| row.get(0))?;
        orgs.collect()
    };
    read().map_err(|e| format!("cannot read the catalog {}: {e}", catalog.display()))
}

/// Where a backup is being written, and what it has written so far.
struct Writing<'a> {
    to: &'a Path,
    files: Vec<FileEntry>,
}

impl Writing<'_> {
    /// Records `path` (relative, written already) in the manifest-to-be.
    fn add(&mut self, path: &str) -> Result<(), String> {
        let full = self.to.join(path);
        let (bytes, sha256) =
            digest(&full).map_err(|e| format!("cannot read back {}: {e}", full.display()))?;
        self.files.push(FileEntry {
            path: path.to_owned(),
            bytes,
            sha256,
        });
        Ok(())
    }
}

/// The platform key a backup notes, and copies only when asked.
pub struct BackupKey<'a> {
    /// Its id, noted in the manifest so a check can say when it is given another.
    pub id: Option<&'a str>,
    /// The key itself, written to [`KEY_FILE`] (`--include-key`).
    pub include: Option<&'a PlatformKey>,
}

/// Backs up the store in `data_dir` into `to`, a folder that must be new or empty, noting
/// (and with `include`, copying) the platform key. `on_blob(done, total)` is called as blobs
/// are copied.
///
/// # Errors
/// A message naming what failed: `to` not empty, the catalog not readable, a blob the copy
/// names gone (deleted by the sweeper during a long backup: run it again), a write.
pub fn take(
    data_dir: &Path,
    to: &Path,
    key: BackupKey<'_>,
    taken_at: &str,
    on_blob: &dyn Fn(u64, u64),
) -> Result<Manifest, String> {
    let source = data_dir.join(CATALOG_FILE);
    if !source.exists() {
        return Err(format!("{} holds no store to back up", data_dir.display()));
    }
    let empty = match fs::read_dir(to) {
        Ok(mut entries) => entries.next().is_none(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => true,
        Err(e) => return Err(format!("cannot read {}: {e}", to.display())),
    };
    if !empty {
        return Err(format!(
            "{} is not empty: back up into a new folder",
            to.display()
        ));
    }
    private_dir(&to.join(BLOB_DIR)).map_err(|e| format!("cannot create {}: {e}", to.display()))?;
    let mut writing = Writing {
        to,
        files: Vec::new(),
    };
    let copy = to.join(CATALOG_FILE);
    snapshot(&source, &copy)?;
    writing.add(CATALOG_FILE)?;
    let conn = Connection::open_with_flags(&copy, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| format!("cannot read the copied catalog: {e}"))?;
    let blobs = named_blobs(&conn).map_err(|e| format!("cannot read the copied catalog: {e}"))?;
    let counts = counts(&conn).map_err(|e| format!("cannot read the copied catalog: {e}"))?;
    drop(conn);
    let total = blobs.len() as u64;
    for (done, blob) in blobs.iter().enumerate() {
        let name = blob_file(blob);
        let from = data_dir.join(BLOB_DIR).join(&name);
        match copy_durably(&from, &to.join(BLOB_DIR).join(&name)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(format!("blob {blob}, which the copied catalog names, is gone from {}: the sweeper deleted it after a later change while the backup ran; run the backup again", from.parent().unwrap_or(&from).display()));
            }
            Err(e) => return Err(format!("cannot copy blob {blob}: {e}")),
        }
        writing.add(&format!("{BLOB_DIR}/{name}"))?;
        on_blob(done as u64 + 1, total);
    }
    if let Some(platform) = key.include {
        let write = || -> io::Result<()> {
            let mut file = private_file().create_new(true).open(to.join(KEY_FILE))?;
            file.write_all(platform.to_base64().as_bytes())?;
            file.sync_all()
        };
        write().map_err(|e| format!("cannot write the key into the backup: {e}"))?;
        writing.add(KEY_FILE)?;
    }
    sync_dir(&to.join(BLOB_DIR)).map_err(|e| format!("cannot sync the blob folder: {e}"))?;
    let manifest = Manifest {
        format: FORMAT,
        taken_at: taken_at.to_owned(),
        files: writing.files,
        key_id: key.id.map(str::to_owned),
        counts,
    };
    sync_dir(to).map_err(|e| format!("cannot sync {}: {e}", to.display()))?;
    write_manifest(to, &manifest)?;
    Ok(manifest)
}

/// The catalog at `source` copied whole to `to` (a new private file) in one step: one read
/// transaction, so the copy is one moment's catalog while writers go on.
fn snapshot(source: &Path, to: &Path) -> Result<(), String> {
    let copy = || -> rusqlite::Result<()> {
        let from = Connection::open(source)?;
        from.busy_timeout(std::time::Duration::from_secs(10))?;
        let mut into = Connection::open(to)?;
        let backup = rusqlite::backup::Backup::new(&from, &mut into)?;
        // Every page in one step (-1): one read transaction, so no write in between
        // restarts it. A writer holding the lock at that instant is waited out.
        for _ in 0..BUSY_TRIES {
            if backup.step(-1)? == rusqlite::backup::StepResult::Done {
                return Ok(());
            }
            std::thread::sleep(BUSY_PAUSE);
        }
        Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
            Some("the catalog stayed locked for a minute".into()),
        ))
    };
    // One file, not a WAL database: what a restore puts back is that file alone.
    let single = || Connection::open(to)?.pragma_update(None, "journal_mode", "DELETE");
    let fail = |e: String| format!("cannot copy the catalog {}: {e}", source.display());
    super::disk::touch_private(to).map_err(|e| fail(e.to_string()))?;
    copy()
        .and_then(|()| single())
        .map_err(|e| fail(e.to_string()))?;
    File::open(to)
        .and_then(|f| f.sync_all())
        .map_err(|e| fail(e.to_string()))
}

/// Writes the manifest to a temporary file, syncs it and renames it into place: it appears
/// whole or not at all, and only after every file it lists is durable.
fn write_manifest(to: &Path, manifest: &Manifest) -> Result<(), String> {
    let text = serde_json::to_vec_pretty(manifest).expect("a manifest serializes");
    let partial = to.join(format!("{MANIFEST}.partial"));
    let write = || -> io::Result<()> {
        let mut file = private_file().create(true).truncate(true).open(&partial)?;
        file.write_all(&text)?;
        file.sync_all()?;
        fs::rename(&partial, to.join(MANIFEST))?;
        sync_dir(to)
    };
    write().map_err(|e| format!("cannot write the manifest in {}: {e}", to.display()))
}

/// Why a backup folder is not a whole backup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsound {
    #[error(
        "{0} has no manifest: it is not a finished backup (an interrupted one, or another folder)"
    )]
    NoManifest(PathBuf),
    #[error("the manifest of {0} cannot be read: {1}")]
    BadManifest(PathBuf, String),
    #[error("{path} is missing from the backup")]
    Missing { path: String },
    #[error("{path} is damaged: {why}")]
    Damaged { path: String, why: String },
}

/// The manifest of the backup in `dir`, once every file it lists is there with its size and
/// SHA-256.
///
/// # Errors
/// The first file missing or damaged, or a folder with no readable manifest.
pub fn check(dir: &Path) -> Result<Manifest, Unsound> {
    let path = dir.join(MANIFEST);
    let text = match fs::read(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(Unsound::NoManifest(dir.to_owned()))
        }
        Err(e) => return Err(Unsound::BadManifest(dir.to_owned(), e.to_string())),
    };
    let manifest: Manifest = serde_json::from_slice(&text)
        .map_err(|e| Unsound::BadManifest(dir.to_owned(), e.to_string()))?;
    if manifest.format != FORMAT {
        return Err(Unsound::BadManifest(
            dir.to_owned(),
            format!("format {} is not one this version reads", manifest.format),
        ));
    }
    for entry in &manifest.files {
        let unsafe_path = entry.path.split('/').any(|p| p.is_empty() || p == "..");
        if unsafe_path {
            return Err(Unsound::BadManifest(
                dir.to_owned(),
                format!("{:?} is not a path inside the backup", entry.path),
            ));
        }
        let (bytes, sha256) = match digest(&dir.join(&entry.path)) {
            Ok(found) => found,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(Unsound::Missing {
                    path: entry.path.clone(),
                })
            }
            Err(e) => {
                return Err(Unsound::Damaged {
                    path: entry.path.clone(),
                    why: e.to_string(),
                })
            }
        };
        if (bytes, &sha256) != (entry.bytes, &entry.sha256) {
            return Err(Unsound::Damaged {
                path: entry.path.clone(),
                why: format!(
                    "{bytes} bytes with SHA-256 {sha256}; the manifest says {} bytes with {}",
                    entry.bytes, entry.sha256
                ),
            });
        }
    }
    Ok(manifest)
}

/// Puts the backup in `dir` back as a new store in `data_dir` (which must not exist, or be
/// an empty folder), after checking every file; its key, when the backup holds it, goes to
/// `key_file`. Everything is written into a work folder beside `data_dir`, read back and
/// checked against the manifest, and only then renamed into place (the key first), so a
/// restore stopped at any point leaves no store in `data_dir`, and a second restore begins
/// again: it clears the work folder a stopped one left, and takes a key file it finds equal
/// to the backup's as its own.
///
/// # Errors
/// What [`check`] finds, a `data_dir` that is not empty, a `key_file` that holds another
/// key, a write, a file that does not read back as the manifest says.
pub fn restore(dir: &Path, data_dir: &Path, key_file: &Path) -> Result<Manifest, String> {
    let manifest = check(dir).map_err(|e| e.to_string())?;
    if !empty_or_absent(data_dir) {
        return Err(format!(
            "{} is not empty: restore into a new folder",
            data_dir.display()
        ));
    }
    let has_key = manifest.files.iter().any(|f| f.path == KEY_FILE);
    if has_key && key_file.exists() && !same_file(key_file, &dir.join(KEY_FILE)) {
        return Err(format!(
            "{} exists and holds another key: move it away, or restore into another folder",
            key_file.display()
        ));
    }
    let work = work_folder(data_dir)?;
    let blobs = work.join(BLOB_DIR);
    private_dir(&blobs).map_err(|e| format!("cannot create {}: {e}", blobs.display()))?;
    for entry in &manifest.files {
        let target = work.join(&entry.path);
        copy_durably(&dir.join(&entry.path), &target)
            .map_err(|e| format!("cannot write {}: {e}", target.display()))?;
        let (bytes, sha256) =
            digest(&target).map_err(|e| format!("cannot read back {}: {e}", target.display()))?;
        if (bytes, sha256.as_str()) != (entry.bytes, entry.sha256.as_str()) {
            return Err(format!(
                "{} did not read back as written ({bytes} bytes, SHA-256 {sha256}; the backup records {} bytes, {}): the disk is failing or full",
                target.display(),
                entry.bytes,
                entry.sha256
            ));
        }
    }
    let synced = sync_dir(&blobs).and_then(|()| sync_dir(&work));
    synced.map_err(|e| format!("cannot sync {}: {e}", work.display()))?;
    if has_key {
        let key_folder = super::disk::folder_of(key_file);
        fs::rename(work.join(KEY_FILE), key_file)
            .and_then(|()| sync_dir(key_folder))
            .map_err(|e| format!("cannot put the key at {}: {e}", key_file.display()))?;
    }
    // An empty folder is replaced by the rename, whole.
    fs::rename(&work, data_dir)
        .and_then(|()| sync_dir(super::disk::folder_of(data_dir)))
        .map_err(|e| {
            format!(
                "cannot move {} to {}: {e}",
                work.display(),
                data_dir.display()
            )
        })?;
    Ok(manifest)
}

/// Whether `path` does not exist or is an empty folder.
fn empty_or_absent(path: &Path) -> bool {
    match fs::read_dir(path) {
        Ok(mut entries) => entries.next().is_none(),
        Err(e) => e.kind() == io::ErrorKind::NotFound,
    }
}

/// Whether two files hold the same bytes (a key file a stopped restore put in place).
fn same_file(a: &Path, b: &Path) -> bool {
    matches!((digest(a), digest(b)), (Ok(x), Ok(y)) if x == y)
}

/// The work folder of a restore into `data_dir`: beside it, so the last rename stays on one
/// file system, made new (what a stopped restore left there goes first).
fn work_folder(data_dir: &Path) -> Result<PathBuf, String> {
    let name = data_dir
        .file_name()
        .ok_or_else(|| format!("{} names no folder", data_dir.display()))?;
    let mut work_name = std::ffi::OsString::from(".");
    work_name.push(name);
    work_name.push(".restoring");
    let work = super::disk::folder_of(data_dir).join(work_name);
    match fs::remove_dir_all(&work) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            return Err(format!("cannot clear {}: {e}", work.display()))
        }
        _ => {}
    }
    private_dir(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    Ok(work)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_file_is_its_key_with_slashes_as_plus() {
        assert_eq!(
            blob_file("orgs/acme/states/i/3-x"),
            "orgs+acme+states+i+3-x"
        );
    }

    #[test]
    fn a_folder_without_a_manifest_is_no_backup_and_a_changed_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(check(dir.path()), Err(Unsound::NoManifest(_))));
        fs::write(dir.path().join("a"), b"hello").unwrap();
        let mut writing = Writing {
            to: dir.path(),
            files: Vec::new(),
        };
        writing.add("a").unwrap();
        let manifest = Manifest {
            format: FORMAT,
            taken_at: "2026-12-02T10:00:00Z".into(),
            files: writing.files,
            key_id: None,
            counts: Counts::default(),
        };
        write_manifest(dir.path(), &manifest).unwrap();
        assert_eq!(check(dir.path()).unwrap(), manifest);
        fs::write(dir.path().join("a"), b"hellO").unwrap();
        assert!(matches!(check(dir.path()), Err(Unsound::Damaged { path, .. }) if path == "a"));
        fs::remove_file(dir.path().join("a")).unwrap();
        assert!(matches!(check(dir.path()), Err(Unsound::Missing { path }) if path == "a"));
    }
}
