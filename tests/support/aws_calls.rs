//! A counting relay in front of the AWS emulator: a deployment whose processes reach moto
//! through it has every AWS call it makes counted by service and operation (DynamoDB and
//! KMS by their `X-Amz-Target`, S3 by method), so a test or the benchmark can say how many
//! calls each backend operation costs. It lives in the test process: production clients
//! carry no counting layer at all. It also works out what those calls would cost on AWS
//! (`request_units`).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::request_units::{self, Sizes, Units};

/// Calls by operation, e.g. `DynamoDB GetItem` -> 2.
pub type Calls = BTreeMap<String, u64>;

/// What the relay saw between two takes: the calls, and the request units they cost.
#[derive(Debug, Default)]
pub struct Tally {
    pub calls: Calls,
    pub units: Units,
}

/// The running tally, and the item sizes seen so far (which outlive a take: a read is
/// charged for an item written before it).
#[derive(Default)]
struct Seen {
    tally: Tally,
    sizes: Sizes,
}

/// The relay: its endpoint, and what it saw since the last [`CallCounter::take`].
pub struct CallCounter {
    pub endpoint: String,
    seen: Arc<Mutex<Seen>>,
    _runtime: tokio::runtime::Runtime,
}

impl CallCounter {
    /// A relay on a free loopback port forwarding every request to `upstream`.
    pub fn start(upstream: &str) -> CallCounter {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Seen::default()));
        runtime.spawn(relay(listener, upstream.to_owned(), seen.clone()));
        CallCounter {
            endpoint,
            seen,
            _runtime: runtime,
        }
    }

    /// What was seen since the last take, and a fresh tally from now.
    pub fn take(&self) -> Tally {
        std::mem::take(&mut self.seen.lock().unwrap().tally)
    }
}

/// What a request to the emulator is: the JSON services name it in `X-Amz-Target`
/// (`DynamoDB_20120810.GetItem`, `TrentService.Decrypt`); S3 by its method on an object.
fn operation(request: &hyper::Request<Incoming>) -> String {
    if let Some(target) = request
        .headers()
        .get("x-amz-target")
        .and_then(|t| t.to_str().ok())
    {
        let (service, op) = target.split_once('.').unwrap_or(("?", target));
        let service = match service {
            s if s.starts_with("DynamoDB") => "DynamoDB",
            "TrentService" => "KMS",
            other => other,
        };
        return format!("{service} {op}");
    }
    let op = match *request.method() {
        hyper::Method::GET => "GetObject",
        hyper::Method::PUT => "PutObject",
        hyper::Method::DELETE => "DeleteObject",
        hyper::Method::HEAD => "HeadObject",
        ref other => return format!("S3 {other}"),
    };
    format!("S3 {op}")
}

