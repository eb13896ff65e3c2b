//! Reading a state document's fields leniently: a field of the shape a comparison wants is
//! read, any other shape is skipped (and so validated) and gives a default, so an odd state
//! is compared as it is and never refused.

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// A scalar read leniently: anything else is skipped (and so validated).
pub enum Scalar {
    Text(String),
    Unsigned(u64),
    Signed(i64),
    Bool(bool),
    Other,
}

impl Scalar {
    pub fn text(self) -> Option<String> {
        match self {
            Scalar::Text(s) => Some(s),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
        Ok(Scalar::Text(v.to_owned()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
        Ok(Scalar::Unsigned(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
        Ok(Scalar::Signed(v))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Scalar, E> {
        Ok(Scalar::Bool(v))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Scalar, E> {
        Ok(Scalar::Other)
    }
    fn visit_unit<E>(self) -> Result<Scalar, E> {
        Ok(Scalar::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other)
    }
}

/// The visitor methods of a seed that wants an object (or an array): any other value is
/// already read, or is skipped, and gives the default.
macro_rules! otherwise_default {
    ($($skip:ident),*) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> { Ok(Default::default()) }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> { Ok(Default::default()) }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> { Ok(Default::default()) }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> { Ok(Default::default()) }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> { Ok(Default::default()) }
        fn visit_unit<E>(self) -> Result<Self::Value, E> { Ok(Default::default()) }
        $(otherwise_default!(@ $skip);)*
    };
    (@ seq) => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Default::default())
        }
    };
    (@ map) => {
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(Default::default())
        }
    };
}

/// Implements `DeserializeSeed` for a visitor that is its own seed.
macro_rules! seed {
    ($ty:ty, $value:ty) => {
        impl<'de> DeserializeSeed<'de> for $ty {
            type Value = $value;
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<$value, D::Error> {
                d.deserialize_any(self)
            }
        }
    };
}
