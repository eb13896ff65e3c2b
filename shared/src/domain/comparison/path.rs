//! Attribute paths as people read them in a plan: `policy`, `tags.team`, `ingress[0]`,
//! `tags["kubernetes.io/role"]`. A path names a place in the state document's JSON, so one
//! form serves both what a comparison finds and what `sensitive_attributes` marks: a mark's
//! map key is written as a member (`tags["secret"]` is `tags.secret`, as the comparison
//! names it), and a mark below a dynamic attribute is read through the `{"value", "type"}`
//! wrapper the document stores it in ([`through_wrapper`]).

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
    below(path, sensitive).is_some()
}

/// What `path` adds below `ancestor` (`.pw`, `[0]`, or nothing for the same path); `None`
/// when it is not at or below it.
fn below<'a>(path: &'a str, ancestor: &str) -> Option<&'a str> {
    path.strip_prefix(ancestor)
        .filter(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
}

/// Whether a value at `path`, named as a whole, holds something `mark` marks: the mark is
/// the path, an ancestor of it, or lies below it.
pub fn holds_mark(path: &str, mark: &str) -> bool {
    is_within(path, mark) || is_within(mark, path)
}

/// The place of `mark` inside the dynamic value stored at `wrapper`: a dynamic attribute is
/// stored as `{"value": ..., "type": ...}`, and Terraform marks `input.secret` where the
/// document holds `input.value.secret`. `None` for a mark not strictly below `wrapper`.
pub fn through_wrapper(wrapper: &str, mark: &str) -> Option<String> {
    below(mark, wrapper)
        .filter(|rest| !rest.is_empty())
        .map(|rest| format!("{wrapper}.value{rest}"))
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
                // A map's key is an object member in the document: named as the comparison
                // names members, so `tags["secret"]` meets `tags.secret`.
                KeyValue::Text(key) => member(&path, key),
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
        assert_eq!(of_steps(&steps).as_deref(), Some("rule[2].secret.k"));
        let steps: Vec<Step> = serde_json::from_str(
            r#"[{"type":"get_attr","value":"tags"},{"type":"index","value":{"value":"kubernetes.io/role","type":"string"}}]"#,
        )
        .unwrap();
        assert_eq!(
            of_steps(&steps).as_deref(),
            Some(r#"tags["kubernetes.io/role"]"#)
        );
    }

    #[test]
    fn a_mark_holds_its_path_its_ancestors_and_what_lies_below() {
        assert!(holds_mark("input.pw", "input"));
        assert!(holds_mark("input", "input.pw"));
        assert!(holds_mark("input", "input"));
        assert!(!holds_mark("inputs", "input.pw"));
        assert!(!holds_mark("input.team", "input.pw"));
    }

    #[test]
    fn marks_below_a_dynamic_attribute_are_read_through_its_wrapper() {
        assert_eq!(
            through_wrapper("input", "input.secret").as_deref(),
            Some("input.value.secret")
        );
        assert_eq!(
            through_wrapper("input", "input[0]").as_deref(),
            Some("input.value[0]")
        );
        assert_eq!(through_wrapper("input", "input"), None);
        assert_eq!(through_wrapper("input", "inputs.secret"), None);
    }
}
