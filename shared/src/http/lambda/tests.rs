//! The unit tests of `lambda`, beside it so that the file holds its code alone.

use super::*;
use crate::service::Limits;
use crate::wiring::clamp;
use lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpRequest;

/// A Terraform-like state of about `size` bytes: pretty-printed, many short attributes,
/// some holding escaped JSON (policies), as real provider states do.
pub(crate) fn terraform_like_state(size: usize) -> String {
    let mut out = String::from("{\n  \"version\": 4,\n  \"terraform_version\": \"1.11.4\",\n  \"serial\": 7,\n  \"lineage\": \"3f0c2a8e-2b7d-4f1e-9d55-0a6a1c2b9e11\",\n  \"outputs\": {},\n  \"resources\": [\n");
    let mut i = 0;
    while out.len() < size {
        out.push_str(&format!(
            "    {{\n      \"mode\": \"managed\",\n      \"type\": \"aws_iam_role\",\n      \"name\": \"r{i}\",\n      \"provider\": \"provider[\\\"registry.terraform.io/hashicorp/aws\\\"]\",\n      \"instances\": [\n        {{\n          \"schema_version\": 0,\n          \"attributes\": {{\n            \"arn\": \"arn:aws:iam::111122223333:role/r{i}\",\n            \"assume_role_policy\": \"{{\\\"Version\\\":\\\"2012-10-17\\\",\\\"Statement\\\":[{{\\\"Effect\\\":\\\"Allow\\\",\\\"Principal\\\":{{\\\"Service\\\":\\\"lambda.amazonaws.com\\\"}},\\\"Action\\\":\\\"sts:AssumeRole\\\"}}]}}\",\n            \"id\": \"r{i}\",\n            \"tags\": {{}}\n          }},\n          \"sensitive_attributes\": []\n        }}\n      ]\n    }},\n"
        ));
        i += 1;
    }
    out.push_str("    {}\n  ]\n}\n");
    out
}

/// The event API Gateway sends for Terraform's POST of `body`.
fn event_size(body: &str) -> u64 {
    let event = serde_json::json!({
        "version": "2.0",
        "routeKey": "POST /api/tf-states/{name}/state",
        "rawPath": "/api/tf-states/production-network/state",
        "rawQueryString": "ID=0d6f3bb5-3d8d-1f0c-6c1a-5a4a9c7e8b21",
        "headers": {
            "accept-encoding": "gzip",
            "authorization": format!("Basic {}", "x".repeat(90)),
            "content-length": body.len().to_string(),
            "content-md5": "1B2M2Y8AsgTpgAmY7PhCfg==",
            "content-type": "application/json",
            "host": "abcdef1234.execute-api.eu-west-1.amazonaws.com",
            "user-agent": "Go-http-client/1.1",
            "x-amzn-trace-id": "Root=1-67891233-abcdef012345678912345678",
            "x-forwarded-for": "203.0.113.10",
            "x-forwarded-port": "443",
            "x-forwarded-proto": "https"
        },
        "queryStringParameters": {"ID": "0d6f3bb5-3d8d-1f0c-6c1a-5a4a9c7e8b21"},
        "pathParameters": {"name": "production-network"},
        "requestContext": {
            "accountId": "111122223333", "apiId": "abcdef1234",
            "domainName": "abcdef1234.execute-api.eu-west-1.amazonaws.com",
            "domainPrefix": "abcdef1234",
            "http": {"method": "POST", "path": "/api/tf-states/production-network/state",
                     "protocol": "HTTP/1.1", "sourceIp": "203.0.113.10", "userAgent": "Go-http-client/1.1"},
            "requestId": "JKJaXmPLvHcESHA=", "routeKey": "POST /api/tf-states/{name}/state",
            "stage": "$default", "time": "30/Nov/2026:04:27:22 +0000", "timeEpoch": 1796013242000u64
        },
        "body": body,
        "isBase64Encoded": false
    });
    let text = serde_json::to_string(&event).unwrap();
    // The event is what the runtime would hand lambda_http.
    let _: ApiGatewayV2httpRequest = serde_json::from_str(&text).unwrap();
    text.len() as u64
}

/// The largest state of `make(size)`'s shape whose event fits the ceiling.
fn largest_fitting(make: impl Fn(usize) -> String) -> usize {
    let (mut fits, mut over) = (0usize, PAYLOAD_CEILING as usize);
    while over - fits > 1 {
        let mid = (fits + over) / 2;
        let body = make(mid);
        let body = &body[..mid.min(body.len())];
        if event_size(body) <= PAYLOAD_CEILING {
            fits = mid;
        } else {
            over = mid;
        }
    }
    fits
}

