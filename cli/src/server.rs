//! The server (the local store's, or the AWS container front door): HTTP/1.1 on a TCP
//! listener. Each request's body is read up to its
//! route's limit (refused as soon as it passes it, with or without Content-Length), turned
//! into the `lambda_http::Request` an API Gateway HTTP API (payload v2, `$default` stage)
//! would deliver, path parameters included, and answered by the same handlers the Lambda
//! functions run. On shutdown it stops accepting and lets the requests in flight finish.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use hegemony_state::http::{self, find_route, Route, RouteMatch};
use hegemony_state::service::sweep::{self, SweepReport};
use hegemony_state::service::{tokens, App};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use lambda_http::Body;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::store::{Store, StoreKind};

/// How long an over-limit body is read and thrown away so the client sees the 413 instead of
/// a reset connection.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The default cap on request bytes held at once: four of the largest states (128 MiB).
pub const DEFAULT_BYTES_IN_FLIGHT: u64 = 512 * 1024 * 1024;

/// How long requests in flight may take to finish once shutdown starts; a save still
/// running after that is cut off (its client sees a dropped connection and retries).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Serves `store` on `listener` until `shutdown` completes. Then it stops accepting (the
/// listener is closed, so new connections are refused), lets the requests in flight finish
/// for up to [`SHUTDOWN_GRACE`], and returns. Taking the listener and the shutdown future
/// as arguments lets a caller pick the port and the signal, as mini-redis's `server::run` does.
///
/// # Errors
/// When the store cannot be opened, the cap on bytes in flight is below the largest state,
/// or the first admin token cannot be written.
pub async fn serve(
    listener: TcpListener,
    store: &Store,
    key_file: Option<&Path>,
    bytes_in_flight: u64,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let app = Arc::new(store.app(key_file).await?);
    if bytes_in_flight < app.limits.max_state_bytes {
        bail!(
            "HEGEMONY_MAX_BODY_BYTES_IN_FLIGHT={bytes_in_flight} is less than the largest state ({} bytes): no save of that size could ever be taken",
            app.limits.max_state_bytes
        );
    }
    let in_flight = Arc::new(Semaphore::new(bytes_in_flight as usize));
    let bound = listener.local_addr()?;
    // A new local store gets its first admin token here; an AWS deployment's first tokens
    // come from `token create --store aws`, never from a server starting.
    if store.kind == StoreKind::Local {
        let first_token =
            tokens::bootstrap(app.catalog.as_ref(), time::OffsetDateTime::now_utc()).await?;
        if let Some(token) = first_token {
            print_welcome(bound, &token);
        }
    }
    let sweeper = tokio::spawn(sweep_every_minute(app.clone()));
    tracing::info!("listening on http://{bound}");
    // Every connection watches `stopping`, so shutdown can ask each to finish its request
    // and close; `connections` is how shutdown knows when they all have.
    let (stop, stopping) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _) = match accepted {
                    Ok(conn) => conn,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        continue;
                    }
                };
                let (app, in_flight) = (app.clone(), in_flight.clone());
                connections.spawn(connection(stream, app, in_flight, stopping.clone()));
            }
            // Reap finished connections as they end, so the set holds only live ones.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    sweeper.abort();
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
/// in flight, if any, is finished and answered, and the connection is closed.
async fn connection(
    stream: TcpStream,
    app: Arc<App>,
    in_flight: Arc<Semaphore>,
    mut stopping: watch::Receiver<bool>,
) {
    let service = service_fn(move |req| answer(app.clone(), in_flight.clone(), req));
    let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
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
    if let Err(e) = ended {
        tracing::debug!(error = %e, "connection ended with an error");
    }
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
        "cleared {} dead locks and {} holds of ended runs, dropped {} expired tokens, pruned {} settled runs, dropped {} versions, deleted {} unused blobs and {} never-committed blobs, removed {} temporary blob files",
        report.locks_cleared,
        report.holds_cleared,
        report.tokens_dropped,
        report.runs_pruned,
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
/// pages open, and a backend.hcl that works against this server.
fn print_welcome(bound: SocketAddr, token: &str) {
    let base = format!("http://{bound}/api/tf-states/example");
    println!(
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
    );
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
    in_flight: Arc<Semaphore>,
    req: hyper::Request<Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let response = match find_route(method.as_str(), &path) {
        RouteMatch::Found { route, params } => {
            let params: Vec<(&'static str, String)> =
                params.into_iter().map(|(k, v)| (k, v.to_owned())).collect();
            isolated(route, async move {
                let params: Vec<(&'static str, &str)> =
                    params.iter().map(|(k, v)| (*k, v.as_str())).collect();
                routed(&app, &in_flight, route, &params, req).await
            })
            .await
        }
        other => http::unrouted(method.as_str(), &path, &other),
    };
    tracing::info!(
        %method,
        path,
        status = response.status().as_u16(),
        ms = started.elapsed().as_millis() as u64,
        "request"
    );
    Ok(response.map(|body| match body {
        Body::Text(text) => Full::new(Bytes::from(text)),
        Body::Binary(bytes) => Full::new(Bytes::from(bytes)),
        other => Full::new(Bytes::copy_from_slice(other.as_ref())),
    }))
}

async fn routed(
    app: &App,
    in_flight: &Arc<Semaphore>,
    route: &'static Route,
    params: &[(&'static str, &str)],
    req: hyper::Request<Incoming>,
) -> lambda_http::Response<Body> {
    let limit = route.body_limit(&app.limits);
    let (parts, incoming) = req.into_parts();
    // The permit for the body's bytes is held until the answer is ready.
    let (body, _held) = match read_body(&parts.headers, incoming, limit, in_flight).await {
        Ok(read) => read,
        Err(BodyError::Busy) => return http::busy(route),
        Err(BodyError::TooLarge) => return http::too_large(route, limit),
        Err(BodyError::Broken(e)) => return http::unreadable_body(route, &e.to_string()),
    };
    let request = http::gateway::request(route, parts, params, body);
    http::handle(app, route, request).await
}

enum BodyError {
    TooLarge,
    /// Taking the body would pass the cap on bytes in flight.
    Busy,
    Broken(hyper::Error),
}

/// Reads the body into one buffer sized from Content-Length (so a large state is never
/// copied by regrowth), refusing it as soon as it passes `limit`. An over-limit body is
/// drained, unbuffered and for a bounded time, so the client reads the 413. The body's bytes
/// are counted against `in_flight` as they arrive (all at once when declared), and a body
/// that would pass the cap is refused at once rather than queued.
async fn read_body(
    headers: &hyper::HeaderMap,
    mut incoming: Incoming,
    limit: u64,
    in_flight: &Arc<Semaphore>,
) -> Result<(Vec<u8>, Option<OwnedSemaphorePermit>), BodyError> {
    let declared = headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut too_large = declared.is_some_and(|n| n > limit);
    let mut held: Option<OwnedSemaphorePermit> = None;
    let take = |bytes: u64, held: &mut Option<OwnedSemaphorePermit>| {
        if bytes == 0 {
            return Ok(());
        }
        let permit = u32::try_from(bytes)
            .ok()
            .and_then(|n| in_flight.clone().try_acquire_many_owned(n).ok())
            .ok_or(BodyError::Busy)?;
        match held {
            Some(h) => h.merge(permit),
            None => *held = Some(permit),
        }
        Ok(())
    };
    let mut counted = 0u64;
    if let Some(n) = declared.filter(|_| !too_large) {
        take(n, &mut held)?;
        counted = n;
    }
    let mut buf = Vec::with_capacity(if too_large {
        0
    } else {
        declared.unwrap_or(0) as usize
    });
    let drain_deadline = Instant::now() + DRAIN_TIMEOUT;
    while let Some(frame) = incoming.frame().await {
        let frame = frame.map_err(BodyError::Broken)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if too_large {
            if Instant::now() > drain_deadline {
                break;
            }
            continue;
        }
        if (buf.len() + data.len()) as u64 > limit {
            too_large = true;
            buf = Vec::new();
            held = None;
            continue;
        }
        buf.extend_from_slice(&data);
        if buf.len() as u64 > counted {
            take(buf.len() as u64 - counted, &mut held)?;
            counted = buf.len() as u64;
        }
    }
    if too_large {
        return Err(BodyError::TooLarge);
    }
    Ok((buf, held))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hegemony_state::http::ROUTES;

    async fn a_defect() -> lambda_http::Response<Body> {
        panic!("a defect of ours")
    }

    async fn served() -> lambda_http::Response<Body> {
        lambda_http::Response::new(Body::Empty)
    }

    /// On the long-running server a panic must cost one request, not every request in
    /// flight of every org (the release profile unwinds for this).
    #[tokio::test]
    async fn a_panicking_request_is_answered_500_and_the_next_is_served() {
        let route = ROUTES.iter().find(|r| r.path == "/api/tf-states").unwrap();
        let failed = isolated(route, a_defect()).await;
        assert_eq!(failed.status(), 500);
        let body: serde_json::Value = serde_json::from_slice(failed.body().as_ref()).unwrap();
        assert_eq!(body["error"]["code"], "internal");
        assert_eq!(isolated(route, served()).await.status(), 200);
    }
}
