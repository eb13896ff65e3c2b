//! `make bench BENCH=memory`: the server's peak memory on every path that reads a whole
//! document, against the goal of 1.15x the state (body buffer included). Two shapes of
//! about 31 MiB: a state of large instances (few resources, the shape of one big output)
//! and a real state's shape, 60,000 small resources of AWS instances. For each, on a fresh
//! server each time (one that served large requests keeps freed memory resident, which
//! would hide the growth): a first save, a second save that changes a few instances, an
//! import, a rollback and a restore of a deleted state. Each line says whether it is within
//! the goal, and the part fails when one is not. `HEGEMONY_BENCH_A` and `HEGEMONY_BENCH_B`
//! (absolute paths of two server binaries) measure both builds side by side instead of
//! this build's.

use std::path::PathBuf;

use hegemony_state_blackbox::*;

use super::index::TYPES;
use super::rss_kib;

/// At most this many times the state's size, body buffer included.
const GOAL: f64 = 1.15;

/// One path, measured on a fresh server: what runs before the peak is reset, and the
/// request whose peak is measured.
struct Path {
    name: &'static str,
    before: fn(&Ctx<'_>),
    measured: fn(&Ctx<'_>),
}

/// A fresh server, its token and the two versions of the shape being measured.
struct Ctx<'a> {
    http: Client,
    server: &'a Server,
    token: String,
    first: &'a str,
    second: &'a str,
}

impl Ctx<'_> {
    fn post(&self, path: &str, body: String, bearer: bool) -> reqwest::blocking::Response {
        let request = self.http.post(self.server.url(path)).body(body);
        let request = if bearer {
            request.bearer_auth(&self.token)
        } else {
            request.basic_auth("u", Some(&self.token))
        };
        let r = request.send().unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
        r
    }

    fn save(&self, doc: &str) {
        self.post("/api/tf-states/measured/state", doc.to_owned(), false);
    }
}

const PATHS: &[Path] = &[
    Path {
        name: "first save",
        before: |_| {},
        measured: |c| c.save(c.first),
    },
    Path {
        name: "save changing a few instances",
        before: |c| c.save(c.first),
        measured: |c| c.save(c.second),
    },
    Path {
        name: "import",
        before: |_| {},
        measured: |c| {
            c.post("/api/tf-states/measured/import", c.first.to_owned(), true);
        },
    },
    Path {
        name: "rollback",
        before: |c| {
            c.save(c.first);
            c.save(c.second);
        },
        measured: |c| {
            c.post(
                "/api/tf-states/measured/rollback",
                r#"{"version":1}"#.into(),
                true,
            );
        },
    },
    Path {
        name: "restore",
        before: |c| {
            c.save(c.first);
            let r = c
                .http
                .delete(c.server.url("/api/tf-states/measured"))
                .bearer_auth(&c.token)
                .send()
                .unwrap();
            assert!(r.status().is_success(), "delete: {}", r.status());
        },
        measured: |c| {
            let listed: serde_json::Value = c
                .http
                .get(c.server.url("/api/deleted-states"))
                .bearer_auth(&c.token)
                .send()
                .unwrap()
                .json()
                .unwrap();
            let id = listed["deleted_states"][0]["id"]
                .as_str()
                .expect("the deleted state is listed")
                .to_owned();
            c.post(
                &format!("/api/deleted-states/{id}/restore"),
                String::new(),
                true,
            );
        },
    },
];

