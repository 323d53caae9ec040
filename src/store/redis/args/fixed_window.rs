//! Not yet run by the Redis store.

use super::Arg;
use crate::algorithm::{Aligned, FirstHit, FixedWindow};
use crate::error::ConfigError;

pub(super) fn args_aligned(_rule: &FixedWindow<Aligned>) -> Result<Vec<Arg>, ConfigError> {
    Err(ConfigError::OutOfRange {
        parameter: "rule",
        expected: "a rule the Redis store runs",
    })
}

pub(super) fn args_first_hit(_rule: &FixedWindow<FirstHit>) -> Result<Vec<Arg>, ConfigError> {
    Err(ConfigError::OutOfRange {
        parameter: "rule",
        expected: "a rule the Redis store runs",
    })
}
