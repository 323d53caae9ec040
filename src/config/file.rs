//! The file as serde reads it: structure and types only. What spans several nodes
//! (duplicates, names, replaces) is checked in `rules.rs`, which finds the line of
//! the offending node with [`locate`](super::locate).

use serde::Deserialize;

use super::unit::{self, Unit};
use crate::algorithm::RuleKind;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct File {
    pub(crate) domain: String,
    #[serde(default)]
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
    pub(crate) name: String,
}