pub fn run() {
    let builds: Vec<(String, Option<PathBuf>)> = match (
        std::env::var_os("HEGEMONY_BENCH_A"),
        std::env::var_os("HEGEMONY_BENCH_B"),
    ) {
        (Some(a), Some(b)) => vec![("A".into(), Some(a.into())), ("B".into(), Some(b.into()))],
        _ => vec![("this build".into(), None)],
    };
    let size = 31 << 20;
    let shapes = [
        (
            "large instances",
            state_of_size(size, 1),
            with_a_few_changed(&state_of_size(size, 1)),
        ),
        (
            "60,000 small resources",
            small_resources(60_000, 1),
            with_a_few_changed(&small_resources(60_000, 1)),
        ),
    ];
    println!("server peak memory growth, body buffer included, against {GOAL}x the state:");
    let mut over = Vec::new();
    for (shape, first, second) in &shapes {
        let mib = first.len() as f64 / (1 << 20) as f64;
        let resources = first.matches(r#""mode":"#).count();
        println!("\n{shape}: {mib:.1} MiB, {resources} resources");
        for path in PATHS {
            for (build, binary) in &builds {
                let server = match binary {
                    Some(binary) => Server::start_binary(binary),
                    None => Server::start(),
                };
                let ctx = Ctx {
                    http: client(),
                    token: server.token("bench", "bench", "admin"),
                    server: &server,
                    first,
                    second,
                };
                // Warm: the server's first request sets up what every request shares.
                ctx.post(
                    "/api/tf-states/warm-up/state",
                    state_of_size(10 << 10, 1),
                    false,
                );
                (path.before)(&ctx);
                let pid = server.pid();
                std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset the peak RSS");
                let before = rss_kib(pid, "VmRSS:");
                (path.measured)(&ctx);
                let peak = rss_kib(pid, "VmHWM:");
                let growth = peak.saturating_sub(before) as f64 / 1024.0;
                let ratio = growth / mib;
                let verdict = if ratio <= GOAL { "within" } else { "OVER" };
                println!(
                    "  {:<30} {build:>10}: {growth:6.1} MiB = {ratio:.2}x  {verdict}",
                    path.name
                );
                if ratio > GOAL {
                    over.push(format!("{shape}, {} ({build}): {ratio:.2}x", path.name));
                }
            }
        }
    }
    assert!(
        over.is_empty(),
        "over {GOAL}x the state:\n{}",
        over.join("\n")
    );
    println!("\nevery path within {GOAL}x the state");
}

/// A state of `count` small resources of AWS instances, one instance each, about 555 bytes
/// a resource (32 MiB for 60,000): the shape of a real large state, where the index's share
/// of a save is the largest.
fn small_resources(count: usize, serial: u64) -> String {
    let resources: Vec<String> = (0..count)
        .map(|i| {
            let (kind, m) = (TYPES[i % TYPES.len()], i % 7);
            format!(
                r#"{{"module":"module.m{m}","mode":"managed","type":"{kind}","name":"r0_{i}","provider":"module.m{m}.provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{{"index_key":{i},"schema_version":0,"attributes":{{"arn":"arn:aws:service:::{kind}-{i}","id":"{kind}-{i}","name":"n{i}","tags":{{"team":"platform","cost":"{i}"}},"policy":"{{\"Version\":\"2012-10-17\",\"Statement\":[{{\"Effect\":\"Allow\",\"Action\":\"s3:GetObject\",\"Resource\":\"*\"}}]}}"}},"sensitive_attributes":[],"dependencies":["module.m{m}.aws_iam_role.r0"]}}]}}"#
            )
        })
        .collect();
    format!(
        r#"{{"version":4,"terraform_version":"1.11.4","serial":{serial},"lineage":"bench","outputs":{{}},"resources":[{}],"check_results":null}}"#,
        resources.join(",")
    )
}

/// `doc` as a second version that changed a few instances: its serial moved and three ids
/// changed, as an apply that touched a few resources writes it.
fn with_a_few_changed(doc: &str) -> String {
    let mut changed = doc.replacen("\"serial\": 1,", "\"serial\": 2,", 1);
    changed = changed.replacen("\"serial\":1,", "\"serial\":2,", 1);
    for n in [1, 2, 3] {
        changed = changed.replacen(&format!("-{n}\""), &format!("-{n}x\""), 1);
    }
    changed
}
