//! The in-process tier's client: each request is built as the local server builds it (a
//! `lambda_http::Request` with the route's path parameters, the query and the API Gateway v2
//! request context) and answered by `http::handle` on a test app, as axum's `oneshot` drives
//! a router: no socket, no process. What needs the wire (streamed bodies, raw bytes, custom
//! methods through a real HTTP parser) stays in the black-box suites.

use base64::Engine;
use hegemony_state::domain::actor::{SessionGrant, WorkloadJob};
use hegemony_state::domain::permission::Role;
use hegemony_state::domain::trust::TrustPolicy;
use hegemony_state::domain::Actor;
use hegemony_state::http::{self, find_route, RouteMatch};
use hegemony_state::ports::{AuditEntry, ExchangeMark};
use hegemony_state::service::tokens::{self, NewToken};
use hegemony_state::service::Limits;
use lambda_http::http::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use time::Duration;

use super::{fixture, Adapter, Fixture};

/// The local server's limits when nothing is configured: 32 MiB states, 50 versions kept,
/// a 600 s grace.
pub fn server_limits() -> Limits {
    Limits {
        max_state_bytes: 32 * 1024 * 1024,
        keep_versions: 50,
        run_end_grace: Duration::seconds(600),
        deleted_retention: Duration::days(7),
        lambda_ceiling: None,
    }
}

/// An app on one adapter and a client of it.
pub struct Api {
    pub fx: Fixture,
}

/// An answer: status, headers and the whole body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
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

impl Answer {
    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("a text body")
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    /// The answer read as an error.
    pub fn error(&self) -> ErrorBody {
        let v: Value = serde_json::from_slice(&self.body).unwrap_or(Value::Null);
        ErrorBody {
            status: self.status,
            code: v["error"]["code"].as_str().unwrap_or("").to_owned(),
            message: v["error"]["message"].as_str().unwrap_or("").to_owned(),
        }
    }

    /// A header's value as text.
    pub fn header(&self, name: &str) -> &str {
        self.headers[name].to_str().unwrap()
    }
}

/// One request being built.
pub struct Call<'a> {
    api: &'a Api,
    method: String,
    path: String,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Call<'_> {
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.insert(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
        self
    }

    /// `name` once more beside the value already set, as a client or a proxy may repeat a
    /// header.
    pub fn repeated_header(mut self, name: &str, value: &str) -> Self {
        self.headers.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
        self
    }

    pub fn bearer(self, token: &str) -> Self {
        self.header("authorization", &format!("Bearer {token}"))
    }

    /// Basic credentials as Terraform sends them: any username, the token as password.
    pub fn basic(self, token: &str) -> Self {
        let pair = base64::engine::general_purpose::STANDARD.encode(format!("u:{token}"));
        self.header("authorization", &format!("Basic {pair}"))
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    pub fn json(self, body: &Value) -> Self {
        self.header("content-type", "application/json")
            .body(body.to_string())
    }

    /// Matches the route and answers as the local server does (pages outside `/api`
    /// included), without its socket.
    pub async fn send(self) -> Answer {
        let uri: lambda_http::http::Uri = self.path.parse().unwrap();
        let response = match find_route(&self.method, uri.path()) {
            RouteMatch::Found { route, params } => {
                let (mut parts, ()) = lambda_http::http::Request::builder()
                    .method(self.method.as_str())
                    .uri(uri.clone())
                    .body(())
                    .unwrap()
                    .into_parts();
                parts.headers = self.headers;
                let request = http::gateway::request(route, parts, &params, self.body);
                http::handle(&self.api.fx.app, route, request).await
            }
            other => http::unrouted(&self.method, uri.path(), &other),
        };
        let (parts, body) = response.into_parts();
        Answer {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body: body.as_ref().to_vec(),
        }
    }
}

impl Api {
    /// On the memory adapter, with the local server's default limits.
    pub fn new() -> Api {
        Api::on(Adapter::Memory, server_limits())
    }

    pub fn on(adapter: Adapter, limits: Limits) -> Api {
        Api {
            fx: fixture(adapter, limits),
        }
    }

