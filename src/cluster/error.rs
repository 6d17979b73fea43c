//! Errors from reading the scheduler environment. Each names the variables involved; a cause
//! (the hostlist's own error) is exposed as `source()` and not repeated in the message.

use super::hostlist::HostlistError;

/// A scheduler environment that is incomplete, malformed or self-contradictory.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EnvError {
    /// A variable the detected scheduler always sets is missing.
    #[error("{scheduler}: {var} is not set ({why})")]
    Missing {
        /// Variable name.
        var: String,
        /// Scheduler that was detected.
        scheduler: &'static str,
        /// Why it is needed.
        why: String,
    },
    /// A variable has a value of the wrong shape.
    #[error("{var}={value:?} is not {expected}")]
    Invalid {
        /// Variable name.
        var: String,
        /// Value as found.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// Two or more variables disagree, e.g. a rank not below the world size.
    #[error("{0}")]
    Contradiction(String),
    /// A node list that is not valid hostlist syntax (the reason is the source).
    #[error("{var} is not a valid Slurm hostlist")]
    Hostlist {
        /// Variable name.
        var: String,
        /// What is wrong with the list.
        source: HostlistError,
    },
}
