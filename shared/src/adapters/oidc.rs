//! OpenID Connect issuers over HTTPS (rustls, the public web roots plus an optional CA file
//! for private issuers, e.g. a self-managed GitLab): the discovery document at
//! `<issuer>/.well-known/openid-configuration`, then the JWK set at its `jwks_uri`, with the
//! set's `Cache-Control: max-age`. Bounded in time and size, no redirects, only `https://`
//! addresses, a `jwks_uri` on the issuer's own host or a subdomain of it, and no private
//! address (after resolution) unless the operator allows them: an issuer's keys decide who
//! gets in, and a policy's issuer is an admin's text, so nothing may steer their fetch
//! elsewhere.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::reach;
use crate::ports::{FetchedKeys, IssuerError, IssuerKeys};

/// How long one fetch may take: the exchange waits for it.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest discovery document or key set read: real ones are a few KB.
const MAX_BYTES: usize = 256 * 1024;

/// Fetches issuers' keys over HTTPS.
pub struct HttpsIssuers {
    http: reqwest::Client,
    /// `HEGEMONY_OIDC_ALLOW_PRIVATE_ISSUERS`: private addresses may be reached.
    allow_private: bool,
}

impl HttpsIssuers {
    /// `ca_pem`: extra CA certificates (PEM) trusted for issuer fetches, beside the public
    /// web roots (`HEGEMONY_OIDC_CA_FILE`); `allow_private`: loopback, private, link-local
    /// and unique-local addresses may be reached (`HEGEMONY_OIDC_ALLOW_PRIVATE_ISSUERS`).
    ///
    /// # Errors
    /// A CA bundle that holds no certificate, or a client that cannot be built.
    pub fn new(ca_pem: Option<&[u8]>, allow_private: bool) -> Result<Self, String> {
        let mut builder = reqwest::Client::builder();
        if let Some(resolver) = reach::resolver(allow_private) {
            // A proxy resolves the names it is asked for itself, where this resolver never
            // sees them: no proxy, unless private issuers are allowed anyway.
            builder = builder.dns_resolver(resolver).no_proxy();
        }
        let mut builder = builder
            .use_rustls_tls()
            .https_only(true)
            .timeout(CALL_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none());
        if let Some(pem) = ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| format!("HEGEMONY_OIDC_CA_FILE: {e}"))?;
            if certs.is_empty() {
                return Err("HEGEMONY_OIDC_CA_FILE holds no PEM certificate".into());
            }
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder.build().map_err(|e| e.to_string())?;
        Ok(Self {
            http,
            allow_private,
        })
    }

    /// The body of `url`, and its `Cache-Control: max-age`.
    async fn get(&self, url: &str) -> Result<(Vec<u8>, Option<u64>), IssuerError> {
        let fail = |why: String| IssuerError(format!("GET {url}: {why}"));
        reach::check_url_host(url, self.allow_private).map_err(fail)?;
        let mut response = self
            .http
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| fail(chain(&e)))?;
        if !response.status().is_success() {
            return Err(fail(format!("answered {}", response.status())));
        }
        let max_age = response
            .headers()
            .get(reqwest::header::CACHE_CONTROL)
            .and_then(|v| v.to_str().ok())
            .and_then(max_age);
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| fail(chain(&e)))? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_BYTES {
                return Err(fail(format!("the answer is larger than {MAX_BYTES} bytes")));
            }
        }
        Ok((body, max_age))
    }
}

/// The age a `Cache-Control` value allows: its `max-age`, or 0 for `no-store` and
/// `no-cache`; `None` when it says neither.
fn max_age(value: &str) -> Option<u64> {
    let mut age = None;
    for directive in value.split(',').map(str::trim) {
        let lower = directive.to_ascii_lowercase();
        if lower == "no-store" || lower == "no-cache" {
            return Some(0);
        }
        if let Some(seconds) = lower.strip_prefix("max-age=") {
            age = seconds.trim_matches('"').parse().ok().or(age);
        }
    }
    age
}

/// Whether `uri`'s host is `issuer`'s host or a subdomain of it: a discovery document may
/// not send the key fetch to another host.
fn on_issuers_host(uri: &str, issuer: &str) -> bool {
    let host = |url: &str| {
        reqwest::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
    };
    match (host(uri), host(issuer)) {
        (Some(uri), Some(issuer)) => uri == issuer || uri.ends_with(&format!(".{issuer}")),
        _ => false,
    }
}

/// An error with its causes: reqwest's own message hides the TLS or DNS reason an operator
/// needs (an unknown CA, a name that does not resolve).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

#[async_trait]
impl IssuerKeys for HttpsIssuers {
    async fn signing_keys(&self, issuer: &str) -> Result<FetchedKeys, IssuerError> {
        let discovery_url = format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        );
        let discovery: Value = serde_json::from_slice(&self.get(&discovery_url).await?.0)
            .map_err(|e| IssuerError(format!("{discovery_url} is not JSON: {e}")))?;
        // OpenID Connect Discovery 1.0, section 4.3: the document's issuer must be exactly
        // the one asked for, or its keys are some other issuer's.
        if discovery.get("issuer").and_then(Value::as_str) != Some(issuer) {
            return Err(IssuerError(format!(
                "{discovery_url} names another issuer ({})",
                discovery.get("issuer").unwrap_or(&Value::Null)
            )));
        }
        let jwks_uri = discovery
            .get("jwks_uri")
            .and_then(Value::as_str)
            .filter(|uri| uri.starts_with("https://"))
            .ok_or_else(|| IssuerError(format!("{discovery_url} has no https:// jwks_uri")))?;
        if !on_issuers_host(jwks_uri, issuer) {
            return Err(IssuerError(format!(
                "{discovery_url} names jwks_uri {jwks_uri}, which is not on the issuer's host or a subdomain of it"
            )));
        }
        let (keys, max_age_seconds) = self.get(jwks_uri).await?;
        let jwks =
            String::from_utf8(keys).map_err(|_| IssuerError(format!("{jwks_uri} is not UTF-8")))?;
        Ok(FetchedKeys {
            jwks,
            max_age_seconds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_control_gives_an_age_or_none() {
        assert_eq!(max_age("public, max-age=300"), Some(300));
        assert_eq!(max_age("max-age=\"60\", must-revalidate"), Some(60));
        assert_eq!(max_age("no-store"), Some(0));
        assert_eq!(max_age("private, No-Cache"), Some(0));
        assert_eq!(max_age("public"), None);
        assert_eq!(max_age("max-age=soon"), None);
    }

    #[test]
    fn the_key_set_lives_on_the_issuers_host_or_below_it() {
        let issuer = "https://token.actions.githubusercontent.com";
        assert!(on_issuers_host(
            "https://token.actions.githubusercontent.com/.well-known/jwks",
            issuer
        ));
        assert!(on_issuers_host(
            "https://keys.token.actions.githubusercontent.com/jwks",
            issuer
        ));
        assert!(!on_issuers_host("https://attacker.example/jwks", issuer));
        assert!(!on_issuers_host(
            "https://eviltoken.actions.githubusercontent.com.attacker.example/jwks",
            issuer
        ));
        assert!(!on_issuers_host(
            "https://xtoken.actions.githubusercontent.com/jwks",
            issuer
        ));
        assert!(on_issuers_host(
            "https://127.0.0.1:9/jwks",
            "https://127.0.0.1:8/"
        ));
    }
}
