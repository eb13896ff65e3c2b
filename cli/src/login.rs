//! `hegemony-state login --oidc`: a CI job's step that finds the job's OpenID Connect ID
//! token the way its CI system hands it out, exchanges it for a workload session, and prints
//! the session token (for `TF_HTTP_PASSWORD`). GitHub Actions hands out a request URL and
//! token (`ACTIONS_ID_TOKEN_REQUEST_URL`, `ACTIONS_ID_TOKEN_REQUEST_TOKEN`; the job needs
//! `permissions: id-token: write`); GitLab CI puts each of the job's `id_tokens` in the
//! variable it names. The ID token itself is never printed.
//!
//! An ID token opens one session (the server refuses a second exchange of it), and GitLab
//! hands a job its `id_tokens` once: a job that logs in twice gets the session its token
//! opened again, from a file kept for it (mode 0600, in a folder of the job's temporary
//! folder only its user reaches, named by the token's digest) until the session ends.

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
    /// The trust policy to log in under, when more than one of the org's lets the job in.
    #[arg(long, env = "HEGEMONY_OIDC_POLICY")]
    policy: Option<String>,
    /// The org the session must be of: a session of another org is ended at once and the
    /// login fails (on a shared deployment, a policy of another org took the audience).
    #[arg(long, env = "HEGEMONY_ORG")]
    org: Option<String>,
    /// Print the whole answer (token, expires_at, org, role, states) as JSON.
    #[arg(long)]
    json: bool,
}

/// A session as the exchange answers it, and as it is kept for the job's next login.
#[derive(serde::Serialize, serde::Deserialize)]
struct Session {
    token: String,
    expires_at: String,
    org: String,
    role: String,
    states: Vec<String>,
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
    let id_token = id_token(&http, &options).await?;
    // Kept per server and policy as well as per token: the same token logs in once to each.
    let kept = kept::path(&[
        options.url.trim_end_matches('/'),
        options.policy.as_deref().unwrap_or(""),
        &id_token,
    ])?;
    let session = match kept::read(&kept) {
        Some(session) => session,
        None => {
            let session = exchange(&http, &options, &id_token).await?;
            kept::write(&kept, &session)?;
            session
        }
    };
    // Checked whichever way the session came: one kept by a login that named no org, or
    // another, is no more the job's than a fresh one.
    if let Some(org) = &options.org {
        if &session.org != org {
            end(&http, &options, &session).await;
            let _ = std::fs::remove_file(&kept);
            bail!(
                "the session is of org {}, not {org}: a trust policy of another org takes this job's audience; the session was ended. Ask for the ID token with an audience naming {org} (it ends with /{org})",
                session.org
            );
        }
    }
    if options.json {
        println!("{}", serde_json::to_string_pretty(&session)?);
    } else {
        println!("{}", session.token);
        eprintln!(
            "session for org {} as {} on {:?} until {}",
            session.org, session.role, session.states, session.expires_at
        );
    }
    Ok(())
}

fn server(options: &Options, path: &str) -> String {
    format!("{}{path}", options.url.trim_end_matches('/'))
}

/// The ID token exchanged for a session.
async fn exchange(
    http: &reqwest::Client,
    options: &Options,
    id_token: &str,
) -> anyhow::Result<Session> {
    let mut body = serde_json::json!({ "token": id_token });
    if let Some(policy) = &options.policy {
        body["policy"] = Value::String(policy.clone());
    }
    let answer = http
        .post(server(options, "/api/oidc/exchange"))
        .json(&body)
        .send()
        .await
        .context("reaching the state server")?;
    let status = answer.status();
    let body: Value = answer.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        let mut reason = body["error"]["message"]
            .as_str()
            .unwrap_or("no reason given")
            .to_owned();
        if body["error"]["code"] == "ambiguous_policy" {
            reason.push_str(" (give --policy NAME)");
        }
        bail!("the exchange was refused ({status}): {reason}");
    }
    serde_json::from_value(body).context("the server answered no session this command can read")
}

/// Ends `session` on the server; a failure is said, not fatal (the session ends by itself).
async fn end(http: &reqwest::Client, options: &Options, session: &Session) {
    let ended = http
        .delete(server(options, "/api/oidc/session"))
        .bearer_auth(&session.token)
        .send()
        .await;
    if !ended.is_ok_and(|a| a.status().is_success()) {
        eprintln!(
            "warning: the session could not be ended; it ends by itself at {}",
            session.expires_at
        );
    }
}

/// The sessions kept for a job's next login, one file per ID token.
mod kept {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    use std::path::{Path, PathBuf};

    use anyhow::{bail, Context};
    use sha2::{Digest, Sha256};

    use super::Session;

    /// The job's temporary folder: GitHub's per-job `RUNNER_TEMP`, else the system's.
    fn folder() -> PathBuf {
        std::env::var_os("RUNNER_TEMP")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir)
            .join("hegemony-state-sessions")
    }

    /// The file of the session that `parts` (the server, the policy named, the ID token)
    /// open, in a folder (created mode 0700) that must be this user's own and reached by no
    /// one else: a shared temporary folder may hold another user's files.
    pub fn path(parts: &[&str]) -> anyhow::Result<PathBuf> {
        let folder = folder();
        match std::fs::DirBuilder::new().mode(0o700).create(&folder) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("creating {}", folder.display())),
        }
        let meta = std::fs::symlink_metadata(&folder)?;
        let mine = tempfile::tempfile_in(&folder)
            .and_then(|f| f.metadata())
            .map(|m| m.uid())
            .with_context(|| format!("writing in {}", folder.display()))?;
        if !meta.is_dir() || meta.uid() != mine || meta.permissions().mode() & 0o077 != 0 {
            bail!(
                "{} is not a folder of this user's own that no one else reaches: remove it",
                folder.display()
            );
        }
        let mut digest = Sha256::new();
        for part in parts {
            // Each part's length first, so no two lists of parts digest alike.
            digest.update((part.len() as u64).to_be_bytes());
            digest.update(part.as_bytes());
        }
        let digest = digest.finalize();
        let name: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        Ok(folder.join(format!("{name}.json")))
    }

    /// The kept session, while it has not ended; a file that does not read is as none.
    pub fn read(path: &Path) -> Option<Session> {
        let text = std::fs::read(path).ok()?;
        let session: Session = serde_json::from_slice(&text).ok()?;
        let ends = time::OffsetDateTime::parse(
            &session.expires_at,
            &time::format_description::well_known::Rfc3339,
        )
        .ok()?;
        if ends <= time::OffsetDateTime::now_utc() {
            let _ = std::fs::remove_file(path);
            return None;
        }
        Some(session)
    }

    /// Keeps `session` at `path`, mode 0600, written whole or not at all.
    pub fn write(path: &Path, session: &Session) -> anyhow::Result<()> {
        let folder = path.parent().context("a session file has a folder")?;
        let mut file = tempfile::Builder::new()
            .permissions(std::fs::Permissions::from_mode(0o600))
            .tempfile_in(folder)?;
        file.write_all(&serde_json::to_vec(session)?)?;
        file.as_file().sync_all()?;
        file.persist(path)
            .with_context(|| format!("keeping the session in {}", path.display()))?;
        Ok(())
    }
}
