//! The metrics port as Prometheus counters, gauges and histograms, for the server's own
//! metrics listener (`serve --metrics-listen`). Events are atomic adds on children found by
//! their labels (no allocation once a label set is seen); what stands at a moment (locks,
//! holds, connections, bytes in flight) is read when scraped and set just before the text
//! is written. Names and units follow Prometheus' conventions: a `hegemony_state_` prefix,
//! seconds and bytes, `_total` on counters. Every metric is described in docs/metrics.md.
//!
//! tikv's `prometheus` crate, not the official `prometheus-client`: it writes the classic
//! text format (0.0.4) that every Prometheus scrapes and Debian's `promtool check metrics`
//! reads; `prometheus-client` writes OpenMetrics only, whose counters' `# TYPE` lines name
//! them without `_total`, which that promtool refuses.

use prometheus::{
    Gauge, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts,
    Registry, TextEncoder,
};

use crate::domain::Timestamp;
use crate::ports::{Census, KeyCall, Metrics, RequestMeasure, SweepPass, VersionKind};

/// The content type of a scrape's answer.
pub const CONTENT_TYPE: &str = prometheus::TEXT_FORMAT;

/// Request durations, from a cached read (milliseconds) to a 128 MiB save (tens of seconds).
const REQUEST_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Key service calls: a local platform key (microseconds) to KMS or Transit over a network.
const KEY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// Sweeper passes: an idle store's (milliseconds) to a bounded pass's worst.
const SWEEP_BUCKETS: &[f64] = &[0.01, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0];

/// What stands when a scrape is answered, read by the server.
#[derive(Debug, Clone, Copy, Default)]
pub struct Standing {
    /// Connections served now.
    pub connections: u64,
    /// Request-body bytes held now.
    pub bytes_in_flight: u64,
    /// The store's locks and holds, when the store can count them.
    pub census: Option<Census>,
    pub now: Option<Timestamp>,
}

/// Every metric the server exposes, registered in one registry.
pub struct Prometheus {
    registry: Registry,
    requests: IntCounterVec,
    request_seconds: HistogramVec,
    refusals: IntCounterVec,
    faults: IntCounterVec,
    versions: IntCounterVec,
    version_bytes: IntCounter,
    key_calls: IntCounterVec,
    key_call_seconds: HistogramVec,
    key_cache: IntCounterVec,
    sweeps: IntCounterVec,
    sweep_seconds: Histogram,
    swept: IntCounterVec,
    last_sweep: Gauge,
    connections: IntGauge,
    bytes_in_flight: IntGauge,
    /// The locks held, the holds and the oldest lock's age: registered only for a store
    /// that counts them, so a store that cannot never shows a zero that means nothing.
    locks: Option<(IntGauge, IntGauge, Gauge)>,
}

