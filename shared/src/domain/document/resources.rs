//! The resource instances of a format-4 state, collected in the sniff's one pass for the
//! inventory: each resource's module, mode, type, name and provider, each instance's index
//! key, and its identity: the `identity` object its provider declares (Terraform 1.12 and
//! later), else the first of its attributes `arn`, `self_link`, `id` and `name` that is a
//! non-empty string. Every other value is skipped with `IgnoredAny` (validated, never kept)
//! and no key is copied, so collecting costs the pass little more than counting does.
//!
//! Deposed objects (an instance with a `deposed` key: the object a create-before-destroy
//! replacement left behind) are counted, as the versions listing counts them, but not
//! collected: the index describes what a state manages, and a deposed object is on its way
//! out.

use std::fmt;
use std::ops::Range;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use super::{known, Field, FieldSeed, Known};

/// The resources collected from one document, in compact records: each string laid end to
/// end in one buffer and the records pointing into it (so collecting grows a few buffers
/// rather than allocating a few strings an instance: a 2 MiB state of 2,019 instances made
/// 14,000 allocations, and allocating and freeing them was a fifth of the collecting pass),
/// and the names a state repeats across its resources (modules, modes, types, providers)
/// kept once each and shared. A state of 60,000 small resources is about 110 bytes a
/// resource here, against 280 with each resource's names copied and 64-bit ranges.
#[derive(Clone, Default)]
pub struct Found {
    text: String,
    /// The shared names, end to end, each once.
    names_text: String,
    /// Where each shared name lies in `names_text`, by its number.
    names: Vec<Span>,
    /// Each shared name's number, by the name: hashed with foldhash, which hashes a short
    /// name in a few nanoseconds where the standard SipHash takes tens, a few times for each
    /// of a state's resources, on the save's critical path.
    numbers: std::collections::HashMap<Box<str>, u32, foldhash::fast::RandomState>,
    /// The number each kind of shared name ([`Shared`]) last had: a resource mostly names
    /// what the one before it named, which a comparison finds before any hashing.
    recent: [Option<u32>; 4],
    resources: Vec<ResourceRecord>,
    /// Every resource's current objects, one resource's after another's.
    instances: Vec<InstanceRecord>,
    /// Room an identity object is read in (see [`object`]), kept from one to the next.
    members: Vec<Member>,
    scratch: String,
}

/// Equal when they hold the same resources: the room identities are read in is no part.
impl PartialEq for Found {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Found {}

/// Where a string lies in a buffer: 32-bit offsets, as the buffers never reach 4 GiB (a
/// document is at most 128 MiB, and what is kept of it at most three times its bytes: an
/// escape grows from 2 bytes to 6 at most).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Span {
    start: u32,
    end: u32,
}

impl Span {
    fn of(range: Range<usize>) -> Self {
        Self {
            start: range.start as u32,
            end: range.end as u32,
        }
    }

    fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }
}

#[derive(Clone, PartialEq, Eq)]
struct ResourceRecord {
    /// The numbers of its shared names.
    module: u32,
    mode: u32,
    resource_type: u32,
    provider: u32,
    name: Span,
    /// Its instances' places in `Found::instances`.
    instances: Span,
}

#[derive(Clone, PartialEq, Eq)]
struct InstanceRecord {
    key: KeyRecord,
    identity: Option<(IdentityKind, Span)>,
}

#[derive(Clone, PartialEq, Eq)]
enum KeyRecord {
    None,
    Int(i64),
    Str(Span),
}

impl Found {
    /// How many resources were collected.
    pub fn len(&self) -> usize {
        self.resources.len()
    }

    pub fn is_empty(&self) -> bool {
        self.resources.is_empty()
    }

