//! `hegemony-state states outputs`: a state's outputs as a table a person reads, one row
//! each (name, type as Terraform declares it, value), a sensitive one marked as such: the
//! API never answers with its value.

use serde_json::Value;

/// What a sensitive output shows in place of its value.
pub const SENSITIVE: &str = "(sensitive)";

/// A type as Terraform writes it in a configuration: `"string"`, `["list", "string"]`
/// as `list(string)`, `["object", {"a": "number"}]` as `object({a = number})`.
pub fn type_text(kind: &Value) -> String {
    match kind {
        Value::String(s) => s.clone(),
        Value::Array(parts) => match (parts.first().and_then(Value::as_str), parts.get(1)) {
            (Some(outer @ ("list" | "set" | "map")), Some(inner)) => {
                format!("{outer}({})", type_text(inner))
            }
            (Some("object"), Some(Value::Object(members))) => {
                let members: Vec<String> = members
                    .iter()
                    .map(|(k, v)| format!("{k} = {}", type_text(v)))
                    .collect();
                format!("object({{{}}})", members.join(", "))
            }
            (Some("tuple"), Some(Value::Array(items))) => {
                let items: Vec<String> = items.iter().map(type_text).collect();
                format!("tuple([{}])", items.join(", "))
            }
            _ => kind.to_string(),
        },
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// A value on one line: a string as it is, anything else as compact JSON.
fn value_text(output: &Value) -> String {
    if output["sensitive"] == Value::Bool(true) {
        return SENSITIVE.into();
    }
    match &output["value"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The heading line: which version the outputs are of.
pub fn heading(name: &str, answer: &Value) -> String {
    format!(
        "{name}: serial {}, lineage {}",
        answer["serial"],
        answer["lineage"].as_str().unwrap_or("-")
    )
}

/// One row per output, in the answer's (name) order: name, type, value.
pub fn rows(answer: &Value) -> Vec<Vec<String>> {
    answer["outputs"]
        .as_object()
        .map(|outputs| {
            outputs
                .iter()
                .map(|(name, output)| {
                    vec![name.clone(), type_text(&output["type"]), value_text(output)]
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn types_read_as_a_configuration_declares_them() {
        assert_eq!(type_text(&json!("string")), "string");
        assert_eq!(type_text(&json!(["list", "string"])), "list(string)");
        assert_eq!(
            type_text(&json!(["map", ["set", "number"]])),
            "map(set(number))"
        );
        assert_eq!(
            type_text(&json!(["object", {"id": "number", "name": "string"}])),
            "object({id = number, name = string})"
        );
        assert_eq!(
            type_text(&json!(["tuple", ["bool", "string"]])),
            "tuple([bool, string])"
        );
    }

    #[test]
    fn a_sensitive_output_is_marked_and_the_others_shown_on_one_line() {
        let answer = json!({"serial": 2, "lineage": "lin", "outputs": {
            "endpoint": {"type": "string", "value": "db.example.com"},
            "password": {"type": "string", "sensitive": true},
            "zone": {"type": ["object", {"id": "number"}], "value": {"id": 7}}
        }});
        assert_eq!(heading("db", &answer), "db: serial 2, lineage lin");
        assert_eq!(
            rows(&answer),
            vec![
                vec![
                    "endpoint".to_owned(),
                    "string".into(),
                    "db.example.com".into()
                ],
                vec!["password".into(), "string".into(), SENSITIVE.into()],
                vec![
                    "zone".into(),
                    "object({id = number})".into(),
                    "{\"id\":7}".into()
                ],
            ]
        );
    }
}