#[test]
fn the_clamped_limit_fits_the_ceiling_with_room_for_escaping() {
    let state = terraform_like_state(MAX_STATE_BYTES as usize);
    let state = &state[..MAX_STATE_BYTES as usize];
    let escaped = serde_json::to_string(state).unwrap().len() as f64;
    let growth = escaped / state.len() as f64;
    assert!(event_size(state) <= PAYLOAD_CEILING, "growth {growth:.3}");
    let largest = largest_fitting(terraform_like_state);
    println!(
        "a Terraform-like state grows {:.1}% when escaped; the largest that fits: {largest} bytes",
        (growth - 1.0) * 100.0
    );
    assert!(largest as u64 > MAX_STATE_BYTES);
    // A body of nothing but quotes doubles: the worst that still fits at the limit is
    // what the clamp's margin is for.
    let headroom = (PAYLOAD_CEILING - event_size("")) as f64 / MAX_STATE_BYTES as f64;
    assert!(headroom > 1.45, "{headroom}");
}

fn app() -> App {
    let store = std::sync::Arc::new(crate::adapters::memory::MemoryStore::new());
    App {
        catalog: store.clone(),
        blobs: store,
        keys: None,
        index_keys: Default::default(),
        key_cache: crate::service::key_cache::KeyCache::off(),
        clock: std::sync::Arc::new(crate::service::SystemClock),
        limits: clamp(Limits {
            max_state_bytes: 1 << 20,
            keep_versions: 5,
            run_end_grace: time::Duration::seconds(600),
            deleted_retention: time::Duration::days(7),
            lambda_ceiling: None,
        }),
        links: Default::default(),
        issuers: crate::service::issuers::Issuers::off(),
        metrics: std::sync::Arc::new(crate::ports::Unmeasured),
    }
}

fn request(method: &str, path: &str) -> Request {
    let mut req = lambda_http::http::Request::new(Body::Empty);
    *req.method_mut() = method.parse().unwrap();
    *req.uri_mut() = path.parse().unwrap();
    req
}

#[tokio::test]
async fn a_function_answers_only_its_own_routes() {
    let app = app();
    let own = answer(&app, "list", request("GET", "/api/openapi.json")).await;
    assert_eq!(own.status(), 200);
    let other = answer(&app, "list", request("GET", "/api/tf-states/net/state")).await;
    assert_eq!(
        other.status(),
        404,
        "a route of state-read, misrouted to list"
    );
    let local = answer(&app, "lock", request("LOCK", "/api/tf-states/net/lock")).await;
    assert_eq!(
        local.status(),
        404,
        "LOCK is served by the local server only"
    );
    // The route's parameters come from the table, not the event: without a token the
    // state-read handler gets as far as authentication.
    let read = answer(
        &app,
        "state-read",
        request("GET", "/api/tf-states/net/state"),
    )
    .await;
    assert_eq!(read.status(), 401);
}

/// A state of `size` bytes that gzip halves and no more (hex of pseudo-random bytes), as
/// a state full of ids and keys is.
fn hex_state(size: usize) -> Vec<u8> {
    let head = r#"{"version":4,"serial":1,"lineage":"big","outputs":{"pad":{"value":""#;
    let mut out = head.as_bytes().to_vec();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while out.len() < size - 4 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(format!("{:016x}", x).as_bytes());
    }
    out.truncate(size - 4);
    out.extend_from_slice(br#""}}}"#);
    out
}

/// A Lambda app on a store that already holds a state of `size` bytes, saved as the
/// container front door saves it (no clamp), and an operator's token.
async fn holding(size: usize, door: Option<&str>) -> (App, String) {
    use crate::domain::{name::StateName, permission::Role, Actor, Principal};
    let store = std::sync::Arc::new(crate::adapters::memory::MemoryStore::new());
    let key: std::sync::Arc<dyn crate::ports::KeyService> =
        std::sync::Arc::new(crate::crypto::PlatformKey::generate());
    let limits = Limits {
        max_state_bytes: 32 << 20,
        keep_versions: 5,
        run_end_grace: time::Duration::seconds(600),
        deleted_retention: time::Duration::days(7),
        lambda_ceiling: None,
    };
    let container = App {
        catalog: store.clone(),
        blobs: store.clone(),
        keys: Some(key.clone()),
        index_keys: Default::default(),
        key_cache: crate::service::key_cache::KeyCache::off(),
        clock: std::sync::Arc::new(crate::service::SystemClock),
        limits,
        links: Default::default(),
        issuers: crate::service::issuers::Issuers::off(),
        metrics: std::sync::Arc::new(crate::ports::Unmeasured),
    };
    let alice = Principal {
        session: None,
        org: "acme".into(),
        role: Role::Operator,
        actor: Actor::User {
            user: "alice".into(),
        },
        step: None,
    };
    let name = StateName::parse("big").unwrap();
    crate::service::state::write(&container, &alice, &name, None, hex_state(size))
        .await
        .unwrap();
    let new = crate::service::tokens::NewToken::Personal {
        org: "acme",
        user: "alice",
        role: Role::Operator,
    };
    let now = time::OffsetDateTime::now_utc();
    let (token, _) = crate::service::tokens::create(store.as_ref(), new, &Actor::Cli, now)
        .await
        .unwrap();
    let lambda = App {
        limits: clamp(limits),
        links: crate::service::Links {
            container_url: door.map(str::to_owned),
            ..Default::default()
        },
        ..container
    };
    (lambda, token)
}