    /// The resources, in the document's order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = FoundResource<'_>> {
        self.resources.iter().map(|r| FoundResource {
            module: self.name(r.module),
            mode: self.name(r.mode),
            resource_type: self.name(r.resource_type),
            name: &self.text[r.name.range()],
            provider: self.name(r.provider),
            text: &self.text,
            instances: &self.instances[r.instances.range()],
        })
    }

    fn name(&self, number: u32) -> &str {
        &self.names_text[self.names[number as usize].range()]
    }

    /// Appends `text` to the buffer and says where it is.
    fn keep(&mut self, text: &str) -> Range<usize> {
        let start = self.text.len();
        self.text.push_str(text);
        start..self.text.len()
    }

    /// The number of the shared name the buffer holds at `kept` (its last bytes), which
    /// leave the buffer: the name's own number when it was seen before, else a new one.
    fn share(&mut self, kind: Shared, kept: Range<usize>) -> u32 {
        let text = &self.text[kept.clone()];
        let recent = self.recent[kind as usize].filter(|n| self.name(*n) == text);
        let number = match recent.or_else(|| self.numbers.get(text).copied()) {
            Some(number) => number,
            None => {
                let start = self.names_text.len();
                self.names_text.push_str(&self.text[kept.clone()]);
                let number = self.names.len() as u32;
                self.names.push(Span::of(start..self.names_text.len()));
                self.numbers.insert(self.text[kept.clone()].into(), number);
                number
            }
        };
        self.recent[kind as usize] = Some(number);
        self.text.truncate(kept.start);
        number
    }

    /// The number of the empty name (a root module, a resource that names no provider).
    fn empty_name(&mut self, kind: Shared) -> u32 {
        let at = self.text.len();
        self.share(kind, at..at)
    }
}

/// The kinds of shared name, each with its own recent number.
#[derive(Clone, Copy)]
enum Shared {
    Module,
    Mode,
    Type,
    Provider,
}

impl fmt::Debug for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// One resource block of a state, as its JSON has it.
#[derive(Clone, Copy)]
pub struct FoundResource<'a> {
    /// The module path (`module.a["k"]`), empty for the root module.
    pub module: &'a str,
    /// `managed` or `data` (anything else is not indexed).
    pub mode: &'a str,
    pub resource_type: &'a str,
    pub name: &'a str,
    /// As written: `provider["registry.terraform.io/hashicorp/aws"].west`; empty when
    /// the document names none.
    pub provider: &'a str,
    text: &'a str,
    instances: &'a [InstanceRecord],
}

impl<'a> FoundResource<'a> {
    /// Its current objects, deposed ones left out.
    pub fn instances(&self) -> impl ExactSizeIterator<Item = FoundInstance<'a>> + use<'a> {
        let text = self.text;
        self.instances.iter().map(move |i| FoundInstance {
            key: match &i.key {
                KeyRecord::None => None,
                KeyRecord::Int(n) => Some(IndexKey::Int(*n)),
                KeyRecord::Str(s) => Some(IndexKey::Str(&text[s.range()])),
            },
            identity: i.identity.map(|(kind, s)| Identity {
                kind,
                text: &text[s.range()],
            }),
        })
    }
}

/// Equal when their fields and instances are, wherever each document kept them.
impl PartialEq for FoundResource<'_> {
    fn eq(&self, other: &Self) -> bool {
        (
            self.module,
            self.mode,
            self.resource_type,
            self.name,
            self.provider,
        ) == (
            other.module,
            other.mode,
            other.resource_type,
            other.name,
            other.provider,
        ) && self.instances().eq(other.instances())
    }
}

impl fmt::Debug for FoundResource<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FoundResource")
            .field("module", &self.module)
            .field("mode", &self.mode)
            .field("resource_type", &self.resource_type)
            .field("name", &self.name)
            .field("provider", &self.provider)
            .field("instances", &self.instances().collect::<Vec<_>>())
            .finish()
    }
}

/// One current object of a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoundInstance<'a> {
    pub key: Option<IndexKey<'a>>,
    /// `None` when it has no `identity` object with a member set and no attribute of
    /// [`IDENTITY_ATTRIBUTES`] is a non-empty string.
    pub identity: Option<Identity<'a>>,
}

/// An instance's `index_key`: `count`'s number or `for_each`'s string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexKey<'a> {
    Int(i64),
    Str(&'a str),
}

/// The attributes an instance's identity is taken from, first to last: the first of them
/// that is a non-empty string is the identity.
pub const IDENTITY_ATTRIBUTES: [&str; 4] = ["arn", "self_link", "id", "name"];

