//! The allocator set-up of `trainer::backend::host_memory`: a training step's buffers, freed
//! and allocated again, must come back without page faults (glibc's default trims them away and
//! faults them in anew each time). Its own test binary without libtest's harness: the settings
//! are per process, and what they change is the main thread's heap, where a training loop runs.

use std::hint::black_box;

use trainer::backend::host_memory::{Tuning, tune};

/// Buffers of one "step": 8 of 8 MiB, more than glibc's default trim threshold keeps.
const BUFFERS: usize = 8;
const BYTES: usize = 8 << 20;

/// Minor page faults of this thread so far.
fn minor_faults() -> i64 {
    // SAFETY: `getrusage` fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) },
        0
    );
    usage.ru_minflt
}

/// Page faults of `steps` steps after two warm-up steps, each step writing every byte of its
/// buffers and freeing them all.
fn faults_per_step(steps: i64) -> i64 {
    let step = || {
        let buffers: Vec<Vec<u8>> = (0..BUFFERS).map(|i| vec![i as u8 + 1; BYTES]).collect();
        black_box(&buffers);
    };
    step();
    step();
    let before = minor_faults();
    for _ in 0..steps {
        step();
    }
    (minor_faults() - before) / steps
}

fn main() {
    let pages_per_step = (BUFFERS * BYTES / 4096) as i64;
    let default = faults_per_step(5);
    eprintln!("glibc's default: {default} page faults per step of {pages_per_step} pages");
    if tune() != Tuning::Set {
        eprintln!("not glibc, or the environment sets malloc: nothing to check");
        return;
    }
    let tuned = faults_per_step(5);
    eprintln!("tuned: {tuned} page faults per step");
    assert!(
        tuned * 20 < pages_per_step,
        "{tuned} page faults per step of {pages_per_step} pages after tuning (default: {default})"
    );
    assert!(
        default > pages_per_step / 2,
        "glibc's default faulted only {default} times per step of {pages_per_step} pages: \
         this test no longer shows what the tuning is for"
    );
}
