//! OpenID Connect issuers over HTTPS (rustls, the public web roots plus an optional CA file
//! for private issuers, e.g. a self-managed GitLab): the discovery document at
//! `<issuer>/.well-known/openid-configuration`, then the JWK set at its `jwks_uri`. Bounded in
//! time and size, no redirects, and only `https://` addresses: an issuer's keys decide who
//! gets in, so nothing may steer their fetch elsewhere.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::ports::{IssuerError, IssuerKeys};

/// How long one fetch may take: the exchange waits for it.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest discovery document or key set read: real ones are a few KB.
const MAX_BYTES: usize = 256 * 1024;

/// Fetches issuers' keys over HTTPS.
pub struct HttpsIssuers {
    http: reqwest::Client,
}

impl HttpsIssuers {
    /// `ca_pem`: extra CA certificates (PEM) trusted for issuer fetches, beside the public
    /// web roots (`HEGEMONY_OIDC_CA_FILE`).
    ///
    /// # Errors
    /// A CA bundle that holds no certificate, or a client that cannot be built.
    pub fn new(ca_pem: Option<&[u8]>) -> Result<Self, String> {
        let mut builder = reqwest::Client::builder()
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
        Ok(Self { http })
    }

    async fn get(&self, url: &str) -> Result<Vec<u8>, IssuerError> {
        let fail = |why: String| IssuerError(format!("GET {url}: {why}"));
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
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| fail(chain(&e)))? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_BYTES {
                return Err(fail(format!("the answer is larger than {MAX_BYTES} bytes")));
            }
        }
        Ok(body)
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
    async fn signing_keys(&self, issuer: &str) -> Result<String, IssuerError> {
        let discovery_url = format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        );
        let discovery: Value = serde_json::from_slice(&self.get(&discovery_url).await?)
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
        let keys = self.get(jwks_uri).await?;
        String::from_utf8(keys).map_err(|_| IssuerError(format!("{jwks_uri} is not UTF-8")))
    }
}
