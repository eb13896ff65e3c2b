//! `make bench BENCH=index`: what the inventory costs and how fast it answers. Its cost on
//! the server's save of a 2 MiB state, against the same bytes with nothing to index, with
//! the in-process passes beside it (`BENCH=index-save` runs this part alone); the local
//! store's search over
//! 10,000 states of 50 instances (500,000) for a few queries (p50/p95); and the rebuild's
//! throughput through the binary.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use hegemony_state::adapters::local;
use hegemony_state::domain::document::{sniff, sniff_resources};
use hegemony_state::domain::inventory::{
    fingerprint, instances_of, inventory_of, tags_of, Instance, Mode, ResourceTag, StateInventory,
};
use hegemony_state::domain::record::StateRecord;
use hegemony_state::domain::version::{ChangeRecord, Source, VersionRecord};
use hegemony_state::domain::Actor;
use hegemony_state::ports::{
    Commit, InventoryCatalog, InventoryChange, ResourceQuery, StateCatalog,
};
use hegemony_state_blackbox::*;

use super::percentile;

/// The resource types the bench's states take in turn.
pub(super) const TYPES: [&str; 5] = [
    "aws_s3_bucket",
    "aws_iam_role",
    "aws_instance",
    "google_storage_bucket",
    "aws_security_group",
];

/// A state of about `size` bytes of managed AWS instances with realistic attributes, their
/// names marked with `generation`: two generations share no address.
fn aws_state(size: usize, serial: u64, generation: u64) -> String {
    let mut resources = Vec::new();
    let mut len = 0;
    let mut i = 0;
    while len < size {
        let kind = TYPES[i % TYPES.len()];
        let resource = format!(
            r#"{{"module":"module.m{m}","mode":"managed","type":"{kind}","name":"r{generation}_{i}","provider":"module.m{m}.provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{{"index_key":{i},"schema_version":0,"attributes":{{"arn":"arn:aws:service:::{kind}-{i}","id":"{kind}-{i}","name":"n{i}","tags":{{"team":"platform","cost":"{i}"}},"policy":"{{\"Version\":\"2012-10-17\",\"Statement\":[{{\"Effect\":\"Allow\",\"Action\":\"s3:GetObject\",\"Resource\":\"*\"}}]}}","lifecycle_rule":[{{"enabled":true,"expiration":[{{"days":30}}],"id":"rule-{i}"}}],"padding":"{pad}"}},"sensitive_attributes":[],"dependencies":["module.m{m}.aws_iam_role.r0"]}}]}}"#,
            m = i % 7,
            pad = "x".repeat(400),
        );
        len += resource.len();
        resources.push(resource);
        i += 1;
    }
    format!(
        r#"{{"version":4,"terraform_version":"1.11.4","serial":{serial},"lineage":"bench","outputs":{{}},"resources":[{}],"check_results":null}}"#,
        resources.join(",")
    )
}

/// `doc` as Terraform 1.12 and later write it with a provider that declares identities:
/// each instance's `identity` beside its attributes (its account, region and id), its
/// members sorted by name as Terraform writes every object.
fn with_identities(doc: &str) -> String {
    let marker = r#""sensitive_attributes":[]"#;
    let mut out = String::with_capacity(doc.len() + doc.len() / 8);
    for (i, part) in doc.split(marker).enumerate() {
        if i > 0 {
            out.push_str(&format!(
                r#"{marker},"identity_schema_version":0,"identity":{{"account_id":"123456789012","id":"r-{i}","region":"eu-west-1"}}"#
            ));
        }
        out.push_str(part);
    }
    out
}

