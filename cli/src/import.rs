//! `hegemony-state import`: moves many existing state files in as new states.
//!
//! Every file is named and checked before anything is written: a state is named after its
//! file without `.tfstate`/`.json`, and a file named `terraform.tfstate` after its folder
//! path relative to the argument, joined with `-`. Illegal names and collisions are refused
//! with the reason; so is a file that is not a state. Then the states are imported in
//! parallel with a progress bar (files and bytes); a name already there with the same content
//! counts as done, so running the import twice imports nothing new.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::bail;
use clap::Args;
use hegemony_state::domain::document::sniff;
use hegemony_state::domain::name::StateName;
use indicatif::{ProgressBar, ProgressStyle};
use reqwest::Method;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::client::{ApiError, Client};

#[derive(Args)]
pub struct Options {
    /// State files, and folders to search for them (`*.tfstate`, `*.json`).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    #[command(flatten)]
    api: crate::Api,
    /// How many imports run at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    jobs: u16,
    /// Check every file (a state? a legal, free name?) without writing anything.
    #[arg(long)]
    dry_run: bool,
    /// The state's name, for a single file.
    #[arg(long)]
    name: Option<String>,
}

/// What became of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Imported { version: u64 },
    WouldImport,
    AlreadyThere,
    Refused(String),
}

struct Candidate {
    name: String,
    file: PathBuf,
}

/// The name a file gets: its stem, or for `terraform.tfstate` its folder path relative to
/// the argument, joined with `-` (the argument folder's own name at its top).
fn derive_name(root: &Path, file: &Path) -> String {
    let file_name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if file_name == "terraform.tfstate" {
        let folder = file.parent().unwrap_or(Path::new(""));
        let relative = folder.strip_prefix(root).unwrap_or(folder);
        let parts: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .filter(|c| !c.is_empty() && c != ".")
            .collect();
        if !parts.is_empty() {
            return parts.join("-");
        }
        let absolute = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_owned());
        return absolute
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
    }
    for suffix in [".tfstate", ".json"] {
        if let Some(stem) = file_name.strip_suffix(suffix) {
            return stem.to_owned();
        }
    }
    file_name
}

fn is_state_file(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.ends_with(".tfstate") || name.ends_with(".json")
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<Candidate>) -> anyhow::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(root, &path, out)?;
        } else if is_state_file(&path) {
            out.push(Candidate {
                name: derive_name(root, &path),
                file: path,
            });
        }
    }
    Ok(())
}

/// Every file the arguments name, with its derived name.
fn collect(options: &Options) -> anyhow::Result<Vec<Candidate>> {
    let mut out = Vec::new();
    for path in &options.paths {
        if path.is_dir() {
            walk(path, path, &mut out)?;
        } else if path.is_file() {
            let root = path.parent().unwrap_or(Path::new("."));
            out.push(Candidate {
                name: derive_name(root, path),
                file: path.clone(),
            });
        } else {
            bail!("{} is neither a file nor a folder", path.display());
        }
    }
    if let Some(name) = &options.name {
        if out.len() != 1 {
            bail!("--name names one state; the paths hold {} files", out.len());
        }
        out[0].name = name.clone();
    }
    Ok(out)
}

/// Refusals decided before anything is written: illegal names and collisions.
fn check_names(candidates: &[Candidate]) -> Vec<Option<String>> {
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, c) in candidates.iter().enumerate() {
        by_name.entry(c.name.as_str()).or_default().push(i);
    }
    candidates
        .iter()
        .map(|c| {
            if let Err(e) = StateName::parse(&c.name) {
                return Some(e.to_string());
            }
            let same = &by_name[c.name.as_str()];
            (same.len() > 1).then(|| {
                let others: Vec<String> = same
                    .iter()
                    .map(|&i| candidates[i].file.display().to_string())
                    .filter(|f| *f != c.file.display().to_string())
                    .collect();
                format!("name collision with {}", others.join(", "))
            })
        })
        .collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether the state `name` already holds exactly `sha256` as its latest version.
async fn same_content(client: &Client, name: &str, sha256: &str) -> anyhow::Result<bool> {
    let versions = client
        .get_json(&format!("/api/tf-states/{name}/versions"))
        .await?;
    Ok(versions["versions"][0]["sha256"].as_str() == Some(sha256))
}

