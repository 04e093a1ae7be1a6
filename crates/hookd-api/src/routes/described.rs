//! Test helpers that hold a route's request and response structs to the schemas of the OpenAPI
//! document ([`super::health::OPENAPI`]).
//!
//! The document is written by `scripts/openapi-subset.py` from Svix's, not derived from the
//! structs, so a field added to a struct (or an alias such as `filterTypes`) can silently be
//! left out of it; SDK generators and schema-driven tools then never send it. These compare
//! the names serde really reads or writes with the schema's properties.

use std::collections::BTreeSet;

use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde::forward_to_deserialize_any;
use serde_json::Value;

use super::health::OPENAPI;

/// The JSON names `T` reads: its fields and their aliases, as serde's derive hands them to
/// `deserialize_struct`.
fn read_by<'de, T: Deserialize<'de>>() -> BTreeSet<String> {
    let mut fields = None;
    // The probe only notes the names; the error it answers with is expected.
    let _ = T::deserialize(FieldProbe(&mut fields));
    fields
        .expect("not a struct deserialized by name")
        .iter()
        .map(|f| f.to_string())
        .collect()
}

/// The property names of the document's schema `name`.
fn described_by(name: &str) -> BTreeSet<String> {
    let document: Value = serde_json::from_str(OPENAPI).expect("the OpenAPI document is JSON");
    document["components"]["schemas"][name]["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("no schema {name} with properties in the OpenAPI document"))
        .keys()
        .cloned()
        .collect()
}

/// Asserts that `T` reads exactly the properties the schema `name` describes.
pub(crate) fn assert_reads_as_described<'de, T: Deserialize<'de>>(name: &str) {
    assert_same(name, &read_by::<T>(), &described_by(name), "reads");
}

/// Asserts that `shown` (a response with every optional field set) has exactly the properties
/// the schema `name` describes.
pub(crate) fn assert_shows_as_described(name: &str, shown: &impl serde::Serialize) {
    let shown = serde_json::to_value(shown).expect("a response serializes");
    let fields = shown
        .as_object()
        .expect("a response is an object")
        .keys()
        .cloned()
        .collect();
    assert_same(name, &fields, &described_by(name), "shows");
}

fn assert_same(name: &str, used: &BTreeSet<String>, described: &BTreeSet<String>, verb: &str) {
    let undescribed: Vec<_> = used.difference(described).collect();
    let unused: Vec<_> = described.difference(used).collect();
    assert!(
        undescribed.is_empty() && unused.is_empty(),
        "schema {name}: hookd {verb} {undescribed:?}, which the OpenAPI document does not \
         describe, and not {unused:?}, which it does (scripts/openapi-subset.py writes it)"
    );
}

/// A deserializer that notes the field names of the struct asked of it, and nothing else.
struct FieldProbe<'a>(&'a mut Option<&'static [&'static str]>);

impl<'de> Deserializer<'de> for FieldProbe<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("only structs are probed"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = Some(fields);
        Err(de::Error::custom("field names noted"))
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}
