//! The figures of `trainer bench mnist`: per contender the median and the spread over rounds,
//! the cores each one really kept busy, and the ratios to PyTorch and to the hardware floor.

use serde::Serialize;

use crate::host_reads::PerStep;

/// One timed phase of one round.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rate {
    pub img_per_s: f64,
    /// Process CPU time over wall time: how many cores the phase kept busy.
    pub threads: f64,
    /// Operations, uploads and reads per step (`None`: not counted, e.g. PyTorch's rows).
    pub counts: Option<PerStep>,
}

/// What one contender measured in one round.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Measure {
    pub train: Rate,
    pub infer: Rate,
    /// The share of the convolution passes (forward and both gradients) that ran by implicit
    /// GEMM, the rest direct (`cuda` and `wgpu`: `backend::fast_cube`); `None` elsewhere.
    pub conv_implicit_gemm: Option<f64>,
}

/// The CNN's floating-point operations per image, in MFLOP: (inference, training step).
///
/// Multiply-adds count 2. Forward: conv1 2·(1·9)·32·26² = 0.389, conv2 2·(32·9)·64·24² =
/// 21.234, fc1 2·9216·128 = 2.359, fc2 2·128·10 = 0.003, in all 23.985. Backward: the weight
/// gradient of every layer (same cost as its forward) and the input gradient of every layer but
/// conv1 (whose input needs none): 47.580. A training step is 71.565.
pub(crate) fn cnn_mflop() -> (f64, f64) {
    let conv1 = 2.0 * 9.0 * 32.0 * 26.0 * 26.0;
    let conv2 = 2.0 * 32.0 * 9.0 * 64.0 * 24.0 * 24.0;
    let (fc1, fc2) = (2.0 * 9216.0 * 128.0, 2.0 * 128.0 * 10.0);
    let forward = conv1 + conv2 + fc1 + fc2;
    let backward = conv1 + 2.0 * (conv2 + fc1 + fc2);
    (forward / 1e6, (forward + backward) / 1e6)
}

/// What the cores could do at best: every FLOP at one core's single-precision GEMM rate.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Floor {
    pub cores: usize,
    /// The best of the measurements: a peak, which a busy neighbour or a core still ramping
    /// its clock up only hides (on a shared virtual machine one measurement gave 98.6 GFLOP/s
    /// between two of 165–168).
    pub sgemm_gflops_per_core: f64,
    /// Every measurement (one before the rounds and one before each round).
    pub sgemm_measured: Spread,
    pub sgemm_measurements: usize,
    /// The GEMM micro-kernels the floor (and Flex's matmuls) ran on this CPU.
    pub gemm_kernels: String,
    pub infer_mflop_per_img: f64,
    pub train_mflop_per_img: f64,
    pub infer_img_per_s: f64,
    pub train_img_per_s: f64,
}

impl Floor {
    /// The floor of `cores` cores from measurements of one core's sgemm GFLOP/s.
    pub(crate) fn new(cores: usize, sgemm_gflops: &[f64], gemm_kernels: String) -> Self {
        let (infer, train) = cnn_mflop();
        let sgemm_measured = Spread::of(sgemm_gflops.iter().copied());
        let sgemm_gflops_per_core = sgemm_measured.max;
        let rate = |mflop: f64| cores as f64 * sgemm_gflops_per_core * 1e3 / mflop;
        Self {
            cores,
            sgemm_gflops_per_core,
            sgemm_measured,
            sgemm_measurements: sgemm_gflops.len(),
            gemm_kernels,
            infer_mflop_per_img: infer,
            train_mflop_per_img: train,
            infer_img_per_s: rate(infer),
            train_img_per_s: rate(train),
        }
    }
}

/// Median, minimum and maximum of the finite values.
#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub(crate) fn of(values: impl IntoIterator<Item = f64>) -> Self {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let (min, max) = (
            v.first().copied().unwrap_or(f64::NAN),
            v.last().copied().unwrap_or(f64::NAN),
        );
        let m = v.len() / 2;
        let median = match v.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => v[m],
            _ => (v[m - 1] + v[m]) / 2.0,
        };
        Self { median, min, max }
    }
}

/// One phase (training or inference) of one contender's row.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct PhaseFigures {
    pub img_per_s: Spread,
    /// Median cores kept busy.
    pub threads_used: f64,
    /// Median img/s over PyTorch's median.
    pub vs_pytorch: Option<f64>,
    /// Median img/s over the floor.
    pub floor_fraction: f64,
    /// `ops_per_step`, `uploads_per_step`, `host_reads_per_step` of the first round (the counts
    /// do not depend on timing); absent where not counted.
    #[serde(flatten)]
    pub counts: Option<PerStep>,
}

