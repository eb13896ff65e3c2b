//! The server (the local store's, or the AWS container front door): HTTP/1.1 on a TCP
//! listener. Each request is turned into the `lambda_http::Request` an API Gateway HTTP API
//! (payload v2, `$default` stage) would deliver, path parameters included, admitted on its
//! headers (route and credentials), and only then has its body read (body.rs) and is
//! answered by the same handlers the Lambda functions run. Clients are held to the limits of
//! [`ClientLimits`]: a cap on connections, a timeout on request heads, idle keep-alive
//! connections, bodies and unread answers, and a least rate for bodies; each connection's
//! chunk sizes are watched as they are read (chunks.rs), so a chunk announced over the
//! route's limit is refused before its data. The port opens only once the store is ready and
//! a new store's first token printed. On shutdown it stops accepting and lets the requests
//! in flight finish.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use hegemony_state::adapters::prometheus::Prometheus;
use hegemony_state::http::content::{StreamedBody, Streams};
use hegemony_state::http::measure::measure;
use hegemony_state::http::{self, find_route, Route, RouteMatch};
use hegemony_state::service::sweep::{self, SweepReport};
use hegemony_state::service::{tokens, App};
use http_body_util::{Either, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use lambda_http::Body;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::body::{Bodies, MinRate};
use crate::chunks::{Announced, Announcement, Watched};
use crate::pacing::{Backoff, Throttle};
use crate::stalled::WriteTimeout;
use crate::store::{Store, StoreKind};
use crate::streamed::Streamed;
use metrics::{Counted, Exposed};

/// The default cap on request bytes held at once: four of the largest states (128 MiB).
pub const DEFAULT_BYTES_IN_FLIGHT: u64 = 512 * 1024 * 1024;

/// The default cap on connections served at once.
pub const DEFAULT_MAX_CONNECTIONS: u64 = 1024;

/// The default client timeout, in seconds.
pub const DEFAULT_CLIENT_TIMEOUT_SECONDS: u64 = 30;

/// The default least rate of a request body: far below any real link (a 128 MiB state at
/// this rate would take a day and a half), far above a byte every few seconds.
pub const DEFAULT_MIN_BYTES_PER_SECOND: u64 = 1024;

/// The default window the least rate is averaged over, in seconds.
pub const DEFAULT_RATE_WINDOW_SECONDS: u64 = 30;

/// How often a fault that repeats (the connection cap reached, accepts failing) is logged.
const WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// What the server holds its clients to (docs/limits.md).
#[derive(Debug, Clone, Copy)]
pub struct ClientLimits {
    /// The most request-body bytes held at once; only admitted requests hold any.
    pub bytes_in_flight: u64,
    /// The most connections served at once; more wait in the kernel's backlog.
    pub max_connections: u64,
    /// How long a client may take to send a request head, leave a keep-alive connection
    /// idle, go without sending a byte of a body, or leave its answer unread.
    pub timeout: Duration,
    /// The slowest a request body may arrive; `None` when the check is off.
    pub min_rate: Option<MinRate>,
}

/// The listen backlog: connections the kernel holds for the accept loop (as Tokio's
/// `TcpListener::bind` asks for).
const LISTEN_BACKLOG: u32 = 1024;

/// How long requests in flight may take to finish once shutdown starts; a save still
/// running after that is cut off (its client sees a dropped connection and retries).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// A socket bound to `addr` (as a listener is: the address may be reused at once after a
/// restart), not yet listening.
///
/// # Errors
/// When the address cannot be bound (in use, not local).
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpSocket> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    Ok(socket)
}

