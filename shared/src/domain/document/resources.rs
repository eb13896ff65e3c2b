//! The resource instances of a format-4 state, collected in the sniff's one pass for the
//! inventory: each resource's module, mode, type, name and provider, each instance's index
//! key, and of its attributes only its identity (the first of `arn`, `self_link`, `id` and
//! `name` that is a non-empty string). Every other value is skipped with `IgnoredAny`
//! (validated, never kept) and no key is copied, so collecting costs the pass little more
//! than counting does.
//!
//! Deposed objects (an instance with a `deposed` key: the object a create-before-destroy
//! replacement left behind) are counted, as the versions listing counts them, but not
//! collected: the index describes what a state manages, and a deposed object is on its way
//! out.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use super::{Field, FieldSeed, Known};

/// One resource block of a state, as its JSON has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundResource {
    /// The module path (`module.a["k"]`), empty for the root module.
    pub module: String,
    /// `managed` or `data` (anything else is not indexed).
    pub mode: String,
    pub resource_type: String,
    pub name: String,
    /// As written: `provider["registry.terraform.io/hashicorp/aws"].west`.
    pub provider: String,
    /// Its current objects, deposed ones left out.
    pub instances: Vec<FoundInstance>,
}

/// One current object of a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundInstance {
    pub key: Option<IndexKey>,
    /// `None` when no attribute of [`IDENTITY_ATTRIBUTES`] is a non-empty string.
    pub identity: Option<Identity>,
}

/// An instance's `index_key`: `count`'s number or `for_each`'s string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexKey {
    Int(i64),
    Str(String),
}

/// The attributes an instance's identity is taken from, first to last: the first of them
/// that is a non-empty string is the identity.
pub const IDENTITY_ATTRIBUTES: [&str; 4] = ["arn", "self_link", "id", "name"];

/// An instance's identity: an attribute value of the state, which never leaves the
/// inventory's digest; even `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Identity(pub String);

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Identity(..)")
    }
}

/// The count of `resources` (as [`super::Count`] takes it: `None` for another shape) and
/// the resources collected.
pub(super) type Collected = (Option<u64>, Vec<FoundResource>);

/// Reads the top-level `resources` value.
pub(super) struct Resources;

