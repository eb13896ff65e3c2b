//! What changed between two versions of a state: the resource instances (by full address)
//! and outputs added, removed and changed, and for each changed instance the attribute paths
//! that differ. Names and paths only, never a value: a state holds secrets, and what is
//! compared are digests ([`summarize`] reads a document once into them). The second side
//! of a comparison is not even summarized: [`compare_to`] compares its instances with the
//! first side's summary as they are read, so only one summary is ever held. Pure: bytes in,
//! an answer out.

mod digest;
#[macro_use]
mod lenient;
mod path;
mod summary;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use digest::{Detail, Key, Node};
use summary::{read, Sink};
pub use summary::{summarize, Address, Facts, IndexKey, Instance, Output, Summary};

use super::version::VersionRecord;
use super::Refusal;

/// The one state format whose resources are read: Terraform 0.12 and later, and OpenTofu.
pub const FORMAT: u64 = 4;

/// What changed from one summary (`before`) to another (`after`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Comparison {
    /// Resource instances added, changed and removed, so a page can show `+3 ~1 -0`.
    pub counts: Counts,
    pub resources: Lists<InstanceView, ChangedInstance>,
    pub outputs: Lists<OutputView, ChangedOutput>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Counts {
    pub added: usize,
    pub changed: usize,
    pub removed: usize,
}

/// What was added, changed and removed, each in address (or name) order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "{A}Lists")]
pub struct Lists<A, C> {
    pub added: Vec<A>,
    pub changed: Vec<C>,
    pub removed: Vec<A>,
}

/// An instance as an answer names it: its address as Terraform writes it, and its parts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct InstanceView {
    pub address: String,
    #[serde(flatten)]
    pub parts: Address,
}

impl From<&Address> for InstanceView {
    fn from(address: &Address) -> Self {
        Self {
            address: address.to_string(),
            parts: address.clone(),
        }
    }
}

/// A changed instance: which of its attribute paths, and which of its other fields, differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ChangedInstance {
    #[serde(flatten)]
    pub instance: InstanceView,
    /// The attribute paths that differ, in order (`policy`, `tags.team`): a path whose
    /// children are compared names its children, one that changed as a whole (a scalar, a
    /// list that changed length, a sensitive value, a value below three levels) names itself.
    pub attributes: Vec<String>,
    /// Those of `attributes` whose value either version marks sensitive, wholly or in part
    /// (a map with a marked key, changed as a whole, is listed too).
    pub sensitive: Vec<String>,
    /// Only sensitive attributes changed.
    pub sensitive_only: bool,
    /// The instance's other fields that differ (`sensitive_attributes`, `status`,
    /// `dependencies`, `schema_version`, `private`, `provider`, ...).
    pub other: Vec<String>,
}

/// An output as an answer names it: never its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct OutputView {
    pub name: String,
    pub sensitive: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ChangedOutput {
    pub name: String,
    pub sensitive: bool,
    /// Whether it was sensitive before: an output that became sensitive changed.
    pub was_sensitive: bool,
    /// Whether its value (or type) changed.
    pub value_changed: bool,
}

/// Refuses a version whose content cannot be compared without reading it: one that OpenTofu
/// encrypted.
///
/// # Errors
/// `Refusal::CannotCompare` naming the version and the way around it.
pub fn check_readable(version: &VersionRecord) -> Result<(), Refusal> {
    if version.opentofu_encrypted {
        return Err(Refusal::CannotCompare {
            version: version.version,
            reason: "it is OpenTofu-encrypted, and only OpenTofu with the state's key can read its resources and outputs; download both versions and compare them where the key is (for example with `tofu show -json`)".into(),
        });
    }
    Ok(())
}

/// Refuses a summary of a format whose resources are not read here.
///
/// # Errors
/// `Refusal::CannotCompare` naming the version, its format and the way around it.
pub fn check_format(version: u64, facts: &Facts) -> Result<(), Refusal> {
    match facts.format {
        Some(FORMAT) => Ok(()),
        format => Err(Refusal::CannotCompare {
            version,
            reason: format!(
                "it is a state of format {}, and only format {FORMAT} (Terraform 0.12 and later, OpenTofu) is compared here; download both versions and compare them yourself, or write the state again with a current Terraform",
                format.map_or_else(|| "unknown".to_owned(), |f| f.to_string())
            ),
        }),
    }
}