/// Serves `store` on `socket` (bound, not yet listening) until `shutdown` completes, and
/// its metrics on `metrics` when given (metrics.rs). The
/// socket starts listening only once the store is open and a new store's first admin token
/// is printed and flushed: a script that waits for the port and then reads the token finds
/// it, and before then a client is refused rather than queued. On shutdown it stops
/// accepting (the listener is closed, so new connections are refused), lets the requests in
/// flight finish for up to [`SHUTDOWN_GRACE`], and returns. Taking the socket and the
/// shutdown future as arguments lets a caller pick the port and the signal, as mini-redis's
/// `server::run` does.
///
/// # Errors
/// When the store cannot be opened, the cap on bytes in flight is below the largest state
/// or above what a semaphore counts, the first admin token cannot be written or printed, or
/// the socket cannot listen.
pub async fn serve(
    socket: TcpSocket,
    store: &Store,
    key_file: Option<&Path>,
    limits: ClientLimits,
    metrics: Option<TcpSocket>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let mut app = store.app(key_file).await?;
    // Without a metrics listener nothing is counted: no one could read it.
    let census = match metrics {
        Some(_) => store.census()?,
        None => None,
    };
    let prometheus = metrics
        .as_ref()
        .map(|_| Arc::new(Prometheus::new(census.is_some())));
    if let Some(prometheus) = &prometheus {
        app = app.measured(prometheus.clone());
    }
    let app = Arc::new(app);
    let bytes_in_flight = limits.bytes_in_flight;
    if bytes_in_flight < app.limits.max_state_bytes {
        bail!(
            "HEGEMONY_MAX_BODY_BYTES_IN_FLIGHT={bytes_in_flight} is less than the largest state ({} bytes): no save of that size could ever be taken",
            app.limits.max_state_bytes
        );
    }
    let Some(permits) = usize::try_from(bytes_in_flight)
        .ok()
        .filter(|n| *n <= Semaphore::MAX_PERMITS)
    else {
        bail!(
            "HEGEMONY_MAX_BODY_BYTES_IN_FLIGHT={bytes_in_flight} is more than {} bytes",
            Semaphore::MAX_PERMITS
        );
    };
    let bodies = Arc::new(Bodies {
        in_flight: Arc::new(Semaphore::new(permits)),
        idle: limits.timeout,
        min_rate: limits.min_rate,
    });
    // The connection cap's slots, one per connection, released when its task ends. The
    // setting's range (main.rs) keeps it under the semaphore's maximum.
    let slots = Arc::new(Semaphore::new(
        usize::try_from(limits.max_connections).unwrap_or(Semaphore::MAX_PERMITS),
    ));
    let bound = socket.local_addr()?;
    // A new local store gets its first admin token here; an AWS deployment's first tokens
    // come from `token create --store aws`, never from a server starting.
    if store.kind == StoreKind::Local {
        let first_token =
            tokens::bootstrap(app.catalog.as_ref(), time::OffsetDateTime::now_utc()).await?;
        if let Some(token) = first_token {
            print_welcome(bound, &token)?;
        }
    }
    let connection_count = Arc::new(AtomicU64::new(0));
    let scrapes = match (metrics, prometheus) {
        (Some(socket), Some(prometheus)) => {
            let exposed = Arc::new(Exposed {
                prometheus,
                connections: connection_count.clone(),
                bytes_cap: permits,
                bytes: bodies.in_flight.clone(),
                census,
            });
            let at = socket.local_addr()?;
            let listener = socket.listen(LISTEN_BACKLOG)?;
            tracing::info!("metrics on http://{at}/metrics");
            Some(tokio::spawn(metrics::serve(listener, exposed)))
        }
        _ => None,
    };
    let listener = socket.listen(LISTEN_BACKLOG)?;
    let sweeper = tokio::spawn(sweep_every_minute(app.clone()));
    tracing::info!("listening on http://{bound}");
    // Every connection watches `stopping`, so shutdown can ask each to finish its request
    // and close; `connections` is how shutdown knows when they all have.
    let (stop, stopping) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut backoff = Backoff::default();
    let (mut at_cap, mut failing) = (
        Throttle::new(WARNING_INTERVAL),
        Throttle::new(WARNING_INTERVAL),
    );
    tokio::pin!(shutdown);
    loop {
        // A slot before each accept: at the cap, new connections wait in the kernel's
        // backlog (holding no descriptor of ours) until a connection ends.
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                if let Some(held_back) = at_cap.occurred(Instant::now()) {
                    tracing::warn!(
                        max_connections = limits.max_connections,
                        held_back,
                        "at the connection cap (HEGEMONY_MAX_CONNECTIONS): new connections wait until one ends"
                    );
                }
                tokio::select! {
                    slot = slots.clone().acquire_owned() => match slot {
                        Ok(slot) => slot,
                        // Never closed: the loop holds the semaphore.
                        Err(_) => break,
                    },
                    Some(_) = connections.join_next(), if !connections.is_empty() => continue,
                    () = &mut shutdown => break,
                }
            }
        };
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    backoff.succeeded();
                    let (app, bodies) = (app.clone(), bodies.clone());
                    let counted = Counted::new(&connection_count);
                    connections.spawn(connection(stream, app, bodies, stopping.clone(), (slot, counted)));
                }
                // Out of descriptors or memory, accepting again at once fails again at
                // once: wait, longer each time, so the loop neither spins nor floods the log.
                Err(e) => {
                    let wait = backoff.failed();
                    if let Some(held_back) = failing.occurred(Instant::now()) {
                        tracing::warn!(
                            error = %e,
                            held_back,
                            retry_in_ms = wait.as_millis() as u64,
                            "accept failed; backing off"
                        );
                    }
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = &mut shutdown => break,
                    }
                }
            },
            // Reap finished connections as they end, so the set holds only live ones.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    sweeper.abort();
    if let Some(scrapes) = scrapes {
        scrapes.abort();
    }
    tracing::info!(
        connections = connections.len(),
        "shutting down: no new connections; letting requests in flight finish"
    );
    stop.send_replace(true);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            connections = connections.len(),
            "requests still in flight after {} s were cut off",
            SHUTDOWN_GRACE.as_secs()
        );
    }
    tracing::info!("stopped");
    Ok(())
}

