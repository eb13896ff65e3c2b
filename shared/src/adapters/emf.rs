//! The metrics port as CloudWatch Embedded Metric Format: one JSON log line per event (a
//! request answered, a version sealed, a key call, a sweep), which CloudWatch Logs turns into
//! metrics as it ingests the function's log, with no call of the function's own. Each line
//! names the namespace [`NAMESPACE`], its metrics with their units and the dimensions they
//! are kept by (always `Function`; `Route`, `Code`, `Cause`, `Backend`, `Operation` and
//! `Kind` as the event has them); docs/metrics.md lists them. The line is written whole, in one write,
//! beside the function's own JSON log lines on the same stream.

use serde_json::{json, Map, Value};

use crate::ports::{KeyCall, Metrics, RequestMeasure, SweepPass, VersionKind};

/// The CloudWatch namespace of every metric.
pub const NAMESPACE: &str = "HegemonyState";

/// Where the lines go: the function's log stream, or a test's buffer.
type Sink = Box<dyn Fn(&str) + Send + Sync>;

/// Dimension sets (each a list of dimension names), and the metrics kept by them, each
/// `(name, unit)`: one entry of a line's `CloudWatchMetrics`.
type Directive<'a> = (&'a [&'a [&'a str]], &'a [(&'a str, &'a str)]);

/// The metrics of one function, as EMF lines.
pub struct Emf {
    function: String,
    sink: Sink,
}

impl Emf {
    /// Lines for `function`, written to standard error, where the function's log goes.
    pub fn to_stderr(function: &str) -> Self {
        Self::new(
            function,
            Box::new(|line| {
                use std::io::Write;
                // One write of the whole line, so no other log line lands inside it; a log
                // that cannot be written has nowhere to say so.
                let _ = std::io::stderr().lock().write_all(line.as_bytes());
            }),
        )
    }

    pub fn new(function: &str, sink: Sink) -> Self {
        Self {
            function: function.to_owned(),
            sink,
        }
    }

