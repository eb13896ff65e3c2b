//! State document sniffing: validates a whole Terraform/OpenTofu state as JSON without
//! building a tree, and keeps only the top-level fields the write checks need, plus the
//! two facts the versions listing shows (the Terraform version and the number of resource
//! instances), taken in the same pass.
//!
//! Everything else is skipped with `IgnoredAny`, which still checks its syntax, so a
//! 32 MiB state costs one pass and no allocation beyond a few strings. [`sniff_resources`]
//! also collects, in the same pass, what the inventory keeps of each instance
//! (`resources`).
//!
//! The reader is sonic-rs, whose skipping runs on SIMD: a fifth faster than serde_json's
//! over a 2 MiB state, which brings the sniff of a save close to the SHA-256 beside it (a
//! counting sniff under it). Its one gap, the `\u` escapes of a skipped string, is checked
//! in a pass of its own ([`check_escapes`]).

mod escapes;
mod resources;

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

pub use resources::{
    Found, FoundInstance, FoundResource, Identity, IdentityKind, IndexKey, DECLARED,
    IDENTITY_ATTRIBUTES,
};

use super::Refusal;

/// What the write checks need of a state document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateMeta {
    pub serial: Option<u64>,
    pub lineage: Option<String>,
    /// OpenTofu client-side encryption (a non-empty top-level `encryption_version`): stored
    /// as sent; serial and lineage are checked only when present.
    pub opentofu_encrypted: bool,
    /// The top-level `terraform_version` (OpenTofu writes its own version there too).
    pub terraform_version: Option<String>,
    /// How many resource instances a format-4 state holds (every entry of every resource's
    /// `instances`, deposed objects included); `None` for an OpenTofu-encrypted state or
    /// another format, whose instances cannot be counted.
    pub instances: Option<u64>,
}

/// Classifies `body` as a state document.
///
/// # Errors
/// `Refusal::NotAState` saying what is wrong: not UTF-8, not JSON (with the line and column),
/// not an object, or a plain state without an integer `serial`, a string `lineage` or a
/// `version`.
pub fn sniff(body: &[u8]) -> Result<StateMeta, Refusal> {
    let (meta, _) = sniff_with(body, false)?;
    check_escapes(body)?;
    Ok(meta)
}

/// As [`sniff`], and the resources of a format-4 state collected in the same pass; `None`
/// where [`StateMeta::instances`] is (an OpenTofu-encrypted state, another format, or
/// `resources` of another shape): such a state cannot be indexed.
///
/// # Errors
/// As [`sniff`].
pub fn sniff_resources(body: &[u8]) -> Result<(StateMeta, Option<Found>), Refusal> {
    let sniffed = sniff_resources_but_escapes(body)?;
    check_escapes(body)?;
    Ok(sniffed)
}

/// As [`sniff_resources`] but for the check of its `\u` escapes ([`check_escapes`]), for a
/// caller that runs that check on another core, beside a pass shorter than the sniff.
///
/// # Errors
/// As [`sniff`], but for a `\u` escape without its four hex digits.
pub fn sniff_resources_but_escapes(body: &[u8]) -> Result<(StateMeta, Option<Found>), Refusal> {
    let (meta, found) = sniff_with(body, true)?;
    let found = meta.instances.and(found);
    Ok((meta, found))
}

/// Refuses a document with a `\u` escape not followed by four hex digits: the one fault
/// the sniff's reader lets through in a value it skips ([`escapes`]). Its answer is the
/// sniff's only for a document the sniff found otherwise sound.
///
/// # Errors
/// `Refusal::NotAState` with the line and column of the first such escape.
pub fn check_escapes(body: &[u8]) -> Result<(), Refusal> {
    match escapes::first_bad_unicode_escape(body) {
        None => Ok(()),
        Some(at) => {
            let (line, column) = escapes::line_and_column(body, at);
            Err(Refusal::NotAState {
                reason: format!(
                    "invalid JSON at line {line} column {column}: a \\u escape without four hex digits"
                ),
            })
        }
    }
}

