//! Not yet run by the Redis store.

use super::Arg;
use crate::algorithm::{SmoothBursty, SmoothWarmingUp};
use crate::error::ConfigError;

pub(super) fn args_bursty(_rule: &SmoothBursty) -> Result<Vec<Arg>, ConfigError> {
    Err(ConfigError::OutOfRange {
        parameter: "rule",
        expected: "a rule the Redis store runs",
    })
}

pub(super) fn args_warming_up(_rule: &SmoothWarmingUp) -> Result<Vec<Arg>, ConfigError> {
    Err(ConfigError::OutOfRange {
        parameter: "rule",
        expected: "a rule the Redis store runs",
    })
}
