//! `GET /api/openapi.json`: the OpenAPI document, assembled once from two sources. What a
//! route's row says is generated from the route table: its path parameters (with the
//! naming rule's pattern and length), its credentials, its body limit and the statuses its
//! row brings (400, 401, 403, 413, 500, 503, each with the error envelope and its codes from
//! the `error_codes!` table). What only a person can say is written in `openapi.json`, one
//! operation per row: summary, query parameters, body schema, the route's own statuses (a
//! description only: the generator adds the body), and links. The tests hold the two to each
//! other both ways.

use std::sync::OnceLock;

use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Response};
use serde_json::{json, Map, Value};

use super::routes::{BodyLimit, Route, DEFAULT_BODY_LIMIT, ROUTES};
use super::schemas::derived;
use super::{Credentials, ErrorCode};
use crate::config::DEFAULT_MAX_BYTES;
use crate::domain::lock::MAX_LOCK_BYTES;
use crate::domain::name::MAX_NAME_LEN;

/// The hand-written part: what each operation is for, its query, body and own statuses.
const DESCRIBED: &str = include_str!("openapi.json");

/// The naming rule of `domain::name` as a pattern: 1-128 of `A-Z a-z 0-9 . _ -`, not
/// starting with `.` (the length is the schema's `maxLength`).
const NAME_PATTERN: &str = "^[A-Za-z0-9_-][A-Za-z0-9._-]*$";

/// An app state's file name: the naming rule, ending in `.json` or `.tfstate`.
const FILE_PATTERN: &str = "^[A-Za-z0-9_-][A-Za-z0-9._-]*\\.(json|tfstate)$";

/// The document, as served: built on first use, the same bytes ever after.
pub fn document() -> &'static str {
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    DOCUMENT.get_or_init(|| build().to_string())
}

pub fn response() -> Response<Body> {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::Text(document().to_owned()))
        .expect("static headers are valid")
}

/// The hand-written document with every row's generated facts merged in.
fn build() -> Value {
    let mut doc: Value = serde_json::from_str(DESCRIBED).expect("openapi.json is JSON");
    let components = &mut doc["components"];
    components["securitySchemes"] = security_schemes();
    let schemas = &mut components["schemas"];
    for (name, schema) in derived() {
        // A hand-written schema of the same name would be a second source: the tests refuse it.
        schemas[name.as_str()] = schema;
    }
    schemas["StateName"] = name_schema("A state's name");
    schemas["Name"] = name_schema("An org, run or step name");
    schemas["Error"] = error_schema();
    schemas["AppLockedError"] = app_locked_schema();
    for route in ROUTES {
        if route.local_only {
            describe_local_only(&mut doc["paths"][route.path], route);
            continue;
        }
        let Some(op) = doc["paths"][route.path]
            .get_mut(route.method.to_ascii_lowercase())
            .and_then(Value::as_object_mut)
        else {
            // A row without its entry: the tests refuse it; the rest is still described.
            continue;
        };
        merge_row(op, route);
    }
    doc
}

/// Merges what `route`'s row says into its hand-written operation.
fn merge_row(op: &mut Map<String, Value>, route: &Route) {
    let mut parameters: Vec<Value> = path_parameters(route.path)
        .map(|name| {
            json!({
                "name": name,
                "in": "path",
                "required": true,
                "schema": path_parameter(name).unwrap_or_else(|| json!({"type": "string"})),
            })
        })
        .collect();
    if let Some(Value::Array(query)) = op.remove("parameters") {
        parameters.extend(query);
    }
    if !parameters.is_empty() {
        op.insert("parameters".into(), Value::Array(parameters));
    }
    op.insert("security".into(), security(route.handler.credentials()));
    let limit = limit_text(route.body);
    if let Some(Value::Object(body)) = op.get_mut("requestBody") {
        let described = body
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let text = format!("{described} At most {limit}; a larger body is refused with 413.");
        body.insert("description".into(), text.trim_start().into());
    }
    let responses = op
        .entry("responses")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .expect("responses is an object");
    for (status, reason) in generated_reasons(route, &limit) {
        let key = status.to_string();
        let text = match responses.get(&key).and_then(|r| r["description"].as_str()) {
            Some(own) => format!("{own}. Also: {reason}"),
            None => reason,
        };
        responses.insert(key, json!({ "description": text }));
    }
    for (status, response) in responses.iter_mut() {
        if let Some(content) = error_content(status, route.path) {
            response["content"] = content;
        }
        if status == "503" {
            response["headers"] = json!({"Retry-After": {
                "description": "Seconds to wait before retrying a transient fault (`unavailable`); absent when no key is configured",
                "schema": {"type": "integer", "minimum": 0},
            }});
        }
    }
}