/// An attribute's place in [`IDENTITY_ATTRIBUTES`].
pub(super) const IDENTITY_RANKS: Known<usize> =
    known!("arn" => 0, "self_link" => 1, "id" => 2, "name" => 3);

/// An instance's identity: values of the state, which never leave the inventory's digest;
/// even `Debug` does not show them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Identity<'a> {
    pub kind: IdentityKind,
    /// For a declared identity, its members sorted by name, as compact JSON (`{"a":1,"b":"x"}`),
    /// so that two states' copies are equal whatever order each wrote them in; else the
    /// attribute's value.
    pub text: &'a str,
}

impl fmt::Debug for Identity<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Identity({:?}, ..)", self.kind)
    }
}

/// Where an instance's identity was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdentityKind {
    /// The instance's `identity` object: the key its provider declares the object by (the
    /// AWS provider's holds the account and region). Preferred to any attribute.
    Declared,
    /// `arn` or `self_link`: a name the cloud gives the object, the same from anywhere.
    Named,
    /// `id` or `name`: for most types a name within the provider's scope (a cluster, an
    /// account, a region), which the state does not record.
    Scoped,
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

/// A seed that reads any JSON value, itself its visitor.
macro_rules! any_value {
    ($($seed:ty => $value:ty),+ $(,)?) => {
        $(impl<'de> DeserializeSeed<'de> for $seed {
            type Value = $value;
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_any(self)
            }
        })+
    };
}

any_value!(
    Text<'_> => Option<Range<usize>>,
    Resources => Collected,
    Resource<'_> => Option<u64>,
    Instances<'_> => Option<u64>,
    Instance<'_> => Option<InstanceRecord>,
    Key<'_> => Option<KeyRecord>,
    Attributes<'_> => Option<(IdentityKind, Range<usize>)>,
    Declared<'_> => Option<Range<usize>>,
);

/// An object or an array where another shape belongs: skipped (and so validated), and
/// `$value`.
macro_rules! skipped {
    (map; $value:expr) => {
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok($value)
        }
    };
    (seq; $value:expr) => {
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok($value)
        }
    };
}

/// A string value kept in the buffer, or `None` for a value of another type (skipped,
/// and so validated).
struct Text<'f>(&'f mut Found);

impl<'de> Visitor<'de> for Text<'_> {
    type Value = Option<Range<usize>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(self.0.keep(v)))
    }
    skipped!(map; None);
    skipped!(seq; None);
    unknown!(None; visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64);
}

/// The count of `resources` (as [`super::Count`] takes it: `None` for another shape) and
/// the resources collected.
pub(super) type Collected = (Option<u64>, Found);

/// Reads the top-level `resources` value.
pub(super) struct Resources;

impl<'de> Visitor<'de> for Resources {
    type Value = Collected;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut total = Some(0u64);
        let mut found = Found::default();
        while let Some(count) = seq.next_element_seed(Resource(&mut found))? {
            total = total.zip(count).and_then(|(t, n)| t.checked_add(n));
        }
        Ok((total, found))
    }
    skipped!(map; (None, Found::default()));

    unknown!((None, Found::default()); visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);
}

/// One element of `resources`, added to the resources found when its fields are there.
/// Its instance count: `None` when it is not an object or `instances` has another shape.
struct Resource<'f>(&'f mut Found);

