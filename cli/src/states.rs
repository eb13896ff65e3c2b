//! `hegemony-state states ...`: list, show, versions, what changed, outputs, download, roll back,
//! force-unlock, delete, the deleted states (list, restore, purge) and audit over the HTTP API. Tables for people, `--json` for scripts; destructive
//! commands ask to confirm unless `--yes`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Subcommand;
use reqwest::Method;
use serde_json::Value;

use crate::client::{items, Client};
use crate::{comparison, outputs, table};

#[derive(Subcommand)]
pub enum Command {
    /// The org's states, their latest versions and locks.
    List {
        #[arg(long)]
        json: bool,
    },
    /// One state: lineage, latest version, lock, and what you may do with it.
    Show {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// A state's versions, newest first.
    Versions {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// What changed in a version (the latest by default) since another (by default the one
    /// before): resources and outputs added, changed (which attributes) and removed.
    Changes {
        name: String,
        version: Option<u64>,
        /// The version to compare with.
        #[arg(long)]
        since: Option<u64>,
        #[arg(long)]
        json: bool,
    },
    /// The latest version's outputs: names, types, and the values of those not sensitive.
    Outputs {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// The content of a version (the latest by default), to stdout or a file.
    Download {
        name: String,
        #[arg(long)]
        version: Option<u64>,
        /// Write to this file instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Make an older version current again, as a new version.
    Rollback {
        name: String,
        version: u64,
        /// Do not ask to confirm.
        #[arg(long)]
        yes: bool,
        #[arg(long)]
        json: bool,
    },
    /// Release whatever lock is held on a state.
    ForceUnlock {
        name: String,
        #[arg(long)]
        yes: bool,
        #[arg(long)]
        json: bool,
    },
    /// Delete a state: it is kept as a deleted state for the server's retention, when an
    /// admin can restore it with all its versions.
    Delete {
        name: String,
        #[arg(long)]
        yes: bool,
    },
    /// The deleted states kept for a restore (admin): their ids, names, versions and purge
    /// dates.
    Deleted {
        #[arg(long)]
        json: bool,
    },
    /// Bring a deleted state back with all its versions, under its name or --name (admin).
    Restore {
        /// The deleted state's id, from `states deleted`.
        id: String,
        /// The name to restore it under, when a state has taken its name since.
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Purge a deleted state now: it can no longer be restored (admin).
    Purge {
        /// The deleted state's id, from `states deleted`.
        id: String,
        #[arg(long)]
        yes: bool,
        #[arg(long)]
        json: bool,
    },
    /// The audit log, of the org or of one state, newest first.
    Audit {
        name: Option<String>,
        /// Only entries of this action (e.g. state.imported).
        #[arg(long)]
        action: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
}

/// A value as a person reads it: `-` for none, text with its control characters escaped
/// ([`crate::table::printable`]).
pub(crate) fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => crate::table::printable(s),
        other => other.to_string(),
    }
}

pub(crate) fn actor(v: &Value) -> String {
    match v["kind"].as_str() {
        Some("user") => text(&v["user"]),
        // A CI job: which job, run, repository and ref, as its lock's Info says it.
        Some("workload") => serde_json::from_value::<hegemony_state::domain::Actor>(v.clone())
            .map_or_else(|_| "workload".into(), |a| a.describe()),
        Some(kind) => kind.to_owned(),
        None => "-".into(),
    }
}

fn lock_text(lock: &Value) -> String {
    if lock.is_null() {
        return "-".into();
    }
    format!(
        "{} by {} since {}",
        text(&lock["id"]),
        actor(&lock["holder"]),
        text(&lock["since"])
    )
}

/// A run's hold: its ID, the run (with its link when there is one) and since when.
fn hold_text(hold: &Value) -> String {
    if hold.is_null() {
        return "-".into();
    }
    let link = hold["run_url"]
        .as_str()
        .map(|url| format!(" {url}"))
        .unwrap_or_default();
    format!(
        "{} (run {}{link}) since {}",
        text(&hold["id"]),
        text(&hold["run"]),
        text(&hold["since"])
    )
}

/// What stands in the way of others: the lock, the hold, or both.
fn locked_text(state: &Value) -> String {
    match (state["lock"].is_null(), state["hold"].is_null()) {
        (_, true) => lock_text(&state["lock"]),
        (true, false) => hold_text(&state["hold"]),
        (false, false) => format!(
            "{}; {}",
            lock_text(&state["lock"]),
            hold_text(&state["hold"])
        ),
    }
}

pub(crate) fn print_json(v: &Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// Asks to confirm a destructive action on a terminal; without one, `--yes` is required.
pub(crate) fn confirm(what: &str, yes: bool) -> anyhow::Result<()> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        bail!("{what}: refusing without --yes (there is no terminal to confirm on)");
    }
    eprint!("{what}? Type yes to confirm: ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    if answer.trim() != "yes" {
        bail!("not confirmed; nothing was done");
    }
    Ok(())
}

/// `version`, or the state's latest when none is given.
async fn version_or_latest(
    client: &Client,
    name: &str,
    version: Option<u64>,
) -> anyhow::Result<u64> {
    match version {
        Some(v) => Ok(v),
        None => client.get_json(&format!("/api/tf-states/{name}")).await?["latest_version"]
            .as_u64()
            .context("the state has no version"),
    }
}

pub async fn run(api: &crate::Api, command: Command) -> anyhow::Result<()> {
    let client = Client::new(api)?;
    match command {
        Command::List { json } => {
            let pages = client.pages("/api/tf-states?limit=1000").await?;
            let states = items(&pages, "states");
            // Every page names the org; the first page is always read.
            let org = pages.last().map_or(Value::Null, |page| page["org"].clone());
            if json {
                return print_json(&serde_json::json!({"org": org, "states": states}));
            }
            let rows: Vec<Vec<String>> = states
                .iter()
                .map(|s| {
                    vec![
                        text(&s["name"]),
                        text(&s["latest_version"]),
                        text(&s["serial"]),
                        text(&s["size"]),
                        text(&s["updated_at"]),
                        actor(&s["updated_by"]),
                        locked_text(s),
                    ]
                })
                .collect();
            table::print(
                &[
                    "NAME",
                    "VERSION",
                    "SERIAL",
                    "SIZE",
                    "UPDATED",
                    "BY",
                    "LOCK OR HOLD",
                ],
                &rows,
            );
        }
        Command::Show { name, json } => {
            let s = client.get_json(&format!("/api/tf-states/{name}")).await?;
            if json {
                return print_json(&s);
            }
            for (label, value) in [
                ("name", text(&s["name"])),
                ("lineage", text(&s["lineage"])),
                ("latest version", text(&s["latest_version"])),
                ("serial", text(&s["serial"])),
                ("size", text(&s["size"])),
                (
                    "updated",
                    format!("{} by {}", text(&s["updated_at"]), actor(&s["updated_by"])),
                ),
                ("opentofu-encrypted", text(&s["opentofu_encrypted"])),
                ("lock", lock_text(&s["lock"])),
                ("hold", hold_text(&s["hold"])),
            ] {
                println!("{label:<20}{value}");
            }
            let allowed: Vec<&str> = s["allowed_actions"]
                .as_object()
                .map(|o| {
                    o.iter()
                        .filter(|(_, v)| v.as_bool() == Some(true))
                        .map(|(k, _)| k.as_str())
                        .collect()
                })
                .unwrap_or_default();
            println!(
                "{:<20}{}",
                "you may",
                if allowed.is_empty() {
                    "-".into()
                } else {
                    allowed.join(", ")
                }
            );
        }
        Command::Versions { name, json } => {
            let v = client
                .get_json(&format!("/api/tf-states/{name}/versions"))
                .await?;
            if json {
                return print_json(&v);
            }
            let rows: Vec<Vec<String>> = v["versions"]
                .as_array()
                .map(|vs| {
                    vs.iter()
                        .map(|v| {
                            vec![
                                text(&v["version"]),
                                text(&v["serial"]),
                                text(&v["size"]),
                                text(&v["terraform_version"]),
                                text(&v["instances"]),
                                text(&v["source"]),
                                actor(&v["writer"]),
                                text(&v["created_at"]),
                                text(&v["change"]["ended"]),
                                text(&v["change"]["saves"]),
                            ]
                        })
                        .collect()
                })
                .unwrap_or_default();
            table::print(
                &[
                    "VERSION",
                    "SERIAL",
                    "SIZE",
                    "TERRAFORM",
                    "INSTANCES",
                    "SOURCE",
                    "WRITER",
                    "CREATED",
                    "ENDED",
                    "SAVES",
                ],
                &rows,
            );
        }
        Command::Changes {
            name,
            version,
            since,
            json,
        } => {
            let version = version_or_latest(&client, &name, version).await?;
            let mut path = format!("/api/tf-states/{name}/versions/{version}/changes");
            if let Some(since) = since {
                path.push_str(&format!("?since={since}"));
            }
            let answer = client.get_json(&path).await?;
            if json {
                return print_json(&answer);
            }
            for line in comparison::render(&answer) {
                println!("{}", crate::table::printable(&line));
            }
        }
        Command::Outputs { name, json } => {
            let answer = client
                .get_json(&format!("/api/tf-states/{name}/outputs"))
                .await?;
            if json {
                return print_json(&answer);
            }
            println!("{}\n", outputs::heading(&name, &answer));
            let rows = outputs::rows(&answer);
            if rows.is_empty() {
                println!("No outputs.");
            } else {
                table::print(&["NAME", "TYPE", "VALUE"], &rows);
            }
        }
        Command::Download {
            name,
            version,
            output,
        } => {
            let version = version_or_latest(&client, &name, version).await?;
            let (_, bytes) = client
                .send(
                    Method::GET,
                    &format!("/api/tf-states/{name}/versions/{version}/content"),
                    None,
                )
                .await?;
            match output {
                Some(path) => {
                    std::fs::write(&path, &bytes)
                        .with_context(|| format!("writing {}", path.display()))?;
                    eprintln!(
                        "Wrote version {version} of {name} to {} ({} bytes).",
                        path.display(),
                        bytes.len()
                    );
                }
                None => std::io::stdout().write_all(&bytes)?,
            }
        }
        Command::Rollback {
            name,
            version,
            yes,
            json,
        } => {
            confirm(&format!("Roll {name} back to version {version}"), yes)?;
            let body = serde_json::to_vec(&serde_json::json!({"version": version}))?;
            let (_, bytes) = client
                .send(
                    Method::POST,
                    &format!("/api/tf-states/{name}/rollback"),
                    Some((body, "application/json")),
                )
                .await?;
            let v: Value = serde_json::from_slice(&bytes)?;
            if json {
                return print_json(&v);
            }
            println!(
                "Rolled {name} back to version {version}: it is now version {} with serial {}.",
                text(&v["version"]),
                text(&v["serial"])
            );
        }
        Command::ForceUnlock { name, yes, json } => {
            confirm(&format!("Force-unlock {name}"), yes)?;
            let (_, bytes) = client
                .send(
                    Method::POST,
                    &format!("/api/tf-states/{name}/force-unlock"),
                    None,
                )
                .await?;
            let v: Value = serde_json::from_slice(&bytes)?;
            if json {
                return print_json(&v);
            }
            match v["released"]["lock"].is_null() {
                true => println!("{name} was not locked; nothing was released."),
                false => println!("Released the lock {}.", lock_text(&v["released"]["lock"])),
            }
        }
        Command::Delete { name, yes } => {
            confirm(&format!("Delete {name}"), yes)?;
            client
                .send(Method::DELETE, &format!("/api/tf-states/{name}"), None)
                .await?;
            println!("Deleted {name}. An admin can restore it within the server's retention: `hegemony-state states deleted` lists it.");
        }
        Command::Deleted { json } => {
            let pages = client.pages("/api/deleted-states?limit=1000").await?;
            let deleted = items(&pages, "deleted_states");
            if json {
                return print_json(&serde_json::json!({"deleted_states": deleted}));
            }
            if deleted.is_empty() {
                println!("No deleted states are kept.");
                return Ok(());
            }
            let rows: Vec<Vec<String>> = deleted
                .iter()
                .map(|d| {
                    vec![
                        text(&d["id"]),
                        text(&d["name"]),
                        text(&d["deleted_at"]),
                        actor(&d["deleted_by"]),
                        text(&d["versions"]),
                        text(&d["bytes"]),
                        text(&d["purge_at"]),
                    ]
                })
                .collect();
            table::print(
                &[
                    "ID",
                    "NAME",
                    "DELETED",
                    "BY",
                    "VERSIONS",
                    "BYTES",
                    "PURGED AT",
                ],
                &rows,
            );
        }
        Command::Restore { id, name, json } => {
            let body = match &name {
                Some(name) => serde_json::json!({"name": name}),
                None => serde_json::json!({}),
            };
            let (_, bytes) = client
                .send(
                    Method::POST,
                    &format!("/api/deleted-states/{id}/restore"),
                    Some((serde_json::to_vec(&body)?, "application/json")),
                )
                .await?;
            let v: Value = serde_json::from_slice(&bytes)?;
            if json {
                return print_json(&v);
            }
            println!(
                "Restored {} with its {} versions; version {} is current.",
                text(&v["name"]),
                text(&v["versions"]),
                text(&v["version"])
            );
        }
        Command::Purge { id, yes, json } => {
            confirm(
                &format!("Purge deleted state {id} (it can no longer be restored)"),
                yes,
            )?;
            let (_, bytes) = client
                .send(Method::DELETE, &format!("/api/deleted-states/{id}"), None)
                .await?;
            let v: Value = serde_json::from_slice(&bytes)?;
            if json {
                return print_json(&v);
            }
            println!(
                "Purged {} ({} versions): the sweeper deletes them.",
                text(&v["name"]),
                text(&v["versions"])
            );
        }
        Command::Audit {
            name,
            action,
            limit,
            json,
        } => {
            let mut path = match &name {
                // The org's log by name: a deleted state's entries are there too.
                Some(n) => format!("/api/audit?state={n}&limit={limit}"),
                None => format!("/api/audit?limit={limit}"),
            };
            if let Some(a) = &action {
                path.push_str(&format!("&action={a}"));
            }
            let page = client.get_json(&path).await?;
            if json {
                return print_json(&page);
            }
            let rows: Vec<Vec<String>> = page["entries"]
                .as_array()
                .map(|es| {
                    es.iter()
                        .map(|e| {
                            vec![
                                text(&e["at"]),
                                text(&e["action"]),
                                actor(&e["actor"]),
                                text(&e["state"]),
                                text(&e["version"]),
                            ]
                        })
                        .collect()
                })
                .unwrap_or_default();
            table::print(&["AT", "ACTION", "ACTOR", "STATE", "VERSION"], &rows);
        }
    }
    Ok(())
}
