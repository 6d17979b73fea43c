//! A sweep's progress at a glance: counts by state and an ETA from the durations of the tasks
//! done so far (`sweep status`, and `sweep status --watch`, one line per interval).

use std::collections::BTreeMap;

use super::state::TaskState;

/// What the ETA is made of: done tasks' durations, running tasks' ages, tasks still to run.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Progress {
    pub counts: BTreeMap<&'static str, usize>,
    pub total: usize,
    /// Durations of the done tasks that recorded one (seconds).
    pub done_secs: Vec<u64>,
    /// How long each running task has run (seconds).
    pub running_secs: Vec<u64>,
    /// Pending and stopped tasks: what the current submission still has to run (failed and
    /// missing ones wait for a re-plan).
    pub to_run: usize,
}

impl Progress {
    /// The progress of `states`, `now` in Unix seconds.
    pub(crate) fn of<'a>(states: impl IntoIterator<Item = &'a TaskState>, now: u64) -> Progress {
        let mut p = Progress::default();
        for s in states {
            p.total += 1;
            *p.counts.entry(s.label()).or_insert(0) += 1;
            match s {
                TaskState::Done { seconds } => p.done_secs.extend(*seconds),
                TaskState::Running { since, .. } => p
                    .running_secs
                    .push(since.map_or(0, |t| now.saturating_sub(t))),
                TaskState::Pending | TaskState::Stopped => p.to_run += 1,
                _ => {}
            }
        }
        p
    }

    /// Whether nothing runs and nothing waits to run (failed tasks aside).
    pub(crate) fn settled(&self) -> bool {
        self.running_secs.is_empty() && self.to_run == 0
    }

    /// Seconds until every task is done: the mean done duration for each task still to run and
    /// the rest of each running one, spread over as many at a time as run now (at least one).
    /// `None` until a task has finished.
    pub(crate) fn eta_secs(&self) -> Option<u64> {
        if self.done_secs.is_empty() {
            return None;
        }
        let mean = self.done_secs.iter().sum::<u64>() as f64 / self.done_secs.len() as f64;
        let rest: f64 = self
            .running_secs
            .iter()
            .map(|&age| (mean - age as f64).max(0.0))
            .sum();
        let work = rest + mean * self.to_run as f64;
        let lanes = self.running_secs.len().max(1) as f64;
        Some((work / lanes).ceil() as u64)
    }

    /// `12 tasks: 3 done, 2 running, 7 pending; ETA ~14 min (mean task 4.6 min, 2 at a time)`.
    pub(crate) fn line(&self) -> String {
        let counts: Vec<String> = self
            .counts
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        let mut out = format!("{} tasks: {}", self.total, counts.join(", "));
        if self.settled() {
            return out;
        }
        match self.eta_secs() {
            Some(eta) => {
                let mean = self.done_secs.iter().sum::<u64>() as f64 / self.done_secs.len() as f64;
                out.push_str(&format!(
                    "; ETA ~{} (mean task {}, {} at a time)",
                    minutes(eta as f64),
                    minutes(mean),
                    self.running_secs.len().max(1)
                ));
            }
            None => out.push_str("; ETA when a first task is done"),
        }
        out
    }
}

fn minutes(secs: f64) -> String {
    if secs < 90.0 {
        format!("{secs:.0} s")
    } else if secs < 90.0 * 60.0 {
        format!("{:.1} min", secs / 60.0)
    } else {
        format!("{:.1} h", secs / 3600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(since: u64) -> TaskState {
        TaskState::Running {
            pid: 1,
            host: "h".into(),
            trainer_pid: None,
            since: Some(since),
            ticks: None,
        }
    }

    #[test]
    fn the_eta_spreads_the_remaining_work_over_the_running_lanes() {
        let done = |s| TaskState::Done { seconds: Some(s) };
        // Two done (100 s, 200 s: mean 150), two running for 50 s and 200 s, three pending.
        let states = [
            done(100),
            done(200),
            running(950),
            running(800),
            TaskState::Pending,
            TaskState::Pending,
            TaskState::Stopped,
        ];
        let p = Progress::of(&states, 1000);
        // (150 − 50) + 0 + 3 × 150 = 550 s of work over 2 lanes.
        assert_eq!(p.eta_secs(), Some(275));
        assert_eq!(
            p.line(),
            "7 tasks: 2 done, 2 pending, 2 running, 1 stopped; ETA ~4.6 min (mean task 2.5 min, 2 at a time)"
        );
        assert!(!p.settled());
        let none_done = Progress::of(&[running(990), TaskState::Pending], 1000);
        assert_eq!(none_done.eta_secs(), None);
        assert!(none_done.line().ends_with("ETA when a first task is done"));
        let finished = Progress::of(&[done(5), TaskState::Done { seconds: None }], 1000);
        assert!(finished.settled());
        assert_eq!(finished.line(), "2 tasks: 2 done");
    }
}
