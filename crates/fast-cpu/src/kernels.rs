//! What the fast kernels share: tensors in and out of Flex, per-thread scratch buffers, a
//! bounds-checked strided GEMM, the split of work between images and GEMM threads, and a sum
//! whose order does not depend on the thread count.

use std::cell::RefCell;
use std::mem::MaybeUninit;

use burn_backend::{Bytes, DType, Shape, TensorMetadata};
use burn_flex::{FlexTensor, Layout};
use gemm::Parallelism;
use rayon::prelude::*;

/// Whether `t` holds `f32` values.
pub(super) fn is_f32(t: &FlexTensor) -> bool {
    t.dtype() == DType::F32
}

/// The dimensions of `t`.
pub(super) fn dims(t: &FlexTensor) -> Vec<usize> {
    t.shape().to_vec()
}

/// A contiguous `f32` tensor made from `data`.
pub(super) fn f32_tensor(data: Vec<f32>, dims: &[usize]) -> FlexTensor {
    debug_assert_eq!(data.len(), dims.iter().product::<usize>());
    let layout = Layout::contiguous(Shape::from(dims.to_vec()));
    FlexTensor::new(Bytes::from_elems(data), layout, DType::F32)
}

/// A contiguous `i32` tensor made from `data` (the backend's integer type).
pub(super) fn i32_tensor(data: Vec<i32>, dims: &[usize]) -> FlexTensor {
    debug_assert_eq!(data.len(), dims.iter().product::<usize>());
    let layout = Layout::contiguous(Shape::from(dims.to_vec()));
    FlexTensor::new(Bytes::from_elems(data), layout, DType::I32)
}

thread_local! {
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on this thread's scratch buffer of `len` values (contents unspecified), kept
/// between calls so that a training step allocates no im2col buffers.
pub(super) fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            if buf.len() < len {
                buf.resize(len, 0.0);
            }
            f(&mut buf[..len])
        }
        // Re-entered on this thread (a GEMM worker ran another task): use a fresh buffer.
        Err(_) => f(&mut vec![0.0; len]),
    })
}

/// A strided matrix view: element `(i, j)` is `data[i * rs + j * cs]`.
#[derive(Clone, Copy)]
pub(super) struct Mat<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a> Mat<'a> {
    /// `data` as a row-major `rows × cols` matrix.
    pub(super) fn rows(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Self {
            data,
            rows,
            cols,
            rs: cols,
            cs: 1,
        }
    }

    /// `data` as a `rows × cols` matrix with element `(i, j)` at `data[i * rs + j * cs]`.
    pub(super) fn strided(data: &'a [f32], rows: usize, cols: usize, rs: usize, cs: usize) -> Self {
        Self {
            data,
            rows,
            cols,
            rs,
            cs,
        }
    }

    /// The transposed view (no copy).
    pub(super) fn t(self) -> Self {
        Self {
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
            ..self
        }
    }

    fn in_bounds(&self) -> bool {
        self.rows == 0
            || self.cols == 0
            || (self.rows - 1) * self.rs + (self.cols - 1) * self.cs < self.data.len()
    }
}

/// A rank-2 or rank-3 `f32` tensor read in place, as a batch of strided matrices: element
/// `(b, i, j)` is `data[b·bs + i·rs + j·cs]` (a rank-2 tensor is a batch of one, `bs = 0`).
#[derive(Clone, Copy)]
pub(super) struct Batch<'a> {
    pub(super) data: &'a [f32],
    /// The tensor's rank: 2 or 3.
    pub(super) rank: usize,
    pub(super) batch: usize,
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) bs: usize,
    pub(super) rs: usize,
    pub(super) cs: usize,
}

impl<'a> Batch<'a> {
    /// `t` as a batch of strided matrices when it is a rank-2 or rank-3 `f32` tensor with
    /// non-negative strides.
    pub(super) fn of(t: &'a FlexTensor) -> Option<Self> {
        let layout = t.layout();
        let (rank, batch, rows, cols, bs, rs, cs) =
            match (layout.shape().as_slice(), layout.strides()) {
                (&[batch, rows, cols], &[bs, rs, cs]) => (3, batch, rows, cols, bs, rs, cs),
                (&[rows, cols], &[rs, cs]) => (2, 1, rows, cols, 0, rs, cs),
                _ => return None,
            };
        if t.dtype() != DType::F32 || bs < 0 || rs < 0 || cs < 0 {
            return None;
        }
        let data: &[f32] = t.storage();
        Some(Self {
            data: &data[layout.start_offset()..],
            rank,
            batch,
            rows,
            cols,
            bs: bs as usize,
            rs: rs as usize,
            cs: cs as usize,
        })
    }

    /// Element `(b, i, j)`.
    pub(super) fn at(&self, b: usize, i: usize, j: usize) -> f32 {
        self.data[b * self.bs + i * self.rs + j * self.cs]
    }

