//! The HTTP calls to one Transit engine (Vault's API, which OpenBao keeps): log in, read and
//! create a key, make a data key, decrypt, re-wrap or encrypt one. Every failure says which
//! engine, which call and why, in words an operator can act on; tokens never appear in them.

use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::sync::Mutex;
use zeroize::Zeroizing;

use crate::transit_settings::{TransitAuth, TransitSettings};

/// How long one call may take: past it the engine counts as unreachable, and the client's
/// retry (after 503 with Retry-After) tries again.
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// Why a call failed: what the engine answered, or that it could not be reached.
#[derive(Debug)]
pub(super) enum Fault {
    /// The engine answered this status, with its `errors` joined.
    Status(StatusCode, String),
    /// No answer: refused connection, timeout, TLS, an unreadable body.
    Transport(String),
    /// The credentials file could not be read, or the login gave no token.
    Credentials(String),
}

impl Fault {
    /// Why, for the log and the 503's message: the engine's own words where it said why.
    pub(super) fn describe(&self, engine: &str, call: &str) -> String {
        match self {
            Fault::Status(StatusCode::SERVICE_UNAVAILABLE, why) => {
                format!("{engine} {call}: the engine is sealed or in standby ({why})")
            }
            Fault::Status(StatusCode::FORBIDDEN, why) => format!(
                "{engine} {call}: refused (403 {why}): the token's policy must allow it (docs/configuration.md lists the paths)"
            ),
            Fault::Status(StatusCode::TOO_MANY_REQUESTS, why) => {
                format!("{engine} {call}: throttled (429 {why})")
            }
            Fault::Status(status, why) => format!("{engine} {call}: answered {status} ({why})"),
            Fault::Transport(why) => format!("{engine} {call}: unreachable ({why})"),
            Fault::Credentials(why) => format!("{engine} {call}: {why}"),
        }
    }
}

/// One engine: its settings, an HTTP client (rustls) and the token in use.
pub(super) struct Engine {
    pub(super) settings: TransitSettings,
    http: reqwest::Client,
    /// The token of the last login or file read; dropped after a 403, so the next call reads
    /// the file again or logs in again.
    token: Mutex<Option<Zeroizing<String>>>,
}

fn read_secret(path: &std::path::Path) -> Result<Zeroizing<String>, Fault> {
    let text = Zeroizing::new(std::fs::read_to_string(path).map_err(|e| {
        Fault::Credentials(format!(
            "cannot read the credentials file {}: {e}",
            path.display()
        ))
    })?);
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(Fault::Credentials(format!(
            "the credentials file {} is empty",
            path.display()
        )));
    }
    Ok(Zeroizing::new(trimmed.to_owned()))
}

/// The engine's `errors`, on one line: a multi-error ("1 error occurred:\n\t* permission
/// denied\n\n") becomes its items, so the log keeps one line per refusal.
fn errors_of(body: &Value) -> String {
    body.get("errors")
        .and_then(Value::as_array)
        .map(|e| {
            e.iter()
                .filter_map(Value::as_str)
                .flat_map(str::lines)
                .map(|line| line.trim().trim_start_matches("* "))
                .filter(|line| !line.is_empty() && !line.ends_with("occurred:"))
                .collect::<Vec<_>>()
                .join("; ")
        })
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| "no reason given".into())
}

impl Engine {
    /// # Errors
    /// A CA file that holds no certificate reqwest accepts, or a client that cannot be built.
    pub(super) fn new(settings: TransitSettings) -> Result<Self, String> {
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .timeout(CALL_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none());
        if let Some(pem) = &settings.ca_pem {
            for cert in reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| format!("{}: the CA file: {e}", settings.name()))?
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder
            .build()
            .map_err(|e| format!("{}: {e}", settings.name()))?;
        Ok(Self {
            settings,
            http,
            token: Mutex::new(None),
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}/v1/{path}", self.settings.addr)
    }

    /// One request, without a token or with `token`; the JSON answer, `None` for 204 or 404.
    async fn send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> Result<Option<Value>, Fault> {
        let mut request = self.http.request(method, self.url(path));
        if let Some(token) = token {
            request = request.header("X-Vault-Token", token);
        }
        if let Some(namespace) = &self.settings.namespace {
            request = request.header("X-Vault-Namespace", namespace);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| Fault::Transport(chain(&e)))?;
        let status = response.status();
        if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let body: Value = response
            .json()
            .await
            .map_err(|e| Fault::Transport(chain(&e)))?;
        if status.is_success() {
            Ok(Some(body))
        } else {
            Err(Fault::Status(status, errors_of(&body)))
        }
    }

    async fn token(&self) -> Result<Zeroizing<String>, Fault> {
        let mut cached = self.token.lock().await;
        if let Some(token) = cached.as_ref() {
            return Ok(token.clone());
        }
        let token = match &self.settings.auth {
            TransitAuth::Token { file } => read_secret(file)?,
            TransitAuth::AppRole {
                mount,
                role_id_file,
                secret_id_file,
            } => {
                let login = serde_json::json!({
                    "role_id": *read_secret(role_id_file)?,
                    "secret_id": *read_secret(secret_id_file)?,
                });
                let answer = self
                    .send(
                        Method::POST,
                        &format!("auth/{mount}/login"),
                        None,
                        Some(&login),
                    )
                    .await?;
                let token = answer
                    .as_ref()
                    .and_then(|a| a["auth"]["client_token"].as_str())
                    .ok_or_else(|| {
                        Fault::Credentials(format!(
                            "the AppRole login at auth/{mount} gave no token"
                        ))
                    })?;
                Zeroizing::new(token.to_owned())
            }
        };
        *cached = Some(token.clone());
        Ok(token)
    }

    /// A call with the current token; after a 403 the token is dropped and the call made once
    /// more with a fresh one (a rotated token file, an expired AppRole token).
    pub(super) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Option<Value>, Fault> {
        let token = self.token().await?;
        match self.send(method.clone(), path, Some(&token), body).await {
            Err(Fault::Status(StatusCode::FORBIDDEN, _)) => {
                *self.token.lock().await = None;
                let token = self.token().await?;
                self.send(method, path, Some(&token), body).await
            }
            other => other,
        }
    }
}

/// A reqwest error with its causes (the refused connection, the timeout, the TLS failure).
fn chain(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engines_errors_are_read_onto_one_line() {
        let body = serde_json::json!({"errors": ["1 error occurred:\n\t* permission denied\n\n"]});
        assert_eq!(errors_of(&body), "permission denied");
        let body = serde_json::json!({"errors": ["Vault is sealed", "again"]});
        assert_eq!(errors_of(&body), "Vault is sealed; again");
        assert_eq!(
            errors_of(&serde_json::json!({"errors": []})),
            "no reason given"
        );
    }
}
