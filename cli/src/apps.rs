//! `hegemony-state apps ...`: an org's app states (Octo's remote state, docs/octo.md) over
//! the HTTP API: list them, an app state's archives and their files, download a file of the
//! newest archive or of any, and what an admin needs: force-unlock, delete an old archive.
//! Tables for people, `--json` for scripts; destructive commands ask to confirm unless
//! `--yes`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use reqwest::Method;
use serde_json::Value;

use crate::client::{items, Client};
use crate::states::{actor, confirm, print_json, text};
use crate::table;

#[derive(Subcommand)]
pub enum Command {
    /// The org's app states, their newest archives and locks.
    List {
        #[arg(long)]
        json: bool,
    },
    /// An app state's archives, newest first.
    Archives {
        app: String,
        #[arg(long)]
        json: bool,
    },
    /// The files of the newest archive (or of --commit), journal files with their command.
    Files {
        app: String,
        /// An archive's commit ID (from `apps archives`).
        #[arg(long)]
        commit: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// A file of the newest archive (or of --commit), exactly as uploaded, to stdout or a file.
    Download {
        app: String,
        file: String,
        #[arg(long)]
        commit: Option<String>,
        /// Write to this file instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Release whatever lock is held, sealing its change as force_unlocked.
    ForceUnlock {
        app: String,
        #[arg(long)]
        yes: bool,
        #[arg(long)]
        json: bool,
    },
    /// Delete an old archive (never the newest); the sweeper removes its files.
    DeleteArchive {
        app: String,
        commit: String,
        #[arg(long)]
        yes: bool,
    },
}

fn lock_text(lock: &Value) -> String {
    if lock.is_null() {
        return "-".into();
    }
    format!(
        "{} by {} since {}",
        text(&lock["commit_id"]),
        actor(&lock["holder"]),
        text(&lock["since"])
    )
}

fn print_files(files: &Value) {
    let rows: Vec<Vec<String>> = files
        .as_array()
        .map(|fs| {
            fs.iter()
                .map(|f| {
                    vec![
                        text(&f["name"]),
                        text(&f["kind"]),
                        text(&f["command"]),
                        text(&f["size"]),
                        text(&f["uploaded_in"]),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    table::print(&["NAME", "KIND", "COMMAND", "SIZE", "UPLOADED IN"], &rows);
}

pub async fn run(api: &crate::Api, command: Command) -> anyhow::Result<()> {
    let client = Client::new(api)?;
    match command {
        Command::List { json } => {
            let apps = items(&client.pages("/api/apps?limit=1000").await?, "apps");
            if json {
                return print_json(&serde_json::json!({ "apps": apps }));
            }
            let rows: Vec<Vec<String>> = apps
                .iter()
                .map(|a| {
                    vec![
                        text(&a["name"]),
                        text(&a["archives"]),
                        text(&a["newest"]["commit_id"]),
                        text(&a["newest"]["ended"]),
                        text(&a["newest"]["sealed_at"]),
                        lock_text(&a["lock"]),
                    ]
                })
                .collect();
            table::print(
                &["NAME", "ARCHIVES", "NEWEST", "ENDED", "SEALED", "LOCK"],
                &rows,
            );
        }
        Command::Archives { app, json } => {
            let path = format!("/api/apps/{app}/archives?limit=100");
            let archives = items(&client.pages(&path).await?, "archives");
            if json {
                return print_json(&serde_json::json!({ "app": app, "archives": archives }));
            }
            let rows: Vec<Vec<String>> = archives
                .iter()
                .map(|a| {
                    let files = a["files"].as_array().map_or(0, Vec::len);
                    vec![
                        text(&a["commit_id"]),
                        text(&a["ended"]),
                        actor(&a["holder"]),
                        text(&a["sealed_at"]),
                        files.to_string(),
                        text(&a["size"]),
                    ]
                })
                .collect();
            table::print(
                &["COMMIT", "ENDED", "HOLDER", "SEALED", "FILES", "SIZE"],
                &rows,
            );
        }
        Command::Files { app, commit, json } => {
            let archive = match &commit {
                Some(id) => {
                    client
                        .get_json(&format!("/api/apps/{app}/archives/{id}"))
                        .await?
                }
                None => {
                    let shown = client.get_json(&format!("/api/apps/{app}")).await?;
                    if shown["newest"].is_null() {
                        anyhow::bail!("app state {app} has no sealed archive yet");
                    }
                    shown["newest"].clone()
                }
            };
            if json {
                return print_json(&archive);
            }
            println!(
                "archive {} ({}), sealed {} by {}",
                text(&archive["commit_id"]),
                text(&archive["ended"]),
                text(&archive["sealed_at"]),
                actor(&archive["sealed_by"])
            );
            print_files(&archive["files"]);
        }
        Command::Download {
            app,
            file,
            commit,
            output,
        } => {
            let path = match &commit {
                Some(id) => format!("/api/apps/{app}/archives/{id}/files/{file}"),
                None => format!("/api/apps/{app}/files/{file}"),
            };
            let (_, bytes) = client.send(Method::GET, &path, None).await?;
            match output {
                Some(out) => {
                    std::fs::write(&out, &bytes)
                        .with_context(|| format!("writing {}", out.display()))?;
                    eprintln!(
                        "Wrote {file} of {app} to {} ({} bytes).",
                        out.display(),
                        bytes.len()
                    );
                }
                None => std::io::stdout().write_all(&bytes)?,
            }
        }
        Command::ForceUnlock { app, yes, json } => {
            confirm(&format!("Force-unlock app state {app}"), yes)?;
            let (_, bytes) = client
                .send(Method::POST, &format!("/api/apps/{app}/force-unlock"), None)
                .await?;
            let v: Value = serde_json::from_slice(&bytes)?;
            if json {
                return print_json(&v);
            }
            match v["released"].is_null() {
                true => println!("{app} was not locked; nothing was released."),
                false => println!(
                    "Released the lock {}; its change is sealed as archive {} (force_unlocked).",
                    lock_text(&v["released"]),
                    text(&v["archive"]["commit_id"])
                ),
            }
        }
        Command::DeleteArchive { app, commit, yes } => {
            confirm(&format!("Delete archive {commit} of app state {app}"), yes)?;
            client
                .send(
                    Method::DELETE,
                    &format!("/api/apps/{app}/archives/{commit}"),
                    None,
                )
                .await?;
            println!("Deleted archive {commit} of {app}.");
        }
    }
    Ok(())
}
