//! `make bench`: the backend's speed and memory, measured (a benchmark, not a test).
//!
//! Starts the release `hegemony-state` server on a fresh data folder (fsync on, as in
//! production) and, for states of 10 KiB to 32 MiB shaped like real Terraform states,
//! times LOCK, GET, POST and UNLOCK (p50/p95). Then measures the save path's CPU throughput
//! in-process (validate + SHA-256 + compress + encrypt), and the server's peak memory growth
//! during a 32 MiB save, body buffer included, against the state's size. Last, the AWS
//! store on the emulator: the Lambda functions' start-up under the runtime API, the AWS calls
//! each backend operation makes, and the backend routes' latency through the functions and the container next to the local store.
//! And the comparison of two 32 MiB versions that differ in a few instances: its time next
//! to a plain download of both, and the server's peak memory growth while it compares.
//!
//! Then reads against their floor: for 2, 8 and 32 MiB, the time to the last byte of a GET
//! (gzip accepted) next to the time to read, decrypt and copy the stored bytes in-process,
//! and the server's peak memory growth over a mix of 32 MiB saves and reads.
//!
//! `cargo bench -p hegemony-state-blackbox --bench backend -- changes` (`make bench
//! BENCH=changes`) runs the comparison alone; `BENCH=small` the backend latencies of the
//! small states alone (10 KiB and 100 KiB, the sizes whose saves are inline); `BENCH=reads`
//! the reads against their floor; `-- aws` (`make bench BENCH=aws`) the AWS store on the
//! emulator alone; `BENCH=index` the inventory's cost on a save, its search over 500,000
//! instances on the local store and the rebuild's throughput.

#[path = "bench/index.rs"]
mod index;
#[path = "bench/memory.rs"]
mod memory;

use std::time::{Duration, Instant};

use hegemony_state::crypto::{self, Binding, Opening};
use hegemony_state::domain::document::sniff;
use hegemony_state_blackbox::aws::Deployment;
use hegemony_state_blackbox::aws_calls;
use hegemony_state_blackbox::gateway::Gateway;
use hegemony_state_blackbox::*;
use sha2::{Digest, Sha256};

const SIZES: &[(&str, usize, usize)] = &[
    ("10 KiB", 10 << 10, 100),
    ("100 KiB", 100 << 10, 60),
    ("2 MiB", 2 << 20, 20),
    ("8 MiB", 8 << 20, 8),
    ("32 MiB", 32 << 20, 4),
];

fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort();
    let idx = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[idx].as_secs_f64() * 1000.0
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn main() {
    // `cargo bench` passes its own flags (`--bench`); a plain word names one part.
    let part = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let sizes = match part.as_deref() {
        None => SIZES,
        Some("changes") => return compare_versions(&client()),
        Some("aws") => return aws_front_doors(&client()),
        Some("reads") => return reads_against_their_floor(&client()),
        Some("index") => return index::run(),
        Some("index-save") => return index::cost_on_a_save(),
        Some("index-ab") => return index::cost_of_two_builds(),
        Some("index-commit") => return index::commit_of_a_whole_entry(),
        Some("memory") => return memory::run(),
        Some("small") => &SIZES[..2],
        Some(other) => {
            panic!("no benchmark part named {other:?}; the parts are: changes, small, reads, aws, index, index-save, index-ab, index-commit, memory")
        }
    };
    // Built with the bench (release) profile, so `bin()` finds the release server.
    let server = Server::start();
    let token = server.token("bench", "bench", "operator");
    let http = client();
    println!("Hegemony State backend benchmark: local server, release build, fsync on\n");
    println!(
        "{:>8}  {:>15}  {:>15}  {:>15}  {:>15}  {:>7}",
        "state", "LOCK p50/p95", "GET p50/p95", "POST p50/p95", "UNLOCK p50/p95", "cycles"
    );
    let mut serial = 0u64;
    for (label, size, cycles) in sizes {
        let name = format!("bench-{size}");
        let (lock, unlock, state) = (
            server.url(&format!("/api/tf-states/{name}/lock")),
            server.url(&format!("/api/tf-states/{name}/lock")),
            server.url(&format!("/api/tf-states/{name}/state")),
        );
        let docs: Vec<String> = (0..*cycles + 1)
            .map(|i| state_of_size(*size, serial + 1 + i as u64))
            .collect();
        // The first version, so every timed GET reads a stored state of this size.
        http.post(&state)
            .basic_auth("u", Some(&token))
            .body(docs[0].clone())
            .send()
            .unwrap();
        serial += 1;
        let mut times: [Vec<Duration>; 4] = Default::default();
        for (i, doc) in docs.iter().enumerate().skip(1) {
            let id = format!("bench-{size}-{i}");
            let t = Instant::now();
            let r = http
                .post(&lock)
                .basic_auth("u", Some(&token))
                .body(lock_doc(&id))
                .send()
                .unwrap();
            times[0].push(t.elapsed());
            assert_eq!(r.status(), 200);
            let t = Instant::now();
            let r = http
                .get(&state)
                .basic_auth("u", Some(&token))
                .header("Accept-Encoding", "gzip")
                .send()
                .unwrap();
            let _ = r.bytes().unwrap();
            times[1].push(t.elapsed());
            let body = doc.clone();
            let t = Instant::now();
            let r = http
                .post(format!("{state}?ID={id}"))
                .basic_auth("u", Some(&token))
                .body(body)
                .send()
                .unwrap();
            times[2].push(t.elapsed());
            assert_eq!(r.status(), 200, "{}", r.text().unwrap_or_default());
            let t = Instant::now();
            let r = http
                .delete(&unlock)
                .basic_auth("u", Some(&token))
                .body(lock_doc(&id))
                .send()
                .unwrap();
            times[3].push(t.elapsed());
            assert_eq!(r.status(), 200);
            serial += 1;
        }
        let cells: Vec<String> = times
            .iter_mut()
            .map(|t| format!("{:.1}/{:.1} ms", percentile(t, 0.5), percentile(t, 0.95)))
            .collect();
        println!(
            "{label:>8}  {:>15}  {:>15}  {:>15}  {:>15}  {cycles:>7}",
            cells[0], cells[1], cells[2], cells[3]
        );
    }
    if part.is_some() {
        return;
    }

    // The save path's CPU work, in-process, on a 32 MiB state.
    let doc = state_of_size(32 << 20, 1);
    let mib = doc.len() as f64 / (1 << 20) as f64;
    let key = [7u8; 32];
    let binding = Binding {
        org: "bench",
        incarnation: "inc",
        version: 1,
        blob_id: "b",
    };
    let rounds = 5;
    let t = Instant::now();
    let mut sealed_len = 0;
    for _ in 0..rounds {
        sniff(doc.as_bytes()).unwrap();
        let _ = Sha256::digest(doc.as_bytes());
        sealed_len = crypto::seal(doc.as_bytes(), &key, &binding).len();
    }
    let per = t.elapsed().as_secs_f64() / rounds as f64;
    println!(
        "\nsave path CPU (validate + SHA-256 + gzip on every core + AES-256-GCM): {:.0} MiB/s of state ({:.1} MiB in {:.0} ms; sealed {:.1} MiB, ratio {:.1}x)",
        mib / per,
        mib,
        per * 1000.0,
        sealed_len as f64 / (1 << 20) as f64,
        doc.len() as f64 / sealed_len as f64
    );

    list_and_import_many(&http);

    aws_front_doors(&http);

    compare_versions(&http);

    reads_against_their_floor(&http);

    // Peak memory growth during one 32 MiB save, on a fresh server: one that already served
    // large requests keeps freed memory resident, which would hide the growth.
    drop(server);
    let server = Server::start();
    let token = server.token("bench", "bench", "operator");
    let warm = http
        .post(server.url("/api/tf-states/warm-up/state"))
        .basic_auth("u", Some(&token))
        .body(state_of_size(10 << 10, 1))
        .send()
        .unwrap();
    assert_eq!(warm.status(), 200);
    let pid = server.pid();
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset the peak RSS");
    let before = rss_kib(pid, "VmRSS:");
    let name = "bench-memory";
    let r = http
        .post(server.url(&format!("/api/tf-states/{name}/state")))
        .basic_auth("u", Some(&token))
        .body(doc.clone())
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let peak = rss_kib(pid, "VmHWM:");
    let growth_mib = (peak.saturating_sub(before)) as f64 / 1024.0;
    println!(
        "server peak memory growth during a {mib:.1} MiB save (body buffer included): {growth_mib:.1} MiB = {:.2}x the state",
        growth_mib / mib
    );
}

