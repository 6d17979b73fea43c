//! `compare --frontier PATH`: the grouped view's configurations drawn on both axes, log-MSE
//! skill against each topology skill ([`crate::outputs::frontier`]), from the same runs and
//! the same group keys as the table printed beside it.

use std::path::Path;

use anyhow::{Result, bail};

use super::{Run, group_value};
use crate::outputs::figure::render_figure;
use crate::outputs::frontier::{Frontier, FrontierPoint, axis_name};

/// The topology skills drawn when `--metric` names none.
const DEFAULT_X: &[&str] = &[
    "skill_betti0_l1",
    "skill_betti1_l1",
    "skill_ecc_l2",
    "skill_strength_mae",
];
/// The y axis of every panel.
const Y: &str = "skill";

/// The panels' metrics: the `skill_<metric>`s of `metrics` in order, else [`DEFAULT_X`].
fn x_metrics(metrics: &[String]) -> Vec<String> {
    let given: Vec<String> = metrics
        .iter()
        .filter(|m| m.starts_with("skill_"))
        .cloned()
        .collect();
    if given.is_empty() {
        DEFAULT_X.iter().map(|m| m.to_string()).collect()
    } else {
        given
    }
}

/// Draws the finished runs of `runs`, grouped by `keys`, into `out`.
pub(super) fn draw(runs: &[Run], keys: &[String], metrics: &[String], out: &Path) -> Result<()> {
    let x = x_metrics(metrics);
    let mut points: Vec<(Vec<String>, FrontierPoint)> = Vec::new();
    for r in runs.iter().filter(|r| r.done()) {
        let key: Vec<String> = keys.iter().map(|k| group_value(r, k)).collect();
        let i = match points.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                let label = key.join(" / ");
                let point = FrontierPoint {
                    label,
                    y: Vec::new(),
                    x: vec![Vec::new(); x.len()],
                };
                points.push((key, point));
                points.len() - 1
            }
        };
        let point = &mut points[i].1;
        // A run counts on a panel only with both of its values finite.
        let Some(y) = r.metric(Y).filter(|v| v.is_finite()) else {
            continue;
        };
        point.y.push(y);
        for (p, m) in x.iter().enumerate() {
            if let Some(v) = r.metric(m).filter(|v| v.is_finite()) {
                point.x[p].push(v);
            }
        }
    }
    // A configuration without a log-MSE skill has no place on the y axis.
    let points: Vec<FrontierPoint> = points
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| !p.y.is_empty())
        .collect();
    if points.is_empty() {
        bail!("--frontier: no finished run has a log-MSE skill (`skill`) to draw");
    }
    for (p, m) in x.iter().enumerate() {
        if points.iter().all(|pt| pt.x[p].is_empty()) {
            bail!(
                "--frontier: no finished run has {m} ({}); name the topology skills to draw \
                 with --metric skill_<metric>",
                axis_name(m)
            );
        }
    }
    let figure = Frontier {
        title: format!(
            "{} against topology skill, by {}",
            axis_name(Y),
            keys.join(", ")
        ),
        x_metrics: x,
        y_metric: Y.into(),
        points,
    };
    render_figure(&figure, out)?;
    eprintln!("[compare] wrote {}", out.display());
    Ok(())
}
