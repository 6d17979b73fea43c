//! The settings columns of a CLG-ODE metrics row: the settings in force at that epoch (the
//! reference's settings columns, porting note §4.5).

use serde_json::json;

use super::super::metric::GnnMetric;
use super::super::settings::GnnSettings;
use crate::engine::{JobMetric, Monitor, Row};
use crate::models::clg_ode::objective::{GradNormScope, Objective};

/// The settings columns at 0-based epoch `epoch`.
pub(super) fn settings_columns(
    a: &GnnSettings,
    monitor: Option<&Monitor>,
    obj: &Objective,
    epoch: usize,
) -> Row {
    let c = &obj.cfg;
    let d = &a.decoder;
    let t = &c.topology;
    let i = &c.innovation;
    let b = |x: bool| json!(u8::from(x));
    let mut row = Row::new();
    for (k, v) in [
        ("enable_vel", b(c.vel_on(epoch))),
        ("enable_acc", b(c.acc_on(epoch))),
        ("lambda_manifold", json!(c.lambda_manifold)),
        ("lambda_vel", json!(c.lambda_vel)),
        ("lambda_acc", json!(c.lambda_acc)),
        ("lambda_kl", json!(c.lambda_kl)),
        ("lambda_topo", json!(t.lambda_topo)),
        ("lambda_full_log_mse", json!(c.lambda_full_log_mse)),
        ("lambda_zero_log", json!(c.lambda_zero_log)),
        ("lambda_delta_log", json!(c.lambda_delta_log)),
        ("lambda_density", json!(c.lambda_density)),
        ("fixed_support", b(d.fixed_support)),
        ("innovation_enabled", b(i.enabled)),
        ("innovation_topm", json!(i.topm)),
        ("innovation_k_new", json!(i.k_new)),
        ("innovation_tau", json!(i.tau)),
        ("innovation_delta_quantile", json!(i.delta_quantile)),
        ("innovation_dt_scale_years", json!(i.dt_scale_years)),
        ("innovation_focal_gamma", json!(i.innovation_focal_gamma)),
        ("innovation_focal_alpha", json!(i.innovation_focal_alpha)),
        ("lambda_new_sparse", json!(i.lambda_new_sparse)),
        (
            "new_sparse_warmup_epochs",
            json!(i.new_sparse_warmup_epochs),
        ),
        ("new_sparse_ramp_epochs", json!(i.new_sparse_ramp_epochs)),
        ("lambda_new_reg", json!(i.lambda_new_reg)),
        ("density_warmup_epochs", json!(c.density_warmup_epochs)),
        ("density_ramp_epochs", json!(c.density_ramp_epochs)),
        ("density_factor", json!(c.density_factor(epoch))),
        ("edge_loss", json!(c.edge_loss)),
        ("edge_pos_weight", json!(c.edge_pos_weight)),
        ("focal_gamma", json!(c.focal_gamma)),
        ("focal_alpha", json!(c.focal_alpha)),
        ("compute_mask_auprc", b(c.compute_mask_auprc)),
        ("zero_log_warmup_epochs", json!(c.zero_log_warmup_epochs)),
        ("zero_log_ramp_epochs", json!(c.zero_log_ramp_epochs)),
        ("zero_log_factor", json!(c.zero_log_factor(epoch))),
        ("topo_scale", json!(obj.state.topo_scale)),
        ("topo_scale_quantile", json!(t.scale_quantile)),
        ("topo_log_compress", b(t.log_compress())),
        ("topo_warmup_frac", json!(t.warmup_frac)),
        (
            "topo_warmup_factor",
            json!(t.warmup_factor(epoch, obj.max_epochs)),
        ),
        (
            "gradnorm_scope",
            json!(match t.gradnorm {
                GradNormScope::ManifoldTopo => "manifold_topo",
                GradNormScope::None => "none",
            }),
        ),
        (
            "gradnorm_alpha",
            json!(crate::models::clg_ode::objective::gradnorm::ALPHA),
        ),
        (
            "gradnorm_weight_manifold",
            json!(obj.state.gradnorm.weights[0]),
        ),
        ("gradnorm_weight_topo", json!(obj.state.gradnorm.weights[1])),
        ("topo_loss_bins", json!(t.loss_bins)),
        ("betti_sharpness", json!(t.sharpness)),
        ("betti_t", json!(t.t)),
        ("betti_taylor_order", json!(t.taylor_order)),
        ("betti_probes", json!(t.probes)),
        ("morph_noise_sigma", json!(a.sampling.morph_noise_sigma)),
        (
            "sc_pos_edge_drop_prob",
            json!(a.sampling.sc_pos_edge_drop_prob),
        ),
        ("residual_skip", b(d.residual_skip)),
        ("residual_tau", json!(d.residual_tau)),
        ("residual_cap", json!(d.residual_cap)),
        ("val_sc_eval_every", json!(a.val_sc_eval_every)),
        (
            "early_stop_metric",
            json!(monitor.map_or(GnnMetric::ValLoss.name(), |m| m.metric.as_str())),
        ),
        (
            "early_stop_density_weight",
            json!(a.early_stop_density_weight),
        ),
    ] {
        row.insert(k.into(), v);
    }
    row
}