/// `state` with a few instances changed (their ids): a second version as an apply that
/// touched a few resources writes it.
fn with_a_few_instances_changed(state: &str, serial: u64) -> String {
    let mut changed = state.replacen("\"serial\": 1,", &format!("\"serial\": {serial},"), 1);
    for i in [10u64, 500, 3000] {
        let id = format!("-90bf-{i:012x}\"");
        assert!(changed.contains(&id), "instance {i} is in the state");
        changed = changed.replacen(&id, &format!("-90bf-changed-{i:06}\""), 1);
    }
    changed
}

/// GETs `path` on `server` as `token`, all of the body read; the time it took.
fn timed_get(http: &Client, server: &Server, token: &str, path: &str) -> Duration {
    let t = Instant::now();
    let r = http
        .get(server.url(path))
        .bearer_auth(token)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200, "{path}");
    let _ = r.bytes().unwrap();
    t.elapsed()
}

/// Two 32 MiB versions that differ in three instances: comparing them, next to a plain
/// download of both (p50 of 5 each), and the server's peak memory growth during one
/// comparison on a fresh process.
fn compare_versions(http: &Client) {
    let server = Server::start();
    let token = server.token("bench", "bench", "operator");
    let first = state_of_size(32 << 20, 1);
    let mib = first.len() as f64 / (1 << 20) as f64;
    let second = with_a_few_instances_changed(&first, 2);
    for (name, bodies) in [
        (
            "warm-up",
            [state_of_size(10 << 10, 1), state_of_size(10 << 10, 2)],
        ),
        ("compared", [first, second]),
    ] {
        for body in bodies {
            let r = http
                .post(server.url(&format!("/api/tf-states/{name}/state")))
                .basic_auth("u", Some(&token))
                .body(body)
                .send()
                .unwrap();
            assert_eq!(r.status(), 200);
        }
    }
    // A fresh process, so memory the saves left resident does not hide the growth.
    let server = server.restart();
    timed_get(
        http,
        &server,
        &token,
        "/api/tf-states/warm-up/versions/2/changes",
    );
    let pid = server.pid();
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset the peak RSS");
    let before = rss_kib(pid, "VmRSS:");
    let r = http
        .get(server.url("/api/tf-states/compared/versions/2/changes"))
        .bearer_auth(&token)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let answer: serde_json::Value = r.json().unwrap();
    let peak = rss_kib(pid, "VmHWM:");
    assert_eq!(
        answer["counts"],
        serde_json::json!({"added": 0, "changed": 3, "removed": 0}),
        "{answer}"
    );
    let growth_mib = peak.saturating_sub(before) as f64 / 1024.0;
    let rounds = 5;
    let mut downloads = Vec::new();
    let mut compares = Vec::new();
    for _ in 0..rounds {
        downloads.push(
            timed_get(
                http,
                &server,
                &token,
                "/api/tf-states/compared/versions/1/content",
            ) + timed_get(
                http,
                &server,
                &token,
                "/api/tf-states/compared/versions/2/content",
            ),
        );
        compares.push(timed_get(
            http,
            &server,
            &token,
            "/api/tf-states/compared/versions/2/changes",
        ));
    }
    let download = percentile(&mut downloads, 0.5);
    let compare = percentile(&mut compares, 0.5);
    println!(
        "\ncomparing two {mib:.1} MiB versions that differ in 3 instances: {compare:.0} ms p50 (a plain download of both: {download:.0} ms p50, ratio {:.2}x); server peak memory growth during one comparison: {growth_mib:.1} MiB = {:.2}x one state",
        compare / download,
        growth_mib / mib
    );
}

