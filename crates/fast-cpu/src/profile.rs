//! Wall time of every operation of the CPU backends that wrap another one (`flex`:
//! [`FastCpu`](super::fast_cpu::FastCpu); `tch`: `FastTch`), by phase of the training step, for
//! `trainer bench mnist|gnn` with `TRAINER_OP_PROFILE=1` (`benches/profile-mnist.sh`).
//!
//! Off by default: then `timed` costs one relaxed atomic load. When on, an operation called
//! inside another one (a Burn default built from other operations) is counted in the outer one
//! only, so the times add up. The caller marks the phases ([`phase`]); the wall time of a phase
//! minus the time of its operations is the framework's own (autodiff bookkeeping, freeing
//! tensors, building batches).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

static ENABLED: AtomicBool = AtomicBool::new(false);
static STATE: Mutex<State> = Mutex::new(State {
    phase: "",
    since: None,
    ops: BTreeMap::new(),
    phases: BTreeMap::new(),
});

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    static OPS: Cell<u64> = const { Cell::new(0) };
    static UPLOADS: Cell<u64> = const { Cell::new(0) };
}

/// Operations that only describe a tensor (its device) or view it without moving data on
/// LibTorch (reshape, transposes, broadcasts, slices): not counted as work.
const VIEWS: [&str; 8] = [
    "_device",
    "_reshape",
    "_swap_dims",
    "_permute",
    "_expand",
    "_slice",
    "_unfold",
    "_into_data",
];

/// Counts one outermost operation of this thread: a `*_from_data` as an upload (host values
/// into a tensor: on a GPU a copy and a wait), a view or a read (see [`VIEWS`]; reads are
/// counted by the caller, which knows why it reads) as nothing, anything else as an op.
fn count(op: &str) {
    if op.ends_with("_from_data") {
        UPLOADS.set(UPLOADS.get() + 1);
    } else if !VIEWS.iter().any(|v| op.ends_with(v)) {
        OPS.set(OPS.get() + 1);
    }
}

/// The operations and uploads this thread issued so far through the wrapping backends (`flex`,
/// `tch`): each call of the backend's interface from outside the backend counts once, whatever
/// the backend does inside (one LibTorch kernel or several, a Burn default built from other
/// operations). Always on (two thread-local counters); backends that wrap nothing (CubeCL's,
/// `tch-plain`) count nothing.
pub fn counts() -> (u64, u64) {
    (OPS.get(), UPLOADS.get())
}

/// Adds operations and uploads that helper threads issued on this thread's behalf.
pub fn add_counts(ops: u64, uploads: u64) {
    OPS.set(OPS.get() + ops);
    UPLOADS.set(UPLOADS.get() + uploads);
}

/// Runs `f` with this thread's counts set aside: returns what `f` counted (operations,
/// uploads), from zero and at nesting depth zero, and leaves the counts as they were before. For
/// work run on a pool: a worker that waits inside one task's operation may run another task, whose
/// operations would otherwise count as nested in the first one's (so not at all), or in its total.
pub fn isolated<R>(f: impl FnOnce() -> R) -> (R, (u64, u64)) {
    struct Restore(u32, u64, u64);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEPTH.set(self.0);
            OPS.set(self.1);
            UPLOADS.set(self.2);
        }
    }
    let saved = Restore(DEPTH.replace(0), OPS.replace(0), UPLOADS.replace(0));
    let out = f();
    let counted = counts();
    drop(saved);
    (out, counted)
}

/// Leaves one level of operation nesting, also when the operation panics.
struct Nested;

impl Nested {
    /// Enters an operation; true for an outermost one.
    fn enter() -> (Self, bool) {
        let depth = DEPTH.get();
        DEPTH.set(depth + 1);
        (Nested, depth == 0)
    }
}

impl Drop for Nested {
    fn drop(&mut self) {
        DEPTH.set(DEPTH.get() - 1);
    }
}

#[derive(Default)]
struct Stat {
    calls: u64,
    wall: Duration,
    cpu: f64,
}

struct State {
    phase: &'static str,
    since: Option<Instant>,
    ops: BTreeMap<(&'static str, &'static str), Stat>,
    phases: BTreeMap<&'static str, Duration>,
}

/// Time spent in one operation during one phase.
#[derive(Clone, Debug)]
pub struct OpTime {
    pub phase: &'static str,
    pub op: &'static str,
    pub calls: u64,
    /// Wall time.
    pub seconds: f64,
    /// CPU time of all threads of the process meanwhile.
    pub cpu_seconds: f64,
}

/// What was recorded since the last [`reset`].
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Per (phase, operation), slowest first.
    pub ops: Vec<OpTime>,
    /// Wall time of each phase.
    pub phases: Vec<(&'static str, f64)>,
}

/// Whether `TRAINER_OP_PROFILE` asks for the profile (any value but empty or `0`).
pub fn requested() -> bool {
    std::env::var("TRAINER_OP_PROFILE").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// User + system CPU seconds of every thread of this process so far.
pub fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one `rusage` into the pointer it is given.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } != 0 {
        return f64::NAN;
    }
    // SAFETY: initialised by the successful call above (and zeroed before).
    let u = unsafe { usage.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// Turns the recording on or off.
pub fn enable(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

fn lock() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f`, the operation `op`, and records its wall time when the profile is on.
/// Every call is counted (see [`counts`]).
pub fn timed<R>(op: &'static str, f: impl FnOnce() -> R) -> R {
    let (level, outer) = Nested::enter();
    if outer {
        count(op);
    }
    if !ENABLED.load(Ordering::Relaxed) {
        return f();
    }
    let (start, cpu) = (Instant::now(), cpu_seconds());
    let out = f();
    let (elapsed, cpu) = (start.elapsed(), cpu_seconds() - cpu);
    drop(level);
    if outer {
        let mut s = lock();
        let key = (s.phase, op);
        let e = s.ops.entry(key).or_default();
        e.calls += 1;
        e.wall += elapsed;
        e.cpu += cpu;
    }
    out
}

/// Ends the current phase and starts `name` (`""`: none).
pub fn phase(name: &'static str) {
    if !ENABLED.load(Ordering::Relaxed) {
        return;
    }
    let now = Instant::now();
    let mut s = lock();
    if let Some(since) = s.since.take() {
        let current = s.phase;
        *s.phases.entry(current).or_default() += now - since;
    }
    s.phase = name;
    s.since = (!name.is_empty()).then_some(now);
}

/// Forgets everything recorded so far.
pub fn reset() {
    let mut s = lock();
    s.ops.clear();
    s.phases.clear();
    s.since = None;
    s.phase = "";
}

/// Ends the current phase and returns what was recorded since the last [`reset`].
pub fn take() -> Report {
    phase("");
    let mut s = lock();
    let mut ops: Vec<OpTime> = std::mem::take(&mut s.ops)
        .into_iter()
        .map(|((phase, op), s)| OpTime {
            phase,
            op,
            calls: s.calls,
            seconds: s.wall.as_secs_f64(),
            cpu_seconds: s.cpu,
        })
        .collect();
    ops.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    let phases = std::mem::take(&mut s.phases)
        .into_iter()
        .map(|(p, t)| (p, t.as_secs_f64()))
        .collect();
    Report { ops, phases }
}

/// How many times a kernel ran in this process: lets the numerics tests check that they exercise
/// a wrapper backend's own kernel rather than the fallback to the backend it wraps.
#[derive(Default)]
pub struct CallCounter(AtomicU64);

impl CallCounter {
    pub const fn new() -> Self {
        Self(AtomicU64::new(0))
    }

    /// Counts one call.
    pub fn count(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// The calls counted so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}
