//! Progress of long loops: an indicatif bar on a terminal, and one plain line every few seconds
//! when stderr is a file (a Slurm log), with step, loss, throughput and ETA.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// How often the terminal bar's loss is refreshed when the loss must be read for it.
const BAR_MESSAGE_EVERY: Duration = Duration::from_millis(100);

pub(crate) struct Progress {
    label: String,
    total: u64,
    bar: Option<ProgressBar>,
    every: Duration,
    last: Instant,
    start: Instant,
    start_step: u64,
    enabled: bool,
}

impl Progress {
    /// `enabled = false` prints nothing (non-zero ranks).
    pub(crate) fn new(
        label: impl Into<String>,
        total: u64,
        start_step: u64,
        every_secs: f64,
        enabled: bool,
    ) -> Self {
        let label = label.into();
        let bar = (enabled && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::new(total);
            b.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg} (eta {eta})",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b.set_prefix(label.clone());
            b.set_position(start_step);
            b
        });
        Self {
            label,
            total,
            bar,
            every: Duration::from_secs_f64(every_secs.max(0.1)),
            last: Instant::now(),
            start: Instant::now(),
            start_step,
            enabled,
        }
    }

    /// Whether [`Progress::update`] at `step` would show the loss: the step ends the loop, or
    /// the bar's message is a tenth of a second old, or a plain line's interval has passed
    /// (always at the last step; never on a rank that prints nothing). A caller whose loss is
    /// still on the device reads it only then.
    pub(crate) fn due(&self, step: u64) -> bool {
        if step == self.total {
            return true;
        }
        if !self.enabled {
            return false;
        }
        let every = if self.bar.is_some() {
            BAR_MESSAGE_EVERY
        } else {
            self.every
        };
        self.last.elapsed() >= every
    }

    /// Moves the bar to `step` without a new loss (a step whose loss is not read yet).
    pub(crate) fn advance(&self, step: u64) {
        if let (true, Some(b)) = (self.enabled, &self.bar) {
            b.set_position(step);
        }
    }

    /// Reports that `step` (1-based, out of `total`) is done.
    pub(crate) fn update(&mut self, step: u64, loss: f64, items_per_sec: f64) {
        if !self.enabled {
            return;
        }
        if let Some(b) = &self.bar {
            b.set_position(step);
            b.set_message(format!("loss {loss:.4} {items_per_sec:.0}/s"));
            self.last = Instant::now();
            return;
        }
        if self.last.elapsed() >= self.every || step == self.total {
            self.last = Instant::now();
            let done = step.saturating_sub(self.start_step) as f64;
            let rate = done / self.start.elapsed().as_secs_f64().max(1e-9);
            let eta = if rate > 0.0 {
                (self.total.saturating_sub(step)) as f64 / rate
            } else {
                0.0
            };
            eprintln!(
                "{} step {step}/{} loss {loss:.4} {items_per_sec:.1}/s eta {}",
                self.label,
                self.total,
                fmt_secs(eta)
            );
        }
    }

    pub(crate) fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// `1h02m03s`, `4m05s` or `6s`.
pub(crate) fn fmt_secs(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    let (h, m, sec) = (s / 3600, (s % 3600) / 60, s % 60);
    if h > 0 {
        format!("{h}h{m:02}m{sec:02}s")
    } else if m > 0 {
        format!("{m}m{sec:02}s")
    } else {
        format!("{sec}s")
    }
}
