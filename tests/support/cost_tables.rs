//! docs/scaling.md's cost tables, made from what a run counted: the AWS calls and request
//! units of each backend operation by state size (the relay of `aws_calls`), the functions'
//! memory sizes from the template, the CloudWatch metrics they write (`emf_metrics`), and
//! the list prices of the doc's price table. A test compares them with the doc and prints
//! the tables to paste when they differ, so the doc's figures are always today's build's.

use std::collections::BTreeMap;

use crate::aws_calls::Tally;
use crate::emf_metrics::{self, When};

/// List prices, us-east-1, as docs/scaling.md's price table gives them (dollars).
const API_REQUEST: f64 = 1.00 / 1e6;
const LAMBDA_REQUEST: f64 = 0.20 / 1e6;
/// Per GB-second, arm64: the template's default architecture.
const LAMBDA_GB_SECOND: f64 = 0.000_013_333_4;
const READ_UNIT: f64 = 0.125 / 1e6;
const WRITE_UNIT: f64 = 0.625 / 1e6;
const KMS_REQUEST: f64 = 0.03 / 1e4;
const S3_PUT: f64 = 0.005 / 1e3;
const S3_GET: f64 = 0.0004 / 1e3;
/// A custom metric a month (the first 10,000 of an account).
pub const CUSTOM_METRIC_MONTH: f64 = 0.30;

/// The operations of a Terraform apply, as the relay's tallies name them, with the function
/// that serves each and its p50 duration in milliseconds at 10 KiB and at 1 MiB (`make
/// bench`'s AWS part, docs/performance.md "On AWS"; an UNLOCK and a LOCK are the same size
/// at every state size, their items carrying no content at 1 MiB).
const APPLY: [(&str, &str, f64, f64); 4] = [
    ("LOCK", "LockFunction", 8.5, 8.5),
    ("GET", "StateReadFunction", 10.0, 16.6),
    ("POST", "StateWriteFunction", 18.6, 34.1),
    ("UNLOCK", "LockFunction", 10.1, 10.1),
];

/// The rows of the operations table: the doc's name for each counted operation.
const OPERATIONS: [(&str, &str); 9] = [
    ("LOCK", "LOCK"),
    ("GET", "GET (key not cached)"),
    ("GET again", "GET (key cached)"),
    ("POST", "POST"),
    ("UNLOCK", "UNLOCK"),
    ("list", "list (one page)"),
    ("search", "resources search"),
    ("conflicts", "resource conflicts"),
    ("overview", "overview"),
];

/// The calls every request makes or a read may, left out of a cell's "with ...".
const ROUTINE_CALLS: [&str; 4] = [
    "DynamoDB BatchGetItem",
    "DynamoDB GetItem",
    "DynamoDB TransactWriteItems",
    "DynamoDB Query",
];

/// What one state size's run counted: its column's label and each operation's tally.
pub type Column<'a> = (&'a str, &'a [(&'static str, Tally)]);

fn tally<'a>(column: &'a Column<'_>, operation: &str) -> &'a Tally {
    &column
        .1
        .iter()
        .find(|(op, _)| *op == operation)
        .unwrap_or_else(|| panic!("no {operation} counted"))
        .1
}

/// A number as the doc writes it: whole, or with its one decimal (a half read unit).
fn units(n: f64) -> String {
    if n.fract() == 0.0 {
        format!("{n:.0}")
    } else {
        format!("{n:.1}")
    }
}

fn dollars(amount: f64) -> String {
    format!("${amount:.2}")
}