    /// Writes one line: `directives` over `fields`, the dimensions' and the metrics' values.
    fn emit(&self, directives: &[Directive<'_>], fields: Map<String, Value>) {
        let metrics: Vec<Value> = directives
            .iter()
            .map(|(dimensions, metrics)| {
                json!({
                    "Namespace": NAMESPACE,
                    "Dimensions": dimensions,
                    "Metrics": metrics
                        .iter()
                        .map(|(name, unit)| json!({"Name": name, "Unit": unit}))
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        let timestamp = time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
        let mut line = Map::new();
        line.insert(
            "_aws".into(),
            json!({"Timestamp": timestamp as i64, "CloudWatchMetrics": metrics}),
        );
        line.insert("Function".into(), Value::from(self.function.as_str()));
        line.extend(fields);
        let mut text = Value::Object(line).to_string();
        text.push('\n');
        (self.sink)(&text);
    }
}

const COUNT: &str = "Count";
const MILLISECONDS: &str = "Milliseconds";
const BYTES: &str = "Bytes";

fn fields(pairs: impl IntoIterator<Item = (&'static str, Value)>) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

impl Metrics for Emf {
    fn request(&self, measure: &RequestMeasure) {
        let server_error = u64::from(measure.status >= 500);
        let mut values = fields([
            ("Route", Value::from(measure.route)),
            ("Method", Value::from(measure.method)),
            ("Status", Value::from(measure.status)),
            ("Requests", Value::from(1)),
            ("Errors5xx", Value::from(server_error)),
            ("Latency", Value::from(measure.seconds * 1000.0)),
        ]);
        let by_route: &[&[&str]] = &[&["Function"], &["Function", "Route"]];
        let request: &[(&str, &str)] = &[
            ("Requests", COUNT),
            ("Errors5xx", COUNT),
            ("Latency", MILLISECONDS),
        ];
        let mut directives = vec![(by_route, request)];
        if let Some(code) = measure.refusal {
            values.insert("Code".into(), Value::from(code));
            values.insert("Refusals".into(), Value::from(1));
            directives.push((&[&["Function", "Code"]], &[("Refusals", COUNT)]));
        }
        if let Some(cause) = measure.fault {
            values.insert("Cause".into(), Value::from(cause));
            values.insert("StoreFaults".into(), Value::from(1));
            directives.push((&[&["Function", "Cause"]], &[("StoreFaults", COUNT)]));
        }
        self.emit(&directives, values);
    }

    fn version_written(&self, kind: VersionKind, sealed_bytes: Option<u64>) {
        // By `Function` alone as well as by kind, so what was kept by `Function` before
        // kinds were counted still sums every version.
        let by_kind: &[&[&str]] = &[&["Function"], &["Function", "Kind"]];
        let mut directives: Vec<Directive<'_>> = vec![(by_kind, &[("VersionsWritten", COUNT)])];
        let mut values = fields([
            ("Kind", Value::from(kind.as_str())),
            ("VersionsWritten", Value::from(1)),
        ]);
        // A restore seals nothing: no sample of zero bytes to pull an average down.
        if let Some(bytes) = sealed_bytes {
            values.insert("SealedBytes".into(), Value::from(bytes));
            directives.push((&[&["Function"]], &[("SealedBytes", BYTES)]));
        }
        self.emit(&directives, values);
    }

    fn key_call(&self, call: &KeyCall) {
        self.emit(
            &[(
                &[&["Function", "Backend", "Operation"]],
                &[
                    ("KeyCalls", COUNT),
                    ("KeyCallErrors", COUNT),
                    ("KeyCallLatency", MILLISECONDS),
                ],
            )],
            fields([
                ("Backend", Value::from(call.backend)),
                ("Operation", Value::from(call.operation)),
                ("KeyCalls", Value::from(1)),
                ("KeyCallErrors", Value::from(u64::from(!call.ok))),
                ("KeyCallLatency", Value::from(call.seconds * 1000.0)),
            ]),
        );
    }

    fn key_cache(&self, hit: bool) {
        self.emit(
            &[(
                &[&["Function"]],
                &[("KeyCacheHits", COUNT), ("KeyCacheMisses", COUNT)],
            )],
            fields([
                ("KeyCacheHits", Value::from(u64::from(hit))),
                ("KeyCacheMisses", Value::from(u64::from(!hit))),
            ]),
        );
    }

    fn sweep(&self, pass: &SweepPass<'_>) {
        let mut values = fields([
            ("SweepPasses", Value::from(1)),
            ("SweepErrors", Value::from(u64::from(!pass.ok))),
            ("SweepDuration", Value::from(pass.seconds * 1000.0)),
        ]);
        let names: Vec<String> = pass
            .removed
            .iter()
            .map(|(kind, _)| format!("Swept_{kind}"))
            .collect();
        for (name, (_, count)) in names.iter().zip(pass.removed) {
            values.insert(name.clone(), Value::from(*count));
        }
        let mut metrics: Vec<(&str, &str)> = vec![
            ("SweepPasses", COUNT),
            ("SweepErrors", COUNT),
            ("SweepDuration", MILLISECONDS),
        ];
        metrics.extend(names.iter().map(|name| (name.as_str(), COUNT)));
        self.emit(&[(&[&["Function"]], &metrics)], values);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    fn captured() -> (Emf, Arc<Mutex<Vec<String>>>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let emf = Emf::new(
            "state-write",
            Box::new(move |line| sink.lock().unwrap().push(line.to_owned())),
        );
        (emf, lines)
    }

    /// Every metric a directive names is a number on the line, and every dimension a
    /// string on it: CloudWatch drops a line that breaks either.
    fn assert_valid(line: &Value) {
        for directive in line["_aws"]["CloudWatchMetrics"].as_array().unwrap() {
            assert_eq!(directive["Namespace"], NAMESPACE);
            for set in directive["Dimensions"].as_array().unwrap() {
                for dimension in set.as_array().unwrap() {
                    assert!(line[dimension.as_str().unwrap()].is_string(), "{line}");
                }
            }
            for metric in directive["Metrics"].as_array().unwrap() {
                assert!(line[metric["Name"].as_str().unwrap()].is_number(), "{line}");
            }
        }
    }

    #[test]
    fn a_refused_request_is_one_line_with_its_code_as_a_dimension() {
        let (emf, lines) = captured();
        emf.request(&RequestMeasure {
            route: "/api/tf-states/{name}/lock",
            method: "POST",
            status: 423,
            seconds: 0.004,
            refusal: Some("locked"),
            fault: None,
        });
        let lines = lines.lock().unwrap();
        assert_eq!(lines.len(), 1);
        assert!(lines[0].ends_with('\n') && lines[0].matches('\n').count() == 1);
        let line: Value = serde_json::from_str(&lines[0]).unwrap();
        assert_valid(&line);
        assert_eq!(line["Function"], "state-write");
        assert_eq!(line["Route"], "/api/tf-states/{name}/lock");
        assert_eq!(line["Code"], "locked");
        assert_eq!(line["Refusals"], 1);
        assert_eq!(line["Errors5xx"], 0);
        assert_eq!(line["Latency"], 4.0);
        assert_eq!(
            line["_aws"]["CloudWatchMetrics"].as_array().unwrap().len(),
            2
        );
    }

    #[test]
    fn a_sweep_names_each_kind_it_removed() {
        let (emf, lines) = captured();
        emf.sweep(&SweepPass {
            ok: true,
            seconds: 0.5,
            removed: &[("versions", 3), ("blobs", 0)],
        });
        let line: Value = serde_json::from_str(&lines.lock().unwrap()[0]).unwrap();
        assert_valid(&line);
        assert_eq!(line["Swept_versions"], 3);
        assert_eq!(line["Swept_blobs"], 0);
        assert_eq!(line["SweepErrors"], 0);
    }
}