/// The statuses `route`'s row brings, with why.
fn generated_reasons(route: &Route, limit: &str) -> Vec<(u16, String)> {
    let codes = |status: u16| {
        ErrorCode::ALL
            .iter()
            .filter(|c| c.status().as_u16() == status)
            .map(|c| format!("`{}`", c.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut bad = String::from("`invalid_request`: the body could not be read");
    if route.path.contains("{name}") {
        bad.push_str("; `invalid_name`: the path's name is outside the naming rule");
    }
    let mut reasons = vec![
        (400, bad),
        (413, format!("`too_large`: a body over {limit}")),
        (500, format!("A defect or damaged storage: {}", codes(500))),
        (
            503,
            format!(
                "A transient fault, retried after `Retry-After` seconds, or no key configured: {}",
                codes(503)
            ),
        ),
    ];
    let (unauthenticated, forbidden) = match route.handler.credentials() {
        Credentials::Open => return reasons,
        Credentials::Backend => (
            "no, unknown, expired or revoked credentials",
            "the token's role or the org's allocation does not allow it, a step token of another state, or a platform token",
        ),
        Credentials::Bearer => (
            "no, unknown, expired or revoked credentials, or Basic credentials (Bearer only here)",
            "the token's role or the org's allocation does not allow it, a step token, or a platform token",
        ),
        Credentials::Platform => (
            "no, unknown, expired or revoked credentials",
            "a token other than the platform's",
        ),
        Credentials::IdToken => (
            "no ID token, or not a signed, current ID token of an issuer and audience some trust policy names (its issuer, algorithm, key, signature, times or audience)",
            "a genuine ID token no trust policy lets in: a claim it does not take, or a token that lives longer than the policy's session",
        ),
    };
    let unauthenticated = if route.handler.credentials() == Credentials::IdToken {
        format!("`unauthenticated`: {unauthenticated}; `invalid_token`: an ID token exchanged already (each opens one session)")
    } else {
        format!("`unauthenticated`: {unauthenticated}")
    };
    if route.handler.credentials() == Credentials::IdToken {
        reasons[0].1.push_str(
            "; two `Authorization` headers, or the ID token both as a Bearer token and in the body",
        );
    }
    reasons.push((401, unauthenticated));
    reasons.push((403, format!("`forbidden`: {forbidden}")));
    reasons.sort_unstable_by_key(|(status, _)| *status);
    reasons
}

/// The body an error status answers with: the holder's lock document for a state's 423, the
/// error envelope with the holder's lock for an app state's, the error envelope for every
/// other; `None` for a success.
fn error_content(status: &str, path: &str) -> Option<Value> {
    let schema = match status {
        "423" if path.starts_with("/api/apps/") => "AppLockedError",
        "423" => "LockDocument",
        s if s.starts_with('4') || s.starts_with('5') => "Error",
        _ => return None,
    };
    Some(
        json!({"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}),
    )
}

/// The largest body a route accepts, in words.
fn limit_text(body: BodyLimit) -> String {
    match body {
        BodyLimit::State => format!(
            "the server's state limit (`HEGEMONY_TF_STATE_MAX_BYTES`, {DEFAULT_MAX_BYTES} bytes unless configured; less on Lambda, whose 413 says how much)"
        ),
        BodyLimit::Lock => format!("{MAX_LOCK_BYTES} bytes"),
        BodyLimit::OneMib => format!("{DEFAULT_BODY_LIMIT} bytes"),
    }
}

/// The `{parameters}` of a route's path, in order.
fn path_parameters(path: &'static str) -> impl Iterator<Item = &'static str> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
}

/// The schema of a path parameter, as the handlers check it; `None` for a name no handler
/// reads (the tests refuse a route with one).
fn path_parameter(name: &str) -> Option<Value> {
    match name {
        "name" => Some(json!({"$ref": "#/components/schemas/StateName"})),
        "run" | "step" | "lock_id" | "commit_id" => {
            Some(json!({"$ref": "#/components/schemas/Name"}))
        }
        // An app state's file: a name that ends in `.json` or `.tfstate` (docs/octo.md).
        "file" => Some(json!({
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_NAME_LEN,
            "pattern": FILE_PATTERN,
            "description": "A file's name: <moduleId>.tfstate, journal.<id>.<command>[.terraform|.<md5>].json or another <name>.json (docs/octo.md)",
        })),
        // A protected-state rule's pattern: a state name in which `*` stands for any run of
        // characters (`domain::protection`).
        "pattern" => Some(json!({
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_NAME_LEN,
            "pattern": "^[A-Za-z0-9_*-][A-Za-z0-9._*-]*$",
            "description": "A state name, or a pattern where * stands for any run of characters",
        })),
        // A deleted state's id, as the service makes them (`<seconds>-<hex>`).
        "id" => Some(json!({
            "type": "string",
            "minLength": 1,
            "maxLength": 64,
            "pattern": "^[0-9a-f-]+$",
            "description": "A deleted state's id, from GET /api/deleted-states",
        })),
        // Any positive whole number a u64 holds; one past the stored ones names no version.
        "version" => Some(json!({"type": "integer", "minimum": 1, "maximum": u64::MAX})),
        _ => None,
    }
}

fn name_schema(what: &str) -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_NAME_LEN,
        "pattern": NAME_PATTERN,
        "description": format!("{what}: 1-{MAX_NAME_LEN} of A-Z a-z 0-9 . _ -, not starting with '.'"),
    })
}

/// The one error envelope, with the fixed list of codes (docs/errors.md).
fn error_schema() -> Value {
    let codes: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    json!({
        "type": "object",
        "required": ["error"],
        "properties": {"error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string", "enum": codes, "description": "docs/errors.md says what each means"},
                "message": {"type": "string", "description": "What a person can do about it"},
            },
        }},
    })
}

