//! Unit tests of the kernels' index arithmetic; `tests/engine/fast_cpu.rs` compares whole operations
//! with Flex.

use burn_backend::ops::ConvOptions;

use super::conv::{col2im_for_test, im2col_for_test};
use super::geom::Geom;
use super::kernels::{Mat, matmul, sum, sums};

fn geom(
    x: [usize; 4],
    w: [usize; 4],
    stride: [usize; 2],
    pad: [usize; 2],
    dil: [usize; 2],
) -> Geom {
    Geom::new(&x, &w, &ConvOptions::new(stride, pad, dil, 1)).unwrap()
}

/// The im2col matrix by its definition, one value at a time.
fn im2col_naive(x: &[f32], g: &Geom) -> Vec<f32> {
    let mut col = vec![0.0; g.k() * g.l()];
    for c in 0..g.c {
        for i in 0..g.kh {
            for j in 0..g.kw {
                for oh in 0..g.oh {
                    for ow in 0..g.ow {
                        let ih = (oh * g.stride[0] + i * g.dil[0]) as isize - g.pad[0] as isize;
                        let iw = (ow * g.stride[1] + j * g.dil[1]) as isize - g.pad[1] as isize;
                        let inside =
                            (0..g.h as isize).contains(&ih) && (0..g.w as isize).contains(&iw);
                        let row = (c * g.kh + i) * g.kw + j;
                        col[row * g.l() + oh * g.ow + ow] = if inside {
                            x[(c * g.h + ih as usize) * g.w + iw as usize]
                        } else {
                            0.0
                        };
                    }
                }
            }
        }
    }
    col
}

fn cases() -> Vec<Geom> {
    vec![
        geom([1, 1, 28, 28], [32, 1, 3, 3], [1, 1], [0, 0], [1, 1]),
        geom([1, 3, 9, 10], [4, 3, 3, 3], [2, 2], [1, 0], [1, 1]),
        geom([1, 2, 11, 9], [3, 2, 2, 3], [2, 1], [2, 1], [2, 1]),
        geom([1, 2, 4, 4], [1, 2, 5, 5], [1, 3], [3, 2], [1, 1]),
        geom([1, 2, 5, 6], [1, 2, 1, 1], [1, 1], [0, 0], [1, 1]),
    ]
}

#[test]
fn im2col_follows_its_definition() {
    for g in cases() {
        let x: Vec<f32> = (0..g.c * g.h * g.w).map(|i| i as f32 + 1.0).collect();
        let mut col = vec![f32::NAN; g.k() * g.l()];
        im2col_for_test(&x, &g, &mut col);
        assert_eq!(col, im2col_naive(&x, &g), "{g:?}");
    }
}

#[test]
fn col2im_is_the_adjoint_of_im2col() {
    // <im2col(x), c> = <x, col2im(c)> for every x and c.
    for g in cases() {
        let x: Vec<f32> = (0..g.c * g.h * g.w)
            .map(|i| ((i * 7) % 5) as f32 - 2.0)
            .collect();
        let c: Vec<f32> = (0..g.k() * g.l())
            .map(|i| ((i * 3) % 7) as f32 - 3.0)
            .collect();
        let mut back = vec![0.0; x.len()];
        col2im_for_test(&c, &g, &mut back);
        let lhs: f32 = im2col_naive(&x, &g)
            .iter()
            .zip(&c)
            .map(|(a, b)| a * b)
            .sum();
        let rhs: f32 = x.iter().zip(&back).map(|(a, b)| a * b).sum();
        assert_eq!(lhs, rhs, "{g:?}");
    }
}

#[test]
fn geometry_rejects_what_the_fast_path_leaves_to_flex() {
    let opt = |groups| ConvOptions::new([1, 1], [0, 0], [1, 1], groups);
    assert!(Geom::new(&[1, 4, 5, 5], &[4, 2, 3, 3], &opt(2)).is_none());
    assert!(Geom::new(&[1, 3, 5, 5], &[4, 2, 3, 3], &opt(1)).is_none());
    assert!(Geom::new(&[1, 3, 2, 5], &[4, 3, 3, 3], &opt(1)).is_none());
    assert!(Geom::new(&[3, 5, 5], &[4, 3, 3, 3], &opt(1)).is_none());
}