impl<'de> Visitor<'de> for Resource<'_> {
    type Value = Option<u64>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let found = self.0;
        let (text_start, first) = (found.text.len(), found.instances.len());
        let (mut module, mut mode, mut kind, mut provider) = (None, None, None, None);
        let mut name = None;
        // A resource without `instances` has none.
        let mut count = Some(0);
        const NAMES: Known = known!("module", "mode", "type", "name", "provider", "instances");
        while let Some(key) = map.next_key_seed(NAMES)? {
            // Later duplicates win, as in the rest of the sniff.
            let (slot, shared) = match key {
                Some("module") => (&mut module, Shared::Module),
                Some("mode") => (&mut mode, Shared::Mode),
                Some("type") => (&mut kind, Shared::Type),
                Some("provider") => (&mut provider, Shared::Provider),
                Some("name") => {
                    // A value of another type counts as absent: `Some(None)`.
                    name = Some(map.next_value_seed(Text(&mut *found))?);
                    continue;
                }
                Some("instances") => {
                    found.instances.truncate(first);
                    count = map.next_value_seed(Instances(&mut *found))?;
                    continue;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            // Shared as soon as it is read, so it leaves the buffer's end at once.
            let text = map.next_value_seed(Text(&mut *found))?;
            *slot = Some(text.map(|text| found.share(shared, text)));
        }
        let module = match module {
            None => Some(found.empty_name(Shared::Module)),
            Some(module) => module,
        };
        let provider = match provider.flatten() {
            Some(provider) => provider,
            None => found.empty_name(Shared::Provider),
        };
        let record = (|| {
            Some(ResourceRecord {
                module: module?,
                mode: mode??,
                resource_type: kind??,
                name: Span::of(name??),
                provider,
                instances: Span::of(first..found.instances.len()),
            })
        })();
        match record {
            Some(record) => found.resources.push(record),
            // Not collected: what it left in the buffers goes.
            None => {
                found.text.truncate(text_start);
                found.instances.truncate(first);
            }
        }
        Ok(count)
    }
    skipped!(seq; None);

    unknown!(None; visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);
}

/// A resource's `instances`: its current objects added to the resources found, and how many
/// entries it has (`None` when it is not an array).
struct Instances<'f>(&'f mut Found);

impl<'de> Visitor<'de> for Instances<'_> {
    type Value = Option<u64>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let found = self.0;
        let mut total = Some(0u64);
        while let Some(instance) = seq.next_element_seed(Instance(&mut *found))? {
            total = total.and_then(|t| t.checked_add(1));
            found.instances.extend(instance);
        }
        Ok(total)
    }
    skipped!(map; None);

    unknown!(None; visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);
}

/// One entry of `instances`: the object, unless it is deposed or not an object.
struct Instance<'f>(&'f mut Found);

impl<'de> Visitor<'de> for Instance<'_> {
    type Value = Option<InstanceRecord>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let found = self.0;
        let mut key = KeyRecord::None;
        let mut deposed = false;
        let (mut attribute, mut declared) = (None, None);
        const NAMES: Known = known!("index_key", "deposed", "attributes", "identity");
        while let Some(name) = map.next_key_seed(NAMES)? {
            match name {
                Some("index_key") => {
                    key = map
                        .next_value_seed(Key(&mut *found))?
                        .unwrap_or(KeyRecord::None)
                }
                Some("deposed") => {
                    // Terraform leaves the key out for a current object; an empty one is
                    // current too.
                    deposed = matches!(
                        map.next_value_seed(FieldSeed::<String>::new())?,
                        Field::Ok(d) if !d.is_empty()
                    );
                }
                Some("attributes") => attribute = map.next_value_seed(Attributes(&mut *found))?,
                Some("identity") => declared = map.next_value_seed(Declared(&mut *found))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let identity = declared
            .map(|text| (IdentityKind::Declared, text))
            .or(attribute)
            .map(|(kind, text)| (kind, Span::of(text)));
        Ok((!deposed).then_some(InstanceRecord { key, identity }))
    }
    skipped!(seq; None);

    unknown!(None; visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);
}

/// An `index_key`: an integer or a string; anything else is no key.
struct Key<'f>(&'f mut Found);

impl<'de> Visitor<'de> for Key<'_> {
    type Value = Option<KeyRecord>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(i64::try_from(v).ok().map(KeyRecord::Int))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(KeyRecord::Int(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(KeyRecord::Str(Span::of(self.0.keep(v)))))
    }
    skipped!(map; None);
    skipped!(seq; None);
    unknown!(None; visit_bool: bool, visit_f64: f64);
}

/// An instance's `attributes`: its identity, nothing else.
struct Attributes<'f>(&'f mut Found);

