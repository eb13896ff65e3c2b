//! Outputs for consumers: what a state's outputs are, which of them are sensitive, and the
//! state document a consumer's `terraform_remote_state` reads (the same serial, lineage and
//! Terraform version, no resources, the non-sensitive outputs only). No I/O; and no
//! sensitive value ever leaves this module: [`OutputsView`] and [`consumer_document`] are
//! the only ways out, and both drop it.

use std::collections::BTreeMap;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::version::VersionRecord;
use super::Refusal;

/// The state format whose outputs are read here (Terraform 0.12 and later, OpenTofu).
const FORMAT: u64 = 4;

/// A state's outputs, read from its document. Holds sensitive values: it is never
/// serialized itself, only shown through [`OutputsView`] or [`consumer_document`].
#[derive(Debug, Clone, PartialEq)]
pub struct StateOutputs {
    pub serial: u64,
    pub lineage: String,
    pub terraform_version: Option<String>,
    /// By name, in name order, so that whatever is built from them is built the same way.
    pub outputs: BTreeMap<String, Output>,
}

/// One output as the state holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// Its type as Terraform writes it: `"string"`, `["list", "string"]`, ...
    pub kind: Value,
    pub value: Value,
    pub sensitive: bool,
}

/// The document's fields this reads; resources and everything else are skipped unbuilt.
/// A key written twice is read as Terraform and OpenTofu read it (Go's `encoding/json`): the
/// last one wins. The write takes such a document, so every reader of it must too, or a
/// consumer's `terraform_remote_state` breaks on a state its writer reads back fine.
#[derive(Default)]
struct Document {
    version: Option<u64>,
    serial: Option<u64>,
    lineage: Option<String>,
    terraform_version: Option<String>,
    encrypted: bool,
    outputs: BTreeMap<String, StoredOutput>,
}

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = Document;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a state document (a JSON object)")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Document, A::Error> {
                let mut doc = Document::default();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "version" => doc.version = map.next_value()?,
                        "serial" => doc.serial = map.next_value()?,
                        "lineage" => doc.lineage = map.next_value()?,
                        "terraform_version" => doc.terraform_version = map.next_value()?,
                        "encryption_version" => {
                            map.next_value::<IgnoredAny>()?;
                            doc.encrypted = true;
                        }
                        // A BTreeMap keeps the last of two outputs of one name.
                        "outputs" => {
                            doc.outputs = map
                                .next_value::<Option<BTreeMap<String, StoredOutput>>>()?
                                .unwrap_or_default()
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(doc)
            }
        }
        d.deserialize_map(Fields)
    }
}

/// One output as stored: its members read from a map, so a member written twice is the
/// last one, as Terraform reads it (`"sensitive": false, "sensitive": true` is sensitive).
struct StoredOutput {
    kind: Value,
    value: Value,
    sensitive: Option<Value>,
}

impl<'de> Deserialize<'de> for StoredOutput {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // serde_json's map keeps the last value of a key written twice.
        let mut members = serde_json::Map::<String, Value>::deserialize(d)?;
        Ok(StoredOutput {
            kind: members.remove("type").unwrap_or(Value::Null),
            value: members.remove("value").unwrap_or(Value::Null),
            sensitive: members.remove("sensitive"),
        })
    }
}

impl StoredOutput {
    /// Sensitive unless the state says `false` (or says nothing): a mark that is not a
    /// boolean hides the value rather than showing a value that may be secret.
    fn is_sensitive(&self) -> bool {
        !matches!(self.sensitive, None | Some(Value::Bool(false)))
    }
}

/// Refuses a version whose outputs cannot be read here: an OpenTofu-encrypted one.
///
/// # Errors
/// `Refusal::OutputsUnreadable` naming the version and what to do instead.
pub fn check_readable(version: &VersionRecord) -> Result<(), Refusal> {
    if version.opentofu_encrypted {
        return Err(encrypted(version.version));
    }
    Ok(())
}

fn encrypted(version: u64) -> Refusal {
    Refusal::OutputsUnreadable {
        version,
        reason: "it is OpenTofu-encrypted, and only OpenTofu with the state's key can read its outputs; read them with OpenTofu's own terraform_remote_state and the key, or `tofu output` where the key is".into(),
    }
}

