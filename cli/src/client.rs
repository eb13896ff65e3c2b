//! The HTTP API as the management commands and the import script call it: a base URL and a
//! Bearer token; an error answer becomes an error carrying the API's code and message.

use hegemony_state::paging::{self, Page};
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// An answer that is not a success.
#[derive(Debug, thiserror::Error)]
#[error("{message} ({code}, HTTP {status})")]
pub struct ApiError {
    pub status: u16,
    pub code: String,
    pub message: String,
}

/// A client of one server with one token.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Client {
    pub fn new(api: &crate::Api) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("hegemony-state/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            http,
            base: api.url.trim_end_matches('/').to_owned(),
            token: api.token.clone(),
        })
    }

    /// Sends a request to `path` (under the base URL) and returns the status and body of a
    /// success.
    ///
    /// # Errors
    /// `ApiError` for an error answer; a transport error when the server is unreachable.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<(Vec<u8>, &str)>,
    ) -> anyhow::Result<(StatusCode, Vec<u8>)> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some((bytes, content_type)) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(bytes);
        }
        let response = req.send().await?;
        let status = response.status();
        let bytes = response.bytes().await?.to_vec();
        if status.is_success() {
            return Ok((status, bytes));
        }
        let parsed: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let (code, message) = match &parsed["error"] {
            Value::Object(e) => (
                e.get("code")
                    .and_then(Value::as_str)
                    .unwrap_or("error")
                    .to_owned(),
                e.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            ),
            // A lock conflict answers with the holder's lock document.
            _ if status == StatusCode::LOCKED => (
                "locked".to_owned(),
                format!("the state is locked: {}", String::from_utf8_lossy(&bytes)),
            ),
            _ => (
                "error".to_owned(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ),
        };
        Err(ApiError {
            status: status.as_u16(),
            code,
            message,
        }
        .into())
    }

    /// GETs `path` as JSON.
    pub async fn get_json(&self, path: &str) -> anyhow::Result<Value> {
        let (_, bytes) = self.send(Method::GET, path, None).await?;
        Ok(serde_json::from_slice(&bytes)?)
    }

    /// Every page of the listing at `path` (whose query has begun), as JSON, following each
    /// page's `next_cursor` until a page has none.
    pub async fn pages(&self, path: &str) -> anyhow::Result<Vec<Value>> {
        paging::all(move |cursor: Option<String>| async move {
            let page_path = match cursor {
                Some(c) => format!("{path}&cursor={c}"),
                None => path.to_owned(),
            };
            let page = self.get_json(&page_path).await?;
            let next = page["next_cursor"].as_str().map(str::to_owned);
            Ok::<_, anyhow::Error>(Page {
                items: vec![page],
                next,
            })
        })
        .await
    }
}

/// `value` as one query-string value: every byte but the unreserved ones percent-encoded.
pub fn encoded(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The items under `key` of every page of a listing, in order.
pub fn items(pages: &[Value], key: &str) -> Vec<Value> {
    pages
        .iter()
        .flat_map(|page| page[key].as_array().cloned().unwrap_or_default())
        .collect()
}
