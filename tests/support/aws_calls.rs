//! A counting relay in front of the AWS emulator: a deployment whose processes reach moto
//! through it has every AWS call it makes counted by service and operation (DynamoDB and
//! KMS by their `X-Amz-Target`, S3 by method), so a test or the benchmark can say how many
//! calls each backend operation costs. It lives in the test process: production clients
//! carry no counting layer at all.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// Calls by operation, e.g. `DynamoDB GetItem` -> 2.
pub type Calls = BTreeMap<String, u64>;

/// The relay: its endpoint, and the calls counted since the last [`CallCounter::take`].
pub struct CallCounter {
    pub endpoint: String,
    calls: Arc<Mutex<Calls>>,
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
        let calls = Arc::new(Mutex::new(Calls::new()));
        runtime.spawn(relay(listener, upstream.to_owned(), calls.clone()));
        CallCounter {
            endpoint,
            calls,
            _runtime: runtime,
        }
    }

    /// The calls counted since the last take, and a fresh count from now.
    pub fn take(&self) -> Calls {
        std::mem::take(&mut *self.calls.lock().unwrap())
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

async fn relay(listener: TcpListener, upstream: String, calls: Arc<Mutex<Calls>>) {
    let client = reqwest::Client::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let (client, upstream, calls) = (client.clone(), upstream.clone(), calls.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request: hyper::Request<Incoming>| {
                let (client, upstream, calls) = (client.clone(), upstream.clone(), calls.clone());
                async move {
                    *calls
                        .lock()
                        .unwrap()
                        .entry(operation(&request))
                        .or_default() += 1;
                    Ok::<_, Infallible>(forward(&client, &upstream, request).await)
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The request sent on to the emulator as it came, and its answer back as it came; a
/// failure to reach it is a 502 the SDK treats as any other failed call.
async fn forward(
    client: &reqwest::Client,
    upstream: &str,
    request: hyper::Request<Incoming>,
) -> hyper::Response<Full<Bytes>> {
    let bad_gateway = |why: String| {
        hyper::Response::builder()
            .status(502)
            .body(Full::new(Bytes::from(why)))
            .unwrap()
    };
    let (parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let body = match body.collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => return bad_gateway(e.to_string()),
    };
    let mut sent = client.request(parts.method, format!("{upstream}{path}"));
    for (name, value) in &parts.headers {
        if name != "host" && name != "content-length" && name != "transfer-encoding" {
            sent = sent.header(name, value);
        }
    }
    let answer = match sent.body(body).send().await {
        Ok(answer) => answer,
        Err(e) => return bad_gateway(e.to_string()),
    };
    let mut response = hyper::Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if name != "content-length" && name != "transfer-encoding" && name != "connection" {
            response = response.header(name, value);
        }
    }
    match answer.bytes().await {
        Ok(bytes) => response.body(Full::new(bytes)).unwrap(),
        Err(e) => bad_gateway(e.to_string()),
    }
}

/// The AWS calls of each backend operation of a Terraform run on a state that exists, in
/// order: LOCK, GET (a version not read before), GET again, POST, UNLOCK, and the list. The
/// state is made first (its first lock and save are not counted), so the figures are those
/// of every plan and apply after the first.
pub fn per_operation(
    deployment: &crate::aws::Deployment,
    endpoint: &impl crate::Endpoint,
    token: &str,
) -> Vec<(&'static str, Calls)> {
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
        api.post_state(
            token,
            "counted",
            Some("first"),
            crate::state_doc(1, "c", "one"),
        ),
    );
    ok(
        "unlock",
        api.unlock(token, "counted", &crate::lock_doc("first")),
    );
    deployment.calls();
    let mut counted = Vec::new();
    let mut step = |name: &'static str, what: &dyn Fn() -> crate::Response| {
        ok(name, what());
        counted.push((name, deployment.calls()));
    };
    step("LOCK", &|| {
        api.lock(token, "counted", &crate::lock_doc("second"))
    });
    step("GET", &|| api.get_state(token, "counted"));
    step("GET again", &|| api.get_state(token, "counted"));
    step("POST", &|| {
        api.post_state(
            token,
            "counted",
            Some("second"),
            crate::state_doc(2, "c", "two"),
        )
    });
    step("UNLOCK", &|| {
        api.unlock(token, "counted", &crate::lock_doc("second"))
    });
    step("list", &|| {
        api.request("GET", "/api/tf-states", Some(token))
            .send()
            .unwrap()
    });
    counted
}

/// One line per operation: its total, then each call, e.g.
/// `LOCK  4  DynamoDB GetItem 3, DynamoDB TransactWriteItems 1`.
pub fn table(counted: &[(&str, Calls)]) -> String {
    counted
        .iter()
        .map(|(name, calls)| {
            let each: Vec<String> = calls.iter().map(|(op, n)| format!("{op} {n}")).collect();
            format!(
                "  {name:<10} {:>2}  {}\n",
                calls.values().sum::<u64>(),
                each.join(", ")
            )
        })
        .collect()
}
