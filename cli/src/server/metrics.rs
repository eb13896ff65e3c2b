//! The metrics listener of `serve --metrics-listen`: a listener of its own, never the API's,
//! answering `GET /metrics` with the Prometheus text format and nothing else. A scrape reads
//! what stands now (connections, request-body bytes held, the store's locks and holds) and
//! writes every metric; requests to the API are counted as they are answered (server.rs).
//!
//! Whoever can reach its address may connect, without a token, so it holds few resources of
//! its own: at most [`SCRAPERS`] connections at once (more wait in the kernel's backlog),
//! each closed when its request head does not arrive within [`HEAD_TIMEOUT`]; so at most
//! that many counts of the store's locks (a read of every state's record) run at once.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hegemony_state::adapters::prometheus::{Prometheus, Standing, CONTENT_TYPE};
use hegemony_state::ports::LockCensus;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{header, Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Scrapers served at once: a Prometheus server or two, with room for a person's curl.
const SCRAPERS: usize = 8;

/// How long a connection may wait for a request's head, first or next (keep-alive).
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// What a scrape reads besides the counters.
pub struct Exposed {
    pub prometheus: Arc<Prometheus>,
    /// Connections being served (a [`Counted`] each).
    pub connections: Arc<AtomicU64>,
    /// The cap on request-body bytes, and the semaphore that holds it.
    pub bytes_cap: usize,
    pub bytes: Arc<Semaphore>,
    /// The store's locks and holds; `None` for a store that cannot count them cheaply (AWS:
    /// it would take a scan of the table per scrape).
    pub census: Option<Arc<dyn LockCensus>>,
}

/// A connection counted while it lives.
pub struct Counted(Arc<AtomicU64>);

impl Counted {
    pub fn new(connections: &Arc<AtomicU64>) -> Self {
        connections.fetch_add(1, Ordering::Relaxed);
        Self(connections.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Answers scrapes on `listener` until the task is aborted (the server's shutdown).
pub async fn serve(listener: TcpListener, exposed: Arc<Exposed>) {
    let slots = Arc::new(Semaphore::new(SCRAPERS));
    loop {
        // A slot before each accept, as the API's loop takes one: past the cap, connections
        // wait in the kernel's backlog, holding no descriptor of ours.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // The listener of an operator's scraper: a failed accept waits a moment and
            // tries again, as the API's loop does, without its backoff's care.
            Err(e) => {
                tracing::warn!(error = %e, "metrics listener: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let exposed = exposed.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| answer(exposed.clone(), req));
            let served = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                tracing::debug!(error = %e, "metrics connection ended with an error");
            }
            drop(slot);
        });
    }
}

async fn answer(
    exposed: Arc<Exposed>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let plain = |status: StatusCode, text: &'static str| {
        let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
        *response.status_mut() = status;
        response
    };
    if req.uri().path() != "/metrics" {
        return Ok(plain(
            StatusCode::NOT_FOUND,
            "only /metrics is served here\n",
        ));
    }
    if req.method() != Method::GET {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "GET only\n");
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET"));
        return Ok(response);
    }
    let now = time::OffsetDateTime::now_utc();
    let census = match &exposed.census {
        Some(census) => match census.census(now).await {
            Ok(counted) => Some(counted),
            // The scrape still answers; the lock gauges keep their last values.
            Err(e) => {
                tracing::warn!(error = %e, "metrics: cannot count the store's locks");
                None
            }
        },
        None => None,
    };
    let standing = Standing {
        connections: exposed.connections.load(Ordering::Relaxed),
        bytes_in_flight: exposed
            .bytes_cap
            .saturating_sub(exposed.bytes.available_permits()) as u64,
        census,
        now: Some(now),
    };
    let text = exposed.prometheus.scrape(&standing);
    let mut response = Response::new(Full::new(Bytes::from(text)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(CONTENT_TYPE),
    );
    Ok(response)
}