async fn relay(listener: TcpListener, upstream: String, seen: Arc<Mutex<Seen>>) {
    let client = reqwest::Client::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let (client, upstream, seen) = (client.clone(), upstream.clone(), seen.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request: hyper::Request<Incoming>| {
                let (client, upstream, seen) = (client.clone(), upstream.clone(), seen.clone());
                async move {
                    let operation = operation(&request);
                    let relayed = forward(&client, &upstream, request).await;
                    let mut seen = seen.lock().unwrap();
                    let Seen { tally, sizes } = &mut *seen;
                    *tally.calls.entry(operation.clone()).or_default() += 1;
                    let units = cost(&operation, &relayed.request, &relayed.answer, sizes);
                    tally.units.add(units);
                    Ok::<_, Infallible>(relayed.response)
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// What a call cost: a DynamoDB call's request units from its request and answer; an S3
/// put's bytes.
fn cost(operation: &str, request: &[u8], answer: &[u8], sizes: &mut Sizes) -> Units {
    if let Some(op) = operation.strip_prefix("DynamoDB ") {
        let parse = |b: &[u8]| serde_json::from_slice(b).unwrap_or(serde_json::Value::Null);
        return request_units::dynamodb(op, &parse(request), &parse(answer), sizes);
    }
    if operation == "S3 PutObject" {
        return Units {
            s3_bytes_put: request.len() as u64,
            ..Units::default()
        };
    }
    Units::default()
}

/// A call relayed: the request's body and the answer's, kept for [`cost`], and the answer
/// to send back.
struct Relayed {
    request: Bytes,
    answer: Bytes,
    response: hyper::Response<Full<Bytes>>,
}

/// The request sent on to the emulator as it came, and its answer back as it came; a
/// failure to reach it is a 502 the SDK treats as any other failed call.
async fn forward(
    client: &reqwest::Client,
    upstream: &str,
    request: hyper::Request<Incoming>,
) -> Relayed {
    let bad_gateway = |request: Bytes, why: String| Relayed {
        request,
        answer: Bytes::new(),
        response: hyper::Response::builder()
            .status(502)
            .body(Full::new(Bytes::from(why)))
            .unwrap(),
    };
    let (parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let body = match body.collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => return bad_gateway(Bytes::new(), e.to_string()),
    };
    let mut sent = client.request(parts.method, format!("{upstream}{path}"));
    for (name, value) in &parts.headers {
        if name != "host" && name != "content-length" && name != "transfer-encoding" {
            sent = sent.header(name, value);
        }
    }
    let answer = match sent.body(body.clone()).send().await {
        Ok(answer) => answer,
        Err(e) => return bad_gateway(body, e.to_string()),
    };
    let mut response = hyper::Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if name != "content-length" && name != "transfer-encoding" && name != "connection" {
            response = response.header(name, value);
        }
    }
    match answer.bytes().await {
        Ok(bytes) => Relayed {
            request: body,
            answer: bytes.clone(),
            response: response.body(Full::new(bytes)).unwrap(),
        },
        Err(e) => bad_gateway(body, e.to_string()),
    }
}

/// The AWS calls of each backend operation of a Terraform run on a state that exists, in
/// order: LOCK, GET (a version not read before), GET again, POST, UNLOCK, the list, and the
/// inventory's search, conflicts and overview. The
/// state is made first (its first lock and save are not counted), so the figures are those
/// of every plan and apply after the first.
pub fn per_operation(
    deployment: &crate::aws::Deployment,
    endpoint: &impl crate::Endpoint,
    token: &str,
) -> Vec<(&'static str, Tally)> {
    per_operation_on(deployment, endpoint, token, &|serial| {
        crate::state_doc(serial, "c", if serial == 1 { "one" } else { "two" })
    })
}

/// [`per_operation`] on the state `state(serial)` gives, for a state of the size of one's
/// own.
pub fn per_operation_on(
    deployment: &crate::aws::Deployment,
    endpoint: &impl crate::Endpoint,
    token: &str,
    state: &dyn Fn(u64) -> String,
) -> Vec<(&'static str, Tally)> {
    let api = crate::Api::new(endpoint);
    let ok = |what: &str, response: crate::Response| {
        assert!(
            response.status().is_success(),
            "{what}: {}",
            response.status()
        );
    };
    ok(
        "lock",
        api.lock(token, "counted", &crate::lock_doc("first")),
    );
    ok(
        "save",
        api.post_state(token, "counted", Some("first"), state(1)),
    );
    ok(
        "unlock",
        api.unlock(token, "counted", &crate::lock_doc("first")),
    );
    deployment.tally();
    let mut counted = Vec::new();
    let mut step = |name: &'static str, what: &dyn Fn() -> crate::Response| {
        ok(name, what());
        counted.push((name, deployment.tally()));
    };
    step("LOCK", &|| {
        api.lock(token, "counted", &crate::lock_doc("second"))
    });
    step("GET", &|| api.get_state(token, "counted"));
    step("GET again", &|| api.get_state(token, "counted"));
    step("POST", &|| {
        api.post_state(token, "counted", Some("second"), state(2))
    });
    step("UNLOCK", &|| {
        api.unlock(token, "counted", &crate::lock_doc("second"))
    });
    step("list", &|| {
        api.request("GET", "/api/tf-states", Some(token))
            .send()
            .unwrap()
    });
    // The inventory's three reads, over the org's one state.
    for (name, path) in [
        ("search", "/api/resources"),
        ("conflicts", "/api/resources/conflicts"),
        ("overview", "/api/overview"),
    ] {
        step(name, &|| {
            api.request("GET", path, Some(token)).send().unwrap()
        });
    }
    counted
}

/// One line per operation: its total, then each call, then the request units they cost,
/// e.g. `LOCK  3  DynamoDB BatchGetItem 1, ...  (read 1.5, write 6, S3 put 0 B)`.
pub fn table(counted: &[(&str, Tally)]) -> String {
    counted
        .iter()
        .map(|(name, tally)| {
            let calls = &tally.calls;
            let each: Vec<String> = calls.iter().map(|(op, n)| format!("{op} {n}")).collect();
            format!(
                "  {name:<10} {:>2}  {}  (DynamoDB read units {}, write units {}, S3 put {} B)\n",
                calls.values().sum::<u64>(),
                each.join(", "),
                tally.units.read(),
                tally.units.write,
                tally.units.s3_bytes_put,
            )
        })
        .collect()
}
