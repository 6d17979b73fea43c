//! Errors that carry their own process exit code.
//!
//! Most failures are plain `anyhow` errors and exit with [`GENERAL`]. A few outcomes have a
//! documented code of their own (see README "Exit codes"), so that batch scripts can react.

use std::fmt;

/// Any error without a more specific code.
pub const GENERAL: u8 = 1;
/// The requested backend or device cannot be used (not compiled in, no driver).
pub const BACKEND_UNAVAILABLE: u8 = 3;

/// An error that asks the process to exit with `code`.
#[derive(Debug)]
pub struct ExitError {
    pub code: u8,
    pub message: String,
}

impl ExitError {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for ExitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExitError {}

/// The exit code for an error: the first [`ExitError`] in its chain, else [`GENERAL`].
pub fn exit_code_of(err: &anyhow::Error) -> u8 {
    err.chain()
        .find_map(|e| e.downcast_ref::<ExitError>().map(|x| x.code))
        .unwrap_or(GENERAL)
}