impl Prometheus {
    /// A registry with every metric, all at zero; with the lock gauges when `counts_locks`.
    pub fn new(counts_locks: bool) -> Self {
        let registry = Registry::new();
        // Names, label names and buckets are constants of this file: a failure is a defect
        // caught by the first test that builds one.
        let counters = |name: &str, help: &str, labels: &[&str]| {
            let metric = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(metric.clone()))
                .expect("unique metric");
            metric
        };
        let histograms = |name: &str, help: &str, labels: &[&str], buckets: &[f64]| {
            let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
            let metric = HistogramVec::new(opts, labels).expect("valid metric");
            registry
                .register(Box::new(metric.clone()))
                .expect("unique metric");
            metric
        };
        let counter = |name: &str, help: &str| {
            let metric = IntCounter::new(name, help).expect("valid metric");
            registry
                .register(Box::new(metric.clone()))
                .expect("unique metric");
            metric
        };
        let int_gauge = |name: &str, help: &str| {
            let metric = IntGauge::new(name, help).expect("valid metric");
            registry
                .register(Box::new(metric.clone()))
                .expect("unique metric");
            metric
        };
        let gauge = |name: &str, help: &str| {
            let metric = Gauge::new(name, help).expect("valid metric");
            registry
                .register(Box::new(metric.clone()))
                .expect("unique metric");
            metric
        };
        let sweep_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "hegemony_state_sweep_duration_seconds",
                "How long sweeper passes took.",
            )
            .buckets(SWEEP_BUCKETS.to_vec()),
        )
        .expect("valid metric");
        registry
            .register(Box::new(sweep_seconds.clone()))
            .expect("unique metric");
        let metrics = Self {
            requests: counters(
                "hegemony_state_http_requests_total",
                "Requests answered, by route pattern, method and status.",
                &["route", "method", "status"],
            ),
            request_seconds: histograms(
                "hegemony_state_http_request_duration_seconds",
                "How long requests took to answer, by route pattern.",
                &["route"],
                REQUEST_BUCKETS,
            ),
            refusals: counters(
                "hegemony_state_http_refusals_total",
                "Error answers, by error code (docs/errors.md).",
                &["code"],
            ),
            faults: counters(
                "hegemony_state_store_faults_total",
                "503 answers, by cause: storage, transient, no_key.",
                &["cause"],
            ),
            versions: counters(
                "hegemony_state_versions_written_total",
                "State versions written, by kind: save, import, rollback, restore.",
                &["kind"],
            ),
            version_bytes: counter(
                "hegemony_state_sealed_bytes_total",
                "Bytes of state documents sealed into written versions.",
            ),
            key_calls: counters(
                "hegemony_state_key_calls_total",
                "Calls on the key service, by backend, operation and outcome.",
                &["backend", "operation", "outcome"],
            ),
            key_call_seconds: histograms(
                "hegemony_state_key_call_duration_seconds",
                "How long calls on the key service took, by backend and operation.",
                &["backend", "operation"],
                KEY_BUCKETS,
            ),
            key_cache: counters(
                "hegemony_state_key_cache_requests_total",
                "Data keys wanted from the key cache, by result: hit or miss.",
                &["result"],
            ),
            sweeps: counters(
                "hegemony_state_sweeps_total",
                "Sweeper passes, by outcome: ok or error.",
                &["outcome"],
            ),
            sweep_seconds,
            swept: counters(
                "hegemony_state_swept_total",
                "What sweeper passes removed, by kind.",
                &["kind"],
            ),
            last_sweep: gauge(
                "hegemony_state_last_sweep_success_timestamp_seconds",
                "When the last sweeper pass that succeeded ended (Unix time); 0 before one.",
            ),
            connections: int_gauge("hegemony_state_http_connections", "Connections served now."),
            bytes_in_flight: int_gauge(
                "hegemony_state_http_body_bytes_in_flight",
                "Request body bytes held now (against HEGEMONY_MAX_BODY_BYTES_IN_FLIGHT).",
            ),
            locks: counts_locks.then(|| {
                (
                    int_gauge("hegemony_state_locks_held", "Live locks on states now."),
                    int_gauge("hegemony_state_holds", "Holds of runs on states now."),
                    gauge(
                        "hegemony_state_oldest_lock_age_seconds",
                        "How long the oldest live lock has been held; 0 when none is.",
                    ),
                )
            }),
            registry,
        };
        // Every kind from the start, at zero: a query of one kind finds a series before the
        // first version of that kind, and a rate over a restart sees no series appear.
        for kind in VersionKind::ALL {
            metrics.versions.with_label_values(&[kind.as_str()]);
        }
        metrics
    }

    /// The text a scrape answers, with what stands now set first.
    pub fn scrape(&self, standing: &Standing) -> String {
        self.connections
            .set(i64::try_from(standing.connections).unwrap_or(i64::MAX));
        self.bytes_in_flight
            .set(i64::try_from(standing.bytes_in_flight).unwrap_or(i64::MAX));
        if let (Some((locks, holds, oldest)), Some(census)) = (&self.locks, standing.census) {
            locks.set(i64::try_from(census.locks).unwrap_or(i64::MAX));
            holds.set(i64::try_from(census.holds).unwrap_or(i64::MAX));
            let age = match (census.oldest_lock_since, standing.now) {
                (Some(since), Some(now)) => (now - since).as_seconds_f64().max(0.0),
                _ => 0.0,
            };
            oldest.set(age);
        }
        let mut text = String::new();
        // Writing into a String fails only on a metric the registry would not take.
        TextEncoder::new()
            .encode_utf8(&self.registry.gather(), &mut text)
            .expect("registered metrics encode");
        text
    }
}

/// A status code's three digits, without allocating.
fn status_digits(status: u16, out: &mut [u8; 3]) -> &str {
    let status = status.min(999);
    out[0] = b'0' + (status / 100) as u8;
    out[1] = b'0' + (status / 10 % 10) as u8;
    out[2] = b'0' + (status % 10) as u8;
    // Three ASCII digits are UTF-8.
    std::str::from_utf8(out).unwrap_or("000")
}

fn outcome(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "error"
    }
}

impl Metrics for Prometheus {
    fn request(&self, measure: &RequestMeasure) {
        let mut digits = [0; 3];
        let status = status_digits(measure.status, &mut digits);
        self.requests
            .with_label_values(&[measure.route, measure.method, status])
            .inc();
        self.request_seconds
            .with_label_values(&[measure.route])
            .observe(measure.seconds);
        if let Some(code) = measure.refusal {
            self.refusals.with_label_values(&[code]).inc();
        }
        if let Some(cause) = measure.fault {
            self.faults.with_label_values(&[cause]).inc();
        }
    }

    fn version_written(&self, kind: VersionKind, sealed_bytes: Option<u64>) {
        self.versions.with_label_values(&[kind.as_str()]).inc();
        if let Some(bytes) = sealed_bytes {
            self.version_bytes.inc_by(bytes);
        }
    }

    fn key_call(&self, call: &KeyCall) {
        self.key_calls
            .with_label_values(&[call.backend, call.operation, outcome(call.ok)])
            .inc();
        self.key_call_seconds
            .with_label_values(&[call.backend, call.operation])
            .observe(call.seconds);
    }

    fn key_cache(&self, hit: bool) {
        let result = if hit { "hit" } else { "miss" };
        self.key_cache.with_label_values(&[result]).inc();
    }

    fn sweep(&self, pass: &SweepPass<'_>) {
        self.sweeps.with_label_values(&[outcome(pass.ok)]).inc();
        self.sweep_seconds.observe(pass.seconds);
        for (kind, count) in pass.removed {
            self.swept.with_label_values(&[kind]).inc_by(*count);
        }
        if pass.ok {
            let now = time::OffsetDateTime::now_utc();
            self.last_sweep.set(now.unix_timestamp_nanos() as f64 / 1e9);
        }
    }
}
