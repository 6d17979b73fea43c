//! What the fuzz properties share: a counting global allocator (the largest single allocation
//! while a case runs), one lock so the properties of a binary run one at a time (the allocator's
//! figures are global), the case budget, and the seeded corpus in `tests/corpus/<parser>/`.
//!
//! The case budget: `TRAINER_FUZZ_CASES` (default 500) generated inputs per property, plus
//! every corpus file. cargo-fuzz needs a nightly toolchain; these proptest properties are the
//! stable-toolchain equivalent, with shrinking to a minimal failing input.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Records the largest single allocation (or reallocation) while [`measure`] runs.
pub struct Tracking;

static ON: AtomicBool = AtomicBool::new(false);
static LARGEST: AtomicUsize = AtomicUsize::new(0);
static LOCK: Mutex<()> = Mutex::new(());

// SAFETY: every call is forwarded unchanged to the system allocator; only a counter is updated.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn note(size: usize) {
    if ON.load(Ordering::Relaxed) {
        LARGEST.fetch_max(size, Ordering::Relaxed);
    }
}

/// Runs `f` and returns its result with the largest single allocation it made.
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, usize) {
    LARGEST.store(0, Ordering::Relaxed);
    ON.store(true, Ordering::Relaxed);
    let r = f();
    ON.store(false, Ordering::Relaxed);
    (r, LARGEST.load(Ordering::Relaxed))
}

/// Serialises the properties of one test binary (the allocation figures are process-wide).
pub fn serial() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Generated cases per property: `TRAINER_FUZZ_CASES`, default 500.
pub fn cases() -> u32 {
    std::env::var("TRAINER_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

/// The proptest configuration of every property: the case budget, no regression files (found
/// cases go into the corpus instead).
pub fn config() -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases: cases(),
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}

/// The files of `tests/corpus/<parser>/` (the README excepted), sorted.
pub fn corpus(parser: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(parser);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != "README.md"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).expect("corpus file");
            (p, bytes)
        })
        .collect()
}

/// Most bytes one allocation may take for an input of `len` bytes: 1 MiB plus 64 bytes per
/// input byte (a parsed CSV cell becomes an f32 or f64; vectors grow by doubling).
pub fn alloc_bound(len: usize) -> usize {
    (1 << 20) + 64 * len
}

/// Prints how many cases a property ran, for the CI log and the closing note.
pub fn report(name: &str, corpus: usize, generated: u32, t0: std::time::Instant) {
    println!(
        "fuzz {name}: {corpus} corpus inputs + {generated} generated cases, no panic, {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
