//! The SAM template held to the code: cfn-lint passes; its routes and functions are exactly the
//! route table's, plus the pages' root and catch-all on the `web` function; each function's IAM
//! grants exactly what its routes' rows say they need (a read function cannot write objects or
//! make data keys; only the functions that open content may decrypt); the table has the keys
//! and indexes the adapter uses.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use hegemony_state::adapters::aws::schema;
use hegemony_state::http::{pages, Need, ROUTES};
use hegemony_state_blackbox::repo_root;

fn template_path() -> std::path::PathBuf {
    repo_root().join("infra/template.yaml")
}

/// The template as JSON, decoded by cfn-lint's own loader (it reads the short-form tags).
fn template() -> serde_json::Value {
    let out = Command::new(repo_root().join(".tools/bin/python"))
        .args([
            "-c",
            "import json,sys; from cfnlint.decode import decode; t, m = decode(sys.argv[1]); assert not m, m; print(json.dumps(t))",
        ])
        .arg(template_path())
        .output()
        .expect("run the tools' python (make tools installs cfn-lint)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn cfn_lint_passes() {
    let out = Command::new(repo_root().join(".tools/bin/cfn-lint"))
        .arg(template_path())
        .output()
        .expect("run cfn-lint (make tools installs it)");
    assert!(
        out.status.success(),
        "cfn-lint:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The functions of the template: (function name from its zip, properties).
fn functions(template: &serde_json::Value) -> BTreeMap<String, serde_json::Value> {
    template["Resources"]
        .as_object()
        .unwrap()
        .values()
        .filter(|r| r["Type"] == "AWS::Serverless::Function")
        .map(|r| {
            let key = r["Properties"]["CodeUri"]["Key"]["Fn::Sub"]
                .as_str()
                .unwrap();
            let name = key
                .strip_prefix("${ArtifactPrefix}/${Architecture}/")
                .and_then(|k| k.strip_suffix(".zip"))
                .unwrap_or_else(|| panic!("a function's zip is <prefix>/<arch>/<name>.zip: {key}"));
            (name.to_owned(), r["Properties"].clone())
        })
        .collect()
}

#[test]
fn routes_and_functions_are_the_route_tables() {
    let template = template();
    let functions = functions(&template);
    let mut routed = BTreeSet::new();
    for (name, properties) in &functions {
        for event in properties["Events"].as_object().unwrap().values() {
            match event["Type"].as_str().unwrap() {
                "HttpApi" => {
                    let p = &event["Properties"];
                    routed.insert((
                        p["Method"].as_str().unwrap().to_owned(),
                        p["Path"].as_str().unwrap().to_owned(),
                        name.clone(),
                    ));
                }
                "Schedule" => {
                    assert_eq!(name, "sweeper");
                    assert_eq!(event["Properties"]["Schedule"], "rate(1 minute)");
                }
                other => panic!("unexpected event type {other}"),
            }
        }
        assert_eq!(
            properties["Handler"],
            serde_json::Value::Null,
            "Globals set bootstrap"
        );
    }
    let mut table: BTreeSet<_> = ROUTES
        .iter()
        .filter(|r| !r.local_only)
        .map(|r| {
            (
                r.method.to_owned(),
                r.path.to_owned(),
                r.function.to_owned(),
            )
        })
        .collect();
    // The pages are no rows of the table (no credentials, no storage, no API document), but
    // their routes are held to the template all the same.
    table.extend(pages::ROUTES.iter().map(|(method, path)| {
        (
            method.to_string(),
            path.to_string(),
            pages::FUNCTION.to_owned(),
        )
    }));
    assert_eq!(routed, table);
    let globals = &template["Globals"]["Function"];
    assert_eq!(globals["Runtime"], "provided.al2023");
    assert_eq!(globals["Handler"], "bootstrap");
    assert_eq!(template["Parameters"]["Architecture"]["Default"], "arm64");
    // Every function has a binary in functions/ of the same name.
    for name in functions.keys() {
        assert!(
            repo_root()
                .join(format!("functions/src/bin/{name}.rs"))
                .exists(),
            "no binary for function {name}"
        );
    }
    assert!(functions.contains_key("sweeper"));
    assert!(functions.contains_key(pages::FUNCTION));
}

/// The IAM action that serves each call a route's handler makes on the table, the bucket
/// and the key.
fn action(need: Need) -> &'static str {
    match need {
        Need::GetRecord => "dynamodb:GetItem",
        Need::PutRecord => "dynamodb:PutItem",
        Need::DeleteRecord => "dynamodb:DeleteItem",
        Need::QueryRecords => "dynamodb:Query",
        Need::BatchGetRecords => "dynamodb:BatchGetItem",
        Need::GetBlob => "s3:GetObject",
        Need::PutBlob => "s3:PutObject",
        Need::UnwrapKey => "kms:Decrypt",
        Need::NewDataKey => "kms:GenerateDataKey",
        Need::DescribeKey => "kms:DescribeKey",
    }
}

const SWEEPER_NEEDS: &[&str] = &[
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:DeleteItem",
    "dynamodb:UpdateItem",
    "dynamodb:Query",
    "dynamodb:BatchGetItem",
    "s3:DeleteObject",
];

fn granted(properties: &serde_json::Value) -> BTreeSet<String> {
    let mut actions = BTreeSet::new();
    // A function with no policy (the pages') is granted nothing.
    let policies = properties["Policies"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for policy in &policies {
        for statement in policy["Statement"].as_array().unwrap() {
            assert_eq!(statement["Effect"], "Allow");
            for action in statement["Action"].as_array().unwrap() {
                let action = action.as_str().unwrap();
                assert!(!action.contains('*'), "no wildcard actions: {action}");
                actions.insert(action.to_owned());
            }
        }
    }
    actions
}

#[test]
fn each_function_is_granted_exactly_what_its_routes_need() {
    let template = template();
    for (name, properties) in functions(&template) {
        let needed: BTreeSet<String> = if name == "sweeper" {
            SWEEPER_NEEDS.iter().map(|a| a.to_string()).collect()
        } else {
            ROUTES
                .iter()
                .filter(|r| r.function == name)
                .flat_map(|r| r.needs.iter().map(|n| action(*n).to_string()))
                .collect()
        };
        assert_eq!(granted(&properties), needed, "function {name}");
    }
    let read_only = ["state-read", "list", "versions", "download", "audit", "web"];
    // A save and an import unwrap the org's inventory key to index what they write.
    let decrypting = [
        "state-read",
        "state-write",
        "download",
        "import",
        "rollback",
        "apps",
    ];
    for (name, properties) in functions(&template) {
        let actions = granted(&properties);
        if read_only.contains(&name.as_str()) {
            assert!(!actions.contains("s3:PutObject"), "{name}");
            assert!(!actions.contains("kms:GenerateDataKey"), "{name}");
        }
        assert_eq!(
            actions.contains("kms:Decrypt"),
            decrypting.contains(&name.as_str()),
            "{name}"
        );
    }
}

#[test]
fn the_table_has_the_adapters_keys_indexes_and_ttl() {
    let template = template();
    let table = &template["Resources"]["Table"]["Properties"];
    let keys: Vec<&str> = table["KeySchema"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["AttributeName"].as_str().unwrap())
        .collect();
    assert_eq!(keys, [schema::PK, schema::SK]);
    let indexes: BTreeSet<(String, String, String)> = table["GlobalSecondaryIndexes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let k = i["KeySchema"].as_array().unwrap();
            (
                i["IndexName"].as_str().unwrap().to_owned(),
                k[0]["AttributeName"].as_str().unwrap().to_owned(),
                k[1]["AttributeName"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: BTreeSet<_> = schema::INDEXES
        .iter()
        .map(|(i, p, s)| (i.to_string(), p.to_string(), s.to_string()))
        .collect();
    assert_eq!(indexes, expected);
    assert_eq!(
        table["TimeToLiveSpecification"]["AttributeName"],
        schema::TTL
    );
    let bucket = &template["Resources"]["Bucket"]["Properties"];
    let rules = bucket["LifecycleConfiguration"]["Rules"]
        .as_array()
        .unwrap();
    assert!(
        rules.iter().all(|r| r.get("ExpirationInDays").is_none()
            && r.get("NoncurrentVersionExpiration").is_none()
            && r.get("AbortIncompleteMultipartUpload").is_some()),
        "a lifecycle rule never deletes a committed state: {rules:?}"
    );
    assert_eq!(
        template["Resources"]["Key"]["Properties"]["EnableKeyRotation"],
        true
    );
}

/// The metrics AWS's own services publish that an alarm here may watch, by namespace, with
/// the dimension each is kept by and the type of the template's resource it names (the
/// Lambda and API Gateway developer guides' metric lists; an alarm with no dimension
/// watches the account and region's sum).
const SERVICE_METRICS: &[(&str, &[&str], &str, &str)] = &[
    (
        "AWS/Lambda",
        &["Invocations", "Errors", "Throttles", "Duration"],
        "FunctionName",
        "AWS::Serverless::Function",
    ),
    (
        "AWS/ApiGateway",
        &["Count", "4xx", "5xx", "Latency"],
        "ApiId",
        "AWS::Serverless::HttpApi",
    ),
];

/// Each metric an alarm watches: its own (`Namespace`, `MetricName`, `Dimensions`), or
/// each `MetricStat` of its metric math.
fn watched(alarm: &serde_json::Value) -> Vec<serde_json::Value> {
    match alarm["Metrics"].as_array() {
        Some(metrics) => metrics
            .iter()
            .filter_map(|m| m.get("MetricStat").map(|s| s["Metric"].clone()))
            .collect(),
        None => vec![alarm.clone()],
    }
}

/// Each alarm of the template watches a metric that is written, as it is written: one of
/// the functions' own (namespace, name and every dimension with its value) as the EMF
/// adapter writes it for the function it names, or one that Lambda or API Gateway
/// publishes for a resource of this template. A `HegemonyState <metric>` its words name is
/// one the functions write.
#[test]
fn each_alarm_watches_a_metric_as_it_is_written() {
    use hegemony_state::adapters::emf::NAMESPACE;
    use hegemony_state_blackbox::emf_metrics;

    let template = template();
    let resources = template["Resources"].as_object().unwrap();
    let written: BTreeSet<emf_metrics::Metric> = emf_metrics::by_function()
        .into_values()
        .flat_map(|metrics| metrics.into_keys())
        .collect();
    let names: BTreeSet<&str> = written.iter().map(|m| m.name.as_str()).collect();
    let alarms: Vec<(&String, &serde_json::Value)> = resources
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::CloudWatch::Alarm")
        .map(|(name, r)| (name, &r["Properties"]))
        .collect();
    assert!(alarms.len() >= 4, "{alarms:?}");
    for (alarm, properties) in alarms {
        for metric in watched(properties) {
            let namespace = metric["Namespace"].as_str().unwrap();
            let name = metric["MetricName"].as_str().unwrap();
            let dimensions: Vec<(&str, &serde_json::Value)> = metric["Dimensions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| (d["Name"].as_str().unwrap(), &d["Value"]))
                .collect();
            if namespace == NAMESPACE {
                let watched = emf_metrics::Metric {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                    dimensions: dimensions
                        .iter()
                        .map(|(d, v)| {
                            let v = v.as_str().unwrap_or_else(|| {
                                panic!("{alarm}: {d} is no value a function writes: {v}")
                            });
                            (d.to_string(), v.to_owned())
                        })
                        .collect(),
                };
                assert!(
                    written.contains(&watched),
                    "{alarm} watches {watched:?}, which no function writes"
                );
                continue;
            }
            let Some((_, metrics, dimension, kind)) =
                SERVICE_METRICS.iter().find(|(ns, ..)| *ns == namespace)
            else {
                panic!("{alarm} watches the namespace {namespace}");
            };
            assert!(metrics.contains(&name), "{alarm}: {namespace} {name}");
            for (d, value) in dimensions {
                if d == "Stage" {
                    assert_eq!(value, "$default", "{alarm}: the HTTP API's one stage");
                    continue;
                }
                assert_eq!(d, *dimension, "{alarm}: {namespace} {name} by {d}");
                let named = value["Ref"].as_str().unwrap_or_else(|| {
                    panic!("{alarm}: {d} names a resource of the template: {value}")
                });
                assert_eq!(resources[named]["Type"], *kind, "{alarm}: {named}");
            }
        }
        let words = properties["AlarmDescription"].as_str().unwrap();
        for named in words.split(&format!("{NAMESPACE} ")).skip(1) {
            let metric = named.split([' ', ',', ')', '.']).next().unwrap();
            assert!(
                names.contains(metric),
                "{alarm} names {NAMESPACE} {metric}, which no function writes"
            );
        }
    }
}

/// A period count in words, as the alarms' descriptions and docs/metrics.md write them.
fn in_words(n: u64) -> String {
    match n {
        1 => "one".into(),
        2 => "two".into(),
        3 => "three".into(),
        4 => "four".into(),
        5 => "five".into(),
        n => n.to_string(),
    }
}

/// `SweeperErrorsAlarm` says what its rule is, in its description and in docs/metrics.md's
/// table of alarms: the words are made from the rule (what share of the sweeper's
/// invocations failed, in how many periods of how long), so a changed statistic,
/// threshold, period or count of periods fails here until the words follow.
#[test]
fn the_sweeper_errors_alarm_says_what_its_rule_is() {
    let template = template();
    let alarm = &template["Resources"]["SweeperErrorsAlarm"]["Properties"];
    let metrics = alarm["Metrics"]
        .as_array()
        .expect("metric math: a share of the sweeper's invocations");
    let stat = |id: &str| {
        let m = metrics.iter().find(|m| m["Id"] == id).unwrap();
        let s = &m["MetricStat"];
        (
            s["Metric"]["MetricName"].as_str().unwrap().to_owned(),
            s["Stat"].as_str().unwrap().to_owned(),
            s["Period"].as_u64().unwrap(),
        )
    };
    let (errors, invocations) = (stat("errors"), stat("invocations"));
    assert_eq!((errors.0.as_str(), errors.1.as_str()), ("Errors", "Sum"));
    assert_eq!(
        (invocations.0.as_str(), invocations.1.as_str()),
        ("Invocations", "Sum")
    );
    assert_eq!(errors.2, invocations.2, "one period for both");
    let share = metrics.iter().find(|m| m["ReturnData"] == true).unwrap();
    assert_eq!(
        share["Expression"],
        "IF(invocations > 0, errors / invocations, 0)"
    );
    // The share of failed invocations in a period is at least the threshold: 1 is every
    // one of them, anything less "at least that share".
    let threshold = alarm["Threshold"].as_f64().unwrap();
    assert_eq!(alarm["ComparisonOperator"], "GreaterThanOrEqualToThreshold");
    let share = if threshold == 1.0 {
        "every sweeper invocation failed".to_owned()
    } else {
        format!(
            "at least {}% of the sweeper's invocations failed",
            threshold * 100.0
        )
    };
    let periods = alarm["EvaluationPeriods"].as_u64().unwrap();
    assert_eq!(
        alarm["DatapointsToAlarm"].as_u64().unwrap_or(periods),
        periods
    );
    let minutes = errors.2 / 60;
    let rule = format!(
        "{share} in each of {} {minutes}-minute periods in a row",
        in_words(periods)
    );
    let words = alarm["AlarmDescription"].as_str().unwrap();
    assert!(
        words.to_lowercase().starts_with(&rule),
        "SweeperErrorsAlarm's description should start with \"{rule}\": {words}"
    );
    let docs = std::fs::read_to_string(repo_root().join("docs/metrics.md")).unwrap();
    let row = docs
        .lines()
        .find(|l| l.starts_with("| `SweeperErrorsAlarm` |"))
        .expect("docs/metrics.md has a row for SweeperErrorsAlarm");
    assert!(
        row.to_lowercase().contains(&rule),
        "docs/metrics.md's row should say \"{rule}\": {row}"
    );
}