/// What changed from `before` to `after`.
pub fn compare(before: &Summary, after: &Summary) -> Comparison {
    let mut against = Against::new(before);
    for (address, instance) in &after.instances {
        against.compare(address, instance);
    }
    against.finish(&after.outputs)
}

/// What changed from `before` to the document `body`, read once: each of its instances is
/// compared as it is read and let go, so the document's own summary is never held.
/// Returns the document's facts with the comparison.
///
/// # Errors
/// As [`summarize`].
pub fn compare_to(before: &Summary, body: &[u8]) -> Result<(Facts, Comparison), Refusal> {
    let mut against = Against::new(before);
    let (facts, outputs) = read(body, &mut against)?;
    Ok((facts, against.finish(&outputs)))
}

/// A comparison with `before` under way: what the other side's instances did so far.
struct Against<'a> {
    before: &'a Summary,
    seen: BTreeSet<&'a Address>,
    added: Vec<InstanceView>,
    changed: Vec<ChangedInstance>,
}

impl<'a> Against<'a> {
    fn new(before: &'a Summary) -> Self {
        Self {
            before,
            seen: BTreeSet::new(),
            added: Vec::new(),
            changed: Vec::new(),
        }
    }

    fn compare(&mut self, address: &Address, now: &Instance) {
        match self.before.instances.get_key_value(address) {
            None => self.added.push(InstanceView::from(address)),
            Some((known, then)) => {
                self.seen.insert(known);
                self.changed.extend(changed_instance(address, then, now));
            }
        }
    }

    /// The comparison, with `outputs` the other side's.
    fn finish(mut self, outputs: &BTreeMap<String, Output>) -> Comparison {
        // The other side's instances came in document order.
        self.added.sort_by(|a, b| a.parts.cmp(&b.parts));
        self.changed
            .sort_by(|a, b| a.instance.parts.cmp(&b.instance.parts));
        let removed: Vec<InstanceView> = self
            .before
            .instances
            .keys()
            .filter(|a| !self.seen.contains(a))
            .map(InstanceView::from)
            .collect();
        let resources = Lists {
            added: self.added,
            changed: self.changed,
            removed,
        };
        Comparison {
            counts: Counts {
                added: resources.added.len(),
                changed: resources.changed.len(),
                removed: resources.removed.len(),
            },
            resources,
            outputs: compare_outputs(&self.before.outputs, outputs),
        }
    }
}

impl Sink for Against<'_> {
    fn instance(&mut self, address: Address, instance: Instance) {
        self.compare(&address, &instance);
    }
}

fn compare_outputs(
    before: &BTreeMap<String, Output>,
    after: &BTreeMap<String, Output>,
) -> Lists<OutputView, ChangedOutput> {
    let mut outputs = Lists {
        added: Vec::new(),
        changed: Vec::new(),
        removed: Vec::new(),
    };
    for (name, now) in after {
        match before.get(name) {
            None => outputs.added.push(OutputView {
                name: name.clone(),
                sensitive: now.sensitive,
            }),
            Some(then) if then != now => outputs.changed.push(ChangedOutput {
                name: name.clone(),
                sensitive: now.sensitive,
                was_sensitive: then.sensitive,
                value_changed: then.digest != now.digest,
            }),
            Some(_) => {}
        }
    }
    outputs.removed = before
        .iter()
        .filter(|(name, _)| !after.contains_key(*name))
        .map(|(name, then)| OutputView {
            name: name.clone(),
            sensitive: then.sensitive,
        })
        .collect();
    outputs
}

