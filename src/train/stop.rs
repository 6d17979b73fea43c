//! Stop requests: signals (SIGTERM, SIGINT, SIGUSR1, SIGUSR2) and step budgets.
//!
//! The signal handler only stores the signal number in an atomic; the training loop polls
//! [`requested`] at every step boundary and does the checkpointing itself, outside the handler.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Result;
use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1, SIGUSR2};

/// Exit code of a run that stopped early after writing its checkpoint and wants to be requeued
/// (EX_TEMPFAIL). Batch scripts requeue on it.
pub const REQUEUE_EXIT: u8 = 75;

static FLAG: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

fn flag() -> &'static Arc<AtomicUsize> {
    FLAG.get_or_init(|| Arc::new(AtomicUsize::new(0)))
}

/// Installs the handlers (idempotent).
pub fn install() -> Result<()> {
    static DONE: OnceLock<()> = OnceLock::new();
    if DONE.get().is_some() {
        return Ok(());
    }
    for sig in [SIGTERM, SIGINT, SIGUSR1, SIGUSR2] {
        signal_hook::flag::register_usize(sig, Arc::clone(flag()), sig as usize)?;
    }
    let _ = DONE.set(());
    Ok(())
}

/// The signal received, if any.
pub fn requested() -> Option<i32> {
    match flag().load(Ordering::SeqCst) {
        0 => None,
        s => Some(s as i32),
    }
}

/// Why a loop stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Signal(i32),
    StepBudget,
}

impl StopReason {
    pub fn describe(self) -> String {
        match self {
            StopReason::Signal(s) => format!("signal {}", signal_name(s)),
            StopReason::StepBudget => "--stop-after-steps reached".into(),
        }
    }
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        SIGTERM => "SIGTERM",
        SIGINT => "SIGINT",
        SIGUSR1 => "SIGUSR1",
        SIGUSR2 => "SIGUSR2",
        _ => "signal",
    }
}

/// Polled at each step boundary: a pending signal, or the step budget of this process spent.
pub fn check(steps_this_process: u64, budget: Option<u64>) -> Option<StopReason> {
    if let Some(s) = requested() {
        return Some(StopReason::Signal(s));
    }
    match budget {
        Some(b) if steps_this_process >= b => Some(StopReason::StepBudget),
        _ => None,
    }
}
