//! Stop requests: signals (SIGTERM, SIGINT, SIGUSR1, SIGUSR2) and step budgets.
//!
//! The signal handler only stores the signal number in an atomic; the training loop polls
//! [`requested`] at every step boundary and does the checkpointing itself, outside the handler.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Result;
use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1, SIGUSR2};

use crate::cluster::scheduler::Requeue;
use crate::exit::Exit;

/// Exit code of a run that stopped early after writing its checkpoint and wants to be requeued
/// (EX_TEMPFAIL, [`Exit::Requeue`]). Batch scripts requeue on it.
pub const REQUEUE_EXIT: u8 = Exit::Requeue.code();

static FLAG: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

fn flag() -> &'static Arc<AtomicUsize> {
    FLAG.get_or_init(|| Arc::new(AtomicUsize::new(0)))
}

/// Installs the handlers (idempotent).
pub(crate) fn install() -> Result<()> {
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
pub(crate) fn requested() -> Option<i32> {
    match flag().load(Ordering::SeqCst) {
        0 => None,
        s => Some(s as i32),
    }
}

/// Why a loop stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopReason {
    Signal(i32),
    StepBudget,
}

impl StopReason {
    pub(crate) fn describe(self) -> String {
        match self {
            StopReason::Signal(s) => format!("signal {}", signal_name(s)),
            StopReason::StepBudget => "--stop-after-steps reached".into(),
        }
    }
}

pub(crate) fn signal_name(sig: i32) -> &'static str {
    match sig {
        SIGTERM => "SIGTERM",
        SIGINT => "SIGINT",
        SIGUSR1 => "SIGUSR1",
        SIGUSR2 => "SIGUSR2",
        _ => "signal",
    }
}

