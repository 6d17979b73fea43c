//! A task's trainer process under the sweep, and the runner's stop: the trainer starts in its
//! own process group (a terminal's Ctrl-C reaches the sweep process only, which decides) and is
//! bound to die with the sweep process (`PR_SET_PDEATHSIG`: SIGTERM, so it checkpoints); the
//! scheduler's signals are forwarded to it; a second SIGINT/SIGTERM kills it. `sweep run`
//! counts the stop signals it receives ([`install_runner_stop`]) and launches nothing after the
//! first.

use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1, SIGUSR2};

/// SIGINT/SIGTERM received by this process since [`install_runner_stop`].
static STOPS: AtomicUsize = AtomicUsize::new(0);
/// The last of them.
static LAST_STOP: AtomicI32 = AtomicI32::new(0);

/// `sweep run`: counts SIGINT and SIGTERM (forwarding to the running tasks is theirs).
pub(super) fn install_runner_stop() -> Result<()> {
    for sig in [SIGINT, SIGTERM] {
        // SAFETY: the handler only touches atomics.
        unsafe {
            signal_hook::low_level::register(sig, move || {
                STOPS.fetch_add(1, Ordering::SeqCst);
                LAST_STOP.store(sig, Ordering::SeqCst);
            })
        }
        .context("cannot install a signal handler")?;
    }
    Ok(())
}

/// The stop signal `sweep run` received, if any: launch nothing more.
pub(super) fn runner_stopped() -> Option<i32> {
    (STOPS.load(Ordering::SeqCst) > 0).then(|| LAST_STOP.load(Ordering::SeqCst))
}

/// Starts `cmd` in its own process group, to receive SIGTERM when this thread's process dies.
pub(super) fn spawn(cmd: &mut Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec only async-signal-safe calls (setpgid, prctl, getppid).
    unsafe {
        cmd.pre_exec(|| {
            libc::setpgid(0, 0);
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before prctl: then nobody would signal us.
            if libc::getppid() == 1 {
                libc::raise(libc::SIGTERM);
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// How a supervised trainer ended.
pub(super) struct Ended {
    /// Its exit code, or 128 + the signal that ended it.
    pub code: i32,
    /// The exit code when it exited by itself.
    pub exited: Option<i32>,
    /// A stop signal (INT, TERM, USR1, USR2) was forwarded to it.
    pub signalled: bool,
    /// Killed after a second SIGINT/SIGTERM.
    pub killed: bool,
}

/// Waits for `child`, forwarding SIGUSR1/USR2/TERM/INT to it; a second SIGINT/SIGTERM kills
/// its process group.
pub(super) fn wait_forwarding(child: &mut Child) -> Result<Ended> {
    let pending = Arc::new(AtomicI32::new(0));
    let stops = Arc::new(AtomicUsize::new(0));
    let mut ids = Vec::new();
    for s in [SIGUSR1, SIGUSR2, SIGTERM, SIGINT] {
        let (flag, count) = (pending.clone(), stops.clone());
        // SAFETY: the handler only touches atomics.
        let id = unsafe {
            signal_hook::low_level::register(s, move || {
                flag.store(s, Ordering::SeqCst);
                if s == SIGINT || s == SIGTERM {
                    count.fetch_add(1, Ordering::SeqCst);
                }
            })
        }
        .context("cannot install a signal handler")?;
        ids.push(id);
    }
    let pid = child.id() as i32;
    let (mut signalled, mut killed) = (false, false);
    let status = loop {
        let sig = pending.swap(0, Ordering::SeqCst);
        if sig != 0 {
            signalled = true;
            // SAFETY: signals a process this process started.
            unsafe { libc::kill(pid, sig) };
        }
        if stops.load(Ordering::SeqCst) >= 2 && !killed {
            killed = true;
            // SAFETY: the trainer's own process group (see `spawn`).
            unsafe { libc::killpg(pid, libc::SIGKILL) };
        }
        if let Some(st) = child.try_wait()? {
            break st;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    for id in ids {
        signal_hook::low_level::unregister(id);
    }
    use std::os::unix::process::ExitStatusExt;
    Ok(Ended {
        code: status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        exited: status.code(),
        signalled,
        killed,
    })
}