    pub fn request(&self, method: &str, path: &str) -> Call<'_> {
        Call {
            api: self,
            method: method.to_owned(),
            path: path.to_owned(),
            headers: HeaderMap::new(),
            body: Vec::new(),
        }
    }

    /// A personal token, made as `hegemony-state token create` makes it.
    pub async fn token(&self, org: &str, user: &str, role: &str) -> String {
        let role: Role = role.parse().unwrap();
        let new = NewToken::Personal { org, user, role };
        self.create(new).await
    }

    /// A workload session's token under trust policy `policy` of `org`, made as the exchange
    /// makes it once a CI job's ID token matched the policy: the policy as stored (one
    /// letting an operator reach every state is stored first when the org has none of that
    /// name), its revision recorded.
    pub async fn session(&self, org: &str, policy: &str) -> String {
        let now = self.fx.app.clock.now();
        let catalog = self.fx.app.catalog.as_ref();
        let stored = match catalog.trust_policy(org, policy).await.unwrap() {
            Some(stored) => stored,
            None => {
                let new = TrustPolicy {
                    name: policy.to_owned(),
                    issuer: "https://ci.example.com".into(),
                    audience: format!("https://state.example.com/{org}"),
                    claims: Default::default(),
                    role: Role::Operator,
                    states: vec!["*".to_owned()],
                    session_seconds: 3600,
                };
                let audit = AuditEntry {
                    org: org.to_owned(),
                    at: now,
                    action: "trust_policy_created".into(),
                    actor: Actor::Cli,
                    state: None,
                    version: None,
                    detail: Value::Null,
                };
                catalog
                    .put_trust_policy(org, None, &new, &audit)
                    .await
                    .unwrap();
                new
            }
        };
        let expires_at = now + Duration::hours(1);
        let grant = Box::new(SessionGrant {
            token_id: String::new(),
            policy: policy.to_owned(),
            policy_revision: stored.revision(),
            narrowed_to: None,
            states: stored.states.clone(),
            job: WorkloadJob::from_claims(&serde_json::Map::from_iter([
                ("iss".to_owned(), Value::from(stored.issuer.clone())),
                ("sub".to_owned(), Value::from(format!("job-of-{policy}"))),
            ])),
            expires_at,
            locks_live_until: expires_at + Duration::minutes(10),
            token_hash: String::new(),
        });
        let new = NewToken::Session {
            org,
            role: stored.role,
            grant,
            mark: ExchangeMark {
                // Each test session stands for an ID token of its own.
                key: format!("test-session-{}", hegemony_state::ids::new_id()),
                until: expires_at,
            },
        };
        self.create(new).await
    }

    /// A platform token, made as `hegemony-state token create --platform` makes it.
    pub async fn platform_token(&self) -> String {
        self.create(NewToken::Platform).await
    }

    async fn create(&self, new: NewToken<'_>) -> String {
        let now = self.fx.app.clock.now();
        let (token, _) = tokens::create(self.fx.app.catalog.as_ref(), new, &Actor::Cli, now)
            .await
            .unwrap();
        token
    }

    /// Revokes `user`'s token, as `hegemony-state token revoke` does with its id.
    pub async fn revoke(&self, user: &str) {
        let catalog = self.fx.app.catalog.as_ref();
        let listed = tokens::list(catalog).await.unwrap();
        let id = &listed.iter().find(|t| t.user == user).unwrap().id;
        let now = self.fx.app.clock.now();
        tokens::revoke(catalog, id, &Actor::Cli, now).await.unwrap();
    }

    pub async fn get_state(&self, token: &str, name: &str) -> Answer {
        self.request("GET", &format!("/api/tf-states/{name}/state"))
            .basic(token)
            .send()
            .await
    }

    /// A save, with `?ID=` when `id` is given.
    pub async fn post_state(
        &self,
        token: &str,
        name: &str,
        id: Option<&str>,
        body: impl Into<Vec<u8>>,
    ) -> Answer {
        let query = id.map(|id| format!("?ID={id}")).unwrap_or_default();
        self.request("POST", &format!("/api/tf-states/{name}/state{query}"))
            .basic(token)
            .body(body)
            .send()
            .await
    }

    pub async fn lock(&self, token: &str, name: &str, body: &str) -> Answer {
        self.request("POST", &format!("/api/tf-states/{name}/lock"))
            .basic(token)
            .body(body)
            .send()
            .await
    }

    pub async fn unlock(&self, token: &str, name: &str, body: &str) -> Answer {
        self.request("DELETE", &format!("/api/tf-states/{name}/lock"))
            .basic(token)
            .body(body)
            .send()
            .await
    }

    /// A management call with Bearer `token` that must succeed; its JSON body.
    pub async fn json(&self, method: &str, path: &str, token: &str) -> Value {
        let r = self.request(method, path).bearer(token).send().await;
        assert!(
            (200..300).contains(&r.status),
            "{method} {path}: {}",
            r.status
        );
        r.json()
    }

    /// A POST of `body` as JSON with Bearer `token` (the runs API).
    pub async fn post_json(&self, path: &str, token: &str, body: &Value) -> Answer {
        self.request("POST", path)
            .bearer(token)
            .json(body)
            .send()
            .await
    }

    /// The list as `token` sees it, after checking it is a 200.
    pub async fn list(&self, token: &str) -> Value {
        let r = self
            .request("GET", "/api/tf-states?limit=1000")
            .bearer(token)
            .send()
            .await;
        assert_eq!(r.status, 200, "the list: {}", r.text());
        r.json()
    }

    /// The list's item for `state` as `token` sees it (`Null` when it is not listed).
    pub async fn listed(&self, token: &str, state: &str) -> Value {
        self.list(token).await["states"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == state)
            .cloned()
            .unwrap_or(Value::Null)
    }
}

/// A lock document as Terraform 1.11 sends it.
pub fn lock_doc(id: &str) -> String {
    format!(
        r#"{{"ID":"{id}","Operation":"OperationTypeApply","Info":"","Who":"tester@host","Version":"1.11.4","Created":"2026-11-30T01:07:12.730574508Z","Path":""}}"#
    )
}

/// A minimal Terraform state document.
pub fn state_doc(serial: u64, lineage: &str, value: &str) -> String {
    format!(
        "{{\n  \"version\": 4,\n  \"terraform_version\": \"1.11.4\",\n  \"serial\": {serial},\n  \"lineage\": \"{lineage}\",\n  \"outputs\": {{\n    \"v\": {{\"value\": \"{value}\", \"type\": \"string\"}}\n  }},\n  \"resources\": [],\n  \"check_results\": null\n}}\n"
    )
}
