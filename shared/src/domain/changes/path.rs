//! Attribute paths as people read them in a plan: `policy`, `tags.team`, `ingress[0]`,
//! `tags["kubernetes.io/role"]`. Terraform's `sensitive_attributes` paths are written the
//! same way, so a changed path can be matched against them.

use serde::Deserialize;

/// Appends the member `key` to `path`.
pub fn member(path: &str, key: &str) -> String {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (plain, path.is_empty()) {
        (true, true) => key.to_owned(),
        (true, false) => format!("{path}.{key}"),
        (false, _) => format!("{path}[{}]", quoted(key)),
    }
}

/// Appends the element `index` to `path`.
pub fn element(path: &str, index: usize) -> String {
    format!("{path}[{index}]")
}

/// A key as a JSON string, the way Terraform writes string index keys.
pub fn quoted(key: &str) -> String {
    // Serializing a string cannot fail.
    serde_json::to_string(key).expect("a string serializes")
}

/// Whether `path` is `sensitive` or lies inside it.
pub fn is_within(path: &str, sensitive: &str) -> bool {
    match path.strip_prefix(sensitive) {
        Some(rest) => rest.is_empty() || rest.starts_with('.') || rest.starts_with('['),
        None => false,
    }
}

/// One step of a `sensitive_attributes` path, as Terraform writes it:
/// `{"type": "get_attr", "value": "password"}` or
/// `{"type": "index", "value": {"value": 0, "type": "number"}}`.
#[derive(Deserialize)]
pub struct Step {
    #[serde(rename = "type")]
    kind: String,
    value: StepValue,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum StepValue {
    Name(String),
    Key { value: KeyValue },
}

#[derive(Deserialize)]
#[serde(untagged)]
enum KeyValue {
    Number(u64),
    Text(String),
}

/// The path a list of steps names; `None` for a step of a kind it does not know.
pub fn of_steps(steps: &[Step]) -> Option<String> {
    let mut path = String::new();
    for step in steps {
        path = match (step.kind.as_str(), &step.value) {
            ("get_attr", StepValue::Name(name)) => member(&path, name),
            ("index", StepValue::Key { value }) => match value {
                KeyValue::Number(i) => format!("{path}[{i}]"),
                KeyValue::Text(key) => format!("{path}[{}]", quoted(key)),
            },
            _ => return None,
        };
    }
    Some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_like_a_plan() {
        assert_eq!(member("", "tags"), "tags");
        assert_eq!(member("tags", "team"), "tags.team");
        assert_eq!(
            member("tags", "kubernetes.io/role"),
            r#"tags["kubernetes.io/role"]"#
        );
        assert_eq!(member("", "1st"), r#"["1st"]"#);
        assert_eq!(element("ingress", 0), "ingress[0]");
    }

    #[test]
    fn within_means_the_path_or_below_it() {
        assert!(is_within("password", "password"));
        assert!(is_within("input.pw", "input"));
        assert!(is_within("list[0]", "list"));
        assert!(!is_within("passwords", "password"));
        assert!(!is_within("input", "input.pw"));
    }

    #[test]
    fn terraform_steps_become_paths() {
        let steps: Vec<Step> = serde_json::from_str(
            r#"[{"type":"get_attr","value":"rule"},{"type":"index","value":{"value":2,"type":"number"}},{"type":"get_attr","value":"secret"},{"type":"index","value":{"value":"k","type":"string"}}]"#,
        )
        .unwrap();
        assert_eq!(of_steps(&steps).as_deref(), Some(r#"rule[2].secret["k"]"#));
    }
}