    /// Rows `first..first + rows` of item `b` as a matrix.
    pub(super) fn rows_of(&self, b: usize, first: usize, rows: usize) -> Mat<'a> {
        Mat::strided(
            &self.data[b * self.bs + first * self.rs..],
            rows,
            self.cols,
            self.rs,
            self.cs,
        )
    }
}

/// `dst = lhs × rhs`, or `dst += lhs × rhs` when `accumulate`; row `i` of `dst` starts at
/// `dst[i * dst_rs]`. The micro-kernels are `gemm`'s choice unless [`isa`](super::isa) says
/// otherwise.
pub(super) fn matmul(
    dst: &mut [f32],
    dst_rs: usize,
    lhs: Mat,
    rhs: Mat,
    accumulate: bool,
    par: Parallelism,
) {
    matmul_with(
        super::isa::fma_forced(),
        dst,
        dst_rs,
        lhs,
        rhs,
        accumulate,
        par,
    )
}

/// [`matmul`] with `gemm`'s FMA micro-kernels when `fma` (x86-64 with AVX2 and FMA only),
/// else with `gemm`'s own choice.
pub(super) fn matmul_with(
    fma: bool,
    dst: &mut [f32],
    dst_rs: usize,
    lhs: Mat,
    rhs: Mat,
    accumulate: bool,
    par: Parallelism,
) {
    #[cfg(not(target_arch = "x86_64"))]
    let _ = fma;
    let (m, k, n) = (lhs.rows, lhs.cols, rhs.cols);
    assert_eq!(k, rhs.rows, "matmul: inner dimensions differ");
    assert!(lhs.in_bounds() && rhs.in_bounds() && dst_rs >= n);
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        dst.len() >= (m - 1) * dst_rs + n,
        "matmul: destination too small"
    );
    if k == 0 {
        if !accumulate {
            dst.chunks_mut(dst_rs)
                .take(m)
                .for_each(|r| r[..n].fill(0.0));
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if fma {
        // SAFETY: as below.
        unsafe {
            super::isa::gemm_fma(
                m,
                n,
                k,
                dst.as_mut_ptr(),
                (1, dst_rs as isize),
                accumulate,
                lhs.data.as_ptr(),
                (lhs.cs as isize, lhs.rs as isize),
                rhs.data.as_ptr(),
                (rhs.cs as isize, rhs.rs as isize),
                par,
            )
        }
        return;
    }
    // SAFETY: the assertions above keep every element gemm reads (`(i, j)` of `lhs` and `rhs`
    // for i, j below their dimensions) and writes (`dst[i * dst_rs + j]`, i < m, j < n) inside
    // the borrowed slices; `dst` does not alias them (it is borrowed mutably).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            dst_rs as isize,
            accumulate,
            lhs.data.as_ptr(),
            lhs.cs as isize,
            lhs.rs as isize,
            rhs.data.as_ptr(),
            rhs.cs as isize,
            rhs.rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            par,
        )
    }
}

/// A vector of `n` values whose chunks of `chunk` values `write(start, chunk)` fills in
/// parallel (the chunk holds values `start..start + chunk.len()`), without zeroing the memory
/// first: a training step's activations are several MiB, and zeroing them took as long as the
/// operation's own writes.
///
/// # Safety
/// `write` must initialise every value of the chunk it is given.
pub(super) unsafe fn written_in(
    n: usize,
    chunk: usize,
    write: impl Fn(usize, &mut [MaybeUninit<f32>]) + Sync,
) -> Vec<f32> {
    let chunk = chunk.max(1);
    let mut out: Vec<f32> = Vec::with_capacity(n);
    out.spare_capacity_mut()[..n]
        .par_chunks_mut(chunk)
        .enumerate()
        .for_each(|(i, values)| write(i * chunk, values));
    // SAFETY: the chunks cover `0..n` and the caller's `write` initialised each of them.
    unsafe { out.set_len(n) };
    out
}

/// `n` zeros, written in parallel chunks of at least `chunk` values when there are several: a
/// large `vec![0.0; n]` is zeroed by one thread.
pub(super) fn zeroed(n: usize, chunk: usize) -> Vec<f32> {
    let chunk = chunk.max(1 << 14);
    if n <= chunk {
        return vec![0.0; n];
    }
    // SAFETY: `filled` initialises every chunk.
    unsafe {
        written_in(n, chunk, |_, values| {
            filled(values, 0.0);
        })
    }
}

/// `values`, every one set to `v`, as initialised values.
pub(super) fn filled<T: Copy>(values: &mut [MaybeUninit<T>], v: T) -> &mut [T] {
    values.fill(MaybeUninit::new(v));
    // SAFETY: every value was just written.
    unsafe { assume_init(values) }
}

/// `values` as initialised values.
///
/// # Safety
/// Every value of `values` must have been written.
pub(super) unsafe fn assume_init<T>(values: &mut [MaybeUninit<T>]) -> &mut [T] {
    // SAFETY: the caller wrote every value; `MaybeUninit<T>` has `T`'s layout.
    unsafe { &mut *(values as *mut [MaybeUninit<T>] as *mut [T]) }
}

