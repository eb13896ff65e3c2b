//! `hegemony-state resources ...`: the org's inventory over the HTTP API: find which state
//! manages a resource, and the objects two states manage (docs/inventory.md). Only
//! addresses, types, providers and state names come back: the index holds no value.

use clap::Subcommand;
use serde_json::{json, Value};

use crate::client::{encoded, Client};
use crate::states::{print_json, text};
use crate::table;

#[derive(Subcommand)]
pub enum Command {
    /// Resource instances across the org's states, in (state, address) order (viewer):
    /// QUERY matches any part of an address, case-insensitively; the filters narrow it.
    Search {
        query: Option<String>,
        /// Exactly this resource type (`aws_s3_bucket`).
        #[arg(long = "type")]
        resource_type: Option<String>,
        /// The provider: its source address, or its `namespace/type`, or its type
        /// (`hashicorp/aws` and `aws` both match `registry.terraform.io/hashicorp/aws`).
        #[arg(long)]
        provider: Option<String>,
        /// Instances in exactly this module path (`module.net`, `module.net.module.subnets`;
        /// `''` for the root module's).
        #[arg(long)]
        module: Option<String>,
        /// Instances of this state only.
        #[arg(long)]
        state: Option<String>,
        /// At most this many instances (the first in order); all of them when not given.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        limit: Option<u64>,
        #[arg(long)]
        json: bool,
    },
    /// Objects managed by two or more states: instances whose identities are equal
    /// (viewer). Exits 0 either way; --json for scripts.
    Conflicts {
        /// Only the objects this state shares with others.
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(api: &crate::Api, command: Command) -> anyhow::Result<()> {
    let client = Client::new(api)?;
    match command {
        Command::Search {
            query,
            resource_type,
            provider,
            module,
            state,
            limit,
            json,
        } => {
            let path = search_path(&[
                ("q", query),
                ("type", resource_type),
                ("provider", provider),
                ("module", module),
                ("state", state),
            ]);
            let (found, more) = search(&client, &path, limit).await?;
            if more {
                eprintln!(
                    "the first {} instances; more match (a larger --limit, or narrower filters)",
                    found.len()
                );
            }
            if json {
                return print_json(&json!({ "resources": found }));
            }
            if found.is_empty() {
                eprintln!("no resource matches");
                return Ok(());
            }
            let rows: Vec<Vec<String>> = found
                .iter()
                .map(|r| {
                    vec![
                        text(&r["state"]),
                        text(&r["address"]),
                        text(&r["type"]),
                        text(&r["provider"]),
                        text(&r["version"]),
                    ]
                })
                .collect();
            table::print(&["STATE", "ADDRESS", "TYPE", "PROVIDER", "VERSION"], &rows);
        }
        Command::Conflicts { state, json } => {
            let path = match state {
                Some(name) => format!("/api/resources/conflicts?state={}", encoded(&name)),
                None => "/api/resources/conflicts".to_owned(),
            };
            let answer = client.get_json(&path).await?;
            if json {
                return print_json(&answer);
            }
            let conflicts = answer["conflicts"].as_array().cloned().unwrap_or_default();
            if conflicts.is_empty() {
                println!("no object is managed by two states");
                return Ok(());
            }
            println!(
                "{} managed by more than one state:",
                objects(conflicts.len())
            );
            for conflict in &conflicts {
                println!();
                println!("{}", text(&conflict["type"]));
                let rows: Vec<Vec<String>> = conflict["instances"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .map(|i| vec![format!("  {}", text(&i["state"])), text(&i["address"])])
                    .collect();
                table::print(&["  STATE", "ADDRESS"], &rows);
            }
        }
    }
    Ok(())
}

/// The instances a search finds, page after page, at most `limit` of them; and whether
/// more match past it.
async fn search(
    client: &Client,
    path: &str,
    limit: Option<u64>,
) -> anyhow::Result<(Vec<Value>, bool)> {
    let mut found = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let left = limit.map_or(PAGE, |l| (l - found.len() as u64).min(PAGE));
        let separator = if path.ends_with('?') { "" } else { "&" };
        let mut page_path = format!("{path}{separator}limit={left}");
        if let Some(c) = &cursor {
            page_path.push_str(&format!("&cursor={}", encoded(c)));
        }
        let page = client.get_json(&page_path).await?;
        found.extend(page["resources"].as_array().cloned().unwrap_or_default());
        cursor = page["next_cursor"].as_str().map(str::to_owned);
        let full = limit.is_some_and(|l| found.len() as u64 >= l);
        if cursor.is_none() || full {
            return Ok((found, full && cursor.is_some()));
        }
    }
}

/// The largest page the API serves: a search for a type across a big org is thousands of
/// rows.
const PAGE: u64 = 1000;

/// The path of a search with the filters given, without its page's limit and cursor.
fn search_path(filters: &[(&str, Option<String>)]) -> String {
    let mut path = "/api/resources?".to_owned();
    for (name, value) in filters {
        // An empty module is the root module; any other empty filter is none.
        if let Some(value) = value
            .as_deref()
            .filter(|v| !v.is_empty() || *name == "module")
        {
            if !path.ends_with('?') {
                path.push('&');
            }
            path.push_str(&format!("{name}={}", encoded(value)));
        }
    }
    path
}

fn objects(n: usize) -> String {
    if n == 1 {
        "1 object".to_owned()
    } else {
        format!("{n} objects")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_path_encodes_its_filters_and_leaves_out_empty_ones() {
        let path = search_path(&[
            ("q", Some("module.net[\"a b\"]".to_owned())),
            ("type", None),
            ("provider", Some(String::new())),
            ("state", Some("prod-net".to_owned())),
        ]);
        assert_eq!(
            path,
            "/api/resources?q=module.net%5B%22a%20b%22%5D&state=prod-net"
        );
        assert_eq!(search_path(&[("q", None)]), "/api/resources?");
        assert_eq!(
            search_path(&[
                ("module", Some(String::new())),
                ("type", Some("aws_vpc".into()))
            ]),
            "/api/resources?module=&type=aws_vpc",
            "an empty module is the root module"
        );
    }

    #[test]
    fn objects_are_counted_in_words() {
        assert_eq!(objects(1), "1 object");
        assert_eq!(objects(3), "3 objects");
    }
}