impl<'de> DeserializeSeed<'de> for Resources {
    type Value = Collected;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// A scalar, or an object where an array belongs: skipped, and unknown.
macro_rules! unknown {
    ($value:expr; $($name:ident: $ty:ty),+) => {
        $(fn $name<E>(self, _: $ty) -> Result<Self::Value, E> {
            Ok($value)
        })+
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
}

impl<'de> Visitor<'de> for Resources {
    type Value = Collected;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut total = Some(0u64);
        let mut found = Vec::new();
        while let Some(resource) = seq.next_element_seed(Resource)? {
            let Some((count, resource)) = resource else {
                total = None;
                continue;
            };
            total = total.zip(count).and_then(|(t, n)| t.checked_add(n));
            found.extend(resource);
        }
        Ok((total, found))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok((None, Vec::new()))
    }

    unknown!((None, Vec::new()); visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);
}

/// One element of `resources`: `None` when it is not an object; else its instance count
/// (`None` when `instances` has another shape) and the resource, when its fields are there.
struct Resource;

type ResourceValue = Option<(Option<u64>, Option<FoundResource>)>;

impl<'de> DeserializeSeed<'de> for Resource {
    type Value = ResourceValue;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Resource {
    type Value = ResourceValue;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let string = |field: Option<Field<String>>| match field {
            Some(Field::Ok(s)) => Some(s),
            _ => None,
        };
        let (mut module, mut mode, mut kind, mut name, mut provider) =
            (None, None, None, None, None);
        let mut instances = None;
        const NAMES: Known = Known(&["module", "mode", "type", "name", "provider", "instances"]);
        while let Some(key) = map.next_key_seed(NAMES)? {
            // Later duplicates win, as in the rest of the sniff.
            let slot = match key {
                Some("module") => &mut module,
                Some("mode") => &mut mode,
                Some("type") => &mut kind,
                Some("name") => &mut name,
                Some("provider") => &mut provider,
                Some("instances") => {
                    instances = Some(map.next_value_seed(Instances)?);
                    continue;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            *slot = Some(map.next_value_seed(FieldSeed::<String>::new())?);
        }
        // A resource without `instances` has none.
        let (count, instances) = instances.unwrap_or((Some(0), Vec::new()));
        let resource = (|| {
            Some(FoundResource {
                module: match module {
                    None => String::new(),
                    some => string(some)?,
                },
                mode: string(mode)?,
                resource_type: string(kind)?,
                name: string(name)?,
                provider: string(provider).unwrap_or_default(),
                instances,
            })
        })();
        Ok(Some((count, resource)))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    unknown!(None; visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);
}

/// A resource's `instances`: how many entries it has (`None` when it is not an array) and
/// its current objects.
struct Instances;

type InstancesValue = (Option<u64>, Vec<FoundInstance>);

impl<'de> DeserializeSeed<'de> for Instances {
    type Value = InstancesValue;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Instances {
    type Value = InstancesValue;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut total = Some(0u64);
        let mut found = Vec::new();
        while let Some(instance) = seq.next_element_seed(Instance)? {
            total = total.and_then(|t| t.checked_add(1));
            found.extend(instance);
        }
        Ok((total, found))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok((None, Vec::new()))
    }

    unknown!((None, Vec::new()); visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);
}

/// One entry of `instances`: the object, unless it is deposed or not an object.
struct Instance;

impl<'de> DeserializeSeed<'de> for Instance {
    type Value = Option<FoundInstance>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Instance {
    type Value = Option<FoundInstance>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut key = None;
        let mut deposed = false;
        let mut identity = None;
        const NAMES: Known = Known(&["index_key", "deposed", "attributes"]);
        while let Some(name) = map.next_key_seed(NAMES)? {
            match name {
                Some("index_key") => key = map.next_value_seed(Key)?,
                Some("deposed") => {
                    // Terraform leaves the key out for a current object; an empty one is
                    // current too.
                    deposed = matches!(
                        map.next_value_seed(FieldSeed::<String>::new())?,
                        Field::Ok(d) if !d.is_empty()
                    );
                }
                Some("attributes") => identity = map.next_value_seed(Attributes)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((!deposed).then_some(FoundInstance { key, identity }))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    unknown!(None; visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);
}

/// An `index_key`: an integer or a string; anything else is no key.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Option<IndexKey>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Option<IndexKey>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(i64::try_from(v).ok().map(IndexKey::Int))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(IndexKey::Int(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(IndexKey::Str(v.to_owned())))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    unknown!(None; visit_bool: bool, visit_f64: f64);
}

/// An instance's `attributes`: its identity, nothing else.
struct Attributes;

impl<'de> DeserializeSeed<'de> for Attributes {
    type Value = Option<Identity>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Attributes {
    type Value = Option<Identity>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        // The best identity so far, with its place in IDENTITY_ATTRIBUTES: an attribute that
        // comes after it there is skipped unread, so an instance copies one value at most.
        // Of an attribute named twice, the last non-empty value counts.
        let mut best: Option<(usize, String)> = None;
        while let Some(name) = map.next_key_seed(Known(&IDENTITY_ATTRIBUTES))? {
            let rank = name.and_then(|n| IDENTITY_ATTRIBUTES.iter().position(|a| *a == n));
            match rank {
                Some(rank) if best.as_ref().is_none_or(|(b, _)| rank <= *b) => {
                    if let Field::Ok(v) = map.next_value_seed(FieldSeed::<String>::new())? {
                        if !v.is_empty() {
                            best = Some((rank, v));
                        }
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(best.map(|(_, v)| Identity(v)))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    unknown!(None; visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);
}