/// A pointer that tasks writing disjoint parts of one buffer share.
#[derive(Clone, Copy)]
pub(super) struct Shared(pub(super) *mut f32);
// SAFETY: the tasks that share it write disjoint values (each user says which: the direct
// tiles' positions, the Winograd tasks' rows).
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// The pointer `offset` values on (a method, so that closures capture `Shared`, not the
    /// raw pointer inside).
    pub(super) fn at(self, offset: usize) -> *mut f32 {
        self.0.wrapping_add(offset)
    }
}

/// Threads of the rayon pool the kernels run on.
pub(super) fn threads() -> usize {
    rayon::current_num_threads()
}

/// GEMM parallelism for one of `tasks` tasks that run at once: none when the tasks already
/// keep every thread busy, else the threads left to each task.
pub(super) fn inner_par(tasks: usize) -> Parallelism {
    let t = threads();
    if t <= 1 || tasks >= t {
        Parallelism::None
    } else {
        Parallelism::Rayon((t / tasks.max(1)).max(1))
    }
}

/// The sum of `x` in a fixed order (eight interleaved partial sums, which vectorise).
pub(super) fn sum(x: &[f32]) -> f32 {
    let [total] = sums([x]);
    total
}

/// [`sum`] of each of `K` slices of one length: for each, eight partial sums over its chunks
/// of eight values in order, then those eight added and the remainder's sum after them. The
/// `K` chains of additions run interleaved: one chain waits on each addition's latency, `K`
/// of them keep the adders busy.
pub(super) fn sums<const K: usize>(xs: [&[f32]; K]) -> [f32; K] {
    let len = xs.first().map_or(0, |x| x.len());
    assert!(
        xs.iter().all(|x| x.len() == len),
        "sums: slices of different lengths"
    );
    let full = len / 8 * 8;
    let mut acc = [[0f32; 8]; K];
    for at in (0..full).step_by(8) {
        for (a, x) in acc.iter_mut().zip(&xs) {
            for (a, v) in a.iter_mut().zip(&x[at..at + 8]) {
                *a += v;
            }
        }
    }
    std::array::from_fn(|k| {
        let rest: f32 = xs[k][full..].iter().sum();
        acc[k].iter().sum::<f32>() + rest
    })
}

/// `total += part`, element-wise.
pub(super) fn add_into(total: &mut [f32], part: &[f32]) {
    for (t, p) in total.iter_mut().zip(part) {
        *t += p;
    }
}

/// Single-precision GEMM rate of one core in GFLOP/s (512³ products on this thread, the best of
/// twenty by this thread's CPU time, so that other processes' load hardly matters): the
/// benchmarks' hardware floor. NaN if the thread's CPU time cannot be read.
pub fn sgemm_gflops_one_core() -> f64 {
    const N: usize = 512;
    let a: Vec<f32> = (0..N * N).map(|i| (i % 13) as f32 * 0.25).collect();
    let mut d = vec![0.0; N * N];
    let best = (0..20)
        .map(|_| {
            let t = thread_cpu_seconds();
            let (a, b) = (Mat::rows(&a, N, N), Mat::rows(&a, N, N));
            matmul(&mut d, N, a, b, false, Parallelism::None);
            thread_cpu_seconds() - t
        })
        .fold(f64::NAN, f64::min);
    2.0 * (N * N * N) as f64 / best / 1e9
}

/// The micro-kernels the fast kernels' GEMMs run on this CPU (see [`isa`](super::isa)): on
/// x86-64 `avx512f` (16 f32 lanes; `gemm`'s run-time choice where the CPU has AVX-512F) unless
/// `TRAINER_CPU_AVX512=0`, else `fma` (AVX2 + FMA, 8 lanes) where the CPU has FMA, else scalar;
/// NEON on aarch64.
pub fn gemm_kernels() -> String {
    use super::isa::{AVX512_VAR, avx512_in_use, cpu_has_avx512};
    #[cfg(target_arch = "x86_64")]
    {
        if avx512_in_use() {
            "avx512f (AVX-512, 16 f32 lanes)".to_string()
        } else if cpu_has_avx512() {
            format!("fma (AVX2 + FMA, 8 f32 lanes): AVX-512 turned off by {AVX512_VAR}=0")
        } else if std::arch::is_x86_feature_detected!("fma") {
            "fma (AVX2 + FMA, 8 f32 lanes); no avx512f on this CPU".to_string()
        } else {
            "scalar; neither avx512f nor fma on this CPU".to_string()
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let _ = (AVX512_VAR, avx512_in_use, cpu_has_avx512);
        "neon".to_string()
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = (AVX512_VAR, avx512_in_use, cpu_has_avx512);
        "scalar or the target's SIMD".to_string()
    }
}

/// CPU seconds of the calling thread so far (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one `timespec` into the pointer it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return f64::NAN;
    }
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}
