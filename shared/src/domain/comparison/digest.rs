//! Digests of JSON values, for telling sameness without keeping the values: each value
//! becomes a 16-byte digest of its content, and the first levels below an attribute keep
//! their children's digests too, so a comparison can name the paths that differ
//! (`tags.team`, `ingress[0].from_port`). No value, and nothing derived from one but its
//! digest, is ever kept.
//!
//! A container's digest is made from its children's digests (an object's in key order), so
//! every byte is hashed once, the same value always gives the same digest however its
//! object keys are ordered, and a container keeps its children or not without changing it.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use sha2::{Digest as _, Sha256};

/// The first half of a SHA-256: enough that two different values never meet by chance, and
/// small enough that a summary stays a fraction of its state.
pub type Digest = [u8; 16];

/// How many levels of an instance's attributes keep their children's digests: the
/// attributes themselves, their children and their grandchildren. A difference deeper down
/// is named by its ancestor at the third level.
pub const DETAIL_LEVELS: u8 = 3;

/// The most values one instance keeps with their own digest below its attributes. A huge
/// nested value (a map of thousands of entries) is compared as a whole beyond it, so a
/// summary never grows past a fraction of its state.
pub const DETAIL_BUDGET: usize = 4096;

/// An object member's key as kept: shared by every instance of a document that uses it
/// (`id`, `tags`, `value`), so thousands of instances keep one copy of each name.
pub type Key = Arc<str>;

/// The keys a document's summary keeps, each once.
#[derive(Default)]
pub struct Keys(RefCell<HashSet<Key>>);

impl Keys {
    pub fn get(&self, key: &str) -> Key {
        let mut keys = self.0.borrow_mut();
        if let Some(kept) = keys.get(key) {
            return kept.clone();
        }
        let kept: Key = key.into();
        keys.insert(kept.clone());
        kept
    }
}

/// One value: its digest, and its children's where they are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub digest: Digest,
    pub detail: Detail,
}

/// What a node keeps below itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detail {
    /// A scalar, or a container compared as a whole (below the detail levels, or past the
    /// budget).
    Whole,
    /// An object's members, sorted by key.
    Object(Vec<(Key, Node)>),
    /// An array's elements, in order.
    Array(Vec<Node>),
}

fn finish(hasher: Sha256) -> Digest {
    let full = hasher.finalize();
    let mut digest = [0u8; 16];
    digest.copy_from_slice(&full[..16]);
    digest
}

fn scalar(tag: u8, bytes: &[u8]) -> Node {
    let mut hasher = Sha256::new();
    hasher.update([tag]);
    hasher.update((bytes.len() as u64).to_le_bytes());
    hasher.update(bytes);
    Node {
        digest: finish(hasher),
        detail: Detail::Whole,
    }
}

/// The digest of a string that is not a value (a list of sensitive paths).
pub fn of_text(text: &str) -> Digest {
    scalar(b's', text.as_bytes()).digest
}

/// The digest of several digests together, each present or not.
pub fn of_parts(parts: &[Option<Digest>]) -> Digest {
    let mut hasher = Sha256::new();
    hasher.update([b'p']);
    for part in parts {
        match part {
            Some(digest) => {
                hasher.update([1]);
                hasher.update(digest);
            }
            None => hasher.update([0]),
        }
    }
    finish(hasher)
}

/// Reads one value as a [`Node`], keeping children down `levels` more levels while the
/// instance's `budget` lasts.
#[derive(Clone, Copy)]
pub struct NodeSeed<'b> {
    pub levels: u8,
    pub budget: &'b Cell<usize>,
    pub keys: &'b Keys,
}

impl<'b> NodeSeed<'b> {
    /// A value compared as a whole.
    pub fn whole(budget: &'b Cell<usize>, keys: &'b Keys) -> Self {
        Self {
            levels: 0,
            budget,
            keys,
        }
    }

    /// The seed of this value's children; spends one of the budget when they are kept.
    fn child(self) -> Self {
        Self {
            levels: self.levels.saturating_sub(1),
            budget: self.budget,
            keys: self.keys,
        }
    }

