//! The CloudWatch metrics the Lambda functions can write, as the real EMF adapter writes
//! them: each function's kinds of event run through it, and every metric its lines name
//! read back with its namespace and dimensions (names and values). What each function
//! reports follows its rows of the route table: a request on each of its routes (answered,
//! refused with each error code, failed with each 503 cause), the key calls its rows' needs
//! make on KMS with the cache's hits and misses where it unwraps, a version of each kind
//! its routes write; the sweeper reports a pass, run for real on an empty store. The
//! template's alarms and the cost of custom metrics (docs/scaling.md) are held to this.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use hegemony_state::adapters::emf::Emf;
use hegemony_state::adapters::memory::MemoryStore;
use hegemony_state::http::{ErrorCode, Need, ROUTES};
use hegemony_state::ports::{KeyCall, Metrics, RequestMeasure, Unmeasured, VersionKind};
use hegemony_state::service::{App, Limits, SystemClock};

/// The sweeper's name, as its function reports it.
pub const SWEEPER: &str = "sweeper";

/// One CloudWatch metric: its namespace, name and dimensions (name -> value). CloudWatch
/// keeps, and charges for, each distinct one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Metric {
    pub namespace: String,
    pub name: String,
    pub dimensions: BTreeMap<String, String>,
}

/// Whether a metric is written on every request of its function (so, on a busy deployment,
/// in every hour) or only when something goes wrong (a refusal's code, a 503's cause).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum When {
    Routinely,
    OnError,
}

/// The causes a 503 is counted under (docs/metrics.md, `StoreFaults`).
const FAULT_CAUSES: [&str; 3] = ["storage", "transient", "no_key"];

/// The route whose row makes a version of each kind.
const WRITES: [(&str, VersionKind); 4] = [
    ("/api/tf-states/{name}/state", VersionKind::Save),
    ("/api/tf-states/{name}/import", VersionKind::Import),
    ("/api/tf-states/{name}/rollback", VersionKind::Rollback),
    ("/api/deleted-states/{id}/restore", VersionKind::Restore),
];

/// The lines `report` writes through an EMF adapter named `function`.
fn lines_of(function: &str, report: impl FnOnce(&Emf)) -> Vec<serde_json::Value> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let emf = Emf::new(
        function,
        Box::new(move |line| sink.lock().unwrap().push(line.to_owned())),
    );
    report(&emf);
    let lines = lines.lock().unwrap();
    lines
        .iter()
        .map(|l| serde_json::from_str(l).expect("an EMF line is JSON"))
        .collect()
}

/// Every metric `lines` name: each metric of each directive, under each of its dimension
/// sets, with the dimensions' values from the line.
fn metrics_of(lines: &[serde_json::Value]) -> BTreeSet<Metric> {
    let mut found = BTreeSet::new();
    for line in lines {
        for directive in line["_aws"]["CloudWatchMetrics"].as_array().unwrap() {
            let namespace = directive["Namespace"].as_str().unwrap();
            for set in directive["Dimensions"].as_array().unwrap() {
                let dimensions: BTreeMap<String, String> = set
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| {
                        let d = d.as_str().unwrap();
                        (d.to_owned(), line[d].as_str().unwrap().to_owned())
                    })
                    .collect();
                for metric in directive["Metrics"].as_array().unwrap() {
                    found.insert(Metric {
                        namespace: namespace.to_owned(),
                        name: metric["Name"].as_str().unwrap().to_owned(),
                        dimensions: dimensions.clone(),
                    });
                }
            }
        }
    }
    found
}

fn request(route: &'static str, method: &'static str) -> RequestMeasure {
    RequestMeasure {
        route,
        method,
        status: 200,
        seconds: 0.01,
        refusal: None,
        fault: None,
    }
}

/// What a route function reports, each metric with when it is written.
fn route_function(function: &str) -> BTreeMap<Metric, When> {
    let rows: Vec<_> = ROUTES
        .iter()
        .filter(|r| r.function == function && !r.local_only)
        .collect();
    let needs: Vec<Need> = rows.iter().flat_map(|r| r.needs.iter().copied()).collect();
    let routine = lines_of(function, |emf| {
        for row in &rows {
            emf.request(&request(row.path, row.method));
        }
        for (need, operation) in [
            (Need::NewDataKey, "data_key"),
            (Need::UnwrapKey, "unwrap"),
            (Need::DescribeKey, "current_key"),
        ] {
            if needs.contains(&need) {
                emf.key_call(&KeyCall {
                    backend: "kms",
                    operation,
                    ok: true,
                    seconds: 0.01,
                });
            }
        }
        if needs.contains(&Need::UnwrapKey) {
            emf.key_cache(true);
        }
        for (path, kind) in WRITES {
            if rows.iter().any(|r| r.path == path) {
                // A restore seals nothing, every other kind does.
                let sealed = (kind != VersionKind::Restore).then_some(1);
                emf.version_written(kind, sealed);
            }
        }
    });
    let on_error = lines_of(function, |emf| {
        let Some(row) = rows.first() else { return };
        for code in ErrorCode::ALL {
            emf.request(&RequestMeasure {
                status: code.status().as_u16(),
                refusal: Some(code.as_str()),
                ..request(row.path, row.method)
            });
        }
        for cause in FAULT_CAUSES {
            emf.request(&RequestMeasure {
                status: 503,
                fault: Some(cause),
                ..request(row.path, row.method)
            });
        }
    });
    let routine = metrics_of(&routine);
    let mut found: BTreeMap<Metric, When> = routine
        .iter()
        .map(|m| (m.clone(), When::Routinely))
        .collect();
    for metric in metrics_of(&on_error) {
        found.entry(metric).or_insert(When::OnError);
    }
    found
}

/// What the sweeper reports of one pass, run on an empty store (a pass names every kind it
/// removes, none or not).
fn sweeper() -> BTreeMap<Metric, When> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let emf = Emf::new(
        SWEEPER,
        Box::new(move |line| sink.lock().unwrap().push(line.to_owned())),
    );
    let store = Arc::new(MemoryStore::new());
    let app = App {
        catalog: store.clone(),
        blobs: store,
        keys: None,
        index_keys: Default::default(),
        key_cache: hegemony_state::service::key_cache::KeyCache::off(),
        clock: Arc::new(SystemClock),
        limits: Limits {
            max_state_bytes: 32 << 20,
            keep_versions: 50,
            run_end_grace: time::Duration::minutes(10),
            deleted_retention: time::Duration::days(7),
            lambda_ceiling: None,
        },
        links: Default::default(),
        issuers: hegemony_state::service::issuers::Issuers::off(),
        metrics: Arc::new(Unmeasured),
    }
    .measured(Arc::new(emf) as Arc<dyn Metrics>);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(hegemony_state::service::sweep::sweep(&app, app.clock.now()))
        .expect("a pass over an empty store");
    let lines: Vec<serde_json::Value> = lines
        .lock()
        .unwrap()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    metrics_of(&lines)
        .into_iter()
        .map(|m| (m, When::Routinely))
        .collect()
}

/// Every metric each function can write, by function, with when it is written. The pages'
/// function writes none.
pub fn by_function() -> BTreeMap<String, BTreeMap<Metric, When>> {
    let functions: BTreeSet<&str> = ROUTES
        .iter()
        .filter(|r| !r.local_only)
        .map(|r| r.function)
        .collect();
    let mut all: BTreeMap<String, BTreeMap<Metric, When>> = functions
        .into_iter()
        .map(|f| (f.to_owned(), route_function(f)))
        .collect();
    all.insert(SWEEPER.to_owned(), sweeper());
    all
}
