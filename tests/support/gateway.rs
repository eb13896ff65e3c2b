//! API Gateway (HTTP API, payload v2, `$default` stage) in front of the real Lambda function
//! binaries, each under its own Lambda Runtime API: the gateway matches a request against
//! the route table as the deployed API's routes do (local-only methods are not routed), turns
//! it into the v2 event, hands it to the function's runtime API and turns the function's
//! response back into HTTP. Lambda's payload limits apply as on AWS: an event of 6,291,456
//! bytes or more is refused (413) before the function sees it, and a response over
//! 6,291,556 bytes becomes a 502.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use hegemony_state::http::{find_route, RouteMatch, ROUTES};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

use crate::aws::Deployment;

/// Lambda's limits on a synchronous invocation's event and response.
pub const EVENT_LIMIT: usize = 6_291_456;
pub const RESPONSE_LIMIT: usize = 6_291_556;

/// Where a function's answer goes: its response, or its error.
type Answer = oneshot::Sender<Result<String, String>>;

/// One invocation waiting for its function: the event, and where its answer goes.
struct Invocation {
    event: String,
    answer: Answer,
}

/// One function's runtime API state.
struct Function {
    queue: mpsc::Sender<Invocation>,
    /// When its process started, and when it first asked for work (ready).
    started: Instant,
    ready: Mutex<Option<Duration>>,
}

/// The gateway and its functions; everything stops when dropped.
pub struct Gateway {
    pub base: String,
    functions: Arc<HashMap<String, Arc<Function>>>,
    children: Vec<(String, Child)>,
    logs: Arc<Mutex<String>>,
    _runtime: tokio::runtime::Runtime,
}

/// The function binaries of this build (`make test` builds them).
fn function_bin(name: &str) -> std::path::PathBuf {
    let path = crate::bin().parent().unwrap().join(name);
    assert!(
        path.exists(),
        "{} is missing: build the functions first (make test does: cargo build -p hegemony-state-functions)",
        path.display()
    );
    path
}

/// Every HTTP function of the route table.
pub fn http_functions() -> Vec<&'static str> {
    let mut names: Vec<&str> = ROUTES.iter().map(|r| r.function).collect();
    names.sort_unstable();
    names.dedup();
    names
}

