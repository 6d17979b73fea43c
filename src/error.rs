//! Errors that carry their own process exit code, and how the binary prints an error.
//!
//! Most failures are plain `anyhow` errors and exit with [`Exit::General`]. A few outcomes have
//! a documented code of their own ([`Exit`], the one table of codes;
//! docs/reference/exit-codes.md), so that batch scripts can react.
//!
//! Every error is said once: a layer either puts its cause's text in its own message or exposes
//! the cause as `source()`, never both (the anyhow/thiserror convention). [`render`] prints the
//! top message and then one `caused by:` line per further cause of the chain.

use std::fmt;

pub(crate) use crate::exit::Exit;

/// Any error without a more specific code: [`Exit::General`].
pub const GENERAL: u8 = Exit::General.code();
/// The requested backend or device cannot be used (not compiled in, no driver):
/// [`Exit::BackendUnavailable`].
pub const BACKEND_UNAVAILABLE: u8 = Exit::BackendUnavailable.code();

type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error that asks the process to exit with `code`, optionally with the error it wraps.
/// `code` is an [`Exit`] (or a number taken from one, such as a doctor report's).
#[derive(Debug)]
pub(crate) struct ExitError {
    /// [`Exit::code`] of the way to exit.
    pub code: u8,
    pub message: String,
    source: Option<Source>,
}

impl ExitError {
    /// An error whose message says everything.
    pub(crate) fn new(code: impl Into<u8>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            source: None,
        }
    }

    /// An error that adds `message` (what was being done) to `source` (why it failed). The
    /// message must not repeat the source's text: the source is printed as the next cause.
    pub(crate) fn with_source(
        code: impl Into<u8>,
        message: impl Into<String>,
        source: impl Into<Source>,
    ) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            source: Some(source.into()),
        }
    }
}

impl fmt::Display for ExitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// How the process exits for an error: the code of the first [`ExitError`] in its chain, else
/// [`Exit::General`].
pub fn exit_of(err: &anyhow::Error) -> Exit {
    err.chain()
        .find_map(|e| e.downcast_ref::<ExitError>().map(|x| x.code))
        .map_or(Exit::General, |code| Exit::from_status(code.into()))
}

/// [`exit_of`] as a number.
#[cfg(test)]
pub(crate) fn exit_code_of(err: &anyhow::Error) -> u8 {
    exit_of(err).code()
}

/// What the binary prints for a failed command: `error: <top>`, then `caused by: <cause>` for
/// each further error of the chain, one per line.
pub fn render(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for (i, e) in err.chain().enumerate() {
        out.push_str(if i == 0 { "error: " } else { "caused by: " });
        out.push_str(&e.to_string());
        out.push('\n');
    }
    out
}

/// One line with the whole chain of a typed error, `top: cause: cause`, for places that keep
/// an error as text (reports, JSON).
pub fn chain_text(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut next = err.source();
    while let Some(e) = next {
        out.push_str(": ");
        out.push_str(&e.to_string());
        next = e.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("inner reason")]
    struct Inner;

    #[test]
    fn render_prints_each_cause_once() {
        let err = anyhow::Error::new(ExitError::with_source(
            Exit::BadClusterEnv,
            "reading the scheduler",
            Inner,
        ))
        .context("starting");
        assert_eq!(
            render(&err),
            "error: starting\ncaused by: reading the scheduler\ncaused by: inner reason\n"
        );
        assert_eq!(exit_of(&err), Exit::BadClusterEnv);
        assert_eq!(exit_code_of(&err), Exit::BadClusterEnv.code());
        let plain = anyhow::anyhow!("plain");
        assert_eq!(render(&plain), "error: plain\n");
        assert_eq!(exit_of(&plain), Exit::General);
    }

    #[test]
    fn chain_text_joins_the_causes() {
        let e = ExitError::with_source(Exit::General, "outer", Inner);
        assert_eq!(chain_text(&e), "outer: inner reason");
    }
}