/// An app state's 423: the envelope with the holder's lock, which Octo's client names.
fn app_locked_schema() -> Value {
    json!({
        "type": "object",
        "required": ["error"],
        "properties": {"error": {
            "type": "object",
            "required": ["code", "message", "lock"],
            "properties": {
                "code": {"type": "string", "enum": [ErrorCode::AppLocked.as_str()]},
                "message": {"type": "string", "description": "What a person can do about it"},
                "lock": {"$ref": "#/components/schemas/AppLock"},
            },
        }},
    })
}

fn security_schemes() -> Value {
    json!({
        "token": {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal access token (`hegemony-state token create`); on the backend routes of its state, a step token too",
        },
        "basic": {
            "type": "http",
            "scheme": "basic",
            "description": "Backend routes only (state, lock, and a state's outputs as a state): any username, the token as password, as Terraform's http backend sends it",
        },
        "platform": {
            "type": "http",
            "scheme": "bearer",
            "description": "The platform's token (`hegemony-state token create --platform`): the runs API only",
        },
        "idToken": {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": "A CI job's OpenID Connect ID token (or the body's `token`): the exchange for a workload session only",
        },
    })
}

/// The credentials a row's handler takes.
fn security(credentials: Credentials) -> Value {
    match credentials {
        Credentials::Open => json!([]),
        Credentials::Backend => json!([{"token": []}, {"basic": []}]),
        Credentials::Bearer => json!([{"token": []}]),
        Credentials::Platform => json!([{"platform": []}]),
        Credentials::IdToken => json!([{"idToken": []}, {}]),
    }
}

/// A method only the local server and the container answer: OpenAPI 3.1 has no place for
/// it as an operation, so its path says it in words and in `x-local-only-methods`.
fn describe_local_only(item: &mut Value, route: &Route) {
    let alias = ROUTES
        .iter()
        .find(|r| r.path == route.path && !r.local_only && r.handler.name() == route.handler.name())
        .map_or("", |r| r.method);
    let Some(item) = item.as_object_mut() else {
        return;
    };
    let methods = item
        .entry("x-local-only-methods")
        .or_insert_with(|| json!({}));
    methods[route.method] = json!(format!("the same as {alias}"));
    let listed: Vec<String> = methods
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k} ({})", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    item.insert(
        "description".into(),
        format!(
            "The local server and the container also answer {} here, for Terraform's lock_method and unlock_method settings. API Gateway cannot route them, so the Lambda functions do not, and `Allow` does not list them.",
            listed.join(" and ")
        )
        .into(),
    );
}

#[cfg(test)]
mod tests;