impl Gateway {
    /// Starts every function of the route table, and the sweeper, on `deployment`.
    pub fn start(deployment: &Deployment, extra_env: &[(&str, &str)]) -> Gateway {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let mut names = http_functions();
        names.push("sweeper");
        let logs = Arc::new(Mutex::new(String::new()));
        let mut functions = HashMap::new();
        let mut children = Vec::new();
        for name in names {
            let (tx, rx) = mpsc::channel::<Invocation>(64);
            let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
            let port = listener.local_addr().unwrap().port();
            let mut cmd = Command::new(function_bin(name));
            cmd.envs(deployment.env())
                .env("AWS_LAMBDA_RUNTIME_API", format!("127.0.0.1:{port}"))
                .env("AWS_LAMBDA_FUNCTION_NAME", name)
                .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024")
                .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
                .env("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}"))
                .env("AWS_LAMBDA_LOG_STREAM_NAME", "test")
                .env("RUST_LOG", "info")
                .env_remove("HEGEMONY_TF_STATE_STORE")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            for (k, v) in extra_env {
                cmd.env(k, v);
            }
            let function = Arc::new(Function {
                queue: tx,
                started: Instant::now(),
                ready: Mutex::new(None),
            });
            let mut child = cmd.spawn().expect("start a function");
            let stderr = child.stderr.take().unwrap();
            let sink = logs.clone();
            std::thread::spawn(move || {
                use std::io::BufRead;
                for line in std::io::BufReader::new(stderr)
                    .lines()
                    .map_while(Result::ok)
                {
                    let mut logs = sink.lock().unwrap();
                    logs.push_str(&line);
                    logs.push('\n');
                }
            });
            children.push((name.to_owned(), child));
            runtime.spawn(runtime_api(listener, function.clone(), rx));
            functions.insert(name.to_owned(), function);
        }
        let functions = Arc::new(functions);
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        runtime.spawn(gateway(listener, functions.clone()));
        let gateway = Gateway {
            base,
            functions,
            children,
            logs,
            _runtime: runtime,
        };
        gateway.wait_ready(Duration::from_secs(30));
        gateway
    }

    fn wait_ready(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.ready_times().len() < self.functions.len() {
            assert!(
                Instant::now() < deadline,
                "functions did not all start:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Each function's time from process start to its first request for work.
    pub fn ready_times(&self) -> Vec<(String, Duration)> {
        let mut times: Vec<_> = self
            .functions
            .iter()
            .filter_map(|(name, f)| f.ready.lock().unwrap().map(|t| (name.clone(), t)))
            .collect();
        times.sort();
        times
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// What the functions logged so far.
    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().clone()
    }

    /// Invokes the sweeper as its schedule would, and returns its answer.
    pub fn invoke_sweeper(&self) -> Result<serde_json::Value, String> {
        let event = serde_json::json!({
            "version": "0", "id": "test", "detail-type": "Scheduled Event",
            "source": "aws.events", "account": "111122223333",
            "time": "2026-11-30T05:00:00Z", "region": "us-east-1",
            "resources": ["arn:aws:events:us-east-1:111122223333:rule/sweeper"], "detail": {}
        });
        let function = self.functions["sweeper"].clone();
        self._runtime
            .block_on(invoke(&function, event.to_string()))
            .map(|text| serde_json::from_str(&text).unwrap())
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl crate::Endpoint for Gateway {
    fn url(&self, path: &str) -> String {
        Gateway::url(self, path)
    }
}

/// Hands `event` to the function and waits for its answer.
async fn invoke(function: &Function, event: String) -> Result<String, String> {
    let (answer, answered) = oneshot::channel();
    function
        .queue
        .send(Invocation { event, answer })
        .await
        .map_err(|_| "the function's runtime API is gone".to_owned())?;
    match tokio::time::timeout(Duration::from_secs(60), answered).await {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err("the invocation was dropped".into()),
        Err(_) => Err("the function timed out".into()),
    }
}

fn reply(status: u16, body: impl Into<Bytes>) -> hyper::Response<Full<Bytes>> {
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(body.into()))
        .unwrap()
}

/// The Lambda Runtime API of one function: `next` hands out one invocation at a time, and
/// `response` / `error` answer it.
async fn runtime_api(
    listener: TcpListener,
    function: Arc<Function>,
    queue: mpsc::Receiver<Invocation>,
) {
    let queue = Arc::new(tokio::sync::Mutex::new(queue));
    let in_flight: Arc<Mutex<HashMap<String, Answer>>> = Arc::default();
    let ids = Arc::new(Mutex::new(0u64));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let (function, queue, in_flight, ids) = (
            function.clone(),
            queue.clone(),
            in_flight.clone(),
            ids.clone(),
        );
        tokio::spawn(async move {
            let service = service_fn(move |req: hyper::Request<Incoming>| {
                let (function, queue, in_flight, ids) = (
                    function.clone(),
                    queue.clone(),
                    in_flight.clone(),
                    ids.clone(),
                );
                async move {
                    let path = req.uri().path().to_owned();
                    if path.ends_with("/runtime/invocation/next") {
                        function
                            .ready
                            .lock()
                            .unwrap()
                            .get_or_insert_with(|| function.started.elapsed());
                        let Some(invocation) = queue.lock().await.recv().await else {
                            return Ok::<_, Infallible>(reply(500, "shutting down"));
                        };
                        let id = {
                            let mut n = ids.lock().unwrap();
                            *n += 1;
                            format!("req-{n}")
                        };
                        in_flight
                            .lock()
                            .unwrap()
                            .insert(id.clone(), invocation.answer);
                        let deadline = time_ms() + 60_000;
                        let mut response = reply(200, invocation.event);
                        let headers = response.headers_mut();
                        headers.insert("lambda-runtime-aws-request-id", id.parse().unwrap());
                        headers.insert(
                            "lambda-runtime-deadline-ms",
                            deadline.to_string().parse().unwrap(),
                        );
                        headers.insert(
                            "lambda-runtime-invoked-function-arn",
                            "arn:aws:lambda:us-east-1:111122223333:function:test"
                                .parse()
                                .unwrap(),
                        );
                        headers.insert("lambda-runtime-trace-id", "Root=1-0-0".parse().unwrap());
                        return Ok(response);
                    }
                    let body = req.into_body().collect().await.map(|b| b.to_bytes());
                    let body = String::from_utf8_lossy(&body.unwrap_or_default()).into_owned();
                    let mut parts = path.rsplitn(3, '/');
                    let (kind, id) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                    let answer = in_flight.lock().unwrap().remove(id);
                    match (kind, answer) {
                        ("response", Some(answer)) => {
                            let _ = answer.send(Ok(body));
                        }
                        ("error", Some(answer)) => {
                            let _ = answer.send(Err(body));
                        }
                        _ => {}
                    }
                    Ok(reply(202, "{}"))
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn time_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// API Gateway's front: HTTP in, v2 event to the route's function, its answer out.
async fn gateway(listener: TcpListener, functions: Arc<HashMap<String, Arc<Function>>>) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            return;
        };
        let functions = functions.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let functions = functions.clone();
                async move { Ok::<_, Infallible>(route(&functions, peer, req).await) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn route(
    functions: &HashMap<String, Arc<Function>>,
    peer: SocketAddr,
    req: hyper::Request<Incoming>,
) -> hyper::Response<Full<Bytes>> {
    let method = req.method().as_str().to_owned();
    let path = req.uri().path().to_owned();
    let route = match find_route(&method, &path) {
        RouteMatch::Found { route, params } if !route.local_only => (route, params),
        _ => return reply(404, r#"{"message":"Not Found"}"#),
    };
    let (parts, body) = req.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return reply(400, r#"{"message":"Bad Request"}"#);
    };
    let mut headers = serde_json::Map::new();
    for name in parts.headers.keys() {
        let joined: Vec<&str> = parts
            .headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        headers.insert(name.as_str().to_owned(), joined.join(",").into());
    }
    let query = parts.uri.query().unwrap_or("").to_owned();
    let mut query_parameters = serde_json::Map::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        query_parameters.insert(k.to_owned(), v.into());
    }
    let path_parameters: serde_json::Map<_, _> = route
        .1
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).into()))
        .collect();
    let texty = parts
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_none_or(|t| t.contains("json") || t.starts_with("text/"));
    let (body, encoded) = match std::str::from_utf8(&body) {
        _ if body.is_empty() => (serde_json::Value::Null, false),
        Ok(text) if texty => (text.into(), false),
        _ => (
            base64::engine::general_purpose::STANDARD
                .encode(&body)
                .into(),
            true,
        ),
    };
    let route_key = format!("{} {}", route.0.method, route.0.path);
    let mut event = serde_json::json!({
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": path,
        "rawQueryString": query,
        "headers": headers,
        "requestContext": {
            "accountId": "111122223333", "apiId": "local", "domainName": "localhost",
            "domainPrefix": "localhost",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                     "sourceIp": peer.ip().to_string(), "userAgent": ""},
            "requestId": "local", "routeKey": route_key, "stage": "$default",
            "time": "30/Nov/2026:05:00:00 +0000", "timeEpoch": time_ms() as u64
        },
        "isBase64Encoded": encoded
    });
    if !query_parameters.is_empty() {
        event["queryStringParameters"] = query_parameters.into();
    }
    if !path_parameters.is_empty() {
        event["pathParameters"] = path_parameters.into();
    }
    if !body.is_null() {
        event["body"] = body;
    }
    let event = event.to_string();
    if event.len() >= EVENT_LIMIT {
        return reply(413, r#"{"message":"Request Entity Too Large"}"#);
    }
    let answer = match invoke(&functions[route.0.function], event).await {
        Ok(answer) => answer,
        Err(_) => return reply(500, r#"{"message":"Internal Server Error"}"#),
    };
    if answer.len() > RESPONSE_LIMIT {
        return reply(502, r#"{"message":"Internal Server Error"}"#);
    }
    let Ok(answer) = serde_json::from_str::<serde_json::Value>(&answer) else {
        return reply(502, r#"{"message":"Internal Server Error"}"#);
    };
    let mut response =
        hyper::Response::builder().status(answer["statusCode"].as_u64().unwrap_or(200) as u16);
    if let Some(headers) = answer["headers"].as_object() {
        for (k, v) in headers {
            if let Some(v) = v.as_str() {
                response = response.header(k, v);
            }
        }
    }
    if let Some(headers) = answer["multiValueHeaders"].as_object() {
        for (k, values) in headers {
            if answer["headers"].get(k).is_some() {
                continue;
            }
            for v in values
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str())
            {
                response = response.header(k, v);
            }
        }
    }
    let body = answer["body"].as_str().unwrap_or("");
    let body = if answer["isBase64Encoded"].as_bool().unwrap_or(false) {
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap_or_default()
    } else {
        body.as_bytes().to_vec()
    };
    response.body(Full::new(Bytes::from(body))).unwrap()
}
