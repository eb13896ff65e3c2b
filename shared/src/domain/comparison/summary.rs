//! A state document read once, streaming, into what a comparison needs: per resource
//! instance (by its full address) a digest per attribute path, its sensitive paths and a
//! digest per other field; per output a digest and whether it is sensitive. No tree of the
//! document is ever built and no value is kept, only digests (see `digest`).

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::digest::{
    self, Detail, Digest, Key, Keys, Node, NodeSeed, DETAIL_BUDGET, DETAIL_LEVELS,
};
use super::lenient::Scalar;
use super::path::{self, Step};
use crate::domain::Refusal;

/// What a comparison keeps of one state document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub facts: Facts,
    pub instances: BTreeMap<Address, Instance>,
    pub outputs: BTreeMap<String, Output>,
}

/// A document's top-level facts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// The document's format (`version`): instances are read from format 4.
    pub format: Option<u64>,
    pub terraform_version: Option<String>,
    pub serial: Option<u64>,
    pub lineage: Option<String>,
}

/// Where a document's instances go as they are read: into a summary, or straight into a
/// comparison with another summary, so the second side of a comparison is never kept.
pub trait Sink {
    fn instance(&mut self, address: Address, instance: Instance);
}

/// The sink of [`summarize`]: every instance kept (a later duplicate wins).
impl Sink for BTreeMap<Address, Instance> {
    fn instance(&mut self, address: Address, instance: Instance) {
        self.insert(address, instance);
    }
}

/// A resource instance's full address: where Terraform would find it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
pub struct Address {
    /// The module path (`module.network["eu"]`); `None` in the root module.
    pub module: Option<String>,
    /// `managed` or `data`.
    pub mode: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    /// The `count` (a number) or `for_each` (a string) key; `None` for a single instance.
    pub index_key: Option<IndexKey>,
    /// The id of a deposed object (one kept while its replacement is created).
    pub deposed: Option<String>,
}

/// A `count` or `for_each` key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum IndexKey {
    Number(i64),
    Text(String),
}

impl fmt::Display for Address {
    /// As Terraform writes it: `module.m.data.aws_ami.x["k"]`, with `(deposed object ID)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(module) = &self.module {
            write!(f, "{module}.")?;
        }
        if self.mode == "data" {
            f.write_str("data.")?;
        }
        write!(f, "{}.{}", self.kind, self.name)?;
        match &self.index_key {
            Some(IndexKey::Number(n)) => write!(f, "[{n}]")?,
            Some(IndexKey::Text(key)) => write!(f, "[{}]", path::quoted(key))?,
            None => {}
        }
        if let Some(id) = &self.deposed {
            write!(f, " (deposed object {id})")?;
        }
        Ok(())
    }
}

/// One instance: digests of its attributes and of everything else it records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instance {
    /// Its attributes, sorted by name, each with its kept children.
    pub attributes: Vec<(Key, Node)>,
    /// The paths `sensitive_attributes` marks, sorted.
    pub sensitive: Vec<String>,
    /// Every other field of the instance (`status`, `schema_version`, `private`,
    /// `dependencies`, `sensitive_attributes`, ...) and its resource's `provider`, sorted by
    /// name.
    pub other: Vec<(Key, Digest)>,
}

/// One output: a digest of its value and type, and whether it is sensitive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub digest: Digest,
    pub sensitive: bool,
}

/// Reads `body`, a state document, into its summary.
///
/// # Errors
/// `Refusal::NotAState` when it is not JSON or its top level is not an object; fields of
/// unexpected shapes are compared as they are, never refused.
pub fn summarize(body: &[u8]) -> Result<Summary, Refusal> {
    let mut instances = BTreeMap::new();
    let (facts, outputs) = read(body, &mut instances)?;
    Ok(Summary {
        facts,
        instances,
        outputs,
    })
}