fn sniff_with(body: &[u8], collect: bool) -> Result<(StateMeta, Option<Found>), Refusal> {
    let refuse = |reason: String| Refusal::NotAState { reason };
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(refuse("the body is empty".into()));
    }
    // JSON text must be UTF-8: the whole body is checked once up front (fast and
    // allocation-free), and read as text after that, so the reader checks no string again.
    let text = std::str::from_utf8(body)
        .map_err(|e| refuse(format!("invalid UTF-8 at byte {}", e.valid_up_to())))?;
    let mut de = sonic_rs::Deserializer::from_str(text);
    let top = de
        .deserialize_any(TopLevel { collect })
        .map_err(|e| refuse(describe_json_error(&e)))?;
    de.end().map_err(|e| refuse(describe_json_error(&e)))?;
    let mut top = top.ok_or_else(|| refuse("the top level is not a JSON object".into()))?;
    // A state without `resources` has none.
    let found = collect.then(|| top.found.take().unwrap_or_default());
    Ok((top.into_meta().map_err(refuse)?, found))
}

/// What the reader says of a fault and where it is. Its message goes on to quote the bytes
/// around the fault, which may be a secret of the state: that part is never shown.
fn describe_json_error(e: &sonic_rs::Error) -> String {
    let (line, column) = (e.line(), e.column());
    let shown = e.to_string();
    let what = shown.split('\n').next().unwrap_or_default();
    let what = what
        .strip_suffix(&format!(" at line {line} column {column}"))
        .unwrap_or(what);
    format!("invalid JSON at line {line} column {column}: {what}")
}

/// Returns `body` with the value of its top-level `serial` replaced by `serial`, every other
/// byte left as it is (a rollback raises only the serial; nothing is re-serialized).
///
/// # Errors
/// `NotAState` when `body` is not a JSON object with a top-level `serial`.
pub fn with_serial(mut body: Vec<u8>, serial: u64) -> Result<Vec<u8>, Refusal> {
    let (start, end) = top_level_value(&body, "serial").ok_or_else(|| Refusal::NotAState {
        reason: "it has no top-level \"serial\" to raise".into(),
    })?;
    // In place: the bytes after the serial move by the difference in its digits, where a
    // copy of the document held two of it at once (a rollback's peak).
    body.splice(start..end, serial.to_string().into_bytes());
    Ok(body)
}

/// The byte span of the last top-level value named `key` in a JSON object.
fn top_level_value(body: &[u8], key: &str) -> Option<(usize, usize)> {
    let mut i = skip_ws(body, 0);
    if *body.get(i)? != b'{' {
        return None;
    }
    i = skip_ws(body, i + 1);
    let mut found = None;
    if *body.get(i)? == b'}' {
        return None;
    }
    loop {
        let key_end = skip_string(body, i)?;
        // Keys are short: decode them properly so an escaped spelling still matches.
        let name: String = serde_json::from_slice(&body[i..key_end]).ok()?;
        i = skip_ws(body, key_end);
        if *body.get(i)? != b':' {
            return None;
        }
        let start = skip_ws(body, i + 1);
        let end = skip_value(body, start)?;
        if name == key {
            found = Some((start, end));
        }
        i = skip_ws(body, end);
        match *body.get(i)? {
            b',' => i = skip_ws(body, i + 1),
            b'}' => return found,
            _ => return None,
        }
    }
}

fn skip_ws(body: &[u8], mut i: usize) -> usize {
    while body.get(i).is_some_and(|b| b.is_ascii_whitespace()) {
        i += 1;
    }
    i
}

/// The index just past the string starting at `i`.
fn skip_string(body: &[u8], i: usize) -> Option<usize> {
    if *body.get(i)? != b'"' {
        return None;
    }
    let mut j = i + 1;
    loop {
        match *body.get(j)? {
            b'"' => return Some(j + 1),
            b'\\' => j += 2,
            _ => j += 1,
        }
    }
}