/// Test hook, for tests that signal a training under way on machines of any speed: with
/// `TRAINER_TEST_PAUSE_AT_STEP=N`, a run waits after its N-th step of the run (global: a run
/// resumed after that step never reaches it again), before that step's stop check, until a
/// signal arrives (at most five minutes), saying so on stderr. A pure wait: the run's results
/// are those of a run without it.
pub(crate) fn test_pause(global_step: u64, tag: &str) {
    static AT: OnceLock<Option<u64>> = OnceLock::new();
    let at = AT.get_or_init(|| {
        std::env::var("TRAINER_TEST_PAUSE_AT_STEP")
            .ok()
            .and_then(|v| v.parse().ok())
    });
    if *at != Some(global_step) {
        return;
    }
    eprintln!(
        "{tag} pausing after step {global_step} until a signal arrives \
         (TRAINER_TEST_PAUSE_AT_STEP)"
    );
    let t0 = std::time::Instant::now();
    while requested().is_none() && t0.elapsed() < std::time::Duration::from_secs(300) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Polled at each step boundary: a pending signal, or the step budget of this process spent.
pub(crate) fn check(steps_this_process: u64, budget: Option<u64>) -> Option<StopReason> {
    if let Some(s) = requested() {
        return Some(StopReason::Signal(s));
    }
    match budget {
        Some(b) if steps_this_process >= b => Some(StopReason::StepBudget),
        _ => None,
    }
}

/// Parses `USR1`, `SIGUSR1`, `usr1` or a number into a signal number.
pub(crate) fn parse_signal(s: &str) -> anyhow::Result<i32> {
    let u = s.trim().to_ascii_uppercase();
    let name = u.strip_prefix("SIG").unwrap_or(&u);
    Ok(match name {
        "TERM" => SIGTERM,
        "INT" => SIGINT,
        "USR1" => SIGUSR1,
        "USR2" => SIGUSR2,
        n => match n.parse::<i32>() {
            Ok(v) if [SIGTERM, SIGINT, SIGUSR1, SIGUSR2].contains(&v) => v,
            _ => anyhow::bail!(
                "--requeue-signal: `{s}` is not one of TERM, INT, USR1, USR2 (the handled signals)"
            ),
        },
    })
}

/// What to do after a stop: which signals ask for a requeue, whether to requeue the job itself
/// (`--requeue`), and how its scheduler does that.
#[derive(Debug, Clone, Default)]
pub(crate) struct RequeuePolicy {
    pub signals: Vec<i32>,
    /// `--requeue`.
    pub requeue_itself: bool,
    /// How the scheduler requeues this job ([`crate::cluster::scheduler::requeue_for`]), when it can.
    pub job: Option<Requeue>,
}

impl RequeuePolicy {
    /// From the signal names of `--requeue-signal` and `--requeue`.
    pub(crate) fn new(signals: &[String], requeue_itself: bool) -> anyhow::Result<Self> {
        Ok(Self {
            signals: signals
                .iter()
                .map(|s| parse_signal(s))
                .collect::<anyhow::Result<_>>()?,
            requeue_itself,
            job: None,
        })
    }

    /// How to exit for `reason`: [`Exit::Requeue`] for the step budget and the requeue
    /// signals, [`Exit::Signal`] (128 + n) for the other signals.
    pub(crate) fn exit(&self, reason: StopReason) -> Exit {
        match reason {
            StopReason::Signal(s) if !self.signals.contains(&s) => Exit::Signal(s),
            _ => Exit::Requeue,
        }
    }

    /// The exit code for `reason`, without logging or requeueing (non-zero ranks).
    pub(crate) fn exit_code(&self, reason: StopReason) -> std::process::ExitCode {
        self.exit(reason).into()
    }

    /// Called after the stop checkpoint was written: logs, requeues if asked, and returns the
    /// documented exit code (75 requeue me; 128 + signal otherwise).
    pub(crate) fn finish(&self, reason: StopReason, log_prefix: &str) -> std::process::ExitCode {
        let exit = self.exit(reason);
        if let Exit::Signal(s) = exit {
            eprintln!(
                "{log_prefix} stopped by {}: exiting with {}",
                signal_name(s),
                exit.code()
            );
            return exit.into();
        }
        if self.requeue_itself {
            self.requeue(log_prefix);
        }
        exit.into()
    }

    /// Runs the scheduler's requeue command; on any failure the exit code (75) still asks the
    /// batch script to requeue.
    fn requeue(&self, log_prefix: &str) {
        let Some(r) = &self.job else {
            eprintln!(
                "{log_prefix} --requeue: not in a job that its scheduler can requeue from inside \
                 (Slurm's); exiting with {REQUEUE_EXIT}"
            );
            return;
        };
        let command = format!("{} {}", r.program, r.args.join(" "));
        match std::process::Command::new(r.program).args(&r.args).status() {
            Ok(st) if st.success() => {
                eprintln!(
                    "{log_prefix} requeued {} job {} ({command})",
                    r.scheduler, r.job
                )
            }
            Ok(st) => eprintln!(
                "{log_prefix} `{command}` failed ({st}); exiting with {REQUEUE_EXIT} so that the \
                 batch script can requeue"
            ),
            Err(e) => eprintln!(
                "{log_prefix} {} not available ({e}; inside a container?): exiting with \
                 {REQUEUE_EXIT} so that the batch script requeues (`[ $? -eq {REQUEUE_EXIT} ] && \
                 {}`)",
                r.program, r.in_script
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_requeues_on_budget_and_requeue_signals_only() {
        let p = RequeuePolicy::new(&["USR1".into()], false).unwrap();
        assert_eq!(p.exit(StopReason::StepBudget), Exit::Requeue);
        assert_eq!(p.exit(StopReason::Signal(SIGUSR1)), Exit::Requeue);
        assert_eq!(p.exit(StopReason::Signal(SIGTERM)), Exit::Signal(SIGTERM));
        assert_eq!(p.exit(StopReason::Signal(SIGTERM)).code(), 143);
        assert_eq!(p.exit(StopReason::Signal(SIGINT)).code(), 130);
        assert_eq!(REQUEUE_EXIT, 75);
    }
}
