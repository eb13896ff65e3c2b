//! The server's Prometheus metrics, scraped from their own listener after a known scenario:
//! locks (one taken, one refused as a conflict), saves (one a stale serial refused), reads
//! (a key cache miss, then a hit), a wrong token, and a sweeper pass that drops versions
//! past the limit. Every value the scenario decides is checked exactly; Debian's `promtool
//! check metrics` lints the scrape, and `promtool check rules` the example alerts of
//! docs/metrics.md. The test tools install promtool (tests/tools/install.sh): without it
//! these tests fail, never skip.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use hegemony_state_blackbox::*;

/// A scrape: each series (its name and its labels, sorted) and its value.
struct Scrape {
    text: String,
    series: BTreeMap<String, f64>,
}

impl Scrape {
    fn parse(text: String) -> Scrape {
        let mut series = BTreeMap::new();
        for line in text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let (key, value) = line.rsplit_once(' ').expect("a sample line");
            series.insert(canonical(key), value.parse().expect("a sample value"));
        }
        Scrape { text, series }
    }

    /// The value of `series` (`name{label="value",...}` with labels in any order).
    fn value(&self, series: &str) -> f64 {
        let key = canonical(series);
        *self
            .series
            .get(&key)
            .unwrap_or_else(|| panic!("no series {key} in the scrape:\n{}", self.text))
    }

    fn has(&self, series: &str) -> bool {
        self.series.contains_key(&canonical(series))
    }
}

/// `name{b="2",a="1"}` as `name{a="1",b="2"}`: label values here hold no comma or quote.
fn canonical(series: &str) -> String {
    match series.split_once('{') {
        None => series.to_owned(),
        Some((name, labels)) => {
            let mut labels: Vec<&str> = labels.trim_end_matches('}').split(',').collect();
            labels.sort_unstable();
            format!("{name}{{{}}}", labels.join(","))
        }
    }
}

/// The metrics address the server logged.
fn metrics_url(server: &Server) -> String {
    let mut url = None;
    assert!(
        eventually(Duration::from_secs(10), || {
            url = server
                .logs()
                .split("metrics on ")
                .nth(1)
                .and_then(|rest| rest.split(['"', ' ', '\n']).next())
                .map(str::to_owned);
            url.is_some()
        }),
        "the server never said where its metrics are:\n{}",
        server.logs()
    );
    url.unwrap()
}

fn scrape(url: &str) -> Scrape {
    let r = client().get(url).send().unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["content-type"],
        "text/plain; version=0.0.4",
        "the classic text format"
    );
    Scrape::parse(r.text().unwrap())
}

