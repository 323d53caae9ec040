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
    /// An adaptive algorithm or a shedder the simulator does not have.
    UnknownAlgorithm {
        /// What was asked for: `adaptive algorithm` or `shedder`.
        kind: &'static str,
        /// The name given.
        name: String,
        /// The names it has.
        known: &'static [&'static str],
    },
    /// A field of the service model out of its range: `parameter`, and what it must
    /// be.
    Service {
        /// The field, as `--service` names it.
        parameter: &'static str,
        /// The range it must be in.
        expected: &'static str,
    },
    /// An adaptive limiter or a shedder refused its settings.
    Limiter(String),
    /// A domain directory, or the domain asked for in it, that does not load.
    Domains(String),
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
            SimError::UnknownAlgorithm { kind, name, known } => {
                write!(f, "no {kind} {name:?} (known: {})", known.join(", "))
            }
            SimError::Service {
                parameter,
                expected,
            } => write!(f, "service: {parameter} must be {expected}"),
            SimError::Limiter(message) => write!(f, "limiter: {message}"),
            SimError::Domains(message) => write!(f, "domains: {message}"),
        }
    }
}

impl std::error::Error for SimError {}