fn authorized(path: &str, token: &str, gzip: bool) -> Request {
    let mut req = request("GET", path);
    let auth = format!("Bearer {token}").parse().unwrap();
    req.headers_mut().insert(header::AUTHORIZATION, auth);
    if gzip {
        req.headers_mut()
            .insert(header::ACCEPT_ENCODING, "gzip".parse().unwrap());
    }
    req
}

/// A 5 MiB version that gzip halves: plain, its base64 passes the ceiling; gzip'd, it
/// fits. What counts is the answer the function returns, not the state's size.
#[tokio::test]
async fn a_read_too_large_for_a_function_names_the_container_door() {
    let (app, token) = holding(5 << 20, None).await;
    let path = "/api/tf-states/big/state";
    let plain = answer(&app, "state-read", authorized(path, &token, false)).await;
    assert_eq!(plain.status(), 413);
    let body: serde_json::Value = serde_json::from_slice(plain.body()).unwrap();
    assert_eq!(body["error"]["code"], "too_large_for_functions");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("serve --store aws") && message.contains("HEGEMONY_CONTAINER_URL"),
        "{message}"
    );
    let zipped = answer(&app, "state-read", authorized(path, &token, true)).await;
    assert_eq!(zipped.status(), 200, "gzip'd, it fits");
    assert!(returned_size(&zipped) <= PAYLOAD_CEILING);
    let download = "/api/tf-states/big/versions/1/content";
    let plain = answer(&app, "download", authorized(download, &token, false)).await;
    assert_eq!(plain.status(), 413);
}

#[tokio::test]
async fn with_a_container_door_a_read_too_large_is_sent_there() {
    let door = "https://door.example.com";
    let (app, token) = holding(5 << 20, Some(door)).await;
    let path = "/api/tf-states/big/versions/1/content";
    let sent = answer(&app, "download", authorized(path, &token, false)).await;
    assert_eq!(sent.status(), 307);
    assert_eq!(sent.headers()[header::LOCATION], format!("{door}{path}"));
    let body: serde_json::Value = serde_json::from_slice(sent.body()).unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains(door));
    let small = answer(&app, "list", authorized("/api/tf-states", &token, false)).await;
    assert_eq!(small.status(), 200, "what fits is answered as always");
}

/// API Gateway joins a repeated header's values with commas: two Authorization headers
/// reach the function as one value holding both, and are refused as the server refuses
/// two headers, whichever comes first.
#[tokio::test]
async fn credentials_joined_by_api_gateway_are_refused() {
    let (app, token) = holding(1 << 10, None).await;
    let valid = format!("Bearer {token}");
    for joined in [
        format!("{valid},Bearer hgs_garbage"),
        format!("Bearer hgs_garbage,{valid}"),
    ] {
        let event = serde_json::json!({
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": "/api/tf-states/big/state",
            "rawQueryString": "",
            "headers": {"authorization": joined, "host": "api.example.com"},
            "requestContext": {
                "accountId": "111122223333", "apiId": "abcdef1234",
                "domainName": "api.example.com", "domainPrefix": "api",
                "http": {"method": "GET", "path": "/api/tf-states/big/state",
                         "protocol": "HTTP/1.1", "sourceIp": "203.0.113.10", "userAgent": "Go-http-client/1.1"},
                "requestId": "JKJaXmPLvHcESHA=", "routeKey": "$default",
                "stage": "$default", "time": "30/Nov/2026:04:27:22 +0000", "timeEpoch": 1796013242000u64
            },
            "isBase64Encoded": false
        });
        let req = lambda_http::request::from_str(&event.to_string()).unwrap();
        let refused = answer(&app, "state-read", req).await;
        assert_eq!(refused.status(), 400);
        let body: serde_json::Value = serde_json::from_slice(refused.body()).unwrap();
        assert_eq!(body["error"]["code"], "invalid_request");
    }
    let alone = answer(
        &app,
        "state-read",
        authorized("/api/tf-states/big/state", &token, false),
    )
    .await;
    assert_eq!(alone.status(), 200);
}

#[test]
fn the_returned_size_counts_base64_and_escapes() {
    let binary = Response::new(Body::Binary(vec![0; 3000]));
    assert_eq!(returned_size(&binary), (4000 + PAYLOAD_FIELDS) as u64);
    let text = Response::new(Body::Text("\"\n\u{1}a".into()));
    assert_eq!(
        returned_size(&text),
        (2 + 2 + 6 + 1 + PAYLOAD_FIELDS) as u64
    );
}

#[test]
fn the_web_function_answers_pages_and_unknown_api_paths_as_the_server_does() {
    let page = answer_pages(&request("GET", "/states/net"));
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["x-frame-options"], "DENY");
    let unknown = answer_pages(&request("GET", "/api/nope"));
    assert_eq!(unknown.status(), 404);
    assert_eq!(unknown.headers()["content-type"], "application/json");
    let wrong_method = answer_pages(&request("GET", "/api/tf-states/net/rollback"));
    assert_eq!(wrong_method.status(), 405);
    let misrouted = answer_pages(&request("GET", "/api/tf-states"));
    assert_eq!(misrouted.status(), 404, "a route of list, misrouted to web");
}