/// Runs `promtool ARGS` with `input` on its standard input; its output, and whether it passed.
fn promtool(args: &[&str], input: &str) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool (Debian's prometheus package; make tools installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

const STATE: &str = "/api/tf-states/{name}/state";
const LOCK: &str = "/api/tf-states/{name}/lock";

#[test]
fn a_scrape_after_a_scenario_counts_what_it_did() {
    // GIVEN a store whose state "old" has three versions where one is kept: the first
    // server's commits mark two for the sweeper.
    let keep_one = [("HEGEMONY_TF_STATE_KEEP_VERSIONS", "1")];
    let first = Server::start_with(&keep_one);
    let api = Api::new(&first);
    let alice = first.token("acme", "alice", "operator");
    for serial in 1..=3 {
        let r = api.post_state(&alice, "old", None, state_doc(serial, "lin-old", "x"));
        assert_eq!(r.status(), 200);
    }
    // WHEN it starts again with metrics (its first sweep runs at once) and serves a scenario.
    let server = first.restart_with(vec![
        ("HEGEMONY_TF_STATE_KEEP_VERSIONS".into(), "1".into()),
        ("HEGEMONY_METRICS_LISTEN".into(), "127.0.0.1:0".into()),
    ]);
    let url = metrics_url(&server);
    assert!(
        eventually(Duration::from_secs(20), || scrape(&url)
            .has("hegemony_state_sweeps_total{outcome=\"ok\"}")),
        "no sweeper pass was counted"
    );
    let api = Api::new(&server);
    assert_eq!(api.lock(&alice, "net", &lock_doc("L1")).status(), 200);
    assert_eq!(api.lock(&alice, "net", &lock_doc("L2")).status(), 423);
    let saved = state_doc(1, "lin-net", "first");
    assert_eq!(
        api.post_state(&alice, "net", Some("L1"), saved.clone())
            .status(),
        200
    );
    let stale = api.post_state(&alice, "net", Some("L1"), state_doc(0, "lin-net", "older"));
    assert_eq!(stale.status(), 409);
    assert_eq!(api.get_state(&alice, "net").status(), 200);
    assert_eq!(api.get_state(&alice, "net").status(), 200);
    assert_eq!(api.get_state("not-a-token", "net").status(), 401);
    assert_eq!(
        client()
            .get(server.url("/api/tf-states/net/nowhere"))
            .send()
            .unwrap()
            .status(),
        404
    );

    // THEN the scrape counts each of those exactly.
    let s = scrape(&url);
    let requests = |route: &str, method: &str, status: u16| {
        s.value(&format!(
            "hegemony_state_http_requests_total{{route=\"{route}\",method=\"{method}\",status=\"{status}\"}}"
        ))
    };
    assert_eq!(requests(LOCK, "POST", 200), 1.0);
    assert_eq!(requests(LOCK, "POST", 423), 1.0);
    assert_eq!(requests(STATE, "POST", 200), 1.0);
    assert_eq!(requests(STATE, "POST", 409), 1.0);
    assert_eq!(requests(STATE, "GET", 200), 2.0);
    assert_eq!(requests(STATE, "GET", 401), 1.0);
    assert_eq!(requests("unrouted", "GET", 404), 1.0);
    assert_eq!(
        s.value("hegemony_state_http_request_duration_seconds_count{route=\"/api/tf-states/{name}/lock\"}"),
        2.0
    );
    for (code, count) in [
        ("locked", 1.0),
        ("stale_serial", 1.0),
        ("unauthenticated", 1.0),
        ("not_found", 1.0),
    ] {
        assert_eq!(
            s.value(&format!(
                "hegemony_state_http_refusals_total{{code=\"{code}\"}}"
            )),
            count,
            "{code}"
        );
    }
    assert!(
        !s.text.contains("hegemony_state_store_faults_total{"),
        "no 503 was answered"
    );
    assert_eq!(
        s.value("hegemony_state_versions_written_total{kind=\"save\"}"),
        1.0
    );
    assert_eq!(
        s.value("hegemony_state_versions_written_total{kind=\"import\"}"),
        0.0,
        "every kind is there from the start"
    );
    assert_eq!(
        s.value("hegemony_state_sealed_bytes_total"),
        saved.len() as f64
    );
    assert_eq!(
        s.value("hegemony_state_key_calls_total{backend=\"platform\",operation=\"data_key\",outcome=\"ok\"}"),
        1.0
    );
    assert_eq!(
        s.value("hegemony_state_key_calls_total{backend=\"platform\",operation=\"unwrap\",outcome=\"ok\"}"),
        1.0,
        "the second read found its key in the cache"
    );
    assert_eq!(
        s.value("hegemony_state_key_cache_requests_total{result=\"miss\"}"),
        1.0
    );
    assert_eq!(
        s.value("hegemony_state_key_cache_requests_total{result=\"hit\"}"),
        1.0
    );
    assert!(s.value("hegemony_state_sweeps_total{outcome=\"ok\"}") >= 1.0);
    assert_eq!(
        s.value("hegemony_state_swept_total{kind=\"versions\"}"),
        2.0
    );
    assert_eq!(s.value("hegemony_state_swept_total{kind=\"locks\"}"), 0.0);
    assert!(s.value("hegemony_state_last_sweep_success_timestamp_seconds") > 1.7e9);
    assert_eq!(
        s.value("hegemony_state_locks_held"),
        1.0,
        "L1 still holds net"
    );
    assert_eq!(s.value("hegemony_state_holds"), 0.0);
    assert!(s.value("hegemony_state_oldest_lock_age_seconds") > 0.0);
    assert_eq!(s.value("hegemony_state_http_body_bytes_in_flight"), 0.0);

    // AND promtool reads the scrape as valid and well named.
    let (passed, said) = promtool(&["check", "metrics"], &s.text);
    assert!(passed, "promtool check metrics:\n{said}\n{}", s.text);
}

#[test]
fn the_metrics_listener_serves_only_get_metrics() {
    let server = Server::start_with(&[("HEGEMONY_METRICS_LISTEN", "127.0.0.1:0")]);
    let url = metrics_url(&server);
    let base = url.trim_end_matches("/metrics");
    let other = client()
        .get(format!("{base}/api/tf-states"))
        .send()
        .unwrap();
    assert_eq!(other.status(), 404);
    let post = client().post(&url).send().unwrap();
    assert_eq!(post.status(), 405);
    assert_eq!(post.headers()["allow"], "GET");
    // And the API's port does not serve them.
    let on_api = client().get(server.url("/metrics")).send().unwrap();
    assert_ne!(
        on_api
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap()),
        Some("text/plain; version=0.0.4")
    );
}