impl PhaseFigures {
    pub(crate) fn new(rates: &[Rate], pytorch: Option<f64>, floor: f64) -> Self {
        let img_per_s = Spread::of(rates.iter().map(|r| r.img_per_s));
        Self {
            threads_used: Spread::of(rates.iter().map(|r| r.threads)).median,
            vs_pytorch: pytorch.map(|p| img_per_s.median / p),
            floor_fraction: img_per_s.median / floor,
            img_per_s,
            counts: rates.first().and_then(|r| r.counts),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub(crate) struct BenchRow {
    pub backend: String,
    pub device: String,
    pub batch_size: usize,
    pub steps: usize,
    /// Rounds the figures are taken over.
    pub rounds: usize,
    /// Medians, as before the spread was reported (kept for scripts reading them).
    pub train_img_per_s: f64,
    pub infer_img_per_s: f64,
    pub train: PhaseFigures,
    pub infer: PhaseFigures,
    /// [`Measure::conv_implicit_gemm`] of the last round (`cuda`, `wgpu`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conv_implicit_gemm: Option<f64>,
    pub error: Option<String>,
}

fn ratio(r: Option<f64>) -> String {
    r.filter(|r| r.is_finite())
        .map_or_else(|| "-".into(), |r| format!("{r:.2}x"))
}

/// "ops/uploads/reads" per step, `-` for what was not counted.
fn count_cell(c: Option<PerStep>) -> String {
    let n = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    match c {
        None => "-".into(),
        Some(c) => format!(
            "{}/{}/{}",
            n(c.ops_per_step),
            n(c.uploads_per_step),
            n(Some(c.host_reads_per_step))
        ),
    }
}

fn phase_cells(p: &PhaseFigures) -> String {
    let s = &p.img_per_s;
    format!(
        "{:>8.1} {:>15} {:>5.2} {:>7} {:>5.1}% {:>11}",
        s.median,
        format!("{:.0}-{:.0}", s.min, s.max),
        p.threads_used,
        ratio(p.vs_pytorch),
        100.0 * p.floor_fraction,
        count_cell(p.counts)
    )
}

/// The table on stdout (its first line starts with `backend`).
pub(crate) fn print_table(rows: &[BenchRow], floor: &Floor) {
    let head = format!(
        "{:>8} {:>15} {:>5} {:>7} {:>6} {:>11}",
        "img/s", "min-max", "cores", "xtorch", "floor", "ops/up/rd"
    );
    println!(
        "{:<26} {:<7} | train: {head} | infer: {head}",
        "backend", "device"
    );
    for r in rows {
        match &r.error {
            Some(e) => println!("{:<26} {:<7} | error: {e}", r.backend, r.device),
            None => println!(
                "{:<26} {:<7} | train: {} | infer: {}",
                r.backend,
                r.device,
                phase_cells(&r.train),
                phase_cells(&r.infer)
            ),
        }
    }
    for r in rows.iter().filter(|r| r.error.is_none()) {
        if let Some(share) = r.conv_implicit_gemm {
            println!(
                "{} on {}: {:.0}% of the convolution passes by implicit GEMM, the rest by Burn's \
                 direct kernels",
                r.backend,
                r.device,
                100.0 * share
            );
        }
    }
    println!(
        "floor: {} cores x {:.1} GFLOP/s (one core's sgemm, best of {} measurements: {:.1}-{:.1}) \
         / {:.1} MFLOP per training image = {:.0} img/s; / {:.1} MFLOP per inference image = \
         {:.0} img/s\n\
         GEMM kernels: {}\n\
         ops/up/rd: backend operations, uploads and device -> host reads per step (- where the \
         backend does not count them)",
        floor.cores,
        floor.sgemm_gflops_per_core,
        floor.sgemm_measurements,
        floor.sgemm_measured.min,
        floor.sgemm_measured.max,
        floor.train_mflop_per_img,
        floor.train_img_per_s,
        floor.infer_mflop_per_img,
        floor.infer_img_per_s,
        floor.gemm_kernels
    );
}

/// The 1-, 5- and 15-minute load averages (Linux), to say how busy the machine was.
pub(crate) fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_of_rounds() {
        let s = Spread::of([3.0, 1.0, f64::NAN, 2.0]);
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(Spread::of([4.0, 1.0, 2.0, 3.0]).median, 2.5);
        assert!(Spread::of([]).median.is_nan());
    }

    #[test]
    fn the_cnn_costs_72_mflop_per_training_image() {
        let (infer, train) = cnn_mflop();
        assert!((infer - 23.985).abs() < 1e-3 && (train - 71.565).abs() < 1e-3);
        let f = Floor::new(2, &[61.5, 78.0, f64::NAN, 70.0], "fma".into());
        assert_eq!(f.sgemm_gflops_per_core, 78.0, "the best measurement");
        assert!(
            (f.train_img_per_s - 2180.0).abs() < 1.0,
            "{}",
            f.train_img_per_s
        );
    }
}
