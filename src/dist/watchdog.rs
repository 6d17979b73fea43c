//! Makes a rank give up when a collective does not complete: a peer that died leaves the others
//! blocked inside MPI, so a thread watches how long the current collective has been running and
//! ends the process (exit code [`Exit::PeerLost`], 17) after `TRAINER_DIST_TIMEOUT` seconds (45).
//! The last checkpoint stays valid: checkpoints are written atomically by rank 0 between steps.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::exit::Exit;

static EPOCH: OnceLock<Instant> = OnceLock::new();
/// Milliseconds since [`EPOCH`] at which the running collective began; 0 when none runs.
static SINCE: AtomicU64 = AtomicU64::new(0);

fn now_ms() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// The timeout from `TRAINER_DIST_TIMEOUT` (seconds), default 45.
pub(crate) fn timeout() -> Duration {
    let secs = std::env::var("TRAINER_DIST_TIMEOUT")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| *v > 0.0)
        .unwrap_or(45.0);
    Duration::from_secs_f64(secs)
}

/// Starts the watchdog thread (once per process).
pub(crate) fn start_global() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let limit = timeout().as_millis() as u64;
        now_ms();
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(500));
                let since = SINCE.load(Ordering::SeqCst);
                if since != 0 && now_ms().saturating_sub(since) > limit {
                    eprintln!(
                        "error: a collective operation has not completed for {} s: another rank \
                         probably died; exiting (code {}). The last checkpoint is intact.",
                        limit / 1000,
                        Exit::PeerLost.code()
                    );
                    Exit::PeerLost.exit_process();
                }
            }
        });
    });
}

/// Marks a collective as running until the guard is dropped.
pub(crate) struct Guard;

impl Guard {
    pub(crate) fn enter() -> Self {
        SINCE.store(now_ms(), Ordering::SeqCst);
        Guard
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        SINCE.store(0, Ordering::SeqCst);
    }
}