/// Anyone who reaches the metrics address may connect, so it serves eight connections at
/// once and closes one whose request does not come: eight idle connections hold a scrape
/// back, and it is answered once their ten seconds are up.
#[test]
fn idle_connections_to_the_metrics_listener_are_capped_and_closed() {
    let server = Server::start_with(&[("HEGEMONY_METRICS_LISTEN", "127.0.0.1:0")]);
    let url = metrics_url(&server);
    let at = url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_owned();
    let idle: Vec<_> = (0..8)
        .map(|_| std::net::TcpStream::connect(&at).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let started = std::time::Instant::now();
    let held_back = client().get(&url).timeout(Duration::from_secs(2)).send();
    assert!(
        held_back.is_err(),
        "a ninth connection is served: {held_back:?}"
    );
    let answered = client()
        .get(&url)
        .timeout(Duration::from_secs(30))
        .send()
        .unwrap();
    assert_eq!(answered.status(), 200);
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "answered after {:?}, before the idle connections timed out",
        started.elapsed()
    );
    drop(idle);
}

#[test]
fn a_metrics_address_that_cannot_be_bound_stops_the_start() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .env("HEGEMONY_METRICS_LISTEN", &at)
        .env_remove("HEGEMONY_TF_STATE_ENCRYPTION_KEY")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!(
            "cannot listen for metrics on {at} (HEGEMONY_METRICS_LISTEN)"
        )),
        "{said}"
    );
}

/// The example alerting rules in docs/metrics.md are rules Prometheus loads.
#[test]
fn the_documented_alerts_are_valid_rules() {
    let doc = std::fs::read_to_string(repo_root().join("docs/metrics.md")).unwrap();
    let rules = doc
        .split("```yaml\ngroups:")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .map(|rest| format!("groups:{rest}"))
        .expect("docs/metrics.md holds its alerts in a yaml block");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("alerts.yml");
    std::fs::write(&file, &rules).unwrap();
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .expect("run promtool (Debian's prometheus package; make tools installs it)");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for metric in [
        "hegemony_state_http_requests_total",
        "hegemony_state_last_sweep_success_timestamp_seconds",
    ] {
        assert!(rules.contains(metric), "the alerts use {metric}");
    }
}

/// An empty setting is an unset one, as operators write them in unit and compose files: a
/// server started with `HEGEMONY_METRICS_LISTEN=` (and other empty settings) serves the API
/// and no metrics, instead of stopping at its start.
#[test]
fn an_empty_setting_is_not_set() {
    let server = Server::start_with(&[
        ("HEGEMONY_METRICS_LISTEN", ""),
        ("HEGEMONY_CLIENT_TIMEOUT_SECONDS", " "),
        ("HEGEMONY_OIDC_ALLOW_PRIVATE_ISSUERS", ""),
    ]);
    let admin = server.token("acme", "root", "admin");
    let r = client()
        .get(server.url("/api/tf-states"))
        .bearer_auth(&admin)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(!server.logs().contains("metrics on "), "{}", server.logs());
}