/// Serves one connection until it closes, or until `stopping` turns true: then the request
/// in flight, if any, is finished and answered, and the connection is closed. `_slot` is
/// its place under the connection cap, given back when it ends, with its place in the count
/// of connections the metrics read.
async fn connection(
    stream: TcpStream,
    app: Arc<App>,
    bodies: Arc<Bodies>,
    mut stopping: watch::Receiver<bool>,
    _slot: (OwnedSemaphorePermit, Counted),
) {
    let timeout = bodies.idle;
    // Requests are numbered in the order hyper hands them over, the order the watch of their
    // chunk sizes follows them in.
    let (announce, announcements) = watch::channel(Announcement::default());
    let requests = std::cell::Cell::new(0u64);
    let service = service_fn(move |req| {
        let announced = Announced {
            announcements: announcements.clone(),
            request: requests.replace(requests.get() + 1),
        };
        answer(app.clone(), bodies.clone(), announced, req)
    });
    let io = WriteTimeout::new(TokioIo::new(Watched::new(stream, announce)), timeout);
    // The head timeout runs from the moment the connection waits for a request: for the
    // first one, and again once each answer is written, so it also closes a keep-alive
    // connection left idle.
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(timeout)
        .serve_connection(io, service);
    tokio::pin!(conn);
    let ended = tokio::select! {
        ended = conn.as_mut() => ended,
        // `wait_for` fails only when the sender is gone, which is shutdown as well; its
        // guard on the flag is dropped at once, never held across the drain.
        () = async { drop(stopping.wait_for(|stop| *stop).await) } => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    match ended {
        Ok(()) => {}
        Err(e) if e.is_timeout() => tracing::info!(
            "closed a connection that sent no complete request head within {} s (idle, or a slow client)",
            timeout.as_secs()
        ),
        Err(e) if timed_out(&e) => tracing::warn!(
            error = %e,
            "cut off a client that stopped reading its answer"
        ),
        Err(e) => tracing::debug!(error = %e, "connection ended with an error"),
    }
}

/// Whether a connection ended because its writes stalled ([`WriteTimeout`]).
fn timed_out(e: &hyper::Error) -> bool {
    std::error::Error::source(e)
        .and_then(|source| source.downcast_ref::<std::io::Error>())
        .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
}

/// How often the server sweeps its store.
const SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// The local server's sweeper: one pass a minute, in the background. A failed pass is logged
/// and retried at the next tick; nothing depends on it but free space.
async fn sweep_every_minute(app: Arc<App>) {
    let mut tick = tokio::time::interval(SWEEP_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match sweep::sweep(&app, app.clock.now()).await {
            Ok(report) if report != SweepReport::default() => {
                tracing::info!(?report, "swept");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "sweep failed; retrying at the next tick"),
        }
    }
}

/// `hegemony-state sweep`: one pass, reported.
pub async fn sweep_once(store: &Store) -> anyhow::Result<()> {
    let app = store.sweeper_app().await?;
    let report = sweep::sweep(&app, app.clock.now()).await?;
    println!(
        "cleared {} dead locks and {} holds of ended runs, dropped {} expired tokens, pruned {} settled runs, purged {} deleted states past their retention, dropped {} versions, deleted {} unused blobs and {} never-committed blobs, removed {} temporary blob files",
        report.locks_cleared,
        report.holds_cleared,
        report.tokens_dropped,
        report.runs_pruned,
        report.deleted_states_purged,
        report.versions_dropped,
        report.blobs_deleted,
        report.uncommitted_blobs_deleted,
        report.blob_leftovers_removed
    );
    Ok(())
}

/// A future that completes on SIGTERM (how a container or service manager stops the
/// server) or Ctrl-C. The handlers are installed here, before the server says it listens:
/// installed when the future is first polled, a SIGTERM sent right after that line would
/// still kill the process outright.
///
/// # Errors
/// When the signal handlers cannot be installed.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = term.recv() => {}
        }
    })
}