#[test]
fn strided_matmul_and_fixed_order_sum() {
    // [[1, 2, 3], [4, 5, 6]] · [[1, 2, 3], [4, 5, 6]]ᵀ, the right operand a transposed view.
    let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let (lhs, rhs) = (Mat::rows(&a, 2, 3), Mat::rows(&a, 2, 3).t());
    let none = gemm::Parallelism::None;
    let mut d = [0.0; 4];
    matmul(&mut d, 2, lhs, rhs, false, none);
    assert_eq!(d, [14.0, 32.0, 32.0, 77.0]);
    matmul(&mut d, 2, lhs, rhs, true, none);
    assert_eq!(d, [28.0, 64.0, 64.0, 154.0]);
    // Into the first two columns of a 2×3 row-major buffer.
    let mut d = [-1.0; 5];
    matmul(&mut d, 3, lhs, rhs, false, none);
    assert_eq!(d, [14.0, 32.0, -1.0, 32.0, 77.0]);
    let v: Vec<f32> = (1..=19).map(|i| i as f32).collect();
    assert_eq!(sum(&v), 190.0);
}

/// The FMA micro-kernels called directly (`TRAINER_CPU_AVX512=0`) compute the same products as
/// `gemm`'s own choice, over odd shapes, strided and transposed operands and accumulation: bit
/// for bit where that choice is FMA too (a CPU without AVX-512F). On an AVX-512 CPU the lanes
/// run along the output's rows and columns, and each element still sums its depth-k products in
/// order, so the two agree unless `gemm` blocks the depth differently for the wider kernels:
/// then ≤ k·u relative to Σ|a·b| in the worst case (k ≤ 300: 1.8e-5), ≈ √k·u in practice.
/// Measured on an AVX-512 EPYC: identical for every case here. 1e-5 of the largest value
/// catches any wrong index, which is of order 1.
#[cfg(target_arch = "x86_64")]
#[test]
fn fma_kernels_match_gemms_own_choice() {
    use super::kernels::matmul_with;
    use gemm::Parallelism;
    if !std::arch::is_x86_feature_detected!("fma") {
        return;
    }
    let value = |i: usize| ((i * 7919 % 1000) as f32 - 500.0) / 250.0;
    for &(m, k, n) in &[
        (1, 1, 1),
        (7, 13, 5),
        (64, 288, 576),
        (33, 300, 17),
        (128, 9, 676),
    ] {
        let a: Vec<f32> = (0..m * k).map(value).collect();
        let b: Vec<f32> = (0..k * n).map(|i| value(i + 3)).collect();
        for transposed in [false, true] {
            for accumulate in [false, true] {
                // The transposed case reads `a` as the k×m matrix's transpose.
                let lhs = if transposed {
                    Mat::rows(&a, k, m).t()
                } else {
                    Mat::rows(&a, m, k)
                };
                let rhs = Mat::rows(&b, k, n);
                let run = |fma: bool| {
                    let mut d: Vec<f32> = (0..m * (n + 3)).map(|i| value(i + 11)).collect();
                    matmul_with(fma, &mut d, n + 3, lhs, rhs, accumulate, Parallelism::None);
                    d
                };
                let (own, fma) = (run(false), run(true));
                let scale = own.iter().fold(0f32, |s, v| s.max(v.abs()));
                let worst = own
                    .iter()
                    .zip(&fma)
                    .fold(0f32, |s, (x, y)| s.max((x - y).abs()));
                eprintln!(
                    "{m}x{k}x{n}: FMA vs own choice {:.1e} of the largest",
                    worst / scale
                );
                if !super::isa::cpu_has_avx512() {
                    assert_eq!(own, fma, "{m}x{k}x{n}");
                }
                assert!(
                    worst <= 1e-5 * scale,
                    "{m}x{k}x{n} transposed {transposed} accumulate {accumulate}: {worst} of {scale}"
                );
            }
        }
    }
}

