//! PyTorch's own examples/mnist CNN as a contender of `trainer bench mnist --pytorch PYTHON`:
//! `benches/pytorch_mnist.py`, embedded in the binary, run by that interpreter on the same data,
//! batch, steps and threads.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::backend::fast_cpu;

use super::BenchSettings as BenchArgs;
use super::report::{Measure, Rate};

const SCRIPT: &str = include_str!("../../benches/pytorch_mnist.py");

/// One PyTorch round on `device` (`cpu` or `cuda:N`), its training batches from data on the
/// device or (`host_fed`) normalised and copied there per step: the figures and the
/// `pytorch <version>` label.
pub fn run(
    python: &Path,
    args: &BenchArgs,
    batch_size: usize,
    threads: usize,
    device: &str,
    host_fed: bool,
) -> Result<(Measure, String)> {
    let mut cmd = Command::new(python);
    cmd.arg("-");
    match &args.data_dir {
        Some(d) => cmd.arg(d),
        None => cmd.arg("--synthetic"),
    };
    cmd.args(["--steps", &args.steps.to_string()])
        .args(["--warmup", &args.warmup.to_string()])
        .args(["--batch-size", &batch_size.to_string()])
        .args(["--threads", &threads.to_string(), "--json"])
        .args(["--device", device])
        .args(["--feed", if host_fed { "host" } else { "device" }])
        // TRAINER_CPU_AVX512=0 stands for a CPU without AVX-512: PyTorch too.
        .envs(fast_cpu::isa::pytorch_env().iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .with_context(|| format!("--pytorch {}: cannot start it", python.display()))?;
    child
        .stdin
        .take()
        .context("no stdin")?
        .write_all(SCRIPT.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "--pytorch {}: the PyTorch benchmark failed ({}): {}",
            python.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = text
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .with_context(|| format!("--pytorch {}: no JSON result in {text:?}", python.display()))?;
    let num = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let measure = Measure {
        train: Rate {
            img_per_s: num("train_img_per_s"),
            threads: num("train_threads_used"),
            counts: None,
        },
        infer: Rate {
            img_per_s: num("infer_img_per_s"),
            threads: num("infer_threads_used"),
            counts: None,
        },
    };
    // The SIMD level ATen's kernels run at (`AVX512`, `AVX2`, ...): it names what was measured.
    let label = match (device, v["cpu_capability"].as_str()) {
        ("cpu", Some(isa)) => format!("pytorch {} {isa}", v["torch"].as_str().unwrap_or("?")),
        _ => format!("pytorch {}", v["torch"].as_str().unwrap_or("?")),
    };
    let label = match host_fed {
        true => format!("{label} host-fed"),
        false => label,
    };
    Ok((measure, label))
}
