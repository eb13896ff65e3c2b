//! `hegemony-state states changes`: what changed between two versions, as text a person
//! reads like a plan (`+ aws_s3_bucket.receipts`, `~ aws_iam_role.app (policy, tags.team)`,
//! `- ...`, then the outputs and a `+a ~c -r` line). Names and paths only: the API never
//! answers with a value.

use serde_json::Value;

fn list(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// `version 3 (serial 7)`.
fn side(v: &Value) -> String {
    format!(
        "version {} (serial {})",
        text(&v["version"]),
        text(&v["serial"])
    )
}

/// The paths of a changed instance, sensitive ones marked, then its other fields that
/// differ after a `;`.
fn details(instance: &Value) -> String {
    let sensitive = list(&instance["sensitive"]);
    let parts: Vec<String> = list(&instance["attributes"])
        .iter()
        .map(|p| match sensitive.contains(p) {
            true => format!("{} (sensitive)", text(p)),
            false => text(p),
        })
        .collect();
    let other: Vec<String> = list(&instance["other"]).iter().map(text).collect();
    let mut out = parts.join(", ");
    if !other.is_empty() {
        if !parts.is_empty() {
            out.push_str("; ");
        }
        out.push_str(&other.join(", "));
    }
    out
}

/// The lines of the answer `c`, in the order a person reads them.
pub fn render(c: &Value) -> Vec<String> {
    let mut lines = vec![match c["since"].is_null() {
        true => format!(
            "{}: {}, its first: compared with nothing",
            text(&c["state"]),
            side(&c["version"])
        ),
        false => format!(
            "{}: {} since {}",
            text(&c["state"]),
            side(&c["version"]),
            side(&c["since"])
        ),
    }];
    if c["same_lineage"] == Value::Bool(false) {
        lines.push(format!(
            "note: the versions have different lineages ({} and {}): they come from different configurations",
            text(&c["since"]["lineage"]),
            text(&c["version"]["lineage"])
        ));
    }
    let resources = &c["resources"];
    let mut rows: Vec<(String, String)> = Vec::new();
    for (sign, key) in [("+", "added"), ("~", "changed"), ("-", "removed")] {
        for instance in list(&resources[key]) {
            let address = text(&instance["address"]);
            let line = match key {
                "changed" => format!("{sign} {address} ({})", details(instance)),
                _ => format!("{sign} {address}"),
            };
            rows.push((address, line));
        }
    }
    rows.sort();
    lines.push(String::new());
    if rows.is_empty() {
        lines.push("No resource changed.".into());
    }
    lines.extend(rows.into_iter().map(|(_, line)| line));
    let outputs = &c["outputs"];
    let mut rows: Vec<(String, String)> = Vec::new();
    for (sign, key) in [("+", "added"), ("~", "changed"), ("-", "removed")] {
        for output in list(&outputs[key]) {
            let name = text(&output["name"]);
            let sensitive = output["sensitive"] == Value::Bool(true);
            let note = match (key, sensitive, output["was_sensitive"].as_bool()) {
                ("changed", true, Some(false)) => " (now sensitive)",
                ("changed", false, Some(true)) => " (no longer sensitive)",
                (_, true, _) => " (sensitive)",
                _ => "",
            };
            rows.push((name.clone(), format!("  {sign} {name}{note}")));
        }
    }
    if !rows.is_empty() {
        rows.sort();
        lines.push(String::new());
        lines.push("Outputs:".into());
        lines.extend(rows.into_iter().map(|(_, line)| line));
    }
    let counts = &c["counts"];
    lines.push(String::new());
    lines.push(format!(
        "+{} ~{} -{}  (resource instances added, changed, removed)",
        text(&counts["added"]),
        text(&counts["changed"]),
        text(&counts["removed"])
    ));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_like_a_plan() {
        let answer = json!({
            "state": "net",
            "version": {"version": 2, "serial": 5, "lineage": "a", "terraform_version": "1.11.4"},
            "since": {"version": 1, "serial": 4, "lineage": "b", "terraform_version": "1.11.4"},
            "same_lineage": false,
            "counts": {"added": 1, "changed": 1, "removed": 1},
            "resources": {
                "added": [{"address": "aws_s3_bucket.receipts"}],
                "changed": [{"address": "aws_iam_role.app", "attributes": ["password", "policy", "tags.team"], "sensitive": ["password"], "sensitive_only": false, "other": ["status"]}],
                "removed": [{"address": "aws_sqs_queue.old"}]
            },
            "outputs": {
                "added": [{"name": "new", "sensitive": true}],
                "changed": [{"name": "hides", "sensitive": true, "was_sensitive": false, "value_changed": false}],
                "removed": [{"name": "gone", "sensitive": false}]
            }
        });
        assert_eq!(
            render(&answer).join("\n"),
            "net: version 2 (serial 5) since version 1 (serial 4)
note: the versions have different lineages (b and a): they come from different configurations

~ aws_iam_role.app (password (sensitive), policy, tags.team; status)
+ aws_s3_bucket.receipts
- aws_sqs_queue.old

Outputs:
  - gone
  ~ hides (now sensitive)
  + new (sensitive)

+1 ~1 -1  (resource instances added, changed, removed)"
        );
    }
}
