//! What can go wrong in a simulation, each naming what to fix.

use std::fmt;

/// A simulation that cannot run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SimError {
    /// A traffic parameter out of its range: `parameter`, and what it must be.
    Traffic {
        /// The parameter, as the command line names it.
        parameter: &'static str,
        /// The range it must be in.
        expected: &'static str,
    },
    /// A line of a trace file that does not read.
    Trace {
        /// The line, counting from 1.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A scenario the simulator does not have.
    UnknownScenario(String),
    /// The rules file, or a decision over it, failed.
    Rules(String),
    /// A plot could not be drawn.
    Plot(String),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Traffic {
                parameter,
                expected,
            } => write!(f, "{parameter} must be {expected}"),
            SimError::Trace { line, message } => write!(f, "trace line {line}: {message}"),
            SimError::UnknownScenario(name) => {
                write!(f, "no scenario {name:?} (`tollgate-sim list` names them)")
            }
            SimError::Rules(message) => write!(f, "rules: {message}"),
            SimError::Plot(message) => write!(f, "plot: {message}"),
        }
    }
}

impl std::error::Error for SimError {}
