//! `hegemony-state trust ...`: the org's trust policies for CI jobs (OpenID Connect
//! workloads) over the HTTP API: list, add, remove. A policy that matches a repository or
//! project by name only is warned about, here as on the page: names can be reused; the list
//! says the server's warnings too (policies made before a rule they break).

use std::collections::BTreeMap;

use anyhow::Context;
use clap::Subcommand;
use hegemony_state::domain::permission::Role;
use hegemony_state::domain::trust::TrustPolicy;
use reqwest::Method;
use serde_json::Value;

use crate::client::Client;
use crate::states::{confirm, print_json};
use crate::table;

#[derive(Subcommand)]
pub enum Command {
    /// The org's trust policies (admin).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Add a trust policy (admin): CI jobs whose ID tokens come from ISSUER for AUDIENCE and
    /// match every --claim open sessions on --state with --role.
    Add {
        name: String,
        /// The exact `iss` of the tokens, e.g. https://token.actions.githubusercontent.com.
        #[arg(long)]
        issuer: String,
        /// The audience the job requests its token for (its `aud`): it ends with /ORG, your
        /// org's name, e.g. https://state.example.com/orgs/acme.
        #[arg(long)]
        audience: String,
        /// A claim condition, CLAIM=VALUE (in VALUE, `*` for any run of characters but `/`
        /// and `:`, `**` for any run); repeatable. A condition on a claim the token lacks
        /// fails. On GitHub Actions and GitLab.com one must name the owner by id
        /// (repository_owner_id or repository_id; namespace_id or project_id).
        #[arg(long = "claim", value_parser = claim)]
        claims: Vec<(String, String)>,
        /// viewer or operator.
        #[arg(long)]
        role: Role,
        /// A state name pattern the sessions may reach (`*` for any run); repeatable.
        #[arg(long = "state", required = true)]
        states: Vec<String>,
        /// The longest session, in seconds (at most 86400).
        #[arg(long, default_value_t = 3600)]
        session_seconds: u64,
        #[arg(long)]
        json: bool,
    },
    /// Remove a trust policy (admin): no new session opens under it.
    Remove {
        name: String,
        #[arg(long)]
        yes: bool,
    },
}

fn claim(raw: &str) -> Result<(String, String), String> {
    raw.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("{raw:?}: write a claim condition as CLAIM=VALUE"))
}

/// Says what an admin should know of `policy` on stderr (stdout stays the answer).
fn warn(policy: &TrustPolicy) {
    for warning in policy.warnings() {
        eprintln!("warning: {warning}");
    }
}

pub async fn run(api: &crate::Api, command: Command) -> anyhow::Result<()> {
    let client = Client::new(api)?;
    match command {
        Command::List { json } => {
            let answer = client.get_json("/api/org/trust-policies").await?;
            let policies: Vec<TrustPolicy> = serde_json::from_value(answer["policies"].clone())
                .context("the server answered policies this command cannot read")?;
            // The server's warnings: it knows the org, and which rules a policy predates.
            for warning in answer["warnings"].as_array().into_iter().flatten() {
                if let Some(warning) = warning.as_str() {
                    eprintln!("warning: {warning}");
                }
            }
            if json {
                return print_json(&answer);
            }
            let rows: Vec<Vec<String>> = policies
                .iter()
                .map(|p| {
                    let claims: Vec<String> =
                        p.claims.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    vec![
                        p.name.clone(),
                        p.issuer.clone(),
                        p.audience.clone(),
                        p.role.as_str().to_owned(),
                        p.states.join(","),
                        p.session_seconds.to_string(),
                        claims.join(" "),
                    ]
                })
                .collect();
            table::print(
                &[
                    "NAME", "ISSUER", "AUDIENCE", "ROLE", "STATES", "SESSION", "CLAIMS",
                ],
                &rows,
            );
        }
        Command::Add {
            name,
            issuer,
            audience,
            claims,
            role,
            states,
            session_seconds,
            json,
        } => {
            let policy = TrustPolicy {
                name,
                issuer,
                audience,
                claims: claims.into_iter().collect::<BTreeMap<_, _>>(),
                role,
                states,
                session_seconds,
            };
            let body = serde_json::to_vec(&policy)?;
            let (_, answer) = client
                .send(
                    Method::POST,
                    "/api/org/trust-policies",
                    Some((body, "application/json")),
                )
                .await?;
            warn(&policy);
            if json {
                let answer: Value = serde_json::from_slice(&answer)?;
                return print_json(&answer);
            }
            println!("trust policy {} added", policy.name);
        }
        Command::Remove { name, yes } => {
            confirm(&format!("remove trust policy {name}"), yes)?;
            client
                .send(
                    Method::DELETE,
                    &format!("/api/org/trust-policies/{name}"),
                    None,
                )
                .await?;
            println!("trust policy {name} removed");
        }
    }
    Ok(())
}
