//! The file as serde reads it: structure and types only. What spans several nodes
//! (duplicates, replaces, wildcards) is checked in `rules.rs`, which finds the line of
//! the offending node with [`locate`](super::locate).
//!
//! The keys are those envoy's ratelimit service accepts (its `validKeys`), each at the
//! level where it has a meaning, plus tollgate's `algorithm` and `burst`.

use std::fmt;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, de::IgnoredAny};

use super::unit::{self, Unit};
use crate::algorithm::RuleKind;

/// Free-form data attached to a descriptor node (`metadata:`).
pub(crate) type Metadata = serde_json::Map<String, serde_json::Value>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct File {
    pub(crate) domain: String,
    #[serde(default, deserialize_with = "entries")]
    pub(crate) descriptors: Vec<Node>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Node {
    pub(crate) key: String,
    #[serde(default)]
    pub(crate) value: Option<String>,
    #[serde(default)]
    pub(crate) rate_limit: Option<RateLimit>,
    #[serde(default)]
    pub(crate) shadow_mode: bool,
    #[serde(default)]
    pub(crate) quota_mode: bool,
    #[serde(default)]
    pub(crate) detailed_metric: bool,
    #[serde(default)]
    pub(crate) value_to_metric: bool,
    #[serde(default)]
    pub(crate) share_threshold: bool,
    #[serde(default)]
    pub(crate) metadata: Option<Metadata>,
    #[serde(default, deserialize_with = "entries")]
    pub(crate) descriptors: Vec<Node>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RateLimit {
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) unit: Option<Unit>,
    // Signed, so that a negative count is reported as such rather than as a type error.
    #[serde(default)]
    pub(crate) requests_per_unit: Option<i64>,
    #[serde(default)]
    pub(crate) unlimited: bool,
    #[serde(default)]
    pub(crate) replaces: Vec<Replace>,
    #[serde(default, deserialize_with = "unit::algorithm")]
    pub(crate) algorithm: Option<RuleKind>,
    #[serde(default)]
    pub(crate) burst: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Replace {
    // `- name:` (null) is read, so that it is refused as an empty entry, as envoy does.
    #[serde(default)]
    pub(crate) name: Option<String>,
}

/// A `descriptors` list: absent or null is empty (as envoy reads `descriptors:` with
/// nothing under it), and every element must be a mapping.
fn entries<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Node>, D::Error> {
    deserializer.deserialize_option(EntriesVisitor)
}

struct EntriesVisitor;

impl<'de> Visitor<'de> for EntriesVisitor {
    type Value = Vec<Node>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of descriptors")
    }

    fn visit_none<E: de::Error>(self) -> Result<Vec<Node>, E> {
        Ok(Vec::new())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Vec<Node>, E> {
        Ok(Vec::new())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Vec<Node>, D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Node>, A::Error> {
        let mut nodes = Vec::new();
        while let Some(Entry(node)) = seq.next_element()? {
            nodes.push(node);
        }
        Ok(nodes)
    }
}

/// One element of a `descriptors` list: a mapping, or envoy's error for anything else.
struct Entry(Node);

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Entry, D::Error> {
        deserializer.deserialize_any(EntryVisitor)
    }
}

struct EntryVisitor;

impl EntryVisitor {
    fn not_a_map<E: de::Error>(what: impl fmt::Display) -> E {
        E::custom(format_args!(
            "yaml file contains list of type other than map: {what}"
        ))
    }
}

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = Entry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a descriptor (a mapping)")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Entry, A::Error> {
        Node::deserialize(MapAccessDeserializer::new(map)).map(Entry)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Entry, E> {
        Err(Self::not_a_map(v))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Entry, E> {
        Err(Self::not_a_map(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Entry, E> {
        Err(Self::not_a_map(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Entry, E> {
        Err(Self::not_a_map(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Entry, E> {
        Err(Self::not_a_map(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Entry, E> {
        Err(Self::not_a_map("null"))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Entry, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Err(Self::not_a_map("a list"))
    }
}
