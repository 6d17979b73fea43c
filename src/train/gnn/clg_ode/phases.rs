//! The phases of CLG-ODE's schedule (warm-ups, terms switched on later) as the engine's
//! degeneracy check sees them: a best epoch before one ends means its setting had no effect.

use crate::engine::degeneracy::Phase;
use crate::models::clg_ode::objective::ObjectiveConfig;

/// The phases that end before `max_epochs` for the terms that are on.
pub(super) fn phases(o: &ObjectiveConfig, max_epochs: usize) -> Vec<Phase> {
    let mut out = Vec::new();
    let mut add = |on: bool, what: &str, last_epoch: usize, setting: &str| {
        if on && last_epoch >= 1 && last_epoch < max_epochs {
            out.push(Phase {
                what: what.into(),
                last_epoch,
                setting: setting.into(),
            });
        }
    };
    let t = &o.topology;
    // The cosine warm-up reaches full weight at its W-th epoch: W − 1 epochs below it.
    let w = ((max_epochs as f64 * t.warmup_frac).ceil() as usize).max(1);
    add(
        t.lambda_topo > 0.0 && t.warmup_frac > 0.0,
        "the topology loss",
        w - 1,
        "--lambda-topo",
    );
    // 0-based first epochs of the velocity and acceleration terms = 1-based last epochs without.
    add(
        o.lambda_vel > 0.0,
        "the velocity term",
        o.vel_from_epoch,
        "--lambda-vel",
    );
    add(
        o.lambda_acc > 0.0,
        "the acceleration term",
        o.acc_from_epoch,
        "--lambda-acc",
    );
    add(
        o.lambda_zero_log > 0.0,
        "the zero-edge penalty",
        o.zero_log_warmup_epochs + o.zero_log_ramp_epochs,
        "--lambda-zero-log",
    );
    add(
        o.lambda_density > 0.0,
        "the density penalty",
        o.density_warmup_epochs + o.density_ramp_epochs,
        "--lambda-density",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_schedule_has_its_three_phases_and_a_density_warm_up_adds_one() {
        let o = ObjectiveConfig::default();
        let p = phases(&o, 120);
        let named: Vec<(&str, usize)> = p.iter().map(|p| (p.what.as_str(), p.last_epoch)).collect();
        assert_eq!(
            named,
            [
                ("the topology loss", 23),
                ("the velocity term", 10),
                ("the acceleration term", 20)
            ]
        );
        let o = ObjectiveConfig {
            lambda_density: 0.1,
            density_warmup_epochs: 30,
            density_ramp_epochs: 10,
            ..ObjectiveConfig::default()
        };
        assert!(
            phases(&o, 120)
                .iter()
                .any(|p| p.what == "the density penalty" && p.last_epoch == 40)
        );
        // A phase that outlasts the run is not one (the run ends inside it: nothing to compare).
        assert!(
            phases(&o, 30)
                .iter()
                .all(|p| p.what != "the density penalty")
        );
    }
}
