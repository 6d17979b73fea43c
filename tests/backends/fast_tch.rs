//! The `tch` backend (`FastTch`: LibTorch with our convolution gradients) against burn-tch's
//! `LibTorch` unchanged (`--backend tch-plain`): outputs and gradients of a convolution agree to
//! a relative error of 1e-4 on the MNIST CNN's layer shapes and on odd ones (batch 1, padding,
//! stride 2, dilation, 1×1, no bias), the CPU kernel really ran (and the GPU's way, LibTorch's
//! `convolution_backward` through our shim, gives the same gradients), relu's gradient is the same, and
//! dropout's Bernoulli masks (drawn differently) have the asked frequency.
#![cfg(feature = "tch")]

use burn::backend::Autodiff;
use burn::backend::libtorch::LibTorch;
use burn::tensor::backend::AutodiffBackend;
use trainer::backend::fast_tch::{
    FastTch, cpu_kernel_calls, device_weight_calls, device_weight_gradient_on_cpu,
};

use crate::common;

use common::numerics::{Conv, host, random, tensor};

type Fast = Autodiff<FastTch>;
type Plain = Autodiff<LibTorch>;

/// Every test shape through `FastTch` and through burn-tch from seed `seed`: the same outputs and
/// gradients (1e-4), and `calls` (a weight-gradient path's counter) counted each shape once.
fn fast_matches_plain(seed: u64, calls: fn() -> u64, path: &str) {
    for (name, conv) in Conv::cnn_layers().into_iter().chain(Conv::odd_shapes()) {
        let before = calls();
        let fast = conv.run::<Fast>(seed);
        assert_eq!(calls(), before + 1, "{name}: {path} did not run");
        Conv::assert_same(name, &fast, &conv.run::<Plain>(seed));
    }
}

// One test: the kernel's call counter is process-wide.
#[test]
fn conv_gradients_match_burn_tch() {
    fast_matches_plain(11, cpu_kernel_calls, "the CPU weight gradient");
}

/// The weight gradient a GPU computes (LibTorch's own kernel, `at::convolution_backward` with
/// only the weight's gradient asked, through our C++ shim: tch binds no `convolution_backward`),
/// run here on the CPU: the same outputs and gradients as burn-tch's, within the same 1e-4, on
/// the same shapes; the shim's path really ran.
#[test]
fn device_weight_gradient_matches_burn_tch() {
    device_weight_gradient_on_cpu(true);
    fast_matches_plain(13, device_weight_calls, "LibTorch's weight gradient");
    device_weight_gradient_on_cpu(false);
}

/// The gradient of `sum(relu(x) · r)`, with some inputs exactly 0 (where both give 0).
fn relu_grad<B: AutodiffBackend>() -> Vec<f32> {
    let mut data = random(4 * 300, 5);
    data.iter_mut().step_by(7).for_each(|v| *v = 0.0);
    let x = tensor::<B, 2>(&data, [4, 300]).require_grad();
    let r = tensor::<B, 2>(&random(4 * 300, 6), [4, 300]);
    let grads = (burn::tensor::activation::relu(x.clone()) * r)
        .sum()
        .backward();
    host(x.grad(&grads).unwrap())
}

/// Exact: relu's gradient is `r` where x > 0 and 0 elsewhere on both sides (a select, no
/// arithmetic), so no summation order is involved.
#[test]
fn relu_gradient_matches_burn_tch() {
    assert_eq!(relu_grad::<Fast>(), relu_grad::<Plain>());
}

/// Bernoulli(p) masks (dropout's): only 0 and 1, ones with frequency p (within 5 standard
/// deviations over 2^18 draws), and not all rows alike; other distributions stay LibTorch's.
#[test]
fn bernoulli_masks_have_the_asked_frequency() {
    use burn::tensor::{Distribution, Tensor};
    let n = 1 << 18;
    for p in [0.1, 0.5, 0.75] {
        let mask = host(Tensor::<FastTch, 2>::random(
            [n / 512, 512],
            Distribution::Bernoulli(p),
            &Default::default(),
        ));
        assert!(
            mask.iter().all(|&v| v == 0.0 || v == 1.0),
            "p = {p}: not 0/1"
        );
        // The f32 sum of 2^18 ones is exact (integers below 2^24). 5 standard deviations: a
        // correct generator fails one p with probability ≈ 6e-7 (two-sided normal tail), and
        // the draws are seeded, so a run either always passes or always fails.
        let freq = mask.iter().sum::<f32>() as f64 / n as f64;
        let sd = (p * (1.0 - p) / n as f64).sqrt();
        assert!((freq - p).abs() < 5.0 * sd, "p = {p}: frequency {freq}");
        assert_ne!(mask[..512], mask[512..1024], "p = {p}: two rows alike");
    }
    let uniform = host(Tensor::<FastTch, 1>::random(
        [4096],
        Distribution::Uniform(2.0, 3.0),
        &Default::default(),
    ));
    assert!(uniform.iter().all(|v| (2.0..3.0).contains(v)));
}

/// `src/backend/fast_tch/delegated.rs` (the op traits `FastTch` forwards to burn-tch) is exactly
/// what `scripts/gen-tch-delegation.py` writes from the burn-tch source this build compiled,
/// formatted by rustfmt: the generated code cannot drift from its generator or from Burn.
#[test]
fn the_delegation_file_is_the_generators_output() {
    use std::process::{Command, Stdio};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cargo"));
    let registry = cargo_home.join("registry/src");
    let source = std::fs::read_dir(&registry)
        .unwrap_or_else(|e| panic!("{}: {e}", registry.display()))
        .filter_map(|d| d.ok())
        .map(|d| d.path().join("burn-tch-0.21.0"))
        .find(|p| p.join("src/ops/tensor.rs").is_file())
        .unwrap_or_else(|| panic!("burn-tch 0.21.0's source not under {}", registry.display()));
    let generated = Command::new("python3")
        .arg(root.join("scripts/gen-tch-delegation.py"))
        .arg(&source)
        .output()
        .unwrap();
    assert!(
        generated.status.success(),
        "{}",
        String::from_utf8_lossy(&generated.stderr)
    );
    let mut fmt = Command::new("rustfmt")
        .args(["--edition", "2024", "--emit", "stdout"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("rustfmt (the toolchain's) on the PATH");
    use std::io::Write as _;
    fmt.stdin
        .take()
        .unwrap()
        .write_all(&generated.stdout)
        .unwrap();
    let formatted = fmt.wait_with_output().unwrap();
    assert!(formatted.status.success());
    let committed =
        std::fs::read_to_string(root.join("src/backend/fast_tch/delegated.rs")).unwrap();
    assert!(
        String::from_utf8(formatted.stdout).unwrap() == committed,
        "src/backend/fast_tch/delegated.rs differs from scripts/gen-tch-delegation.py's output: \
         regenerate it (the script's header says how)"
    );
}
