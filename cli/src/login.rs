//! `hegemony-state login --oidc`: a CI job's step that finds the job's OpenID Connect ID
//! token the way its CI system hands it out, exchanges it for a workload session, and prints
//! the session token (for `TF_HTTP_PASSWORD`). GitHub Actions hands out a request URL and
//! token (`ACTIONS_ID_TOKEN_REQUEST_URL`, `ACTIONS_ID_TOKEN_REQUEST_TOKEN`; the job needs
//! `permissions: id-token: write`); GitLab CI puts each of the job's `id_tokens` in the
//! variable it names. The ID token itself is never printed.

use anyhow::{bail, Context};
use clap::Args;
use serde_json::Value;

#[derive(Args)]
pub struct Options {
    /// Exchange the job's OpenID Connect ID token (the only login there is today).
    #[arg(long, required = true)]
    oidc: bool,
    #[arg(long, env = "HEGEMONY_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The audience to request a GitHub Actions ID token for (the trust policy's).
    #[arg(long, env = "HEGEMONY_OIDC_AUDIENCE")]
    audience: Option<String>,
    /// The variable holding the job's ID token (GitLab CI: the name under `id_tokens`).
    #[arg(long, env = "HEGEMONY_ID_TOKEN_VARIABLE")]
    id_token_variable: Option<String>,
    /// Print the whole answer (token, expires_at, org, role, states) as JSON.
    #[arg(long)]
    json: bool,
}

fn variable(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The job's ID token: from the named variable, else from GitHub's request URL.
async fn id_token(http: &reqwest::Client, options: &Options) -> anyhow::Result<String> {
    if let Some(name) = &options.id_token_variable {
        return variable(name).with_context(|| {
            format!("the variable {name} is empty or unset: give the job an id_tokens entry of that name (GitLab CI)")
        });
    }
    let (Some(url), Some(request_token)) = (
        variable("ACTIONS_ID_TOKEN_REQUEST_URL"),
        variable("ACTIONS_ID_TOKEN_REQUEST_TOKEN"),
    ) else {
        bail!("no ID token found: on GitHub Actions give the job `permissions: id-token: write`; on GitLab CI name its id_tokens variable with --id-token-variable");
    };
    let audience = options.audience.as_deref().context(
        "GitHub Actions makes the ID token for an audience: give --audience (the trust policy's)",
    )?;
    let separator = if url.contains('?') { '&' } else { '?' };
    let encoded = crate::client::encoded(audience);
    let answer = http
        .get(format!("{url}{separator}audience={encoded}"))
        .bearer_auth(request_token)
        .send()
        .await
        .context("requesting the job's ID token from GitHub Actions")?;
    let status = answer.status();
    if !status.is_success() {
        bail!("GitHub Actions refused the ID token request ({status}): does the job have `permissions: id-token: write`?");
    }
    let body: Value = answer.json().await?;
    body["value"]
        .as_str()
        .map(str::to_owned)
        .context("GitHub Actions answered no ID token (no \"value\")")
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    let http = reqwest::Client::builder()
        .user_agent(concat!("hegemony-state/", env!("CARGO_PKG_VERSION")))
        .build()?;
    let token = id_token(&http, &options).await?;
    let answer = http
        .post(format!(
            "{}/api/oidc/exchange",
            options.url.trim_end_matches('/')
        ))
        .json(&serde_json::json!({ "token": token }))
        .send()
        .await
        .context("reaching the state server")?;
    let status = answer.status();
    let body: Value = answer.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        bail!(
            "the exchange was refused ({status}): {}",
            body["error"]["message"]
                .as_str()
                .unwrap_or("no reason given")
        );
    }
    if options.json {
        println!("{}", serde_json::to_string_pretty(&body)?);
    } else {
        let session = body["token"]
            .as_str()
            .context("the server answered no session token")?;
        println!("{session}");
        eprintln!(
            "session for org {} as {} on {} until {}",
            body["org"].as_str().unwrap_or("?"),
            body["role"].as_str().unwrap_or("?"),
            body["states"],
            body["expires_at"].as_str().unwrap_or("?")
        );
    }
    Ok(())
}