/// A mask drawn in parallel chunks is the sequential draw of the same stream, value for value,
/// on any thread count, and leaves the stream where the sequential draw would: masks larger
/// and smaller than a chunk, a draw that starts inside a ChaCha block, pools of 1 and 3
/// threads.
#[test]
fn dropout_masks_drawn_in_chunks_are_one_sequential_stream() {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    let sizes = [3, 100_003, 40_000];
    let p = 0.3;
    let mut reference = ChaCha8Rng::seed_from_u64(11);
    let expected: Vec<Vec<f32>> = sizes
        .iter()
        .map(|&n| {
            let mut words = vec![0u32; n];
            reference.fill(&mut words[..]);
            let threshold = (p * 4_294_967_296.0) as u64;
            let mask = words
                .iter()
                .map(|&u| f32::from(u8::from(u64::from(u) < threshold)));
            mask.collect()
        })
        .collect();
    for threads in [1, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        // Both sources of words: this CPU's (`draw`) and `rand_chacha`'s.
        for here in [true, false] {
            let mut rng = ChaCha8Rng::seed_from_u64(11);
            for (n, want) in sizes.iter().zip(&expected) {
                let stream = super::chacha::Stream::of(&rng).filter(|_| here);
                let got = pool.install(|| super::random::draw_with(&mut rng, *n, p, stream));
                assert!(got == *want, "{threads} threads, {here}, mask of {n}");
            }
            assert_eq!(rng.get_word_pos(), reference.get_word_pos());
        }
    }
}

/// Interleaved sums are [`sum`]'s, bit for bit, on lengths with and without a remainder of 8.
#[test]
fn interleaved_sums_are_single_sums() {
    for len in [0, 5, 8, 576, 677] {
        let xs: Vec<Vec<f32>> = (0..3)
            .map(|k| {
                (0..len)
                    .map(|i| ((i * 7 + k * 13) % 17) as f32 * 0.37 - 2.9)
                    .collect()
            })
            .collect();
        let got = sums([&xs[0][..], &xs[1], &xs[2]]);
        for (k, x) in xs.iter().enumerate() {
            assert_eq!(
                got[k].to_bits(),
                sum(x).to_bits(),
                "length {len}, slice {k}"
            );
        }
    }
}

/// The max-pool backward pass takes its own `i32` indices and Flex's `i64` ones alike, on the
/// fast path and where it hands the pass to Flex (ceil mode), which reads `i64` only.
#[test]
fn max_pool_backward_reads_i32_and_i64_indices() {
    use burn_backend::DType;
    use burn_backend::ops::ModuleOps;
    use burn_flex::Flex;

    use super::FastCpu;
    use super::kernels::{f32_tensor, i32_tensor};

    let x = || {
        f32_tensor(
            (0..20).map(|i| ((i * 7) % 11) as f32).collect(),
            &[1, 1, 4, 5],
        )
    };
    for ceil_mode in [false, true] {
        let pooled = Flex::max_pool2d_with_indices(x(), [2, 2], [2, 2], [0, 0], [1, 1], ceil_mode);
        let out = super::kernels::dims(&pooled.indices);
        assert_eq!(pooled.indices.dtype(), DType::I64);
        let wide: Vec<i64> = pooled.indices.storage::<i64>().to_vec();
        let narrow = i32_tensor(wide.iter().map(|&i| i as i32).collect(), &out);
        let dy = || {
            f32_tensor(
                (0..out.iter().product()).map(|i| i as f32 + 1.0).collect(),
                &out,
            )
        };
        let backward = |indices| pool_backward::<FastCpu>(x(), dy(), indices, ceil_mode);
        let want = pool_backward::<Flex>(x(), dy(), pooled.indices.clone(), ceil_mode);
        assert_eq!(
            backward(pooled.indices.clone()),
            want,
            "i64, ceil mode {ceil_mode}"
        );
        assert_eq!(backward(narrow), want, "i32, ceil mode {ceil_mode}");
    }
}

/// The gradient of a 2 × 2, stride-2 max-pool that backend `B` gives.
fn pool_backward<B>(
    x: burn_flex::FlexTensor,
    dy: burn_flex::FlexTensor,
    indices: burn_flex::FlexTensor,
    ceil_mode: bool,
) -> Vec<f32>
where
    B: burn_backend::Backend
        + burn_backend::BackendTypes<
            FloatTensorPrimitive = burn_flex::FlexTensor,
            IntTensorPrimitive = burn_flex::FlexTensor,
        >,
{
    let (k, s, p, d) = ([2, 2], [2, 2], [0, 0], [1, 1]);
    let r = B::max_pool2d_with_indices_backward(x, k, s, p, d, ceil_mode, dy, indices);
    r.x_grad.storage::<f32>().to_vec()
}