/// Printed once, to the terminal only (never to a log): the first admin token, where the
/// pages open, and a backend.hcl that works against this server. Flushed before the port
/// opens, so that it is there, whole, for whoever connects first.
fn print_welcome(bound: SocketAddr, token: &str) -> std::io::Result<()> {
    use std::io::Write;
    let base = format!("http://{bound}/api/tf-states/example");
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "\nA new store: org \"{org}\" and an admin token were created. The token is shown only this once:\n\n    {token}\n\n\
         Open http://{bound}/ in a browser and sign in with it.\n\n\
         For Terraform, save this as backend.hcl (with terraform {{ backend \"http\" {{}} }} in your configuration):\n\n\
         address        = \"{base}/state\"\n\
         lock_address   = \"{base}/lock\"\n\
         unlock_address = \"{base}/lock\"\n\
         lock_method    = \"POST\"\n\
         unlock_method  = \"DELETE\"\n\
         username       = \"{user}\"\n\n\
         then:\n\n    export TF_HTTP_PASSWORD='{token}'\n    terraform init -backend-config=backend.hcl\n",
        org = tokens::DEFAULT_ORG,
        user = tokens::FIRST_ADMIN,
    )?;
    out.flush()
}

/// Runs one request's handling on a task of its own, so that a panic (a defect of ours)
/// costs that request alone, answered 500 `internal`, instead of its connection or the server.
async fn isolated(
    route: &'static Route,
    handling: impl std::future::Future<Output = lambda_http::Response<Body>> + Send + 'static,
) -> lambda_http::Response<Body> {
    match tokio::spawn(handling).await {
        Ok(response) => response,
        Err(failed) => {
            tracing::error!(route = %format!("{} {}", route.method, route.path), error = %failed, "a request's handling panicked");
            http::internal_error(route)
        }
    }
}

async fn answer(
    app: Arc<App>,
    bodies: Arc<Bodies>,
    announced: Announced,
    req: hyper::Request<Incoming>,
) -> Result<hyper::Response<Either<Full<Bytes>, Streamed>>, Infallible> {
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let (route, response) = match find_route(method.as_str(), &path) {
        RouteMatch::Found { route, params } => {
            let params: Vec<(&'static str, String)> =
                params.into_iter().map(|(k, v)| (k, v.to_owned())).collect();
            let app = app.clone();
            let answered = isolated(route, async move {
                let params: Vec<(&'static str, &str)> =
                    params.iter().map(|(k, v)| (*k, v.as_str())).collect();
                routed(&app, &bodies, route, &params, announced, req).await
            })
            .await;
            (Some(route), answered)
        }
        other => (None, http::unrouted(method.as_str(), &path, &other)),
    };
    measure(&app, route, method.as_str(), &response, started);
    tracing::info!(
        %method,
        path,
        status = response.status().as_u16(),
        ms = started.elapsed().as_millis() as u64,
        "request"
    );
    Ok(into_hyper(response))
}

/// The response hyper sends: a streamed body as it is opened (its length is the
/// `Content-Length` the handler set), any other as the bytes it holds.
fn into_hyper(
    response: lambda_http::Response<Body>,
) -> hyper::Response<Either<Full<Bytes>, Streamed>> {
    let streamed = response
        .extensions()
        .get::<StreamedBody>()
        .and_then(StreamedBody::take);
    let length = response
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    match (streamed, length) {
        (Some(chunks), Some(length)) => {
            response.map(|_| Either::Right(Streamed::new(chunks, length)))
        }
        _ => response.map(|body| {
            Either::Left(match body {
                Body::Text(text) => Full::new(Bytes::from(text)),
                Body::Binary(bytes) => Full::new(Bytes::from(bytes)),
                other => Full::new(Bytes::copy_from_slice(other.as_ref())),
            })
        }),
    }
}

/// Admits the request on its headers, then reads its body and answers it. A client refused
/// at admission (no or wrong credentials) is answered without a byte of its body read or
/// counted against the cap; hyper then closes its connection.
async fn routed(
    app: &App,
    bodies: &Bodies,
    route: &'static Route,
    params: &[(&'static str, &str)],
    announced: Announced,
    req: hyper::Request<Incoming>,
) -> lambda_http::Response<Body> {
    let (parts, incoming) = req.into_parts();
    let mut request = http::gateway::request(route, parts, params, Vec::new());
    // This server sends a version's content as it is opened, not gathered first.
    request.extensions_mut().insert(Streams);
    let admitted = match http::admit_head(app, route, &request).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    let limit = route.body_limit(&app.limits);
    let taken = match bodies
        .read(request.headers(), incoming, limit, announced)
        .await
    {
        Ok(taken) => taken,
        Err(refusal) => return admitted.refuse_body(refusal),
    };
    *request.body_mut() = http::gateway::body(taken.bytes);
    // The body's bytes stay counted against the cap until the answer is ready.
    let _held = taken.held;
    http::answer(app, admitted, request).await
}

mod metrics;
#[cfg(test)]
mod tests;
