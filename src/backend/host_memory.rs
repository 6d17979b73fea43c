//! Host memory for tensor buffers: glibc's `malloc` set up for a training loop.
//!
//! By default glibc hands every allocation above 128 KiB (a threshold it raises on the fly, up
//! to 32 MiB) to its own `mmap`, returns it to the kernel on `free`, and trims the free top of
//! its heap beyond twice that threshold. A training step allocates and frees the same few-MiB
//! activations and gradients every time, so by default it gets fresh pages from the kernel each
//! step and pays a page fault (and the kernel's zeroing) per 4 KiB page: on the MNIST CNN
//! (`flex`, 2 cores) the max-pool gradient, a scatter into a 9 MiB buffer, took 12.5 ms of which
//! 11 were page faults, and a whole step 87 ms instead of 59.
//!
//! [`tune`] sets glibc's top pad: the heap grows by 256 MiB more than it needs at a time and,
//! when it trims its free top, keeps that much mapped, so the next step's buffers come back
//! without faults. Pages are mapped when first written and freed ones are reused, so peak memory
//! grows by at most what the heap keeps beyond the live buffers. One epoch of Fashion-MNIST,
//! peak RSS and speed by default → tuned: `flex` 320 → 315 MB, 734 → 1142 img/s; `tch` 888 → 974
//! MB (+9.7 %), 834 → 989 img/s; same losses and accuracy. A 192 MiB pad kept `tch` at 899 MB but
//! also at 710 img/s (its working set is larger), 64 MiB was too little for `flex`, 512 MiB grew
//! `tch` by 11–22 %: 256 MiB is the pad within 10 % of the default's peak on both.
//!
//! Setting any of glibc's thresholds freezes the `mmap` threshold (glibc stops raising it), so
//! [`tune`] also sets that one, to its largest value, 32 MiB: below it, buffers come from the
//! heaps. Without it every buffer above 128 KiB was a fresh `mmap`, faulted in page by page: the
//! CLG-ODE step, whose subjects run on rayon's threads (their own malloc arenas), took 1.25 M
//! page faults per 24-subject epoch instead of 0.16 M and 8.7 s instead of 7.5 s (2 cores,
//! batch 4); the MNIST CNN and its peak RSS did not move (1862 vs 1848 img/s, 137 MB both).
//! LibTorch allocates through the same `malloc`, hence the gain (and the growth) on `tch`. A
//! user's own
//! choice (`GLIBC_TUNABLES` naming a `glibc.malloc.` tunable, or one of glibc's `MALLOC_…`
//! variables) is left alone; other C libraries are left alone.

/// Memory the heap takes beyond each request, and keeps when it trims.
pub(crate) const TOP_PAD: usize = 256 << 20;

/// Requests at least this large get their own `mmap` (glibc's maximum, `HEAP_MAX_SIZE / 2` on
/// 64-bit).
pub(crate) const MMAP_THRESHOLD: usize = 32 << 20;

/// What [`tune`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tuning {
    /// The top pad and the `mmap` threshold above are set.
    Set,
    /// The user's environment already sets glibc's malloc; nothing changed.
    UserChoice,
    /// Not glibc, or glibc refused the setting; the allocator is as it was.
    Unavailable,
}

/// Whether the environment already configures glibc's malloc.
pub(crate) fn user_configured(vars: impl IntoIterator<Item = (String, String)>) -> bool {
    vars.into_iter().any(|(k, v)| {
        (k == "GLIBC_TUNABLES" && v.contains("glibc.malloc.")) || k.starts_with("MALLOC_")
    })
}

/// Sets glibc's top pad for a training process, once, before the first tensor; see the
/// module's documentation.
pub fn tune() -> Tuning {
    // `vars_os`: a variable that is not UTF-8 must not stop the program.
    let vars = std::env::vars_os().map(|(k, v)| {
        let text = |s: std::ffi::OsString| s.to_string_lossy().into_owned();
        (text(k), text(v))
    });
    if user_configured(vars) {
        return Tuning::UserChoice;
    }
    set_thresholds()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_thresholds() -> Tuning {
    let pad = libc::c_int::try_from(TOP_PAD).expect("the pad fits a C int");
    let threshold = libc::c_int::try_from(MMAP_THRESHOLD).expect("the threshold fits a C int");
    // SAFETY: `mallopt` only changes the allocator's parameters; it takes glibc's own lock and
    // may be called at any time, from any thread.
    let ok = unsafe {
        libc::mallopt(libc::M_TOP_PAD, pad) == 1
            && libc::mallopt(libc::M_MMAP_THRESHOLD, threshold) == 1
    };
    if ok { Tuning::Set } else { Tuning::Unavailable }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_thresholds() -> Tuning {
    Tuning::Unavailable
}

#[cfg(test)]
mod tests {
    use super::user_configured;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_users_malloc_setting_stands() {
        assert!(user_configured(vars(&[(
            "GLIBC_TUNABLES",
            "glibc.malloc.trim_threshold=0"
        )])));
        assert!(user_configured(vars(&[("MALLOC_ARENA_MAX", "2")])));
        assert!(user_configured(vars(&[("MALLOC_TOP_PAD_", "0")])));
        assert!(!user_configured(vars(&[
            ("GLIBC_TUNABLES", "glibc.pthread.rseq=0"),
            ("PATH", "/usr/bin")
        ])));
    }
}
