//! Not yet run by the Redis store.

use super::Arg;
use crate::algorithm::Leased;
use crate::error::ConfigError;

pub(super) fn args(_rule: &Leased) -> Result<Vec<Arg>, ConfigError> {
    Err(ConfigError::OutOfRange {
        parameter: "rule",
        expected: "a rule the Redis store runs",
    })
}