/// Reads `body` once, handing each instance to `sink` as soon as its resource is read;
/// returns the facts and the outputs.
///
/// # Errors
/// As [`summarize`].
pub fn read(
    body: &[u8],
    sink: &mut dyn Sink,
) -> Result<(Facts, BTreeMap<String, Output>), Refusal> {
    let refuse = |e: serde_json::Error| Refusal::NotAState {
        reason: format!(
            "invalid JSON at line {} column {}: {e}",
            e.line(),
            e.column()
        ),
    };
    let mut de = serde_json::Deserializer::from_slice(body);
    let keys = Keys::default();
    let read = de
        .deserialize_map(TopLevel { sink, keys: &keys })
        .map_err(refuse)?;
    de.end().map_err(refuse)?;
    Ok(read)
}

struct TopLevel<'s> {
    sink: &'s mut dyn Sink,
    keys: &'s Keys,
}

impl<'de> Visitor<'de> for TopLevel<'_> {
    type Value = (Facts, BTreeMap<String, Output>);
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a state document (a JSON object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut facts = Facts::default();
        let mut outputs = BTreeMap::new();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "version" => {
                    facts.format = match map.next_value()? {
                        Scalar::Unsigned(v) => Some(v),
                        _ => None,
                    }
                }
                "terraform_version" => facts.terraform_version = map.next_value::<Scalar>()?.text(),
                "serial" => {
                    facts.serial = match map.next_value()? {
                        Scalar::Unsigned(v) => Some(v),
                        _ => None,
                    }
                }
                "lineage" => facts.lineage = map.next_value::<Scalar>()?.text(),
                "outputs" => outputs = map.next_value_seed(Outputs)?,
                "resources" => map.next_value_seed(Resources {
                    sink: &mut *self.sink,
                    keys: self.keys,
                })?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((facts, outputs))
    }
}

struct Outputs;
seed!(Outputs, BTreeMap<String, Output>);

impl<'de> Visitor<'de> for Outputs {
    type Value = BTreeMap<String, Output>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the outputs object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut outputs = BTreeMap::new();
        while let Some(name) = map.next_key::<String>()? {
            let output = map.next_value_seed(OutputSeed)?;
            outputs.insert(name, output);
        }
        Ok(outputs)
    }
    otherwise_default!(seq);
}

struct OutputSeed;
seed!(OutputSeed, Output);

impl<'de> Visitor<'de> for OutputSeed {
    type Value = Output;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an output")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Output, A::Error> {
        let (budget, keys) = (Cell::new(0), Keys::default());
        let (mut value, mut kind, mut sensitive) = (None, None, false);
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "value" => {
                    value = Some(map.next_value_seed(NodeSeed::whole(&budget, &keys))?.digest)
                }
                "type" => kind = Some(map.next_value_seed(NodeSeed::whole(&budget, &keys))?.digest),
                "sensitive" => sensitive = matches!(map.next_value()?, Scalar::Bool(true)),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Output {
            digest: digest::of_parts(&[value, kind]),
            sensitive,
        })
    }
    otherwise_default!(seq);
}

impl Default for Output {
    /// An output that is not an object: nothing to tell apart.
    fn default() -> Self {
        Self {
            digest: digest::of_parts(&[]),
            sensitive: false,
        }
    }
}

/// The resources array, each resource's instances handed to the sink.
struct Resources<'s> {
    sink: &'s mut dyn Sink,
    keys: &'s Keys,
}
seed!(Resources<'_>, ());

impl<'de> Visitor<'de> for Resources<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the resources array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(instances) = seq.next_element_seed(Resource { keys: self.keys })? {
            for (address, instance) in instances {
                self.sink.instance(address, instance);
            }
        }
        Ok(())
    }
    otherwise_default!(map);
}