/// Reads the outputs of version `version`'s content `body`.
///
/// # Errors
/// `Refusal::OutputsUnreadable` for an OpenTofu-encrypted document or a format other than
/// 4; `Refusal::NotAState` for a body that does not read as a state (stored content never
/// should: the service reports that as damage).
pub fn read_outputs(version: u64, body: &[u8]) -> Result<StateOutputs, Refusal> {
    let not_a_state = |reason: String| Refusal::NotAState { reason };
    let doc: Document = serde_json::from_slice(body).map_err(|e| not_a_state(e.to_string()))?;
    if doc.encrypted {
        return Err(encrypted(version));
    }
    if doc.version != Some(FORMAT) {
        return Err(Refusal::OutputsUnreadable {
            version,
            reason: format!(
                "it is a state of format {}, and only format {FORMAT} (Terraform 0.12 and later, OpenTofu) is read here; write the state again with a current Terraform",
                doc.version
                    .map_or_else(|| "unknown".to_owned(), |f| f.to_string())
            ),
        });
    }
    let (Some(serial), Some(lineage)) = (doc.serial, doc.lineage) else {
        return Err(not_a_state("it has no serial or no lineage".into()));
    };
    let outputs = doc
        .outputs
        .into_iter()
        .map(|(name, stored)| {
            let sensitive = stored.is_sensitive();
            let output = Output {
                kind: canonical(stored.kind),
                value: canonical(stored.value),
                sensitive,
            };
            (name, output)
        })
        .collect();
    Ok(StateOutputs {
        serial,
        lineage,
        terraform_version: doc.terraform_version,
        outputs,
    })
}

