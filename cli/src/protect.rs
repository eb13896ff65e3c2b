//! `hegemony-state protect ...`: the org's protected states over the HTTP API: list, set,
//! remove. A protected state is changed only by CI sessions of the trust policies its rule
//! names (docs/ci.md, "Protected states").

use anyhow::Context;
use clap::Subcommand;
use hegemony_state::domain::protection::Protection;
use reqwest::Method;
use serde_json::{json, Value};

use crate::client::Client;
use crate::states::{confirm, print_json};
use crate::table;

#[derive(Subcommand)]
pub enum Command {
    /// The org's protected-state rules (admin).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Protect the states PATTERN matches (a state name, `*` for any run of characters)
    /// (admin): only CI sessions of the --policy trust policies may change them.
    Set {
        pattern: String,
        /// A trust policy whose sessions may change the states; repeatable.
        #[arg(long = "policy", required = true)]
        policies: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// Remove the rule of PATTERN (admin): its states are changed as roles allow again.
    Remove {
        pattern: String,
        #[arg(long)]
        yes: bool,
    },
}

pub async fn run(api: &crate::Api, command: Command) -> anyhow::Result<()> {
    let client = Client::new(api)?;
    match command {
        Command::List { json } => {
            let answer = client.get_json("/api/org/protected-states").await?;
            if json {
                return print_json(&answer);
            }
            let rules: Vec<Protection> = serde_json::from_value(answer["protections"].clone())
                .context("the server answered rules this command cannot read")?;
            let rows: Vec<Vec<String>> = rules
                .iter()
                .map(|r| vec![r.pattern.clone(), r.policies.join(",")])
                .collect();
            table::print(&["PATTERN", "POLICIES"], &rows);
        }
        Command::Set {
            pattern,
            policies,
            json,
        } => {
            let body = serde_json::to_vec(&json!({ "policies": policies }))?;
            let (_, answer) = client
                .send(
                    Method::PUT,
                    &format!("/api/org/protected-states/{pattern}"),
                    Some((body, "application/json")),
                )
                .await?;
            let answer: Value = serde_json::from_slice(&answer)?;
            if json {
                return print_json(&answer);
            }
            let rule: Protection = serde_json::from_value(answer)
                .context("the server answered a rule this command cannot read")?;
            println!(
                "states {} protected: only CI sessions of {} change them",
                rule.pattern,
                rule.policies.join(", ")
            );
        }
        Command::Remove { pattern, yes } => {
            confirm(&format!("remove the protection of {pattern}"), yes)?;
            client
                .send(
                    Method::DELETE,
                    &format!("/api/org/protected-states/{pattern}"),
                    None,
                )
                .await?;
            println!("states {pattern} no longer protected");
        }
    }
    Ok(())
}
