//! Arguments of the commands that are not training: evaluation, benchmarks, plots, synthetic
//! data, downloads, shell completions.

use std::path::PathBuf;

use clap::{Args, Subcommand};

#[derive(Subcommand, Debug)]
pub(crate) enum DataCommand {
    /// Download a dataset from its usual public mirrors and verify checksums (for login nodes
    /// with internet; compute nodes should never download).
    Fetch(FetchArgs),
}

#[derive(Args, Debug, Clone)]
pub(crate) struct FetchArgs {
    #[arg(value_enum)]
    pub dataset: crate::data::fetch::Dataset,
    #[arg(long)]
    pub out: PathBuf,
    /// Base URL to download from instead of the built-in mirrors (only this one is tried).
    #[arg(long)]
    pub mirror: Option<String>,
}

/// `trainer synth-connectome`.
#[derive(Args, Debug, Clone)]
pub(crate) struct SynthArgs {
    #[arg(long, default_value_t = 60)]
    pub subjects: usize,
    #[arg(long, default_value_t = 400)]
    pub nodes: usize,
    /// Output directory (gets `sc/`, `morph/`, `subject_info_sc.csv`).
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Signal-to-noise ratio of the two-year change of an edge against the scan noise (larger:
    /// cleaner scans, higher best skill ≈ snr/(1 + snr)).
    #[arg(long, default_value_t = crate::data::connectome::SynthOptions::DEFAULT_SNR)]
    pub snr: f64,
}

impl SynthArgs {
    /// The generator's options.
    pub(crate) fn options(&self) -> crate::data::connectome::SynthOptions {
        crate::data::connectome::SynthOptions {
            subjects: self.subjects,
            nodes: self.nodes,
            seed: self.seed,
            snr: self.snr,
        }
    }
}

/// `trainer compare`: one line per run, or with `--group-by`, `--metric` or `--format` one line
/// per group (`crate::report::compare`).
#[derive(Args, Debug, Clone)]
pub(crate) struct CompareArgs {
    /// Run directories of `trainer train-gnn` (each with its `clg_ode_results.json`), sweep
    /// directories (their tasks' runs), or the reference trainer's run directories.
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// Group the runs by these keys (a varied setting, `variant`, `model`, `fold`, `stage`,
    /// `source`, any setting of args.json) and print mean ± sd, min, max and n of each metric per
    /// group.
    #[arg(long, value_delimiter = ',')]
    pub group_by: Vec<String>,
    /// A metric of the grouped table (repeatable): a test metric (`sc_log_mse`, `ecc_l2`, the
    /// exact `betti0_l1`/`betti1_l1`), `skill`, `pearson_gain`, `identity_<metric>`,
    /// `forecast_only.<metric>`, `skill_<metric>` of an error or distance (1 − model / identity:
    /// `skill_ecc_l2`, `skill_betti0_l1`, `skill_strength_mae`, > 0 closer to the truth than
    /// the start scan), or a column of the best epoch's metrics row (`val_mask_ratio`).
    #[arg(long = "metric")]
    pub metrics: Vec<String>,
    /// Print the view as `table`, `md` (Markdown), `csv` or `json` (alone: the grouped table;
    /// with `--against` or `--per-run`, that view).
    #[arg(long, value_enum)]
    pub format: Option<crate::outputs::compare::Format>,
    /// Print JSON instead of the table (as `--format json`).
    #[arg(long)]
    pub json: bool,
    /// One line per run (the per-run view) in any `--format`.
    #[arg(long, conflicts_with_all = ["against", "group_by", "metrics", "strata"])]
    pub per_run: bool,
    /// Also write the validation skill (else loss) per epoch of every run to this `.svg` or
    /// `.png`, lines labelled by group.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Also draw both axes of the grouped table to this `.svg` or `.png`: per configuration
    /// (the groups) its log-MSE `skill` against each topology skill (the `skill_<metric>`s of
    /// `--metric`; default skill_betti0_l1, skill_betti1_l1, skill_ecc_l2,
    /// skill_strength_mae), mean over its runs with a 95% t-interval, the identity at 0, 0.
    #[arg(long, conflicts_with_all = ["against", "per_run", "strata"])]
    pub frontier: Option<PathBuf>,
    /// Lay `--plot`'s figure out for a journal's single column (89 mm): 400 pixels wide, the
    /// legend under the chart (`--frontier`'s figure always is).
    #[arg(long)]
    pub column: bool,
    /// Pair every run by test subject with the run of this model (`eb-drift`, `linear-drift`,
    /// or a run directory's name; `identity`: each run's own identity forecast) and with the
    /// identity: mean difference of each `--metric` (default sc_log_mse) with a bootstrap 95%
    /// interval over subjects, the Wilcoxon signed-rank p-value and its Holm adjustment over
    /// the table. With `--group-by KEY`: one row per configuration (the keys' values), each
    /// subject's figure averaged over the configuration's folds and seeds (and the partners'
    /// over the same runs) before the paired test, Holm over the configurations' rows.
    #[arg(long, value_name = "MODEL")]
    pub against: Option<String>,
    /// Print every run's strata (`strata.json`: Δt terciles with their thresholds, horizons):
    /// n, mse, identity mse and skill per stratum, small strata marked; in any `--format` (md,
    /// csv, json: one row per run and stratum).
    #[arg(long, conflicts_with_all = ["against", "group_by", "metrics"])]
    pub strata: bool,
    /// Pool runs of different cohorts (another `cohort_fingerprint` or `sc_dir`) in one group
    /// or one `--against` comparison (refused without it).
    #[arg(long)]
    pub pool_cohorts: bool,
    /// `NAME=PATH`: the name of the run (or sweep) at PATH, one of the runs given, in the
    /// tables and `--plot`'s legend (repeatable; default: the path in the per-run table, the
    /// directory's name in a legend).
    #[arg(long = "label", value_name = "NAME=PATH", value_parser = crate::outputs::run_label::parse)]
    pub labels: Vec<crate::outputs::run_label::Label>,
}

impl CompareArgs {
    /// The command's settings.
    pub(crate) fn settings(self) -> crate::report::compare::CompareSettings {
        crate::report::compare::CompareSettings {
            runs: self.runs,
            group_by: self.group_by,
            metrics: self.metrics,
            format: self.format,
            json: self.json,
            plot: self.plot,
            frontier: self.frontier,
            column: self.column,
            against: self.against,
            strata: self.strata,
            per_run: self.per_run,
            pool_cohorts: self.pool_cohorts,
            labels: self.labels,
        }
    }
}

/// `trainer plot`.
#[derive(Args, Debug, Clone)]
pub(crate) struct PlotArgs {
    /// Run directories (each with its `metrics.jsonl`) and sweep directories (every task that
    /// has started, labelled by its varied settings).
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// Output image: `.svg` or `.png`.
    #[arg(long, default_value = "plot.svg")]
    pub out: PathBuf,
    /// Metric columns to plot, one chart each (repeatable). Default: `train_loss` and the
    /// validation or test loss.
    #[arg(long)]
    pub metric: Vec<String>,
    /// A title above the charts (default: none; each chart is titled by its metric).
    #[arg(long)]
    pub title: Option<String>,
    /// `NAME=PATH`: the legend of the run (or the sweep's tasks' prefix) at PATH, one of the
    /// runs given (repeatable; default: the directory's name).
    #[arg(long = "label", value_name = "NAME=PATH", value_parser = crate::outputs::run_label::parse)]
    pub labels: Vec<crate::outputs::run_label::Label>,
    /// Lay the figure out for a journal's single column (89 mm): 400 pixels wide, legends under
    /// the charts, so that its smallest text prints at 6 pt.
    #[arg(long)]
    pub column: bool,
}

/// `trainer completions`.
#[derive(Args, Debug, Clone)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}