/// `doc` with its resources moved under a key the sniff skips: the same bytes, compressed
/// the same, with nothing to index.
fn hide_resources(doc: &str) -> String {
    doc.replacen(r#""resources":["#, r#""resources":[],"elsewhere":["#, 1)
}

fn median_of(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    percentile(&mut times, 0.5)
}

/// The index's share of a 2 MiB save, measured two ways. In the process: sniff alone, sniff
/// collecting the instances (and again with each instance's identity declared), the tags and
/// the fingerprint, the digests of a whole entry, and
/// the instances of the one resource a save added. Through the server (301 rounds, or
/// `HEGEMONY_BENCH_ROUNDS` + 1, of one POST of each kind, the first left out, in orders
/// that change round by round; a kind's cost is the median of the rounds' differences from
/// the first kind, its share that cost over its p50): the same 2 MiB saved with nothing to index (the resources
/// moved under a key the sniff skips: same bytes, same compression), against a save that
/// changes no instance (an apply that changed attributes: the entry kept, only its version
/// moved), one that adds an instance (an apply that created one: the entry patched, its one
/// resource built and its row written, the previous round's removed), and one that renames
/// every instance (every row replaced). That baseline's sniff skips the resources whole,
/// where a server without the index still walks them to count the instances; that walk's
/// share of the save's wait, from the in-process passes, is given, and each cost without it.
/// Last, the first search after a whole entry's save, which writes the rows its commit
/// recorded on the local store.
pub fn cost_on_a_save() {
    // Enough that a run's median difference moves by about 0.1 ms from run to run: at 75
    // rounds it moved by up to 0.6 ms, more than a kept save's whole cost.
    let round_count = rounds_or(300);
    let doc = aws_state(2 << 20, 1, 0);
    let bytes = doc.as_bytes();
    let (_, found) = sniff_resources(bytes).unwrap();
    let found = found.unwrap();
    let instances: usize = found.iter().map(|r| r.instances().len()).sum();
    let key = [7u8; 32];
    // Taken in turn, 60 times each, so that a busy spell of the machine falls on the three
    // alike: the walk below is a small difference of them.
    let hidden_doc = hide_resources(&doc);
    let mut passes: [Vec<Duration>; 3] = Default::default();
    for _ in 0..60 {
        let t = Instant::now();
        std::hint::black_box(sniff(bytes).unwrap());
        passes[0].push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(Sha256::digest(bytes));
        passes[1].push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(sniff_resources(hidden_doc.as_bytes()).unwrap());
        passes[2].push(t.elapsed());
    }
    let [plain, digest, hidden] = passes.map(|mut times| percentile(&mut times, 0.5));
    let collecting = median_of(30, || {
        std::hint::black_box(sniff_resources(bytes).unwrap());
    });
    let declared_doc = with_identities(&doc);
    let extra = declared_doc.len() - doc.len();
    let declaring = median_of(30, || {
        std::hint::black_box(sniff_resources(declared_doc.as_bytes()).unwrap());
    });
    let declared_plain = median_of(30, || {
        std::hint::black_box(sniff(declared_doc.as_bytes()).unwrap());
    });
    let fingerprinting = median_of(30, || {
        std::hint::black_box(fingerprint(tags_of(&found, &key).as_slice(), &key));
    });
    let tags = tags_of(&found, &key);
    let digesting = median_of(30, || {
        std::hint::black_box(inventory_of(1, Some((&found, &tags)), &key));
    });
    // What a save that added the last resource builds: that resource's instances alone.
    let kept = &tags.as_slice()[..tags.as_slice().len() - 1];
    let patching = median_of(30, || {
        std::hint::black_box(instances_of(&found, &tags, kept, &key));
    });
    println!(
        "2 MiB state, {instances} instances, in the process: sniff {plain:.2} ms, sniff collecting {collecting:.2} ms, \
         tags and fingerprint {fingerprinting:.2} ms, digests of the whole entry {digesting:.2} ms, \
         instances of one new resource {patching:.2} ms; SHA-256 {digest:.2} ms, sniff of the \
         body with its resources hidden {hidden:.2} ms; sniff collecting the same state with \
         each instance's identity declared (as Terraform 1.12 and later write it, {extra} bytes more) \
         {declaring:.2} ms, against {declared_plain:.2} ms for its sniff alone"
    );
    // The save with nothing to index hides the resources, so its sniff skips them whole,
    // where a server without the index would still walk them to count the instances: the
    // two passes run side by side, so the longer of each pair is what the save waits for.
    let walk = (plain.max(digest) - hidden.max(digest)).max(0.0);
    let server = Server::start();
    let token = server.token("bench", "bench", "operator");
    let http = client();
    // One state of each kind; the first round (every state's first version) is left out.
    // Each round saves each of the four once, in one of four orders in which each kind comes
    // right after each other kind once (a balanced Latin square): in one fixed order the save
    // with nothing to index always came right after the heavy one (the renamed save, 50 ms
    // of writes), and whatever that leaves the disk doing fell on it alone.
    const ORDERS: [[usize; 4]; 4] = [[0, 1, 3, 2], [1, 2, 0, 3], [2, 3, 1, 0], [3, 0, 2, 1]];
    let mut rounds: Vec<[Duration; 4]> = Vec::new();
    for round in 0..=round_count {
        let serial = round + 1;
        let mut times = [Duration::ZERO; 4];
        for kind in ORDERS[round as usize % ORDERS.len()] {
            times[kind] = save(&http, &server, &token, kind, body_of(kind, serial));
        }
        if round > 0 {
            rounds.push(times);
        }
    }
    let p50 = |kind: usize| {
        let mut times: Vec<Duration> = rounds.iter().map(|r| r[kind]).collect();
        percentile(&mut times, 0.5)
    };
    // The index's cost: the median of each round's difference from the save with nothing to
    // index, which what else the machine did in that round weighs on alike.
    let cost = |kind: usize| {
        let mut more: Vec<f64> = rounds
            .iter()
            .map(|r| (r[kind].as_secs_f64() - r[0].as_secs_f64()) * 1000.0)
            .collect();
        more.sort_by(f64::total_cmp);
        more[more.len() / 2]
    };
    let bare = p50(0);
    let share = |kind: usize| {
        let (with, more) = (p50(kind), cost(kind));
        let net = more - walk;
        format!(
            "{with:.1} ms, {more:.2} ms more: {:.1}% of the save; {net:.2} ms, {:.1}%, less the count's walk",
            more / with * 100.0,
            net / with * 100.0
        )
    };
    println!(
        "  a save with nothing to index: {bare:.1} ms (p50); its sniff skips the walk that \
         counts the instances, which a server without the index makes too: {walk:.2} ms of \
         each cost below"
    );
    println!("  a save changing no instance (entry kept): {}", share(1));
    println!(
        "  a save adding one instance (entry patched, one row written): {}",
        share(2)
    );
    println!(
        "  a save renaming every instance ({instances} rows replaced): {}",
        share(3)
    );
    let (first, settled) = first_read_after_a_whole_entry(&http, &server, &token, round_count);
    println!(
        "  the first search after a save renaming every instance, which writes the rows its \
         commit recorded: {first:.1} ms (p50); the search after it {settled:.2} ms"
    );
}

/// The p50 of the first search of the renamed state after each of 30 saves renaming every
/// instance (the rows its commit recorded written), and of the search after it (nothing
/// left to do), in ms.
fn first_read_after_a_whole_entry(
    http: &Client,
    server: &Server,
    token: &str,
    after: u64,
) -> (f64, f64) {
    let url = server.url(&format!("/api/resources?state={}&limit=1", KINDS[3]));
    let search = || {
        let t = Instant::now();
        let r = http.get(&url).bearer_auth(token).send().unwrap();
        assert_eq!(r.status(), 200);
        t.elapsed()
    };
    let mut first = Vec::new();
    let mut second = Vec::new();
    for serial in after + 2..after + 32 {
        save(http, server, token, 3, body_of(3, serial));
        first.push(search());
        second.push(search());
    }
    (percentile(&mut first, 0.5), percentile(&mut second, 0.5))
}

/// `make bench BENCH=index-commit`: what recording a whole entry's rows costs the local
/// store's commit, in the process, where the server's saves (`index-save`, `index-ab`) see it
/// through the spread of the whole save. Two states take turns, 300 rounds each after 20
/// left out: one's commit replaces its whole entry with the 2 MiB state's instances renamed
/// (as a rename, an import or a first save does), the other's keeps its entry and moves its
/// version (no rows recorded). Both commit the same record otherwise, fsync on.
pub fn commit_of_a_whole_entry() {
    const ROUNDS: u64 = 320;
    let key = [7u8; 32];
    let dir = tempfile::tempdir().unwrap();
    let (catalog, _) = local::open(dir.path()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fresh =
        |name: &str| StateRecord::fresh("bench", name, "inc", time::OffsetDateTime::now_utc());
    let mut records = [fresh("whole"), fresh("kept")];
    let mut times: [Vec<Duration>; 2] = Default::default();
    let mut rows = 0;
    for round in 1..=ROUNDS {
        // Every round's instances renamed (a generation of their own), built as a save
        // builds them, before the clock starts.
        let doc = aws_state(2 << 20, round, round);
        let (_, found) = sniff_resources(doc.as_bytes()).unwrap();
        let found = found.unwrap();
        let entry = inventory_of(round, Some((&found, &tags_of(&found, &key))), &key);
        rows = entry.instances.len();
        let whole = InventoryChange::Replace(entry);
        // Both states' first versions are whole entries.
        let kept = match round {
            1 => whole.clone(),
            _ => InventoryChange::Keep { version: round },
        };
        let mut changes = [Some(whole), Some(kept)];
        for turn in 0..2 {
            // The states take the first turn in turn.
            let which = (turn + round as usize) % 2;
            let change = changes[which]
                .take()
                .expect("each state commits once a round");
            let before = records[which].clone();
            let mut record = before.clone();
            record.latest = Some(version(round));
            record.next_version = round + 1;
            record.revision = round;
            let mut commit = Commit::over(&before, record.created_at, Some(record.clone()));
            commit.inventory = Some(change);
            let t = Instant::now();
            rt.block_on(catalog.commit(commit)).unwrap();
            if round > 20 {
                times[which].push(t.elapsed());
            }
            records[which] = record;
        }
    }
    let [whole, kept] = times.map(|mut t| percentile(&mut t, 0.5));
    println!(
        "\nlocal store, in the process: a commit replacing a whole entry of {rows} instances \
         {whole:.2} ms (p50), one keeping its entry {kept:.2} ms: {:.2} ms for recording the rows",
        whole - kept
    );
}

/// The kinds of save the cost is measured on, by the name of the state each goes to: the
/// baseline first.
const KINDS: [&str; 4] = ["index-none", "index-kept", "index-added", "index-renamed"];

/// The body of `kind`'s save number `serial`: the 2 MiB state with its resources hidden;
/// as it is (its entry kept); with one resource more, named after the serial (its entry
/// patched, the last serial's resource removed); every resource renamed.
fn body_of(kind: usize, serial: u64) -> String {
    match KINDS[kind] {
        "index-none" => hide_resources(&aws_state(2 << 20, serial, 0)),
        "index-kept" => aws_state(2 << 20, serial, 0),
        "index-added" => {
            let extra = format!(
                r#"{{"mode":"managed","type":"aws_sqs_queue","name":"q{serial}","provider":"provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{{"attributes":{{"arn":"arn:aws:sqs:::q{serial}"}}}}]}},"#
            );
            aws_state(2 << 20, serial, 0).replacen(
                r#""resources":["#,
                &format!(r#""resources":[{extra}"#),
                1,
            )
        }
        _ => aws_state(2 << 20, serial, serial),
    }
}

/// Posts `body` as the state of save kind `kind`, and says how long it took.
fn save(http: &Client, server: &Server, token: &str, kind: usize, body: String) -> Duration {
    let url = server.url(&format!("/api/tf-states/{}/state", KINDS[kind]));
    let t = Instant::now();
    let r = http
        .post(&url)
        .basic_auth("u", Some(token))
        .body(body)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    t.elapsed()
}

/// `make bench BENCH=index-ab`: the index's cost on a save in two builds, each a server of
/// its own (`HEGEMONY_BENCH_A` and `HEGEMONY_BENCH_B` name their binaries), saving the same
/// bodies in turn in one run. Runs of `index-save` a build apart differ by up to 0.6 ms for
/// the same code, as the machine's busy spells come and go; here a spell weighs on both
/// builds alike. Each round saves every kind to each server, the servers and the kinds
/// taking turns in their order; a kind's cost is the median of its rounds' differences from
/// the same server's save with nothing to index. (The renamed kind was left out while its
/// commit wrote 40 ms of rows, which weighed on whatever followed it; a build from before
/// the rows were recorded rather than written still does.)
pub fn cost_of_two_builds() {
    let rounds = rounds_or(200);
    let builds: Vec<(String, std::path::PathBuf)> = ["A", "B"]
        .iter()
        .map(|build| {
            let var = format!("HEGEMONY_BENCH_{build}");
            let path = std::env::var_os(&var)
                .unwrap_or_else(|| panic!("{var} names the binary of build {build}"));
            (build.to_string(), path.into())
        })
        .collect();
    let servers: Vec<Server> = builds
        .iter()
        .map(|(_, path)| Server::start_binary(path))
        .collect();
    let tokens: Vec<String> = servers
        .iter()
        .map(|s| s.token("bench", "bench", "operator"))
        .collect();
    let http = client();
    // [server][kind - 1]: the round's difference from that server's save with nothing to
    // index, in ms.
    let mut more: [[Vec<f64>; 3]; 2] = Default::default();
    for round in 0..=rounds {
        let serial = round + 1;
        let bodies: Vec<String> = (0..KINDS.len()).map(|kind| body_of(kind, serial)).collect();
        let mut times = [[Duration::ZERO; KINDS.len()]; 2];
        for turn in 0..2 {
            let server = (turn + round as usize) % 2;
            for step in 0..KINDS.len() {
                let kind = (step + round as usize) % KINDS.len();
                times[server][kind] = save(
                    &http,
                    &servers[server],
                    &tokens[server],
                    kind,
                    bodies[kind].clone(),
                );
            }
        }
        // The first round is every state's first version.
        if round > 0 {
            for (server, times) in times.iter().enumerate() {
                for kind in 1..KINDS.len() {
                    more[server][kind - 1]
                        .push((times[kind].as_secs_f64() - times[0].as_secs_f64()) * 1000.0);
                }
            }
        }
    }
    println!("The index's cost on a 2 MiB save, two builds side by side, {rounds} rounds:");
    for ((build, path), more) in builds.iter().zip(more.iter_mut()) {
        let [kept, patched, renamed] = more.each_mut().map(|m| {
            m.sort_by(f64::total_cmp);
            m[m.len() / 2]
        });
        println!(
            "  {build} ({}): entry kept {kept:.2} ms more, entry patched {patched:.2} ms more, \
             entry replaced whole (every instance renamed) {renamed:.2} ms more",
            path.display()
        );
    }
}

/// `HEGEMONY_BENCH_ROUNDS`, or `default` rounds.
fn rounds_or(default: u64) -> u64 {
    std::env::var("HEGEMONY_BENCH_ROUNDS")
        .ok()
        .map(|r| {
            r.parse()
                .expect("HEGEMONY_BENCH_ROUNDS is a number of rounds")
        })
        .unwrap_or(default)
}

fn version(n: u64) -> VersionRecord {
    let at = time::OffsetDateTime::now_utc();
    VersionRecord {
        version: n,
        serial: Some(n),
        lineage: Some("l".into()),
        size: 10,
        sha256: format!("{n:064x}"),
        source: Source::Write,
        key: "platform:bench".into(),
        wrapped_key: None,
        opentofu_encrypted: false,
        terraform_version: None,
        instances: Some(50),
        index: None,
        created_at: at,
        writer: Actor::User {
            user: "bench".into(),
        },
        change: ChangeRecord::first_save(None, at),
        blob: String::new(),
        inline: false,
    }
}

/// State `s`'s 50 instances: five types, two providers, seven modules; every 1,000th
/// state shares a bucket with the one before.
fn synthetic_instances(s: usize) -> Vec<Instance> {
    let mut instances: Vec<Instance> = (0..50)
        .map(|j| {
            let kind = TYPES[j % TYPES.len()];
            let module = format!("module.m{}", j % 7);
            let provider = if kind.starts_with("google") {
                "registry.terraform.io/hashicorp/google"
            } else {
                "registry.terraform.io/hashicorp/aws"
            };
            let digest = if s % 1000 == 1 && j == 0 {
                format!("{:064x}", s - 1)
            } else {
                format!("{:064x}", s * 100 + j)
            };
            Instance {
                address: format!("{module}.{kind}.r{s}_{j}"),
                module: module.into(),
                mode: Mode::Managed,
                resource_type: kind.into(),
                provider: provider.into(),
                digest: Some(digest),
                resource: ResourceTag(j as u64),
            }
        })
        .collect();
    instances.sort_by(|a, b| a.address.cmp(&b.address));
    instances
}

/// The local store's search over 10,000 states x 50 instances.
fn search_at_scale() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, _) = local::open(dir.path()).unwrap();
    let catalog = Arc::new(catalog);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let states = 10_000;
    let t = Instant::now();
    rt.block_on(async {
        for s in 0..states {
            let mut record = StateRecord::fresh(
                "bench",
                &format!("s{s:05}"),
                "inc",
                time::OffsetDateTime::now_utc(),
            );
            record.latest = Some(version(1));
            record.next_version = 2;
            record.revision = 1;
            let mut commit = Commit::over(
                &StateRecord {
                    revision: 0,
                    ..record.clone()
                },
                record.created_at,
                Some(record.clone()),
            );
            commit.inventory = Some(InventoryChange::Replace(StateInventory {
                version: 1,
                indexed: true,
                instances: synthetic_instances(s),
                tags: None,
            }));
            catalog.commit(commit).await.unwrap();
        }
        // The rows the last commits recorded are written by the first read: timed too.
        let first = ResourceQuery {
            limit: 1,
            ..ResourceQuery::default()
        };
        catalog.resources("bench", &first).await.unwrap();
    });
    println!(
        "\nlocal store: {states} states x 50 instances indexed in {:.1} s (one commit each, fsync on, \
         the rows still recorded then written by a first search)",
        t.elapsed().as_secs_f64()
    );
    let q = |f: &dyn Fn(&mut ResourceQuery)| {
        let mut query = ResourceQuery {
            limit: 100,
            ..ResourceQuery::default()
        };
        f(&mut query);
        query
    };
    let queries: Vec<(&str, ResourceQuery)> = vec![
        ("first page, no filter", q(&|_| {})),
        ("q common (\"bucket\")", q(&|x| x.q = Some("bucket".into()))),
        (
            "q rare (\"r9876_\", one state near the end)",
            q(&|x| x.q = Some("r9876_".into())),
        ),
        (
            "q absent (\"nothing\")",
            q(&|x| x.q = Some("nothing".into())),
        ),
        (
            "type",
            q(&|x| x.resource_type = Some("aws_iam_role".into())),
        ),
        (
            "provider \"google\"",
            q(&|x| x.provider = Some("google".into())),
        ),
        (
            "module + q",
            q(&|x| {
                x.module = Some("module.m3".into());
                x.q = Some("role".into());
            }),
        ),
        ("state", q(&|x| x.state = Some("s05000".into()))),
        (
            "page deep in (after s07000)",
            q(&|x| x.after = Some(("s07000".into(), "module.m6".into()))),
        ),
        ("limit 1000", q(&|x| x.limit = 1000)),
    ];
    println!(
        "{:<48} {:>9} {:>9} {:>6}",
        "search", "p50 ms", "p95 ms", "rows"
    );
    rt.block_on(async {
        for (label, query) in &queries {
            let mut times = Vec::new();
            let mut rows = 0;
            for _ in 0..20 {
                let t = Instant::now();
                rows = catalog.resources("bench", query).await.unwrap().len();
                times.push(t.elapsed());
            }
            println!(
                "{label:<48} {:>9.1} {:>9.1} {rows:>6}",
                percentile(&mut times, 0.5),
                percentile(&mut times, 0.95)
            );
        }
        let mut times = Vec::new();
        let mut groups = 0;
        for _ in 0..10 {
            let t = Instant::now();
            groups = catalog.conflicts("bench", None).await.unwrap().len();
            times.push(t.elapsed());
        }
        println!(
            "{:<48} {:>9.1} {:>9.1} {groups:>6}",
            "conflicts",
            percentile(&mut times, 0.5),
            percentile(&mut times, 0.95)
        );
        let mut times = Vec::new();
        for _ in 0..10 {
            let t = Instant::now();
            std::hint::black_box(catalog.inventory_summary("bench").await.unwrap());
            times.push(t.elapsed());
        }
        println!(
            "{:<48} {:>9.1} {:>9.1}",
            "the overview's summary (states, counts, conflicts)",
            percentile(&mut times, 0.5),
            percentile(&mut times, 0.95)
        );
    });
    drop(catalog);
}

/// `index rebuild` through the binary: states saved by the server, their index dropped.
fn rebuild_throughput() {
    let server = Server::start();
    let token = server.token("bench", "bench", "operator");
    let http = client();
    let states = 300;
    let body = aws_state(64 << 10, 1, 0);
    for s in 0..states {
        let r = http
            .post(server.url(&format!("/api/tf-states/r{s}/state")))
            .basic_auth("u", Some(&token))
            .body(body.clone())
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    // A commit records its rows and the first read writes them: a search first, so they
    // are all counted, and after the rebuild, so its figure is of rows written, not waiting.
    let search = || {
        let t = Instant::now();
        let r = http
            .get(server.url("/api/resources?limit=1"))
            .bearer_auth(&token)
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
        t.elapsed().as_secs_f64()
    };
    search();
    let file = server.data_dir().join(local::CATALOG_FILE);
    let instances: i64 = rusqlite::Connection::open(&file)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM inventory", [], |r| r.get(0))
        .unwrap();
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute_batch(
            "DELETE FROM inventory; DELETE FROM inventory_states; DELETE FROM inventory_pending;",
        )
        .unwrap();
    let t = Instant::now();
    let out = Command::new(bin())
        .args(["index", "rebuild", "--org", "bench", "--data-dir"])
        .arg(server.data_dir())
        .env_remove("HEGEMONY_TF_STATE_ENCRYPTION_KEY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let rebuilt = t.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = search();
    let took = rebuilt + written;
    println!(
        "\nindex rebuild: {states} states of 64 KiB ({instances} instances) in {took:.2} s \
         ({rebuilt:.2} s the rebuild, {written:.2} s the first search writing the rows it \
         recorded): {:.0} states/s, {:.0} instances/s",
        states as f64 / took,
        instances as f64 / took
    );
}

pub fn run() {
    println!("Hegemony State inventory benchmark: release build, fsync on\n");
    cost_on_a_save();
    commit_of_a_whole_entry();
    search_at_scale();
    rebuild_throughput();
}
