//! The layer rules of `shared/src`, held by a test rather than by review alone: each
//! top-level module (a layer, or a small module every layer may use) names the modules it
//! may import, and every `crate::` path outside test code must stay inside them. The domain
//! imports nothing above it; adapters nothing above ports, domain and crypto; the service
//! never http, adapters or wiring; http never adapters or wiring.
//!
//! It reads the source as text (`crate::x` in paths and in `use crate::{x, ..}` groups), so
//! a new top-level module must be given its row here before the test passes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The modules every layer may use: ids, following a paged listing, and the parsed settings
/// the adapters read.
const LEAVES: &[&str] = &["ids", "paging", "key_template", "transit_settings"];

/// Each top-level module of the crate and what it may import besides itself and
/// [`LEAVES`]; `None` for the one module that may import anything (start-up wiring).
const LAYERS: &[(&str, Option<&[&str]>)] = &[
    ("domain", Some(&[])),
    ("ports", Some(&["domain"])),
    ("crypto", Some(&["domain", "ports"])),
    ("adapters", Some(&["domain", "ports", "crypto"])),
    ("service", Some(&["domain", "ports", "crypto"])),
    (
        "http",
        Some(&["domain", "ports", "crypto", "service", "config"]),
    ),
    ("config", Some(&["domain", "crypto"])),
    ("ids", Some(&[])),
    ("paging", Some(&[])),
    ("key_template", Some(&[])),
    ("transit_settings", Some(&[])),
    ("wiring", None),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text of a file without its unit tests, which may import anything. A `tests.rs` (or a
/// file under a `tests/` folder) beside the code is all test.
fn production_text(path: &Path) -> String {
    let is_test_file = path.file_stem().is_some_and(|s| s == "tests")
        || path.components().any(|c| c.as_os_str() == "tests");
    if is_test_file {
        return String::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// The top-level modules `text` reaches through `crate::`.
fn imported(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        // `hegemony_state::crate::` never occurs; `my_crate::` is another name.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `use crate::{a::B, b, c::{..}}`: the first name of each top-level item.
            let mut depth = 0;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && (c.is_alphabetic() || c == '_') => {
                        found.insert(identifier(&group[i..]).to_owned());
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name = identifier(rest);
            if !name.is_empty() {
                found.insert(name.to_owned());
            }
        }
    }
    found
}

fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

#[test]
fn every_module_of_the_crate_imports_only_what_its_layer_may() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers: BTreeMap<&str, Option<&[&str]>> = LAYERS.iter().copied().collect();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut breaks = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let first = relative.components().next().unwrap().as_os_str();
        let top = first.to_str().unwrap().trim_end_matches(".rs");
        if top == "lib" {
            continue;
        }
        let allowed = layers.get(top).unwrap_or_else(|| {
            panic!(
                "{top} (in {}) is a new top-level module: give it its row in LAYERS",
                relative.display()
            )
        });
        let Some(allowed) = allowed else { continue };
        for module in imported(&production_text(file)) {
            if module == top || module == "self" || LEAVES.contains(&module.as_str()) {
                continue;
            }
            if !allowed.contains(&module.as_str()) {
                breaks.push(format!("{} imports crate::{module}", relative.display()));
            }
        }
    }
    assert!(
        breaks.is_empty(),
        "imports across the layer rules:\n{}",
        breaks.join("\n")
    );
}

#[test]
fn the_reader_finds_paths_and_groups() {
    let text = "use crate::domain::Refusal;\nuse crate::{ports::Catalog, service::{a, b}, ids};\nlet x = crate::http::error(1);\nlet y = my_crate::adapters::x;";
    let found: Vec<String> = imported(text).into_iter().collect();
    assert_eq!(found, ["domain", "http", "ids", "ports", "service"]);
}