/// The index just past the value starting at `i`.
fn skip_value(body: &[u8], i: usize) -> Option<usize> {
    match *body.get(i)? {
        b'"' => skip_string(body, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match *body.get(j)? {
                    b'"' => {
                        j = skip_string(body, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while body
                .get(j)
                .is_some_and(|b| !matches!(b, b',' | b'}' | b']') && !b.is_ascii_whitespace())
            {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

/// The top-level fields as found; `None` for a top level that is not an object.
#[derive(Default)]
struct Fields {
    version: Option<Field<u64>>,
    serial: Option<Field<u64>>,
    lineage: Option<Field<String>>,
    encryption_version: Option<Field<String>>,
    terraform_version: Option<Field<String>>,
    /// The instance count of `resources`: `None` inside when it is not an array of
    /// resource objects.
    resources: Option<Option<u64>>,
    /// The resources collected, when asked for and `resources` was there.
    found: Option<Found>,
}

/// A top-level field's value: the expected type, or something else (kept as a description).
enum Field<T> {
    Ok(T),
    Other(&'static str),
}

impl Fields {
    fn into_meta(self) -> Result<StateMeta, String> {
        let encrypted = matches!(&self.encryption_version, Some(Field::Ok(v)) if !v.is_empty());
        let serial = match self.serial {
            Some(Field::Ok(s)) => Some(s),
            Some(Field::Other(what)) if !(encrypted && what == "null") => {
                return Err(format!(
                    "\"serial\" must be a non-negative integer, not {what}"
                ))
            }
            _ => None,
        };
        let lineage = match self.lineage {
            Some(Field::Ok(l)) if !l.is_empty() => Some(l),
            Some(Field::Ok(_)) => return Err("\"lineage\" must not be empty".into()),
            Some(Field::Other(what)) => {
                return Err(format!("\"lineage\" must be a string, not {what}"))
            }
            None => None,
        };
        // Informational only: a mistyped one is unknown, never a refusal.
        let terraform_version = match self.terraform_version {
            Some(Field::Ok(v)) if !v.is_empty() => Some(v),
            _ => None,
        };
        if encrypted {
            return Ok(StateMeta {
                serial,
                lineage,
                opentofu_encrypted: true,
                terraform_version,
                instances: None,
            });
        }
        let format = match self.version {
            Some(Field::Ok(v)) => v,
            Some(Field::Other(what)) => {
                return Err(format!("\"version\" must be an integer, not {what}"))
            }
            None => return Err("it has no \"version\"".into()),
        };
        let serial = serial.ok_or("it has no \"serial\"")?;
        let lineage = lineage.ok_or("it has no \"lineage\"")?;
        // Format 4 (Terraform 0.12 and later, OpenTofu) lists resources with their instances;
        // a state with no `resources` at all has none.
        let instances = (format == 4)
            .then(|| self.resources.unwrap_or(Some(0)))
            .flatten();
        Ok(StateMeta {
            serial: Some(serial),
            lineage: Some(lineage),
            opentofu_encrypted: false,
            terraform_version,
            instances,
        })
    }
}

/// The top level; `collect` asks for the resources as well as their count.
struct TopLevel {
    collect: bool,
}

impl<'de> Visitor<'de> for TopLevel {
    type Value = Option<Fields>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Fields::default();
        const NAMES: Known = known!(
            "version",
            "serial",
            "lineage",
            "encryption_version",
            "terraform_version",
            "resources",
        );
        while let Some(key) = map.next_key_seed(NAMES)? {
            // Later duplicates win, as in Terraform's own JSON decoder.
            match key {
                Some("version") => {
                    fields.version = Some(map.next_value_seed(FieldSeed::<u64>::new())?)
                }
                Some("serial") => {
                    fields.serial = Some(map.next_value_seed(FieldSeed::<u64>::new())?)
                }
                Some("lineage") => {
                    fields.lineage = Some(map.next_value_seed(FieldSeed::<String>::new())?)
                }
                Some("encryption_version") => {
                    fields.encryption_version =
                        Some(map.next_value_seed(FieldSeed::<String>::new())?)
                }
                Some("terraform_version") => {
                    fields.terraform_version =
                        Some(map.next_value_seed(FieldSeed::<String>::new())?)
                }
                Some("resources") if self.collect => {
                    let (count, found) = map.next_value_seed(resources::Resources)?;
                    fields.resources = Some(count);
                    fields.found = Some(found);
                }
                Some("resources") => {
                    fields.resources = Some(map.next_value_seed(Count(Level::Resources))?)
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Some(fields))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// An object's key read as the one of its names it equals (`None` for any other key), without
/// copying it: serde's `Cow<str>` copies every key it reads, and a big state has hundreds of
/// thousands of keys. Made by [`known!`].
#[derive(Clone, Copy)]
struct Known<T: 'static = &'static str>(fn(&str) -> Option<T>);

/// A [`Known`] of the names given, each found as itself, or of `name => value` pairs. A
/// `match` on the names as literals, not a search of a list: it compares lengths and then
/// words, where comparing to names held in a slice called `memcmp` for each of the same
/// length (a tenth of the collecting sniff's added cost).
macro_rules! known {
    ($($name:literal),+ $(,)?) => {
        Known(|key| match key {
            $($name => Some($name),)+
            _ => None,
        })
    };
    ($($name:literal => $value:expr),+ $(,)?) => {
        Known(|key| match key {
            $($name => Some($value),)+
            _ => None,
        })
    };
}
use known;

impl<'de, T> DeserializeSeed<'de> for Known<T> {
    type Value = Option<T>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, T> Visitor<'de> for Known<T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok((self.0)(v))
    }
}

/// Reads one top-level value as `T` when it has T's JSON type, and otherwise skips it
/// (validating it) and remembers what it was, so the error can say so.
struct FieldSeed<T>(std::marker::PhantomData<T>);

impl<T> FieldSeed<T> {
    fn new() -> Self {
        Self(std::marker::PhantomData)
    }
}

macro_rules! other {
    ($name:ident, $ty:ty, $what:expr) => {
        fn $name<E>(self, _: $ty) -> Result<Self::Value, E> {
            Ok(Field::Other($what))
        }
    };
}

/// null, objects and arrays are never the value a field wants: skip (and so validate) them.
macro_rules! not_scalar {
    () => {
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(Field::Other("null"))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(Field::Other("an object"))
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Field::Other("an array"))
        }
    };
}

impl<'de> DeserializeSeed<'de> for FieldSeed<u64> {
    type Value = Field<u64>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FieldSeed<u64> {
    type Value = Field<u64>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Field::Ok(v))
    }
    other!(visit_i64, i64, "a negative number");
    other!(visit_f64, f64, "a fraction");
    other!(visit_bool, bool, "a boolean");
    other!(visit_str, &str, "a string");
    not_scalar!();
}

impl<'de> DeserializeSeed<'de> for FieldSeed<String> {
    type Value = Field<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FieldSeed<String> {
    type Value = Field<String>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Field::Ok(v.to_owned()))
    }
    other!(visit_u64, u64, "a number");
    other!(visit_i64, i64, "a number");
    other!(visit_f64, f64, "a number");
    other!(visit_bool, bool, "a boolean");
    not_scalar!();
}

/// Counts instances on the way through `resources`, validating everything it skips: the
/// resources array sums its resources' counts, a resource object gives its `instances`
/// array's length. Any other shape counts as unknown (`None`), never as a refusal.
#[derive(Clone, Copy)]
enum Level {
    Resources,
    Resource,
    Instances,
}

#[derive(Clone, Copy)]
struct Count(Level);

impl<'de> DeserializeSeed<'de> for Count {
    type Value = Option<u64>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// A scalar where an array or object was wanted: already read, so only unknown.
macro_rules! uncounted {
    ($($name:ident: $ty:ty),+) => {
        $(fn $name<E>(self, _: $ty) -> Result<Self::Value, E> {
            Ok(None)
        })+
    };
}

impl<'de> Visitor<'de> for Count {
    type Value = Option<u64>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut total = Some(0u64);
        match self.0 {
            Level::Resources => {
                while let Some(n) = seq.next_element_seed(Count(Level::Resource))? {
                    total = total.zip(n).and_then(|(t, n)| t.checked_add(n));
                }
            }
            Level::Instances => {
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    total = total.and_then(|t| t.checked_add(1));
                }
            }
            Level::Resource => {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                total = None;
            }
        }
        Ok(total)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut instances = None;
        while let Some(key) = map.next_key_seed(known!("instances"))? {
            if matches!(self.0, Level::Resource) && key.is_some() {
                instances = Some(map.next_value_seed(Count(Level::Instances))?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        // A resource without `instances` has none, and a later duplicate wins; an object
        // where the resources array or an instances array belongs is unknown.
        Ok(match self.0 {
            Level::Resource => instances.unwrap_or(Some(0)),
            Level::Resources | Level::Instances => None,
        })
    }

    uncounted!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests;