/// The instance at `address` as it changed from `then` to `now`; `None` when it did not.
fn changed_instance(address: &Address, then: &Instance, now: &Instance) -> Option<ChangedInstance> {
    let mut marks: Vec<String> = then
        .sensitive
        .iter()
        .chain(&now.sensitive)
        .cloned()
        .collect();
    marks.sort();
    marks.dedup();
    let mut named = Vec::new();
    for (name, a, b) in pairs(&then.attributes, &now.attributes) {
        differing(path::member("", name), a, b, &marks, &mut named);
    }
    let other: Vec<String> = pairs(&then.other, &now.other)
        .into_iter()
        .filter(|(_, a, b)| a != b)
        .map(|(name, _, _)| name.to_owned())
        .collect();
    if named.is_empty() && other.is_empty() {
        return None;
    }
    let sensitive: Vec<String> = named
        .iter()
        .filter(|n| n.sensitive)
        .map(|n| n.path.clone())
        .collect();
    Some(ChangedInstance {
        instance: InstanceView::from(address),
        sensitive_only: !named.is_empty() && sensitive.len() == named.len(),
        attributes: named.into_iter().map(|n| n.path).collect(),
        sensitive,
        other,
    })
}

/// A path that differs, and whether the value named there holds something marked sensitive.
struct Named {
    path: String,
    sensitive: bool,
}

impl Named {
    fn new(path: String, marks: &[String]) -> Self {
        let sensitive = marks.iter().any(|m| path::holds_mark(&path, m));
        Self { path, sensitive }
    }
}

/// Adds to `out` the paths at or below `path` where `then` and `now` differ, as precisely as
/// both kept their children; a sensitive value is named as a whole, never below. `marks`
/// are the instance's sensitive paths in the document's form.
fn differing(
    path: String,
    then: Option<&Node>,
    now: Option<&Node>,
    marks: &[String],
    out: &mut Vec<Named>,
) {
    let (a, b) = match (then, now) {
        (Some(a), Some(b)) if a.digest == b.digest => return,
        (Some(a), Some(b)) => (a, b),
        _ => return out.push(Named::new(path, marks)),
    };
    if marks.iter().any(|m| path::is_within(&path, m)) {
        return out.push(Named::new(path, marks));
    }
    match (&a.detail, &b.detail) {
        (Detail::Object(x), Detail::Object(y)) => {
            let wrapped = wrapper_marks(&path, x, y, marks);
            let marks = wrapped.as_deref().unwrap_or(marks);
            for (key, x, y) in pairs(x, y) {
                differing(path::member(&path, key), x, y, marks, out);
            }
        }
        (Detail::Array(x), Detail::Array(y)) if x.len() == y.len() => {
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                differing(path::element(&path, i), Some(x), Some(y), marks, out);
            }
        }
        _ => out.push(Named::new(path, marks)),
    }
}

/// The marks to use below `path` when both sides store a dynamic value there (an object of
/// exactly `type` and `value`): each mark below `path` is also read through the wrapper.
/// The marks as they were are kept too, so an object that only looks like a wrapper is
/// still matched as it is. `None` when nothing changes.
fn wrapper_marks(
    path: &str,
    then: &[(Key, Node)],
    now: &[(Key, Node)],
    marks: &[String],
) -> Option<Vec<String>> {
    let is_wrapper = |members: &[(Key, Node)]| matches!(members, [(t, _), (v, _)] if &**t == "type" && &**v == "value");
    if !(is_wrapper(then) && is_wrapper(now)) {
        return None;
    }
    let through: Vec<String> = marks
        .iter()
        .filter_map(|m| path::through_wrapper(path, m))
        .collect();
    (!through.is_empty()).then(|| marks.iter().cloned().chain(through).collect())
}

/// The members of two key-sorted lists side by side, in key order.
fn pairs<'a, V>(
    a: &'a [(Key, V)],
    b: &'a [(Key, V)],
) -> Vec<(&'a str, Option<&'a V>, Option<&'a V>)> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    while i < a.len() || j < b.len() {
        let order = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => x.0.cmp(&y.0),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        match order {
            std::cmp::Ordering::Less => {
                out.push((&*a[i].0, Some(&a[i].1), None));
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push((&*b[j].0, None, Some(&b[j].1)));
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push((&*a[i].0, Some(&a[i].1), Some(&b[j].1)));
                i += 1;
                j += 1;
            }
        }
    }
    out
}