/// Listing 10,000 states page by page, and importing 1,000 small states with the import
/// script, each on a fresh server.
fn list_and_import_many(http: &Client) {
    let server = Server::start();
    let token = server.token("bench", "bench", "operator");
    let total = 10_000usize;
    let threads = 8;
    let t = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|k| {
            let (http, token, base) = (http.clone(), token.clone(), server.base.clone());
            std::thread::spawn(move || {
                for i in (k..total).step_by(threads) {
                    let r = http
                        .post(format!("{base}/api/tf-states/s{i:05}/state"))
                        .basic_auth("u", Some(&token))
                        .body(state_doc(1, "bench", "x"))
                        .send()
                        .unwrap();
                    assert_eq!(r.status(), 200);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let created = t.elapsed();
    let t = Instant::now();
    let mut cursor: Option<String> = None;
    let mut seen = 0;
    let mut pages = 0;
    loop {
        let url = match &cursor {
            Some(c) => server.url(&format!("/api/tf-states?limit=1000&cursor={c}")),
            None => server.url("/api/tf-states?limit=1000"),
        };
        let page: serde_json::Value = http
            .get(url)
            .bearer_auth(&token)
            .send()
            .unwrap()
            .json()
            .unwrap();
        seen += page["states"].as_array().unwrap().len();
        pages += 1;
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, total);
    println!(
        "\nlisting {total} states page by page (1,000 a page, {pages} requests): {:.0} ms ({:.1} ms a page); creating them with 8 writers took {:.1} s",
        t.elapsed().as_secs_f64() * 1000.0,
        t.elapsed().as_secs_f64() * 1000.0 / pages as f64,
        created.as_secs_f64()
    );
    drop(server);

    let server = Server::start();
    let token = server.token("bench", "bench", "operator");
    let dir = tempfile::tempdir().unwrap();
    let files = 1000;
    for i in 0..files {
        std::fs::write(
            dir.path().join(format!("state{i:04}.tfstate")),
            state_of_size(10 << 10, i as u64 + 1),
        )
        .unwrap();
    }
    let t = Instant::now();
    let out = server.cli(
        &token,
        &["import", dir.path().to_str().unwrap(), "--jobs", "8"],
    );
    let took = t.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    println!(
        "import script: {files} states of 10 KiB in {took:.2} s = {:.0} states/s (--jobs 8, the whole command)",
        files as f64 / took
    );
}

/// p50 of LOCK (POST), GET, POST and UNLOCK (DELETE) cycles on `api` for a state of `size`,
/// named after `door`: the doors of one deployment share its table.
fn cycle_p50(
    http: &Client,
    (door, api): (&str, &impl Endpoint),
    token: &str,
    size: usize,
    cycles: usize,
) -> [f64; 4] {
    let name = format!("{door}-{size}");
    let lock = api.url(&format!("/api/tf-states/{name}/lock"));
    let state = api.url(&format!("/api/tf-states/{name}/state"));
    let mut samples: [Vec<Duration>; 4] = Default::default();
    for i in 0..cycles {
        let id = format!("bench-{i}");
        let doc = state_of_size(size, i as u64 + 1);
        let steps = [
            http.post(&lock).body(lock_doc(&id)),
            http.get(&state).header("accept-encoding", "gzip"),
            http.post(format!("{state}?ID={id}")).body(doc),
            http.delete(&lock).body(lock_doc(&id)),
        ];
        for (n, request) in steps.into_iter().enumerate() {
            let t = Instant::now();
            let response = request.basic_auth("u", Some(token)).send().unwrap();
            let status = response.status();
            let _ = response.bytes();
            samples[n].push(t.elapsed());
            assert!(
                status.is_success() || (n == 1 && status == StatusCode::NOT_FOUND),
                "step {n}: {status}"
            );
        }
    }
    samples.map(|mut s| percentile(&mut s, 0.5))
}

/// The AWS store on the emulator (moto, one process, Python): how fast the functions start,
/// the AWS calls of each backend operation, and the backend routes through the functions and
/// the container beside the local store.
/// moto's own latency dominates the AWS figures; they compare doors, not clouds.
fn aws_front_doors(http: &Client) {
    let deployment = Deployment::create();
    let token = deployment.token("bench", "bench", "operator");
    let gateway = Gateway::start(&deployment, &[]);
    println!("\nLambda functions under the runtime API (release build): process start to ready");
    for (name, ready) in gateway.ready_times() {
        println!("  {name:>12}  {:>6.1} ms", ready.as_secs_f64() * 1000.0);
    }
    // Counted on a deployment of their own: the relay that counts them adds a hop the
    // timings below should not carry.
    let counted = Deployment::counted();
    let door = counted.container(&[]);
    let counted_token = door.token("bench", "bench", "operator");
    println!(
        "\nAWS calls per backend operation (container front door; the functions make the same)"
    );
    print!(
        "{}",
        aws_calls::table(&aws_calls::per_operation(&counted, &door, &counted_token))
    );
    // What they cost by state size (docs/scaling.md): each size on a state of its own.
    for (label, size) in [
        ("10 KiB", 10 << 10),
        ("100 KiB", 100 << 10),
        ("1 MiB", 1 << 20),
    ] {
        let org = format!("units-{}", size >> 10);
        let token = door.token(&org, "bench", "operator");
        println!("\nAWS calls and request units per backend operation, {label} state");
        print!(
            "{}",
            aws_calls::table(&aws_calls::per_operation_on(
                &counted,
                &door,
                &token,
                &|serial| state_of_size(size, serial)
            ))
        );
    }
    drop(door);
    let container = deployment.container(&[]);
    let local = Server::start();
    let local_token = local.token("bench", "bench", "operator");
    println!(
        "\nbackend routes, p50 ms (LOCK / GET / POST / UNLOCK), 30 cycles each; AWS store on moto"
    );
    for (label, size) in [("10 KiB", 10 << 10), ("1 MiB", 1 << 20)] {
        let doors = [
            (
                "local store",
                cycle_p50(http, ("local", &local), &local_token, size, 30),
            ),
            (
                "container on moto",
                cycle_p50(http, ("container", &container), &token, size, 30),
            ),
            (
                "functions on moto",
                cycle_p50(http, ("functions", &gateway), &token, size, 30),
            ),
        ];
        for (door, p) in doors {
            println!(
                "  {label:>6}  {door:<18}  {:>6.1} / {:>6.1} / {:>6.1} / {:>6.1}",
                p[0], p[1], p[2], p[3]
            );
        }
    }
}

/// For 2, 8 and 32 MiB: the time to the last byte of a GET that accepts gzip (p50, loopback,
/// one persistent connection) beside its floor, the time to read the stored object, decrypt
/// it and copy the opened bytes (p50, in-process, same run, same size sealed the same way),
/// and the ratio. Then the server's peak memory growth over a mix of 32 MiB saves and reads.
fn reads_against_their_floor(http: &Client) {
    let server = Server::start();
    let token = server.token("bench", "bench", "operator");
    println!("\nreads (gzip accepted) against the floor (read + decrypt + copy the stored bytes):");
    for (label, size, rounds) in [
        ("2 MiB", 2 << 20, 30),
        ("8 MiB", 8 << 20, 12),
        ("32 MiB", 32 << 20, 6),
    ] {
        let name = format!("floor-{size}");
        let doc = state_of_size(size, 1);
        let r = http
            .post(server.url(&format!("/api/tf-states/{name}/state")))
            .basic_auth("u", Some(&token))
            .body(doc.clone())
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
        let state = server.url(&format!("/api/tf-states/{name}/state"));
        let mut gets = Vec::new();
        let mut sent = 0;
        for _ in 0..rounds + 1 {
            let t = Instant::now();
            let r = http
                .get(&state)
                .basic_auth("u", Some(&token))
                .header("Accept-Encoding", "gzip")
                .send()
                .unwrap();
            sent = r.bytes().unwrap().len();
            gets.push(t.elapsed());
        }
        gets.remove(0);
        let (key, binding) = (
            [7u8; 32],
            Binding {
                org: "bench",
                incarnation: "inc",
                version: 1,
                blob_id: "b",
            },
        );
        let stored = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(stored.path(), crypto::seal(doc.as_bytes(), &key, &binding)).unwrap();
        let mut floors = Vec::new();
        for _ in 0..rounds + 1 {
            let t = Instant::now();
            let object = std::fs::read(stored.path()).unwrap();
            let header = crypto::read_header(&object).unwrap();
            let mut opening = Opening::new(object, &header, &key, &binding).unwrap();
            let mut copied = Vec::with_capacity(opening.opened_len() as usize);
            while let Some(segment) = opening.next_segment().unwrap() {
                copied.extend_from_slice(segment);
            }
            // The same plaintext, deflated again: the pieces' output can differ by a few
            // bytes with the output room each piece's buffer happened to have.
            assert!(
                copied.len().abs_diff(sent) <= sent / 1000,
                "the floor opens what the GET sends: {} against {sent} bytes",
                copied.len()
            );
            floors.push(t.elapsed());
        }
        floors.remove(0);
        let (get, floor) = (percentile(&mut gets, 0.5), percentile(&mut floors, 0.5));
        println!(
            "{label:>8}  GET to last byte {get:.1} ms p50 ({:.1} MiB sent)  floor {floor:.1} ms p50  ratio {:.2}x",
            sent as f64 / (1 << 20) as f64,
            get / floor
        );
    }
    drop(server);

    // The mix on a fresh server, as Terraform makes it: each save followed by reads of it,
    // gzip accepted, and one read by a client that refuses gzip.
    let server = Server::start();
    let token = server.token("bench", "bench", "operator");
    let warm = http
        .post(server.url("/api/tf-states/warm-up/state"))
        .basic_auth("u", Some(&token))
        .body(state_of_size(10 << 10, 1))
        .send()
        .unwrap();
    assert_eq!(warm.status(), 200);
    let docs: Vec<String> = (1..=3)
        .map(|serial| state_of_size(32 << 20, serial))
        .collect();
    let mib = docs[0].len() as f64 / (1 << 20) as f64;
    let pid = server.pid();
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset the peak RSS");
    let before = rss_kib(pid, "VmRSS:");
    let state = server.url("/api/tf-states/bench-mix/state");
    let mut saves = Vec::new();
    for doc in &docs {
        let t = Instant::now();
        let r = http
            .post(&state)
            .basic_auth("u", Some(&token))
            .body(doc.clone())
            .send()
            .unwrap();
        saves.push(t.elapsed());
        assert_eq!(r.status(), 200);
        for encoding in ["gzip", "gzip", "gzip", "identity"] {
            let r = http
                .get(&state)
                .basic_auth("u", Some(&token))
                .header("Accept-Encoding", encoding)
                .send()
                .unwrap();
            assert_eq!(r.status(), 200);
            let _ = r.bytes().unwrap();
        }
    }
    let peak = rss_kib(pid, "VmHWM:");
    let growth_mib = peak.saturating_sub(before) as f64 / 1024.0;
    println!(
        "server peak memory growth over 3 saves of {mib:.1} MiB, each read 3 times with gzip and once without: {growth_mib:.1} MiB = {:.2}x the state (saves {:.0} ms p50)",
        growth_mib / mib,
        percentile(&mut saves, 0.5)
    );
}