impl<'de> Visitor<'de> for Attributes<'_> {
    type Value = Option<(IdentityKind, Range<usize>)>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let found = self.0;
        // The best identity so far, with its place in IDENTITY_ATTRIBUTES: an attribute that
        // comes after it there is skipped unread. Of an attribute named twice, the last
        // non-empty value counts.
        let mut best: Option<(usize, Range<usize>)> = None;
        while let Some(rank) = map.next_key_seed(IDENTITY_RANKS)? {
            match rank {
                Some(rank) if best.as_ref().is_none_or(|(b, _)| rank <= *b) => {
                    let start = found.text.len();
                    match map.next_value_seed(Text(&mut *found))? {
                        // A value starting with a byte 1 could pass for a declared identity
                        // in a digest ([`DECLARED`]): no identity.
                        Some(value)
                            if !value.is_empty()
                                && !found.text[value.clone()].starts_with(DECLARED) =>
                        {
                            best = Some((rank, value))
                        }
                        _ => found.text.truncate(start),
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(best.map(|(rank, v)| {
            let kind = if rank < 2 {
                IdentityKind::Named
            } else {
                IdentityKind::Scoped
            };
            (kind, v)
        }))
    }
    skipped!(seq; None);

    unknown!(None; visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);
}

/// What a declared identity's digest puts before it, and no attribute's value starts with:
/// the two never give one digest.
pub const DECLARED: char = '\u{1}';

/// An instance's `identity` object (Terraform 1.12 and later): its members kept sorted by
/// name as compact JSON, a member named twice counting once (the later), a `null` member
/// (an attribute the provider left unset) left out. `None` for an object with no member
/// set, or another shape. Written straight into the buffer as it is read, with no value
/// built: on a 2 MiB state of 2,019 instances, each with one, reading each identity as a
/// `serde_json::Value` first cost the collecting sniff 1.9 ms, against about 0.8 ms so.
struct Declared<'f>(&'f mut Found);

impl<'de> Visitor<'de> for Declared<'_> {
    type Value = Option<Range<usize>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let found = self.0;
        let (canonical, set) = object(found, &mut map)?;
        if set == 0 {
            found.text.truncate(canonical.start);
            return Ok(None);
        }
        Ok(Some(canonical))
    }
    skipped!(seq; None);

    unknown!(None; visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);
}

/// One member of an object as read into the buffer: its name as a JSON string, and its
/// value as JSON text (`None` for a `null`).
type Member = (Range<usize>, Option<Range<usize>>);

/// Reads an object into the buffer in its canonical form: `{"a":1,"b":"x"}`, the members
/// sorted by their names as JSON strings, the later of a name given twice, `null` members
/// left out. Gives where it lies and how many members it holds. Terraform writes an
/// object's attributes sorted by name, so the members are written as they come and end up
/// in their place; only an object out of order, or with a name twice or a `null`, is
/// written again from what was read.
fn object<'de, A: MapAccess<'de>>(
    found: &mut Found,
    map: &mut A,
) -> Result<(Range<usize>, usize), A::Error> {
    let start = found.text.len();
    // Kept between instances: an identity costs no allocation once the first is read.
    let mut members = std::mem::take(&mut found.members);
    members.clear();
    found.text.push('{');
    let mut in_place = true;
    while let Some(name) = map.next_key_seed(Name(&mut *found))? {
        let Some(name) = name else {
            map.next_value::<IgnoredAny>()?;
            continue;
        };
        found.text.push(':');
        let value = map.next_value_seed(Json(&mut *found))?;
        found.text.push(',');
        let text = &found.text;
        in_place &= value.is_some()
            && members
                .last()
                .is_none_or(|(last, _): &Member| text[last.clone()] < text[name.clone()]);
        members.push((name, value));
    }
    if in_place {
        if members.is_empty() {
            found.text.push('}');
        } else {
            found.text.pop();
            found.text.push('}');
        }
        let set = members.len();
        found.members = members;
        return Ok((start..found.text.len(), set));
    }
    let mut out = std::mem::take(&mut found.scratch);
    out.clear();
    let text = &found.text;
    // Stable: of one name's members, the later stays last.
    members.sort_by(|a, b| text[a.0.clone()].cmp(&text[b.0.clone()]));
    out.push('{');
    let mut set = 0;
    for (i, (name, value)) in members.iter().enumerate() {
        let later_named_alike = members
            .get(i + 1)
            .is_some_and(|next| text[next.0.clone()] == text[name.clone()]);
        let Some(value) = value.as_ref().filter(|_| !later_named_alike) else {
            continue;
        };
        if set > 0 {
            out.push(',');
        }
        out.push_str(&text[name.clone()]);
        out.push(':');
        out.push_str(&text[value.clone()]);
        set += 1;
    }
    out.push('}');
    found.text.truncate(start);
    found.text.push_str(&out);
    found.scratch = out;
    found.members = members;
    Ok((start..found.text.len(), set))
}

