//! `hegemony-state overview`: the org at a glance over the HTTP API: how many states,
//! versions and resources, resources by provider and by type, the largest states, the
//! locks and holds with their age, states not written for a long time and states not
//! indexed (docs/inventory.md).

use serde_json::Value;

use crate::client::Client;
use crate::states::{print_json, text};
use crate::table;

/// How many rows of each list the text shows (`--json` shows all the server sends: every
/// lock, hold and stale state, the top 20 providers and types).
const TOP: usize = 10;

pub async fn run(api: &crate::Api, json: bool) -> anyhow::Result<()> {
    let client = Client::new(api)?;
    let view = client.get_json("/api/overview").await?;
    if json {
        return print_json(&view);
    }
    println!(
        "org {}: {} states, {} versions, {} resources, {} managed by two states",
        text(&view["org"]),
        text(&view["states"]),
        text(&view["versions"]),
        text(&view["resources"]),
        text(&view["conflicts"]),
    );
    section(
        &view,
        "by_provider",
        "Resources by provider",
        &["PROVIDER", "COUNT"],
        |p| vec![text(&p["provider"]), text(&p["count"])],
    );
    section(
        &view,
        "by_type",
        "Resources by type",
        &["TYPE", "COUNT"],
        |t| vec![text(&t["type"]), text(&t["count"])],
    );
    section(
        &view,
        "largest",
        "Largest states",
        &["STATE", "SIZE", "VERSION"],
        |s| vec![text(&s["state"]), text(&s["size"]), text(&s["version"])],
    );
    section(
        &view,
        "locks",
        "Locks",
        &["STATE", "AGE", "SINCE", "BY"],
        |l| {
            vec![
                text(&l["state"]),
                age(&l["age_seconds"]),
                text(&l["since"]),
                text(&l["who"]),
            ]
        },
    );
    section(
        &view,
        "holds",
        "Holds",
        &["STATE", "AGE", "SINCE", "RUN"],
        |h| {
            vec![
                text(&h["state"]),
                age(&h["age_seconds"]),
                text(&h["since"]),
                text(&h["run"]),
            ]
        },
    );
    section(
        &view,
        "stale",
        "Not written for 90 days",
        &["STATE", "UPDATED", "DAYS"],
        |s| vec![text(&s["state"]), text(&s["updated_at"]), text(&s["days"])],
    );
    section(
        &view,
        "not_indexed",
        "Not indexed (content unreadable)",
        &["STATE", "VERSION"],
        |s| vec![text(&s["state"]), text(&s["version"])],
    );
    Ok(())
}

/// Prints the list under `key` as a table under `title`; nothing when it is empty. A long
/// list is cut at TOP with a line saying how many more there are.
fn section(
    view: &Value,
    key: &str,
    title: &str,
    header: &[&str],
    row: impl Fn(&Value) -> Vec<String>,
) {
    let list = view[key].as_array().map(Vec::as_slice).unwrap_or_default();
    if list.is_empty() {
        return;
    }
    println!();
    println!("{title}:");
    let rows: Vec<Vec<String>> = list.iter().take(TOP).map(row).collect();
    table::print(header, &rows);
    if list.len() > TOP {
        println!("... and {} more (--json shows them)", list.len() - TOP);
    }
}

/// An age in seconds as a person reads it: the two largest units.
fn age(seconds: &Value) -> String {
    let Some(s) = seconds.as_u64() else {
        return text(seconds);
    };
    let (days, hours, minutes) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60);
    match (days, hours, minutes) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, m) => format!("{m}m {}s", s % 60),
        (0, h, m) => format!("{h}h {m}m"),
        (d, h, _) => format!("{d}d {h}h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_age_shows_its_two_largest_units() {
        assert_eq!(age(&json!(42)), "42s");
        assert_eq!(age(&json!(125)), "2m 5s");
        assert_eq!(age(&json!(3 * 3600 + 7 * 60 + 9)), "3h 7m");
        assert_eq!(age(&json!(2 * 86_400 + 5 * 3600)), "2d 5h");
        assert_eq!(age(&Value::Null), "-");
    }
}
