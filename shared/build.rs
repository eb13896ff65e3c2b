//! Embeds the built web pages (`web/dist`, made by `make web`) in the library as a table of
//! files, so one binary serves them with the API. Without them the table is empty and the
//! build still compiles: the server then answers `/` with a page that says how to build them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let web = manifest
        .parent()
        .expect("shared/ is in the workspace")
        .join("web");
    let dist = web.join("dist");
    let mut files = Vec::new();
    if dist.join("index.html").is_file() {
        collect(&dist, &dist, &mut files);
        println!("cargo:rerun-if-changed={}", dist.display());
    } else {
        // A missing path would make cargo rerun this script (and rebuild the crate) on every
        // build; watching web/ itself notices when web/dist appears.
        println!("cargo:rerun-if-changed={}", web.display());
    }
    files.sort();
    let mut table = String::from(
        "/// The built pages, by path from the site's root: empty when web/dist was not built.\n\
         static FILES: &[(&str, &[u8])] = &[\n",
    );
    for (route, file) in &files {
        writeln!(table, "    ({route:?}, include_bytes!({file:?})),").expect("to a String");
    }
    table.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it")).join("pages.rs");
    std::fs::write(out, table).expect("write the pages table");
}

/// Every file under `dir`, as (`/path/from/root`, absolute file name).
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, String)>) {
    let entries = std::fs::read_dir(dir).expect("read web/dist");
    for entry in entries {
        let path = entry.expect("read web/dist").path();
        if path.is_dir() {
            collect(root, &path, files);
        } else {
            let relative = path.strip_prefix(root).expect("under web/dist");
            let route = format!("/{}", relative.to_string_lossy().replace('\\', "/"));
            files.push((route, path.to_string_lossy().into_owned()));
        }
    }
}