async fn import_one(client: &Client, name: &str, bytes: Vec<u8>, dry_run: bool) -> Outcome {
    let sha256 = sha256_hex(&bytes);
    if let Err(e) = sniff(&bytes) {
        return Outcome::Refused(e.to_string());
    }
    let result = if dry_run {
        match client.get_json(&format!("/api/tf-states/{name}")).await {
            Ok(_) => Err(anyhow::Error::new(ApiError {
                status: 409,
                code: "state_exists".into(),
                message: String::new(),
            })),
            Err(e) => match e.downcast_ref::<ApiError>() {
                Some(api) if api.status == 404 => return Outcome::WouldImport,
                _ => Err(e),
            },
        }
    } else {
        client
            .send(
                Method::POST,
                &format!("/api/tf-states/{name}/import"),
                Some((bytes, "application/json")),
            )
            .await
            .and_then(|(_, body)| Ok(serde_json::from_slice::<serde_json::Value>(&body)?))
    };
    match result {
        Ok(v) => Outcome::Imported {
            version: v["version"].as_u64().unwrap_or(0),
        },
        Err(e) => match e.downcast_ref::<ApiError>() {
            Some(api) if api.code == "state_exists" => {
                match same_content(client, name, &sha256).await {
                    Ok(true) => Outcome::AlreadyThere,
                    Ok(false) => {
                        Outcome::Refused("the name is in use by a state with other content".into())
                    }
                    Err(e) => Outcome::Refused(format!("{e:#}")),
                }
            }
            _ => Outcome::Refused(format!("{e:#}")),
        },
    }
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    let client = Client::new(&options.api)?;
    let candidates = collect(&options)?;
    if candidates.is_empty() {
        bail!("no state files (*.tfstate, *.json) under the given paths");
    }
    let early = check_names(&candidates);
    let sizes: Vec<u64> = candidates
        .iter()
        .map(|c| std::fs::metadata(&c.file).map(|m| m.len()).unwrap_or(0))
        .collect();
    let total_bytes: u64 = candidates
        .iter()
        .zip(&early)
        .zip(&sizes)
        .filter(|((_, e), _)| e.is_none())
        .map(|(_, s)| *s)
        .sum();
    let to_send = early.iter().filter(|e| e.is_none()).count();
    let bar = ProgressBar::new(total_bytes);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {msg}",
        )
        .expect("a valid template"),
    );
    bar.set_message(format!("0/{to_send} files"));
    let semaphore = Arc::new(Semaphore::new(options.jobs as usize));
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for ((candidate, refusal), size) in candidates.iter().zip(&early).zip(&sizes) {
        if let Some(reason) = refusal {
            tasks.push(tokio::spawn(std::future::ready(Outcome::Refused(
                reason.clone(),
            ))));
            continue;
        }
        let (client, semaphore, bar, done) =
            (client.clone(), semaphore.clone(), bar.clone(), done.clone());
        let (name, file, size, dry_run) = (
            candidate.name.clone(),
            candidate.file.clone(),
            *size,
            options.dry_run,
        );
        tasks.push(tokio::spawn(async move {
            let _permit = semaphore
                .acquire_owned()
                .await
                .expect("the semaphore is never closed");
            let outcome = match tokio::fs::read(&file).await {
                Ok(bytes) => import_one(&client, &name, bytes, dry_run).await,
                Err(e) => Outcome::Refused(format!("cannot read the file: {e}")),
            };
            let n = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            bar.inc(size);
            bar.set_message(format!("{n}/{to_send} files"));
            outcome
        }));
    }
    let mut outcomes = Vec::with_capacity(tasks.len());
    for task in tasks {
        outcomes.push(task.await?);
    }
    bar.finish_and_clear();
    summarize(&candidates, &outcomes, options.dry_run)
}

fn summarize(candidates: &[Candidate], outcomes: &[Outcome], dry_run: bool) -> anyhow::Result<()> {
    let rows: Vec<Vec<String>> = candidates
        .iter()
        .zip(outcomes)
        .map(|(c, o)| {
            let (result, detail) = match o {
                Outcome::Imported { version } => {
                    ("imported".to_owned(), format!("version {version}"))
                }
                Outcome::WouldImport => ("would import".to_owned(), String::new()),
                Outcome::AlreadyThere => ("already there".to_owned(), "same content".to_owned()),
                Outcome::Refused(why) => ("refused".to_owned(), why.clone()),
            };
            vec![c.name.clone(), c.file.display().to_string(), result, detail]
        })
        .collect();
    crate::table::print(&["NAME", "FILE", "RESULT", "DETAIL"], &rows);
    let count = |f: fn(&Outcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
    let imported = count(|o| matches!(o, Outcome::Imported { .. }));
    let would = count(|o| matches!(o, Outcome::WouldImport));
    let there = count(|o| matches!(o, Outcome::AlreadyThere));
    let refused = count(|o| matches!(o, Outcome::Refused(_)));
    println!();
    if dry_run {
        println!("dry run: {would} would be imported, {there} already there, {refused} refused; nothing was written");
    } else if imported == 0 && refused == 0 {
        println!("nothing new to import: all {there} states are already there");
    } else {
        println!("imported {imported}, already there {there}, refused {refused}");
    }
    if refused > 0 {
        bail!("{refused} of {} files were refused", outcomes.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_files_or_from_folders_of_terraform_tfstate() {
        let root = Path::new("/states");
        assert_eq!(
            derive_name(root, Path::new("/states/network-core.tfstate")),
            "network-core"
        );
        assert_eq!(derive_name(root, Path::new("/states/sub/app.json")), "app");
        assert_eq!(
            derive_name(root, Path::new("/states/prod/eu/terraform.tfstate")),
            "prod-eu"
        );
    }

    #[test]
    fn collisions_and_illegal_names_are_refused_before_anything_is_written() {
        let c = |name: &str, file: &str| Candidate {
            name: name.into(),
            file: file.into(),
        };
        let checks = check_names(&[
            c("a", "x/a.tfstate"),
            c("a", "y/a.json"),
            c(".bad", "z/.bad.tfstate"),
            c("ok", "ok.tfstate"),
        ]);
        assert!(checks[0].as_deref().unwrap().contains("y/a.json"));
        assert!(checks[1].as_deref().unwrap().contains("x/a.tfstate"));
        assert!(checks[2].as_deref().unwrap().contains("invalid state name"));
        assert!(checks[3].is_none());
    }
}