/// `value` with the members of every object in it in name order: the bytes built from a
/// value then depend on what it holds, not on the order a writer put it in.
fn canonical(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut members: Vec<(String, Value)> = map.into_iter().collect();
            members.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
            Value::Object(
                members
                    .into_iter()
                    .map(|(k, v)| (k, canonical(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

/// The answer of `GET /api/tf-states/{name}/outputs`: the latest version's outputs, a
/// sensitive one by its type alone.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "StateOutputs")]
pub struct OutputsView {
    /// The serial of the version read.
    pub serial: u64,
    /// The lineage of the version read.
    pub lineage: String,
    /// Every output by name.
    pub outputs: BTreeMap<String, OutputView>,
}

/// One output: its type and value, or, when sensitive, its type and the mark only.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
#[schemars(rename = "StateOutput")]
pub enum OutputView {
    /// A non-sensitive output.
    Plain {
        /// Its type as Terraform writes it: `"string"`, `["list", "string"]`, ...
        #[serde(rename = "type")]
        kind: Value,
        value: Value,
    },
    /// A sensitive output: never its value, for anyone.
    Sensitive {
        /// Its type as Terraform writes it.
        #[serde(rename = "type")]
        kind: Value,
        /// Always true.
        #[schemars(extend("const" = true))]
        sensitive: bool,
    },
}

impl OutputsView {
    pub fn of(state: &StateOutputs) -> Self {
        let outputs = state
            .outputs
            .iter()
            .map(|(name, output)| {
                let view = if output.sensitive {
                    OutputView::Sensitive {
                        kind: output.kind.clone(),
                        sensitive: true,
                    }
                } else {
                    OutputView::Plain {
                        kind: output.kind.clone(),
                        value: output.value.clone(),
                    }
                };
                (name.clone(), view)
            })
            .collect();
        Self {
            serial: state.serial,
            lineage: state.lineage.clone(),
            outputs,
        }
    }
}

/// A state document of format 4 as Terraform writes one, with the fields a reader needs.
#[derive(Serialize)]
struct ConsumerDocument<'a> {
    version: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    terraform_version: Option<&'a str>,
    serial: u64,
    lineage: &'a str,
    outputs: BTreeMap<&'a str, ConsumerOutput<'a>>,
    resources: [(); 0],
}

#[derive(Serialize)]
struct ConsumerOutput<'a> {
    value: &'a Value,
    #[serde(rename = "type")]
    kind: &'a Value,
}

/// The document a consumer's `terraform_remote_state` reads over the http backend: a valid
/// format-4 state with `state`'s serial, lineage and Terraform version, no resources, and
/// its non-sensitive outputs. The same outputs give the same bytes: fields in a fixed
/// order, outputs by name, the members of an object value by name.
pub fn consumer_document(state: &StateOutputs) -> Vec<u8> {
    let doc = ConsumerDocument {
        version: FORMAT,
        terraform_version: state.terraform_version.as_deref(),
        serial: state.serial,
        lineage: &state.lineage,
        outputs: state
            .outputs
            .iter()
            .filter(|(_, output)| !output.sensitive)
            .map(|(name, output)| {
                let output = ConsumerOutput {
                    value: &output.value,
                    kind: &output.kind,
                };
                (name.as_str(), output)
            })
            .collect(),
        resources: [],
    };
    // Serializing borrowed strings and JSON values into memory cannot fail: every map key
    // is a string.
    serde_json::to_vec_pretty(&doc).expect("a state document serializes")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SECRET: &str = "hunter2-planted";

    /// A state with a plain output, a sensitive one, a resource holding a secret, and
    /// outputs out of name order.
    fn state() -> Vec<u8> {
        serde_json::to_vec(&json!({
            "version": 4,
            "terraform_version": "1.11.4",
            "serial": 7,
            "lineage": "3d1c",
            "outputs": {
                "zone": {"value": {"b": 2, "a": [1, "x"]}, "type": ["object", {"a": ["tuple", ["number", "string"]], "b": "number"}]},
                "password": {"value": SECRET, "type": "string", "sensitive": true},
                "endpoint": {"value": "db.example.com", "type": "string", "sensitive": false}
            },
            "resources": [{"mode": "managed", "type": "random_password", "name": "db",
                           "instances": [{"attributes": {"result": SECRET}}]}],
            "check_results": null
        }))
        .unwrap()
    }

    #[test]
    fn outputs_are_read_by_name_with_their_sensitivity() {
        let read = read_outputs(3, &state()).unwrap();
        assert_eq!((read.serial, read.lineage.as_str()), (7, "3d1c"));
        assert_eq!(read.terraform_version.as_deref(), Some("1.11.4"));
        let names: Vec<_> = read.outputs.keys().map(String::as_str).collect();
        assert_eq!(names, ["endpoint", "password", "zone"]);
        assert!(read.outputs["password"].sensitive);
        assert!(!read.outputs["endpoint"].sensitive && !read.outputs["zone"].sensitive);
    }

    #[test]
    fn a_sensitive_output_is_shown_by_its_type_alone() {
        let view = OutputsView::of(&read_outputs(3, &state()).unwrap());
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(
            json,
            json!({"serial": 7, "lineage": "3d1c", "outputs": {
                "endpoint": {"type": "string", "value": "db.example.com"},
                "password": {"type": "string", "sensitive": true},
                "zone": {"type": ["object", {"a": ["tuple", ["number", "string"]], "b": "number"}],
                         "value": {"a": [1, "x"], "b": 2}}
            }})
        );
        assert!(!json.to_string().contains(SECRET));
    }

    /// A mark that is not `false` hides the value: showing a secret is the worse mistake.
    #[test]
    fn a_mark_other_than_false_counts_as_sensitive() {
        let body = br#"{"version":4,"serial":1,"lineage":"l","outputs":{
            "odd": {"value": "s", "type": "string", "sensitive": "yes"},
            "unmarked": {"value": "u", "type": "string"}}}"#;
        let read = read_outputs(1, body).unwrap();
        assert!(read.outputs["odd"].sensitive);
        assert!(!read.outputs["unmarked"].sensitive);
    }

    #[test]
    fn the_consumer_document_is_a_state_with_the_plain_outputs_only() {
        let read = read_outputs(3, &state()).unwrap();
        let bytes = consumer_document(&read);
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(!text.contains(SECRET), "{text}");
        let doc: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            doc,
            json!({"version": 4, "terraform_version": "1.11.4", "serial": 7, "lineage": "3d1c",
                   "outputs": {
                       "endpoint": {"value": "db.example.com", "type": "string"},
                       "zone": {"value": {"a": [1, "x"], "b": 2},
                                "type": ["object", {"a": ["tuple", ["number", "string"]], "b": "number"}]}
                   },
                   "resources": []})
        );
        // The sniffing the writes use reads it as a state, with the same serial and lineage.
        let meta = crate::domain::document::sniff(&bytes).unwrap();
        assert_eq!(
            (meta.serial, meta.lineage.as_deref()),
            (Some(7), Some("3d1c"))
        );
        assert_eq!(meta.instances, Some(0));
    }

    #[test]
    fn the_consumer_document_is_the_same_bytes_whatever_the_order_written() {
        let reordered = br#"{"outputs":{"zone":{"type":["object",{"b":"number","a":["tuple",["number","string"]]}],"value":{"a":[1,"x"],"b":2}},
            "endpoint":{"type":"string","value":"db.example.com"},
            "password":{"sensitive":true,"type":"string","value":"hunter2-planted"}},
            "resources":[],"lineage":"3d1c","serial":7,"terraform_version":"1.11.4","version":4}"#;
        let a = consumer_document(&read_outputs(3, &state()).unwrap());
        let b = consumer_document(&read_outputs(3, reordered).unwrap());
        assert_eq!(a, b);
    }

    #[test]
    fn a_state_without_outputs_or_terraform_version_still_reads() {
        let read = read_outputs(
            1,
            br#"{"version":4,"serial":0,"lineage":"l","resources":[]}"#,
        )
        .unwrap();
        assert!(read.outputs.is_empty());
        let doc: Value = serde_json::from_slice(&consumer_document(&read)).unwrap();
        assert_eq!(
            doc,
            json!({"version": 4, "serial": 0, "lineage": "l", "outputs": {}, "resources": []})
        );
    }

    #[test]
    fn an_opentofu_encrypted_state_is_refused_in_words() {
        let body = br#"{"serial":3,"lineage":"l","meta":{},"encrypted_data":"AAAA","encryption_version":"v0"}"#;
        let refusal = read_outputs(2, body).unwrap_err();
        assert!(
            matches!(&refusal, Refusal::OutputsUnreadable { version: 2, reason } if reason.contains("OpenTofu-encrypted")),
            "{refusal:?}"
        );
    }

    #[test]
    fn a_format_other_than_4_is_refused_naming_it() {
        let body = br#"{"version":3,"serial":3,"lineage":"l","modules":[]}"#;
        let refusal = read_outputs(5, body).unwrap_err();
        assert!(
            matches!(&refusal, Refusal::OutputsUnreadable { version: 5, reason } if reason.contains("format 3")),
            "{refusal:?}"
        );
    }

    #[test]
    fn a_body_that_is_no_state_is_not_a_state() {
        assert!(matches!(
            read_outputs(1, b"[1, 2]"),
            Err(Refusal::NotAState { .. })
        ));
        assert!(matches!(
            read_outputs(1, br#"{"version":4,"lineage":"l"}"#),
            Err(Refusal::NotAState { .. })
        ));
    }

    #[test]
    fn a_key_written_twice_is_read_as_terraform_reads_it_the_last_one() {
        let body = br#"{"version":4,"serial":1,"serial":3,"lineage":"l","outputs":{
            "token":{"value":"s3cret","type":"string","sensitive":false,"sensitive":true},
            "shown":{"value":"a","value":"b","type":"string","sensitive":true,"sensitive":false},
            "twice":{"value":1,"type":"number"},"twice":{"value":2,"type":"number"}}}"#;
        let read = read_outputs(3, body).unwrap();
        assert_eq!(read.serial, 3);
        assert!(read.outputs["token"].sensitive, "the last mark hides it");
        assert!(!read.outputs["shown"].sensitive);
        assert_eq!(read.outputs["shown"].value, json!("b"));
        assert_eq!(read.outputs["twice"].value, json!(2));
        let view = serde_json::to_string(&OutputsView::of(&read)).unwrap();
        assert!(!view.contains("s3cret"), "{view}");
        let consumer = String::from_utf8(consumer_document(&read)).unwrap();
        assert!(
            !consumer.contains("s3cret") && !consumer.contains("token"),
            "{consumer}"
        );
    }
}
