//! The typed client every black-box suite speaks HTTP with: the backend calls (state, lock,
//! unlock) with Basic credentials as Terraform sends them, the management and runs calls
//! with Bearer, and error bodies read one way. It is built on [`crate::client`], so it never
//! follows redirects or decompresses: a test sees exactly what was sent back.

use reqwest::blocking::{Body, RequestBuilder, Response};
use reqwest::Method;
use serde_json::Value;

use crate::Endpoint;

/// A client of one server (or gateway).
#[derive(Clone)]
pub struct Api {
    http: reqwest::blocking::Client,
    base: String,
}

/// An error answer: its status, and the `{"error": {"code", "message"}}` it carried (empty
/// strings when the body is not one, as for a lock conflict's lock document).
#[derive(Debug)]
pub struct ErrorBody {
    pub status: u16,
    pub code: String,
    pub message: String,
}

impl ErrorBody {
    /// The code and message, after checking the status.
    pub fn expect(self, status: u16) -> (String, String) {
        assert_eq!(self.status, status, "unexpected status: {self:?}");
        (self.code, self.message)
    }
}

/// Reads `r` as an error answer.
pub fn error_body(r: Response) -> ErrorBody {
    let status = r.status().as_u16();
    let v: Value = r.json().unwrap_or(Value::Null);
    ErrorBody {
        status,
        code: v["error"]["code"].as_str().unwrap_or("").to_owned(),
        message: v["error"]["message"].as_str().unwrap_or("").to_owned(),
    }
}

impl Api {
    pub fn new(endpoint: &impl Endpoint) -> Api {
        Api {
            http: crate::client(),
            base: endpoint.url(""),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Any request, with Bearer `token` when given.
    pub fn request(&self, method: &str, path: &str, token: Option<&str>) -> RequestBuilder {
        let r = self.http.request(
            Method::from_bytes(method.as_bytes()).unwrap(),
            self.url(path),
        );
        match token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    /// A backend request as Terraform sends it: Basic, any username, the token as password.
    pub fn backend(&self, method: &str, path: &str, token: &str) -> RequestBuilder {
        self.request(method, path, None)
            .basic_auth("u", Some(token))
    }

    pub fn get_state(&self, token: &str, name: &str) -> Response {
        self.backend("GET", &format!("/api/tf-states/{name}/state"), token)
            .send()
            .unwrap()
    }

    /// A save, with `?ID=` when `id` is given.
    pub fn post_state(
        &self,
        token: &str,
        name: &str,
        id: Option<&str>,
        body: impl Into<Body>,
    ) -> Response {
        let query = id.map(|id| format!("?ID={id}")).unwrap_or_default();
        self.backend(
            "POST",
            &format!("/api/tf-states/{name}/state{query}"),
            token,
        )
        .body(body)
        .send()
        .unwrap()
    }

    pub fn lock(&self, token: &str, name: &str, body: &str) -> Response {
        self.backend("POST", &format!("/api/tf-states/{name}/lock"), token)
            .body(body.to_owned())
            .send()
            .unwrap()
    }

    pub fn unlock(&self, token: &str, name: &str, body: &str) -> Response {
        self.backend("DELETE", &format!("/api/tf-states/{name}/lock"), token)
            .body(body.to_owned())
            .send()
            .unwrap()
    }

    /// A management call with Bearer `token` that must succeed; its JSON body.
    pub fn json(&self, method: &str, path: &str, token: &str) -> Value {
        let r = self.request(method, path, Some(token)).send().unwrap();
        assert!(r.status().is_success(), "{method} {path}: {}", r.status());
        r.json().unwrap()
    }

    /// A POST of `body` as JSON with Bearer `token` (the runs API).
    pub fn post_json(&self, path: &str, token: &str, body: &Value) -> Response {
        self.request("POST", path, Some(token))
            .json(body)
            .send()
            .unwrap()
    }

    /// The list as `token` sees it, after checking it is a 200.
    pub fn list(&self, token: &str) -> Value {
        let r = self
            .request("GET", "/api/tf-states?limit=1000", Some(token))
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
        r.json().unwrap()
    }

    /// The list's item for `state` as `token` sees it (`Null` when it is not listed).
    pub fn listed(&self, token: &str, state: &str) -> Value {
        self.list(token)["states"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == state)
            .cloned()
            .unwrap_or(Value::Null)
    }
}