/// An object's key, written into the buffer as a JSON string.
struct Name<'f>(&'f mut Found);

any_value!(Name<'_> => Option<Range<usize>>);

impl<'de> Visitor<'de> for Name<'_> {
    type Value = Option<Range<usize>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        let start = self.0.text.len();
        quoted(&mut self.0.text, v);
        Ok(Some(start..self.0.text.len()))
    }
    skipped!(map; None);
    skipped!(seq; None);
    unknown!(None; visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64);
}

/// `text` as a JSON string.
fn quoted(out: &mut String, text: &str) {
    use std::fmt::Write;
    out.push('"');
    // Most names and values need no escape: copied whole.
    if !text.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.push_str(text);
        out.push('"');
        return;
    }
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c < ' ' => {
                // Writing to a String cannot fail.
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Any JSON value, written into the buffer as compact JSON (an object's members sorted as
/// [`object`] sorts them): `None`, and nothing written, for a `null`.
struct Json<'f>(&'f mut Found);

any_value!(Json<'_> => Option<Range<usize>>);

impl<'de> Visitor<'de> for Json<'_> {
    type Value = Option<Range<usize>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(
            self.written(|t| t.push_str(if v { "true" } else { "false" })),
        ))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(self.written(|t| number(t, v))))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(self.written(|t| number(t, v))))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(self.written(|t| number(t, v))))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(self.written(|t| quoted(t, v))))
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let found = self.0;
        let start = found.text.len();
        found.text.push('[');
        loop {
            // The comma goes before the element is written, and back out at the end.
            let comma = found.text.len() > start + 1;
            if comma {
                found.text.push(',');
            }
            match seq.next_element_seed(Json(&mut *found))? {
                Some(Some(_)) => {}
                Some(None) => found.text.push_str("null"),
                None => {
                    if comma {
                        found.text.pop();
                    }
                    break;
                }
            }
        }
        found.text.push(']');
        Ok(Some(start..found.text.len()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        Ok(Some(object(self.0, &mut map)?.0))
    }
}

/// A number as JSON text (Rust's shortest form that reads back the same).
fn number(out: &mut String, v: impl fmt::Display) {
    use std::fmt::Write;
    // Writing to a String cannot fail.
    let _ = write!(out, "{v}");
}

impl Json<'_> {
    /// Where `write` put its text, at the buffer's end.
    fn written(self, write: impl FnOnce(&mut String)) -> Range<usize> {
        let start = self.0.text.len();
        write(&mut self.0.text);
        start..self.0.text.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::sniff_resources;

    #[test]
    fn the_names_resources_repeat_are_kept_once() {
        let resource = |name: &str, module: &str| {
            format!(
                r#"{{"module":"{module}","mode":"managed","type":"aws_s3_bucket","name":"{name}","provider":"provider[\"registry.terraform.io/hashicorp/aws\"]","instances":[{{"attributes":{{"id":"{name}"}}}}]}}"#
            )
        };
        let doc = format!(
            r#"{{"version":4,"serial":1,"lineage":"l","resources":[{},{},{}]}}"#,
            resource("a", "module.m"),
            resource("b", "module.m"),
            resource("c", "module.n"),
        );
        let (_, found) = sniff_resources(doc.as_bytes()).unwrap();
        let found = found.unwrap();
        assert_eq!(found.names_text.matches("module.m").count(), 1);
        assert_eq!(found.names_text.matches("aws_s3_bucket").count(), 1);
        assert_eq!(found.names_text.matches("hashicorp/aws").count(), 1);
        assert!(!found.text.contains("module"), "{}", found.text);
        let modules: Vec<_> = found.iter().map(|r| (r.module, r.name)).collect();
        assert_eq!(
            modules,
            [("module.m", "a"), ("module.m", "b"), ("module.n", "c")]
        );
    }
}