/// One resource, read into its instances; their addresses are known only once the whole
/// resource object is read, since its fields may come in any order.
struct Resource<'k> {
    keys: &'k Keys,
}
seed!(Resource<'_>, Vec<(Address, Instance)>);

impl<'de> Visitor<'de> for Resource<'_> {
    type Value = Vec<(Address, Instance)>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a resource")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut module, mut mode, mut kind, mut name) = (None, None, None, None);
        let mut provider = None;
        let mut instances = Vec::new();
        let budget = Cell::new(0);
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "module" => module = map.next_value::<Scalar>()?.text(),
                "mode" => mode = map.next_value::<Scalar>()?.text(),
                "type" => kind = map.next_value::<Scalar>()?.text(),
                "name" => name = map.next_value::<Scalar>()?.text(),
                "provider" => {
                    provider = Some(map.next_value_seed(NodeSeed::whole(&budget, self.keys))?)
                }
                "instances" => instances = map.next_value_seed(Instances { keys: self.keys })?,
                // `each` (list or map) follows from the index keys.
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(instances
            .into_iter()
            .map(|(index_key, deposed, mut instance)| {
                if let Some(provider) = &provider {
                    instance
                        .other
                        .push((self.keys.get("provider"), provider.digest));
                    instance.other.sort_by(|a, b| a.0.cmp(&b.0));
                }
                let address = Address {
                    module: module.clone().filter(|m| !m.is_empty()),
                    mode: mode.clone().unwrap_or_else(|| "managed".into()),
                    kind: kind.clone().unwrap_or_default(),
                    name: name.clone().unwrap_or_default(),
                    index_key,
                    deposed,
                };
                (address, instance)
            })
            .collect())
    }
    otherwise_default!(seq);
}

/// An instance before its resource's address is known: its index key and deposed id.
type Pending = (Option<IndexKey>, Option<String>, Instance);

struct Instances<'k> {
    keys: &'k Keys,
}
seed!(Instances<'_>, Vec<Pending>);

impl<'de> Visitor<'de> for Instances<'_> {
    type Value = Vec<Pending>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a resource's instances")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut instances = Vec::new();
        while let Some(instance) = seq.next_element_seed(InstanceSeed { keys: self.keys })? {
            instances.push(instance);
        }
        Ok(instances)
    }
    otherwise_default!(map);
}

/// `sensitive_attributes` as Terraform writes it: a list of paths, each a list of steps.
/// Another shape marks nothing.
#[derive(Deserialize)]
#[serde(untagged)]
enum Sensitive {
    Paths(Vec<Vec<Step>>),
    Other(IgnoredAny),
}

struct InstanceSeed<'k> {
    keys: &'k Keys,
}
seed!(InstanceSeed<'_>, Pending);

impl<'de> Visitor<'de> for InstanceSeed<'_> {
    type Value = Pending;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an instance")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pending, A::Error> {
        let budget = Cell::new(DETAIL_BUDGET);
        let (mut index_key, mut deposed) = (None, None);
        let mut instance = Instance::default();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "index_key" => {
                    index_key = match map.next_value()? {
                        Scalar::Text(s) => Some(IndexKey::Text(s)),
                        Scalar::Unsigned(n) => i64::try_from(n).ok().map(IndexKey::Number),
                        Scalar::Signed(n) => Some(IndexKey::Number(n)),
                        Scalar::Bool(_) | Scalar::Other => None,
                    }
                }
                "deposed" => deposed = map.next_value::<Scalar>()?.text(),
                "attributes" | "attributes_flat" => {
                    let seed = NodeSeed {
                        levels: DETAIL_LEVELS,
                        budget: &budget,
                        keys: self.keys,
                    };
                    let node = map.next_value_seed(seed)?;
                    match node.detail {
                        Detail::Object(members) => instance.attributes = members,
                        _ => instance.other.push((self.keys.get(&key), node.digest)),
                    }
                }
                "sensitive_attributes" => {
                    let mut paths: Vec<String> = match map.next_value()? {
                        Sensitive::Paths(paths) => {
                            paths.iter().filter_map(|p| path::of_steps(p)).collect()
                        }
                        Sensitive::Other(_) => Vec::new(),
                    };
                    paths.sort();
                    paths.dedup();
                    let digest = digest::of_text(&paths.join("\n"));
                    instance.other.push((self.keys.get(&key), digest));
                    instance.sensitive = paths;
                }
                _ => {
                    let node = map.next_value_seed(NodeSeed::whole(&budget, self.keys))?;
                    instance.other.push((self.keys.get(&key), node.digest));
                }
            }
        }
        instance.other.sort_by(|a, b| a.0.cmp(&b.0));
        instance.other.shrink_to_fit();
        Ok((index_key, deposed, instance))
    }
    otherwise_default!(seq);
}
