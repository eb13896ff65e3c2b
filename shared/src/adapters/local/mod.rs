//! The local embedded store: a data folder holding an SQLite catalog and a folder of blob
//! files. `serve`, `token` and `sweep` may be separate processes on one folder, so every
//! write is a `BEGIN IMMEDIATE` transaction with a busy timeout, and a 200 survives a power
//! cut: the commit is durable (WAL, `synchronous=FULL`: one fsync of the log), a small
//! version's sealed content is inside it, and a larger version's blob is fsynced before the
//! commit that names it. The catalog is split by port as the AWS store's is: `catalog`
//! (opening it, its connections, the audit insert), `state` (states, versions, audit),
//! `access` (tokens, orgs), `runs`, `apps` (app states and their archives), `sweep`, `trust`
//! (trust policies), `protection` (protected-state rules), `inventory` (the resource index), and `tables` (the schema and row codecs); `backup` copies a live store
//! consistently, checks a copy and puts one back; `key_file` keeps the platform key beside the folder
//! when none is configured; `census` counts the locks and holds for the metrics; `disk` makes
//! its folders and files private and their entries durable.

mod access;
mod apps;
pub mod backup;
mod blobs;
mod catalog;
mod census;
mod deleted;
mod disk;
mod inventory;
pub mod key_file;
mod protection;
mod runs;
mod scanners;
mod state;
mod sweep;
mod tables;
mod trust;

use std::path::Path;

pub use blobs::FileBlobs;
pub use catalog::SqliteCatalog;

/// The catalog's file inside the data folder.
pub const CATALOG_FILE: &str = "catalog.sqlite";
/// The blob folder inside the data folder.
pub const BLOB_DIR: &str = "blobs";

/// Opens (creating if needed) the store in `data_dir`.
///
/// # Errors
/// A message naming the folder or file that could not be created or opened.
pub fn open(data_dir: &Path) -> Result<(SqliteCatalog, FileBlobs), String> {
    disk::private_dir(data_dir)
        .map_err(|e| format!("cannot create the data folder {}: {e}", data_dir.display()))?;
    let catalog = SqliteCatalog::open(&data_dir.join(CATALOG_FILE))?;
    let blobs = FileBlobs::open(&data_dir.join(BLOB_DIR))?;
    Ok((catalog, blobs))
}

/// Whether `data_dir` already holds a catalog.
pub fn exists(data_dir: &Path) -> bool {
    data_dir.join(CATALOG_FILE).exists()
}