/// One cell: `3 calls with KMS `Decrypt`; 3 RRU, 8 WRU, 275 KB to S3`.
fn cell(t: &Tally) -> String {
    let calls: u64 = t.calls.values().sum();
    let special: Vec<String> = t
        .calls
        .iter()
        .filter(|(c, _)| !ROUTINE_CALLS.contains(&c.as_str()))
        .map(|(c, n)| {
            let (service, op) = c.split_once(' ').unwrap();
            let times = if *n > 1 {
                format!("{n} ")
            } else {
                String::new()
            };
            format!("{times}{service} `{op}`")
        })
        .collect();
    let mut text = format!("{calls} calls");
    if !special.is_empty() {
        text += &format!(" with {}", special.join(", "));
    }
    text += &format!("; {} RRU", units(t.units.read()));
    if t.units.write > 0 {
        text += &format!(", {} WRU", t.units.write);
    }
    if t.units.s3_bytes_put > 0 {
        text += &format!(", {} KB to S3", t.units.s3_bytes_put.div_ceil(1000));
    }
    text
}

fn header(first: &str, columns: &[Column<'_>]) -> String {
    let labels: Vec<String> = columns.iter().map(|(l, _)| format!("{l} state")).collect();
    format!(
        "| {first} | {} |\n|---|{}\n",
        labels.join(" | "),
        "---|".repeat(columns.len())
    )
}

/// "What each backend operation costs".
pub fn operations(columns: &[Column<'_>]) -> String {
    let mut table = header("Operation", columns);
    for (counted, row) in OPERATIONS {
        let cells: Vec<String> = columns.iter().map(|c| cell(tally(c, counted))).collect();
        table += &format!("| {row} | {} |\n", cells.join(" | "));
    }
    table
}

/// The MemorySize of a function resource of the template, in MB.
fn memory_mb(template: &str, resource: &str) -> f64 {
    let block = template
        .split(&format!("\n  {resource}:\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("no {resource} in the template"));
    let size = block
        .split("MemorySize: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{resource} has no MemorySize"));
    size.parse().unwrap()
}

/// "What a Terraform run costs": per million applies (LOCK, GET with its key not cached,
/// POST, UNLOCK), each priced unit summed over the four. The 100 KiB column's Lambda
/// duration is not measured; its row says so.
pub fn applies(columns: &[Column<'_>], template: &str) -> String {
    let mut table = header("Per million applies", columns);
    let mut totals = vec![0.0; columns.len()];
    let mut row = |name: String, costs: Vec<Option<f64>>| {
        let cells: Vec<String> = costs
            .iter()
            .zip(totals.iter_mut())
            .map(|(cost, total)| match cost {
                Some(c) if *c > 0.0 => {
                    *total += c;
                    dollars(c * 1e6)
                }
                Some(_) => "-".to_owned(),
                None => "not measured".to_owned(),
            })
            .collect();
        format!("| {name} | {} |\n", cells.join(" | "))
    };
    let each = |f: &dyn Fn(&Tally) -> f64| -> Vec<f64> {
        columns
            .iter()
            .map(|c| APPLY.iter().map(|(op, ..)| f(tally(c, op))).sum())
            .collect()
    };
    let calls = |name: &'static str| move |t: &Tally| *t.calls.get(name).unwrap_or(&0) as f64;
    let some = |v: Vec<f64>, price: f64| v.into_iter().map(|n| Some(n * price)).collect();
    let mut text = String::new();
    text += &row(
        "API Gateway (4 requests)".into(),
        some(vec![4.0; columns.len()], API_REQUEST),
    );
    text += &row(
        "Lambda requests (4)".into(),
        some(vec![4.0; columns.len()], LAMBDA_REQUEST),
    );
    let gb_seconds = |large: bool| -> f64 {
        APPLY
            .iter()
            .map(|(_, function, small_ms, large_ms)| {
                let ms = if large { large_ms } else { small_ms };
                ms / 1000.0 * memory_mb(template, function) / 1024.0
            })
            .sum()
    };
    let durations: Vec<Option<f64>> = columns
        .iter()
        .map(|(label, _)| match *label {
            "10 KiB" => Some(gb_seconds(false) * LAMBDA_GB_SECOND),
            "1 MiB" => Some(gb_seconds(true) * LAMBDA_GB_SECOND),
            _ => None,
        })
        .collect();
    text += &row(
        format!(
            "Lambda duration, arm64 ({:.3} GB-s at 10 KiB, {:.3} at 1 MiB)",
            gb_seconds(false),
            gb_seconds(true)
        ),
        durations,
    );
    let reads = each(&|t| t.units.read());
    let writes = each(&|t| t.units.write as f64);
    // One figure when every column has the same.
    let list = |v: &[f64]| {
        if v.iter().all(|n| *n == v[0]) {
            units(v[0])
        } else {
            v.iter().map(|n| units(*n)).collect::<Vec<_>>().join("; ")
        }
    };
    text += &row(
        format!("DynamoDB reads ({} RRU)", list(&reads)),
        some(reads, READ_UNIT),
    );
    text += &row(
        format!("DynamoDB writes ({} WRU)", list(&writes)),
        some(writes, WRITE_UNIT),
    );
    let kms: Vec<f64> = each(&|t| {
        t.calls
            .iter()
            .filter(|(c, _)| c.starts_with("KMS "))
            .map(|(_, n)| *n as f64)
            .sum()
    });
    text += &row(
        format!("KMS ({} requests)", list(&kms)),
        some(kms, KMS_REQUEST),
    );
    let puts = each(&calls("S3 PutObject"));
    let gets = each(&calls("S3 GetObject"));
    let s3: Vec<Option<f64>> = puts
        .iter()
        .zip(&gets)
        .map(|(p, g)| Some(p * S3_PUT + g * S3_GET))
        .collect();
    let s3_calls: Vec<String> = puts
        .iter()
        .zip(&gets)
        .map(|(p, g)| {
            if *p == 0.0 && *g == 0.0 {
                "none".to_owned()
            } else {
                format!("{} PUT, {} GET", units(*p), units(*g))
            }
        })
        .collect();
    text += &row(format!("S3 ({})", s3_calls.join("; ")), s3);
    let cells: Vec<String> = totals
        .iter()
        .map(|t| format!("**{}**", dollars(t * 1e6)))
        .collect();
    table += &text;
    table += &format!("| **Total** | {} |\n", cells.join(" | "));
    table
}

/// "CloudWatch custom metrics": how many distinct metrics (name and dimension values) the
/// functions write, and what they cost a month at the list price.
pub fn custom_metrics() -> String {
    let mut routinely = BTreeMap::<String, usize>::new();
    let mut on_error = 0;
    for (function, metrics) in emf_metrics::by_function() {
        for when in metrics.values() {
            match when {
                When::Routinely => *routinely.entry(function.clone()).or_default() += 1,
                When::OnError => on_error += 1,
            }
        }
    }
    let every: usize = routinely.values().sum();
    let per_function: Vec<String> = routinely.iter().map(|(f, n)| format!("{f} {n}")).collect();
    format!(
        "| Custom metrics, per month | Metrics | List price |\n|---|---|---|\n\
         | Written by every busy function each hour ({}) | {every} | {} |\n\
         | Written only in the hours an error code or a 503 cause occurs (at most) | {on_error} | at most {} |\n",
        per_function.join(", "),
        dollars(every as f64 * CUSTOM_METRIC_MONTH),
        dollars(on_error as f64 * CUSTOM_METRIC_MONTH),
    )
}

/// Each of `tables` is in `doc` as it is: the ones that are not, printed whole to paste.
///
/// # Panics
/// When any is not.
pub fn check(doc: &str, tables: &[(&str, String)]) {
    let stale: Vec<&(&str, String)> = tables.iter().filter(|(_, t)| !doc.contains(t)).collect();
    for (name, table) in &stale {
        println!("docs/scaling.md, {name}, as today's build measures it:\n\n{table}");
    }
    assert!(
        stale.is_empty(),
        "docs/scaling.md's tables differ from what was measured: paste the tables printed above ({})",
        stale.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    );
}
