//! The per-operation profile of the MNIST training step of `flex` or `tch`
//! (`TRAINER_OP_PROFILE=1 trainer bench mnist`, `benches/profile-mnist.sh`): where one step's
//! time goes, as Markdown tables on stderr.

use std::collections::BTreeMap;

use crate::backend::profile::Report;

/// What an operation is part of in the MNIST CNN's step.
fn category(phase: &str, op: &str) -> &'static str {
    match (phase, op) {
        ("optimizer", _) => "Adam (optimizer phase)",
        ("data", _) => "batch to tensors",
        (_, "conv2d") => "conv forward",
        // Burn's input gradient is a transposed convolution where the backend has no own one (tch).
        (_, "conv2d_x_backward") | ("backward", "conv_transpose2d") => "conv backward, input",
        (_, "conv2d_weight_backward" | "conv2d_bias_backward") => "conv backward, weight + bias",
        (_, "max_pool2d_with_indices" | "max_pool2d") => "max-pool forward",
        (_, "max_pool2d_backward" | "max_pool2d_with_indices_backward") => "max-pool backward",
        (_, "float_random") => "dropout masks",
        ("forward", "float_matmul") => "linear forward",
        ("backward", "float_matmul") => "linear backward",
        (_, "relu" | "relu_backward") => "relu",
        _ => "other ops (dropout/bias mul-add, loss, sums, reshapes)",
    }
}

/// Prints the profile of `steps` training steps under the heading `label`.
pub(crate) fn print(label: &str, report: &Report, steps: usize) {
    if report.ops.is_empty() {
        return;
    }
    let n = steps.max(1) as f64;
    let step_total: f64 = report.phases.iter().map(|(_, t)| t).sum::<f64>() / n;
    let ms = |s: f64| 1e3 * s / n;
    let pct = |s: f64| 100.0 * s / n / step_total;
    eprintln!(
        "\n### {label}: one training step = {:.1} ms\n",
        1e3 * step_total
    );

    let mut by_cat: BTreeMap<&str, f64> = BTreeMap::new();
    for o in &report.ops {
        *by_cat.entry(category(o.phase, o.op)).or_default() += o.seconds;
    }
    for (phase, wall) in &report.phases {
        let ops: f64 = report
            .ops
            .iter()
            .filter(|o| o.phase == *phase)
            .map(|o| o.seconds)
            .sum();
        if *phase != "optimizer" && *phase != "data" {
            *by_cat
                .entry("framework (autodiff graph, freeing tensors; between ops)")
                .or_default() += (wall - ops).max(0.0);
        } else {
            *by_cat.entry(category(phase, "")).or_default() += (wall - ops).max(0.0);
        }
    }
    let mut cats: Vec<_> = by_cat.into_iter().collect();
    cats.sort_by(|a, b| b.1.total_cmp(&a.1));
    eprintln!("| part of the step | ms/step | share |\n| --- | ---: | ---: |");
    for (c, s) in &cats {
        eprintln!("| {c} | {:.2} | {:.1} % |", ms(*s), pct(*s));
    }

    eprintln!("\n| phase | wall ms/step | in ops | share |\n| --- | ---: | ---: | ---: |");
    for (phase, wall) in &report.phases {
        let ops: f64 = report
            .ops
            .iter()
            .filter(|o| o.phase == *phase)
            .map(|o| o.seconds)
            .sum();
        eprintln!(
            "| {phase} | {:.2} | {:.2} | {:.1} % |",
            ms(*wall),
            ms(ops),
            pct(*wall)
        );
    }

    print_ops(report, steps, 30);
}

/// The `top` slowest (phase, operation) pairs per step, as a Markdown table on stderr.
pub(crate) fn print_ops(report: &Report, steps: usize, top: usize) {
    let steps = steps.max(1) as f64;
    let total: f64 = report.phases.iter().map(|(_, t)| t).sum();
    let ms = |s: f64| 1e3 * s / steps;
    eprintln!("\n| phase | operation | calls/step | ms/step | share | CPU ms/step |");
    eprintln!("| --- | --- | ---: | ---: | ---: | ---: |");
    for o in report.ops.iter().take(top) {
        eprintln!(
            "| {} | {} | {:.0} | {:.2} | {:.1} % | {:.2} |",
            o.phase,
            o.op,
            o.calls as f64 / steps,
            ms(o.seconds),
            100.0 * o.seconds / total,
            ms(o.cpu_seconds)
        );
    }
}