    /// Whether a child about to be read is kept with its own digest: the instance's
    /// attributes object (the top level) always keeps its members.
    fn keeps(self) -> bool {
        if self.levels == DETAIL_LEVELS {
            return true;
        }
        match self.budget.get() {
            0 => false,
            left => {
                self.budget.set(left - 1);
                true
            }
        }
    }
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_> {
    type Value = Node;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_> {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(scalar(b'n', &[]))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(scalar(b'b', &[u8::from(v)]))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        Ok(scalar(b'u', &v.to_le_bytes()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(scalar(b'i', &v.to_le_bytes()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
        Ok(scalar(b'f', &v.to_bits().to_le_bytes()))
    }
    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(scalar(b's', v.as_bytes()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut hasher = Sha256::new();
        hasher.update([b'a']);
        let mut kept = Some(Vec::new()).filter(|_| self.levels > 0);
        let mut count = 0u64;
        while let Some(node) = seq.next_element_seed(self.child())? {
            hasher.update(node.digest);
            count += 1;
            kept = kept.and_then(|mut nodes| {
                self.keeps().then(|| {
                    nodes.push(node);
                    nodes
                })
            });
        }
        hasher.update(count.to_le_bytes());
        Ok(Node {
            digest: finish(hasher),
            detail: kept.map_or(Detail::Whole, |mut nodes| {
                // Kept for the whole comparison: no spare capacity.
                nodes.shrink_to_fit();
                Detail::Array(nodes)
            }),
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        // Every member's key and digest, for the digest in key order; the nodes themselves
        // only while they are kept.
        let mut members: Vec<(Key, Node)> = Vec::new();
        let mut keep = self.levels > 0;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let mut node = map.next_value_seed(self.child())?;
            keep = keep && self.keeps();
            if !keep {
                node.detail = Detail::Whole;
            }
            // Only kept keys are shared; the others live as long as this digest takes.
            let key = match keep {
                true => self.keys.get(&key),
                false => Key::from(key.as_ref()),
            };
            members.push((key, node));
        }
        members.sort_by(|a, b| a.0.cmp(&b.0));
        let mut hasher = Sha256::new();
        hasher.update([b'o']);
        hasher.update((members.len() as u64).to_le_bytes());
        for (key, node) in &members {
            hasher.update((key.len() as u64).to_le_bytes());
            hasher.update(key.as_bytes());
            hasher.update(node.digest);
        }
        Ok(Node {
            digest: finish(hasher),
            detail: if keep {
                // Kept for the whole comparison: no spare capacity.
                members.shrink_to_fit();
                Detail::Object(members)
            } else {
                Detail::Whole
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(json: &str, levels: u8) -> Node {
        let (budget, keys) = (Cell::new(DETAIL_BUDGET), Keys::default());
        let mut de = serde_json::Deserializer::from_str(json);
        NodeSeed {
            levels,
            budget: &budget,
            keys: &keys,
        }
        .deserialize(&mut de)
        .unwrap()
    }

    #[test]
    fn equal_values_have_equal_digests_whatever_their_key_order_or_spelling() {
        let a = node(r#"{"a":1,"b":["x",{"c":null}]}"#, 0);
        let b = node("{ \"b\" : [ \"\\u0078\" , {\"c\":null} ] , \"a\" : 1 }", 2);
        assert_eq!(a.digest, b.digest);
    }

    #[test]
    fn different_values_and_types_have_different_digests() {
        let digests: Vec<Digest> = [
            r#""1""#,
            "1",
            "-1",
            "1.5",
            "true",
            "null",
            "[]",
            "{}",
            r#"[""]"#,
            r#"["",""]"#,
            r#"{"a":"b"}"#,
            r#"{"ab":""}"#,
        ]
        .iter()
        .map(|j| node(j, 0).digest)
        .collect();
        let distinct: std::collections::BTreeSet<_> = digests.iter().collect();
        assert_eq!(distinct.len(), digests.len());
    }

    #[test]
    fn children_are_kept_down_the_levels_asked_for() {
        let n = node(r#"{"tags":{"team":"a"},"list":[{"x":1}]}"#, 2);
        let Detail::Object(members) = &n.detail else {
            panic!("{n:?}")
        };
        let Detail::Object(tags) = &members[1].1.detail else {
            panic!("{members:?}")
        };
        assert_eq!(&*tags[0].0, "team");
        assert_eq!(tags[0].1.detail, Detail::Whole);
        let Detail::Array(list) = &members[0].1.detail else {
            panic!("{members:?}")
        };
        assert_eq!(list[0].detail, Detail::Whole, "the third level is not kept");
    }

    #[test]
    fn past_the_budget_values_are_compared_whole() {
        let (budget, keys) = (Cell::new(2), Keys::default());
        let json = r#"{"a":{"x":1,"y":2,"z":3}}"#;
        let mut de = serde_json::Deserializer::from_str(json);
        let n = NodeSeed {
            levels: DETAIL_LEVELS,
            budget: &budget,
            keys: &keys,
        }
        .deserialize(&mut de)
        .unwrap();
        let Detail::Object(members) = &n.detail else {
            panic!("{n:?}")
        };
        assert_eq!(members[0].1.detail, Detail::Whole, "{members:?}");
        assert_eq!(n.digest, node(json, 0).digest);
    }
}
