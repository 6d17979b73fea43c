#!/usr/bin/env python3
"""Goldens for the CLG-ODE "extras" (topology loss, GradNorm, residual decoder, focal/density/
log-domain terms, innovation module, monitors, CLI parsing), computed by the reference's OWN code.

Usage (from the repository root):

    python tests/golden/clg_ode_extras_golden.py /path/to/sc_connectome_trajectories \
        > tests/fixtures/clg-ode-extras-golden.json

The reference checkout (github.com/xsmilebook/sc_connectome_trajectories; this file was produced
against commit 4cc09e3df8aa4f910b9c46a3b186855c3738170c) is put on sys.path and its modules are
imported; nothing of it is copied here. Needs torch (CPU), numpy, pandas, scikit-learn.

What is called is named in every section's "how" field. Where a quantity is only computed inline
inside a reference method, it is captured while that method runs (a recording wrapper around
`torch.nn.functional.smooth_l1_loss` as seen by `src.engine.clg_trainer`, around the trainer's
`_trace_expm_neg_t_lsym`, or around `torch.topk` / `torch.quantile`); such values are marked
"recorded". Values marked "derived" are computed here from recorded ones by the formula stated.

Side effects on the checkout: `scripts.train_clg_ode.main()` creates `<checkout>/outputs/logs/`
(as it always does). Temporary run directories are removed at the end.

JSON conventions: matrices are nested lists (row-major); non-finite floats are written as the
strings "nan", "inf", "-inf"; float32 results are written as the exact float32 value (as a double).
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

REF = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
if not REF or not os.path.isdir(os.path.join(REF, "src")):
    sys.stderr.write("usage: clg_ode_extras_golden.py /path/to/sc_connectome_trajectories\n")
    sys.exit(2)
sys.path.insert(0, REF)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

torch.set_num_threads(1)

import src.engine.clg_trainer as ct  # noqa: E402
from src.engine.clg_trainer import CLGTrainer, NormStats  # noqa: E402
from src.engine.losses import edge_bce_loss, edge_focal_loss_with_logits, weight_huber_loss  # noqa: E402
from src.models.clg_ode import CLGODE, ConnDecoder  # noqa: E402
from src.data.utils import compute_triu_indices, compute_strengths, preprocess_sc  # noqa: E402
from src.data.topology import compute_ecc  # noqa: E402
from src.data.clg_dataset import collate_clg_sequences  # noqa: E402
import scripts.train_clg_ode as tco  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FLAG_SETS = os.path.join(HERE, "..", "fixtures", "reference_flag_sets.txt")
PATH_FLAGS = ["sc_dir", "morph_root", "subject_info_csv", "results_dir"]
TMP_DIRS: list[str] = []


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------

def clean(v):
    """Make a value JSON-safe (non-finite floats as strings)."""
    if isinstance(v, torch.Tensor):
        v = v.detach().cpu()
        if v.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            v = v.double()
        return clean(v.tolist())
    if isinstance(v, np.ndarray):
        return clean(v.tolist())
    if isinstance(v, (np.floating,)):
        v = float(v)
    if isinstance(v, (np.integer,)):
        v = int(v)
    if isinstance(v, (np.bool_,)):
        v = bool(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return v
    if isinstance(v, dict):
        return {str(k): clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [clean(x) for x in v]
    return v


def sym_matrix(rng: np.random.Generator, n: int, density: float, scale: float) -> np.ndarray:
    """Symmetric, zero diagonal, entries rounded to 3 decimals (so they can be written literally)."""
    a = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            if rng.random() < density:
                a[i, j] = a[j, i] = round(float(rng.uniform(0.05, 1.0) * scale), 3)
    return a


def rounded(rng: np.random.Generator, shape, lo: float, hi: float) -> np.ndarray:
    return np.round(rng.uniform(lo, hi, size=shape), 3)


_captured: dict = {}


def _fake_run(self):  # replaces CLGTrainer.run so that main() only builds the trainer
    _captured["trainer"] = self


CLGTrainer.run = _fake_run


def trainer_from_flags(flags: list[str]):
    """Build a CLGTrainer exactly as the reference entry point does (scripts/train_clg_ode.main),
    from CLI flags; returns (trainer, args.json content)."""
    tmp = tempfile.mkdtemp(prefix="clg_golden_")
    TMP_DIRS.append(tmp)
    argv = [
        "train_clg_ode.py",
        "--sc_dir", tmp, "--morph_root", tmp, "--subject_info_csv", tmp, "--results_dir", tmp,
        "--run_name", "golden",
    ] + list(flags)
    old = sys.argv
    sys.argv = argv
    try:
        tco.main()
    finally:
        sys.argv = old
    with open(os.path.join(tmp, "runs", "golden", "args.json"), encoding="utf-8") as f:
        args = json.load(f)
    return _captured.pop("trainer"), args


class FRecorder:
    """Stands in for `torch.nn.functional` inside src.engine.clg_trainer; records smooth_l1_loss."""

    def __init__(self, real):
        self._real = real
        self.calls = []

    def __getattr__(self, name):
        return getattr(self._real, name)

    def smooth_l1_loss(self, a, b, *args, **kw):
        out = self._real.smooth_l1_loss(a, b, *args, **kw)
        self.calls.append({"input": a.detach().clone(), "target": b.detach().clone(), "out": out.detach().clone()})
        return out


@contextlib.contextmanager
def record_F():
    rec = FRecorder(ct.F)
    old = ct.F
    ct.F = rec
    try:
        yield rec
    finally:
        ct.F = old


@contextlib.contextmanager
def record_topk_quantile():
    calls = []
    real_topk, real_quantile = torch.topk, torch.quantile

    def topk(input, k, *a, **kw):
        out = real_topk(input, k, *a, **kw)
        calls.append({"fn": "topk", "input": input.detach().clone(), "k": int(k),
                      "indices": out.indices.clone(), "values": out.values.detach().clone()})
        return out

    def quantile(input, q, *a, **kw):
        out = real_quantile(input, q, *a, **kw)
        calls.append({"fn": "quantile", "input": input.detach().clone(),
                      "q": q.clone() if isinstance(q, torch.Tensor) else float(q), "out": out.detach().clone()})
        return out

    torch.topk, torch.quantile = topk, quantile
    try:
        yield calls
    finally:
        torch.topk, torch.quantile = real_topk, real_quantile


def triu_t(n):
    return compute_triu_indices(n)


# ----------------------------------------------------------------------------------------------
# sections
# ----------------------------------------------------------------------------------------------

def section_cli():
    parser = tco.build_arg_parser()
    defaults = vars(parser.parse_args([]))
    for k in PATH_FLAGS:
        defaults[k] = "(configs/paths.yaml, resolved against the checkout)"
    flags = []
    for action in parser._actions:
        if not action.option_strings:
            continue
        if action.dest == "help":
            continue
        flags.append({
            "flag": action.option_strings[0],
            "dest": action.dest,
            "kind": "store_true" if action.nargs == 0 else (action.type.__name__ if action.type else "str"),
            "default": defaults[action.dest],
            "choices": list(action.choices) if action.choices else None,
        })
    out = {
        "how": "scripts/train_clg_ode.build_arg_parser(): every option (order of definition), its type and "
               "default; parse_args([]) for the defaults (path defaults are machine dependent and replaced).",
        "n_flags": len(flags),
        "flags": flags,
    }
    parsed_sets = []
    if os.path.exists(FLAG_SETS):
        name = None
        with open(FLAG_SETS, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line.strip():
                    continue
                if line.startswith("#"):
                    name = line[1:].strip()
                    continue
                argv = line.split()
                ns = vars(parser.parse_args(argv + ["--sc_dir", "SC", "--morph_root", "MR",
                                                    "--subject_info_csv", "SI", "--results_dir", "RD"]))
                for k in PATH_FLAGS:
                    ns.pop(k)
                parsed_sets.append({"name": name, "argv": argv, "parsed": ns})
        out["flag_sets"] = {
            "how": "each non-comment line of tests/fixtures/reference_flag_sets.txt, split on spaces, plus "
                   "the four path flags (dropped from 'parsed'), through build_arg_parser().parse_args: "
                   "the value of every argument as the reference sees it (= its args.json minus paths).",
            "sets": parsed_sets,
        }
    # the glue of main(): how args become CLGTrainer attributes (default flags)
    trainer, args_json = trainer_from_flags([])
    glue = {k: getattr(trainer, k) for k in [
        "focal_alpha", "topo_log_compress", "use_s_mean", "cv_fold", "resume_from", "gradnorm_scope",
        "gradnorm_enabled", "gradnorm_alpha", "gradnorm_lr", "gradnorm_weight_min", "gradnorm_weight_max",
        "topo_scale_ema", "topo_scale_min", "edge_loss", "early_stop_metric"]}
    glue["_numeric_cov_dim()"] = trainer._numeric_cov_dim()
    trainer2, _ = trainer_from_flags(["--disable_s_mean"])
    glue["_numeric_cov_dim() with --disable_s_mean"] = trainer2._numeric_cov_dim()
    trainer3, _ = trainer_from_flags(["--disable_s_mean", "--topo_bins", "16"])
    glue["_numeric_cov_dim() with --disable_s_mean --topo_bins 16"] = trainer3._numeric_cov_dim()
    trainer4, _ = trainer_from_flags(["--focal_alpha", "0.25", "--cv_fold", "2", "--resume_from", "  x.pt ",
                                      "--disable_topo_log_compress", "--gradnorm_scope", "none"])
    glue["with --focal_alpha 0.25 --cv_fold 2 --resume_from '  x.pt ' --disable_topo_log_compress --gradnorm_scope none"] = {
        k: getattr(trainer4, k) for k in ["focal_alpha", "cv_fold", "resume_from", "topo_log_compress",
                                          "gradnorm_enabled", "gradnorm_scope"]}
    args_json.pop("results_dir")
    for k in PATH_FLAGS:
        args_json.pop(k, None)
    out["main_glue"] = {
        "how": "scripts/train_clg_ode.main() with CLGTrainer.run replaced by a no-op: attributes of the "
               "constructed CLGTrainer (constructor-only knobs included: gradnorm_alpha/lr/min/max, "
               "topo_scale_ema/min are not CLI flags).",
        "attributes": glue,
        "args_json_without_paths_default_run": args_json,
    }
    # invalid combinations the reference rejects (constructor ValueError / argparse SystemExit)
    rejects = []
    for flags in (["--innovation_enabled"], ["--innovation_topm", "0"], ["--innovation_k_new", "-1"],
                  ["--innovation_tau", "0"], ["--innovation_delta_quantile", "0"],
                  ["--innovation_delta_quantile", "1.5"], ["--innovation_dt_scale_years", "0"],
                  ["--innovation_dt_ramp_months", "0"], ["--edge_loss", "mse"], ["--gradnorm_scope", "all"],
                  ["--early_stop_metric", "val_sc_log_mae"], ["--porcelain"]):
        err = None
        buf = io.StringIO()
        try:
            with contextlib.redirect_stderr(buf):
                trainer_from_flags(flags)
        except SystemExit as e:
            err = f"argparse exit {e.code}: " + buf.getvalue().strip().splitlines()[-1]
        except Exception as e:  # noqa: BLE001
            err = f"{type(e).__name__}: {e}"
        rejects.append({"flags": flags, "error": err})
    out["rejected"] = {"how": "main() with these flags (plus paths)", "cases": rejects}
    return out


def section_topology():
    rng = np.random.default_rng(7)
    n = 8
    true_raw = sym_matrix(rng, n, 0.6, 6.0)
    pred_w = sym_matrix(rng, n, 0.8, 5.0)
    triu = triu_t(n)
    res = {
        "how": "CLGTrainer._betti_curve_loss(pred_weight, true_raw, triu_idx) on a trainer built by main(), float32 "
               "(the method builds W_true with .float(), so it only runs in float32); per-threshold values recorded "
               "from its F.smooth_l1_loss calls (beta0 then beta1 per threshold: input = pred, target = true) and "
               "from its _trace_expm_neg_t_lsym calls (true first, then pred). 'f64': the recorded W matrices cast "
               "to float64 and fed again to the reference's _trace_expm_neg_t_lsym with float64 probes (the "
               "truncated series cancels heavily, so float32 values carry large rounding noise).",
        "n": n,
        "true_raw": true_raw,
        "pred_weight": pred_w,
    }

    def huber(d: float) -> float:
        return 0.5 * d * d if abs(d) < 1.0 else abs(d) - 0.5

    def run_case(flags, pred, true, label):
        trainer, _ = trainer_from_flags(flags)
        probes = trainer._betti_probes(n)
        traces = []
        orig = trainer._trace_expm_neg_t_lsym

        def wrapped(w, t, probes):
            out = orig(w, t=t, probes=probes)
            traces.append({"w": w.detach().clone(), "t": t, "out": out.detach().clone()})
            return out

        trainer._trace_expm_neg_t_lsym = wrapped
        p = torch.tensor(pred, dtype=torch.float32)
        tr = torch.tensor(true, dtype=torch.float32)
        thresholds = CLGTrainer._quantile_thresholds_torch(torch.log1p(tr), triu, k=max(int(trainer.topo_loss_bins), 1))
        with record_F() as rec:
            loss = trainer._betti_curve_loss(p, tr, triu)
        del trainer._trace_expm_neg_t_lsym
        per = []
        f64_l0, f64_l1 = [], []
        for i in range(len(rec.calls) // 2):
            b0, b1 = rec.calls[2 * i], rec.calls[2 * i + 1]
            w_true = traces[2 * i]["w"]
            w_pred = traces[2 * i + 1]["w"]
            e_true = torch.triu(w_true, diagonal=1).sum()
            e_pred = torch.triu(w_pred, diagonal=1).sum()
            # float64 re-evaluation of the same W matrices with the reference estimator
            b0t64 = float(orig(w_true.double(), t=trainer.betti_t, probes=probes.double()))
            b0p64 = float(orig(w_pred.double(), t=trainer.betti_t, probes=probes.double()))
            e_t64 = float(torch.triu(w_true.double(), diagonal=1).sum())
            e_p64 = float(torch.triu(w_pred.double(), diagonal=1).sum())
            b1t64 = e_t64 - n + b0t64
            b1p64 = e_p64 - n + b0p64
            f64_l0.append(huber(b0p64 - b0t64))
            f64_l1.append(huber(b1p64 - b1t64))
            per.append({
                "tau": thresholds[i],
                "beta0_pred": b0["input"], "beta0_true": b0["target"], "huber_beta0": b0["out"],
                "beta1_pred": b1["input"], "beta1_true": b1["target"], "huber_beta1": b1["out"],
                "edges_true (derived: sum triu of W_true)": e_true,
                "edges_pred (derived: sum triu of W_pred)": e_pred,
                "f64": {"beta0_true": b0t64, "beta0_pred": b0p64, "beta1_true": b1t64, "beta1_pred": b1p64},
            })
        case = {
            "label": label,
            "flags": flags,
            "settings": {k: getattr(trainer, k) for k in ["topo_loss_bins", "betti_sharpness", "betti_t",
                                                          "betti_taylor_order", "betti_probes", "random_state"]},
            "probes": probes,
            "thresholds": thresholds,
            "per_threshold": per,
            "raw_loss": loss,
            "raw_loss_f64 (derived: mean huber beta0 + mean huber beta1 of the f64 values)":
                (sum(f64_l0) / len(f64_l0) + sum(f64_l1) / len(f64_l1)) if f64_l0 else 0.0,
            "n_trace_calls": len(traces),
        }
        if label.startswith("default"):
            case["W_true_per_threshold"] = [traces[2 * i]["w"] for i in range(len(traces) // 2)]
            case["W_pred_per_threshold"] = [traces[2 * i + 1]["w"] for i in range(len(traces) // 2)]
        return case

    cases = [
        run_case([], pred_w, true_raw, "default"),
        run_case(["--betti_t", "1.0", "--betti_taylor_order", "30", "--topo_loss_bins", "4",
                  "--betti_sharpness", "5.0", "--betti_probes", "3"], pred_w, true_raw, "converged_series"),
        run_case(["--random_state", "7"], pred_w, true_raw, "random_state_7 (probes change)"),
    ]
    # sparsified prediction first, as the trainer does
    sp, mask = CLGTrainer._sparsify_pred(torch.tensor(pred_w, dtype=torch.float32),
                                         torch.tensor(true_raw, dtype=torch.float32), triu)
    cases.append(run_case([], sp.numpy(), true_raw,
                          "default_on_sparsified_pred (pred = _sparsify_pred(pred_weight, true_raw) as in _compute_loss)"))
    # zero-threshold and lambda_topo=0 short-cuts
    t0, _ = trainer_from_flags([])
    zero_loss = t0._betti_curve_loss(torch.tensor(pred_w, dtype=torch.float32), torch.zeros((n, n)), triu)
    t1, _ = trainer_from_flags(["--lambda_topo", "0"])
    off_loss = t1._betti_curve_loss(torch.tensor(pred_w, dtype=torch.float32), torch.tensor(true_raw, dtype=torch.float32), triu)
    res["cases"] = cases
    res["sparsified_pred"] = sp
    res["edge_cases"] = {"true_all_zero -> loss": zero_loss, "lambda_topo 0 -> loss": off_loss}

    # probes for the real N = 400 (max_nodes is hard-coded to 400 in the dataset)
    tp, _ = trainer_from_flags(["--betti_probes", "4"])
    p400_4 = tp._betti_probes(400)
    tp2, _ = trainer_from_flags([])
    p400_2 = tp2._betti_probes(400)
    tp3, _ = trainer_from_flags(["--betti_probes", "0"])
    p8_0 = tp3._betti_probes(8)
    bg = np.random.default_rng(42).bit_generator
    st = bg.state
    res["probes_n400"] = {
        "how": "CLGTrainer._betti_probes(400): numpy default_rng(random_state).integers(0, 2, size=(probes, n), "
               "dtype=int64)*2-1, as float32; random_state 42.",
        "probes_4_seed42": p400_4.to(torch.int64),
        "probes_2_equal_first_two_rows_of_probes_4": bool(torch.equal(p400_2, p400_4[:2])),
        "betti_probes_0_gives_rows": int(p8_0.shape[0]),
        "pcg64_state_after_default_rng_42": {"state": str(st["state"]["state"]), "inc": str(st["state"]["inc"])},
        "pcg64_first_4_raw_outputs_seed42": [str(x) for x in np.random.default_rng(42).bit_generator.random_raw(4)],
    }

    # normalisation, scale EMA, warmup
    raw_vals = [0.5, 3.0, 120.0, 0.0]
    norm = {}
    for flags in ([], ["--disable_topo_log_compress"]):
        for scale in (1.0, 37.5, 0.0, float("nan")):
            t, _ = trainer_from_flags(flags)
            t._topo_scale = scale
            norm[f"flags={' '.join(flags) or '(default)'} scale={scale}"] = {
                "scale_used": t._topo_scale_value(),
                "normalized": t._normalize_topo_loss(torch.tensor(raw_vals, dtype=torch.float64)),
            }
    res["normalize"] = {
        "how": "CLGTrainer._normalize_topo_loss(tensor(raw)) after setting trainer._topo_scale; "
               "_topo_scale_value() is the scale actually used",
        "raw": raw_vals,
        "cases": norm,
    }
    ema = []
    for flags in ([], ["--topo_scale_quantile", "0.5"], ["--topo_scale_quantile", "1.7"]):
        t, _ = trainer_from_flags(flags)
        seq = []
        epochs = [[0.5, 3.0, 120.0, 7.25, 1.0], [2.0], [], [float("nan"), float("inf"), 4.0, 8.0], [0.0, 0.0],
                  [float("nan")], [1e-9]]
        for vals in epochs:
            t._update_topo_scale(vals)
            seq.append({"values": vals, "scale_after": t._topo_scale})
        ema.append({"flags": flags, "initial_scale": 1.0, "epochs": seq})
    res["scale_ema"] = {
        "how": "CLGTrainer._update_topo_scale(values) called once per 'epoch' in sequence (the trainer calls it "
               "after each training epoch with every raw per-prediction topo value of that epoch); "
               "quantile = numpy linear interpolation; EMA 0.9 (constructor default), floor 1e-6",
        "sequences": ema,
    }
    warm = []
    for flags in (["--max_epochs", "120"], ["--max_epochs", "8"], ["--max_epochs", "15"],
                  ["--max_epochs", "40", "--topo_warmup_frac", "0.5"], ["--max_epochs", "3", "--topo_warmup_frac", "0.01"],
                  ["--max_epochs", "120", "--topo_warmup_frac", "0"]):
        t, _ = trainer_from_flags(flags)
        warm.append({"flags": flags, "factors_epoch_0_to_29": [t._topo_warmup_factor(e) for e in range(30)]})
    res["warmup"] = {"how": "CLGTrainer._topo_warmup_factor(epoch), epoch 0-based", "cases": warm}
    return res


class TinyGN(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.tensor([0.5, -1.0], dtype=torch.float64))
        self.b = nn.Parameter(torch.tensor([2.0, 0.25, -0.75], dtype=torch.float64))
        self.c = nn.Parameter(torch.tensor([0.3], dtype=torch.float64))  # used by neither loss


def gn_losses(m: TinyGN, zero_topo=False):
    coef = torch.tensor([0.2, -0.4, 0.1], dtype=torch.float64)
    l_man = 1.5 * (m.a ** 2).sum() + ((m.b * coef).sum()) ** 2
    if zero_topo:
        l_topo = (m.c * 0.0).sum()
    else:
        l_topo = torch.log1p(((m.b - 0.5) ** 2).sum())
    return {"manifold": l_man, "topo": l_topo}


def grad_norm(m, loss):
    params = [p for p in m.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
    norms = [g.norm() for g in grads if g is not None]
    return torch.norm(torch.stack(norms)) if norms else torch.tensor(0.0)


def section_gradnorm():
    scenarios = []
    for flags in ([], ["--lambda_topo", "1.0"], ["--lambda_topo", "0.5", "--lambda_manifold", "2.0"]):
        trainer, _ = trainer_from_flags(flags)
        m = TinyGN()
        steps = []
        plan = [("initial parameters", None, False),
                ("a *= 0.8, b += 0.1", lambda mm: (mm.a.mul_(0.8), mm.b.add_(0.1)), False),
                ("b -= 0.3", lambda mm: mm.b.sub_(0.3), False),
                ("topo loss with zero gradient (update skipped)", None, True)]
        for label, mutate, zero_topo in plan:
            if mutate is not None:
                with torch.no_grad():
                    mutate(m)
            losses = gn_losses(m, zero_topo)
            before = dict(trainer._gradnorm_weights)
            g = {k: grad_norm(m, v) for k, v in losses.items()}
            w = trainer._compute_gradnorm_weights(m, losses)
            steps.append({
                "label": label,
                "params": {k: v for k, v in m.state_dict().items()},
                "L": {k: v for k, v in losses.items()},
                "G (autograd.grad over requires_grad params, norm of per-parameter norms)": g,
                "weights_before": before,
                "weights_after": dict(w),
                "init_losses_after": dict(trainer._gradnorm_init_losses),
            })
        scenarios.append({"flags": flags, "lambda_manifold": trainer.lambda_manifold,
                          "lambda_topo": trainer.lambda_topo, "steps": steps})
    # disabled scope / no-grad losses
    t_none, _ = trainer_from_flags(["--gradnorm_scope", "none"])
    m = TinyGN()
    w_none = t_none._compute_gradnorm_weights(m, gn_losses(m))
    t_ng, _ = trainer_from_flags([])
    with torch.no_grad():
        w_ng = t_ng._compute_gradnorm_weights(m, gn_losses(m))
    return {
        "how": "CLGTrainer._compute_gradnorm_weights(model, {'manifold': L_man, 'topo': L_topo}) called repeatedly "
               "on one trainer (state kept) with a tiny float64 module; the losses are the formulas below of "
               "parameters a (2), b (3) (c is unused: its gradient is None and is skipped). "
               "L_man = 1.5*sum(a^2) + (sum(b*[0.2,-0.4,0.1]))^2; L_topo = log1p(sum((b-0.5)^2)); "
               "last step uses L_topo = sum(c*0) (gradient exactly 0 -> update skipped).",
        "constants": {"gradnorm_alpha": 0.5, "gradnorm_lr": 0.1, "weight_min": 0.1, "weight_max": 10.0, "eps": 1e-6},
        "scenarios": scenarios,
        "scope_none -> weights": w_none,
        "losses_without_grad -> weights": w_ng,
    }


def section_decoder():
    rng = np.random.default_rng(11)
    n, L = 6, 3
    a0_raw = sym_matrix(rng, n, 0.6, 4.0)
    z = rounded(rng, (1, 2, n, L), -0.8, 0.8)
    dt = 1.7
    scalars = {"alpha": 8.0, "delta": 0.1, "gamma": 1.3, "beta": -0.2, "residual_scale": 0.7,
               "residual_bias": 0.05, "alpha_new": 6.0, "delta_new": 0.2, "gamma_new": 1.2, "beta_new": -0.3}
    a0_log = np.log1p(a0_raw)
    cases = []
    for label, kw in [
        ("residual_skip, dt gate, tau 1, cap 0.5", dict(residual_skip=True, residual_tau=1.0, residual_no_dt_gate=False, residual_cap=0.5)),
        ("residual_skip, no dt gate, cap 0.5", dict(residual_skip=True, residual_tau=1.0, residual_no_dt_gate=True, residual_cap=0.5)),
        ("residual_skip, dt gate, tau 0.5, cap 0.2", dict(residual_skip=True, residual_tau=0.5, residual_no_dt_gate=False, residual_cap=0.2)),
        ("no residual (weight = softplus(gamma_new*S + beta_new))", dict(residual_skip=False)),
    ]:
        dec = ConnDecoder().double()
        with torch.no_grad():
            for k, v in scalars.items():
                getattr(dec, k).fill_(v)
        zt = torch.tensor(z)
        times = torch.tensor([[0.0, dt]], dtype=torch.float64)
        logit, weight, weight_new, l_new = dec(zt, a0_log=torch.tensor(a0_log)[None], times=times, **kw)
        w_last = weight[0, -1]
        a0_t = torch.tensor(a0_raw)
        cases.append({
            "label": label,
            "kwargs": kw,
            "logit": logit[0], "weight": weight[0], "weight_new": weight_new[0], "l_new": l_new[0],
            "fixed_support_pred_t1 (CLGTrainer._apply_fixed_support(weight[0,-1], a0_raw))":
                CLGTrainer._apply_fixed_support(w_last, a0_t),
            "expected_weight_t1 (CLGTrainer._expected_weight(logit[0,-1], weight[0,-1]))":
                CLGTrainer._expected_weight(logit[0, -1], w_last),
        })
    return {
        "how": "src.models.clg_ode.ConnDecoder (float64) with its 10 scalars set as listed, called as the model "
               "calls it: z [B=1,T=2,N,L] (decoder input z_c(t) at grid times [0, dt]), a0_log [1,N,N] = "
               "log1p(a0_raw), times [[0, dt]]. Outputs indexed [t][i][j] (t=0 is the grid start, t=1 is dt).",
        "n": n, "latent_dim": L, "dt": dt, "scalars": scalars, "a0_raw": a0_raw, "a0_log": a0_log, "z": z[0],
        "cases": cases,
    }


def section_edge_losses():
    rng = np.random.default_rng(5)
    logits = rounded(rng, (15,), -4.0, 4.0)
    target = (rng.random(15) < 0.4).astype(float)
    lt = torch.tensor(logits)
    tt = torch.tensor(target)
    focal = []
    for gamma, alpha in [(2.0, None), (2.0, 0.25), (0.0, None), (1.5, 0.75), (0.0, 0.5)]:
        focal.append({"gamma": gamma, "alpha": alpha, "loss": edge_focal_loss_with_logits(lt, tt, gamma=gamma, alpha=alpha)})
    bce = []
    for pw in (1.0, 2.0, 5.0):
        bce.append({"pos_weight": pw, "loss": edge_bce_loss(lt, tt, pos_weight=pw)})
    # _recon_losses dispatch (edge_loss focal vs bce) on a 6-node example
    n = 6
    triu = triu_t(n)
    true_raw = sym_matrix(rng, n, 0.5, 3.0)
    pred_w = sym_matrix(rng, n, 0.9, 3.0)
    logit_m = rounded(rng, (n, n), -3.0, 3.0)
    logit_m = np.round((logit_m + logit_m.T) / 2, 4)
    x_hat = rounded(rng, (n, 2), -1, 1)
    x_true = rounded(rng, (n, 2), -1, 1)
    recon = []
    for flags in ([], ["--edge_pos_weight", "2"], ["--edge_loss", "focal"],
                  ["--edge_loss", "focal", "--focal_alpha", "0.25", "--focal_gamma", "1.0"], ["--lambda_weight", "3.0"]):
        t, _ = trainer_from_flags(flags)
        lx, le, lw = t._recon_losses(torch.tensor(logit_m)[None], torch.tensor(pred_w)[None], torch.tensor(x_hat)[None],
                                     torch.tensor(true_raw)[None], torch.tensor(x_true)[None], triu)
        recon.append({"flags": flags, "loss_x": lx, "loss_edge": le, "loss_weight": lw,
                      "note": "lambda_weight is applied by _compute_loss (manifold = lx + le + lambda_weight*lw), not here"})
    return {
        "how": "src.engine.losses.edge_focal_loss_with_logits / edge_bce_loss on float64 vectors; "
               "CLGTrainer._recon_losses(a_logit[1,N,N], a_weight[1,N,N], x_hat[1,N,F], a_true_raw[1,N,N], x_true[1,N,F], triu) "
               "(float64) for the edge_loss dispatch (the weight argument is what _compute_loss passes: the "
               "top-k sparsified prediction; here any matrix).",
        "logits": logits, "target": target, "focal": focal, "bce": bce,
        "recon": {"n": n, "true_raw": true_raw, "a_weight": pred_w, "a_logit": logit_m, "x_hat": x_hat,
                  "x_true": x_true, "cases": recon},
    }


def section_log_terms():
    rng = np.random.default_rng(9)
    n = 6
    triu = triu_t(n)
    true_raw = sym_matrix(rng, n, 0.5, 3.0)
    a0_raw = sym_matrix(rng, n, 0.5, 3.0)
    pred = sym_matrix(rng, n, 0.9, 3.0)
    pred[0, 1] = pred[1, 0] = -0.25  # a negative entry: every term clamps at 0 first
    p_hat = rounded(rng, (n, n), 0.01, 0.99)
    p_hat = np.round((p_hat + p_hat.T) / 2, 4)
    P = torch.tensor(pred)
    T = torch.tensor(true_raw)
    A0 = torch.tensor(a0_raw)
    out = {
        "how": "CLGTrainer static methods on float64 N=6 matrices: _full_log_mse(pred, true_raw, triu), "
               "_zero_log_penalty(pred, true_raw, triu), _delta_log_penalty(pred, log1p(a0_raw), triu), "
               "_density_loss(p_hat, true_raw, triu), _support_weight_loss(pred, true_raw, a0_raw, triu), "
               "_sparsify_pred(pred, true_raw, triu); _mask_diagnostics (instance; float32 because it builds a "
               "float32 quantile tensor) with and without --compute_mask_auprc; _linear_warmup_factor(epoch, warmup, ramp).",
        "n": n, "true_raw": true_raw, "a0_raw": a0_raw, "pred": pred, "p_hat": p_hat,
        "full_log_mse": CLGTrainer._full_log_mse(P, T, triu),
        "zero_log": CLGTrainer._zero_log_penalty(P, T, triu),
        "delta_log": CLGTrainer._delta_log_penalty(P, torch.log1p(A0), triu),
        "density": CLGTrainer._density_loss(torch.tensor(p_hat), T, triu),
        "density_true_all_zero": CLGTrainer._density_loss(torch.tensor(p_hat), torch.zeros_like(T), triu),
        "support_weight_loss(pred, true, a0)": CLGTrainer._support_weight_loss(P, T, A0, triu),
        "sparsify_pred": CLGTrainer._sparsify_pred(P, T, triu)[0],
    }
    diags = {}
    for flags in ([], ["--compute_mask_auprc"]):
        t, _ = trainer_from_flags(flags)
        diags[" ".join(flags) or "(default)"] = t._mask_diagnostics(torch.tensor(p_hat, dtype=torch.float32),
                                                                   torch.tensor(true_raw, dtype=torch.float32), triu)
    out["mask_diagnostics_f32"] = diags
    ramps = []
    for w, r in [(0, 0), (2, 20), (5, 20), (10, 20), (0, 10), (5, 0), (10, 10)]:
        ramps.append({"warmup": w, "ramp": r, "factors_epoch_0_to_34": [CLGTrainer._linear_warmup_factor(e, w, r) for e in range(35)]})
    out["linear_warmup_factor"] = ramps
    return out


def section_innovation():
    rng = np.random.default_rng(3)
    n = 8
    triu = triu_t(n)
    a0_raw = sym_matrix(rng, n, 0.5, 4.0)
    a_true = a0_raw.copy()
    # the truth keeps most A0 edges and gains some new ones
    for (i, j) in [(0, 3), (1, 6), (2, 7), (4, 5), (3, 6)]:
        if a0_raw[i, j] == 0:
            a_true[i, j] = a_true[j, i] = round(float(rng.uniform(0.2, 2.0)), 3)
    l_new = rounded(rng, (n, n), -3.0, 3.0)
    l_new = np.round((l_new + l_new.T) / 2, 4)
    w_new = rounded(rng, (n, n), 0.0, 2.0)
    w_new = np.round((w_new + w_new.T) / 2, 4)
    np.fill_diagonal(w_new, 0.0)
    w_support = sym_matrix(rng, n, 1.0, 3.0) * (a0_raw > 0)
    base_flags = ["--fixed_support", "--innovation_enabled", "--innovation_topm", "6", "--innovation_k_new", "3",
                  "--innovation_tau", "0.1", "--innovation_delta_quantile", "0.95", "--lambda_new_reg", "0.5"]
    cases = []
    for label, flags, dt, epoch in [
        ("gate 1 (dt 2y), epoch 15 (sparse factor 0.6)", [], 2.0, 15),
        ("gate 0.5 (dt 0.5y), epoch 30 (sparse factor 1)", [], 0.5, 30),
        ("dt 0 -> gate 0 -> unchanged", [], 0.0, 30),
        ("epoch 5 < new_sparse_warmup_epochs 10 -> unchanged", [], 2.0, 5),
        ("offset 9 / ramp 9 months, dt 1.0y (gate 1/3), warmup 0 ramp 0, epoch 0",
         ["--innovation_dt_offset_months", "9", "--innovation_dt_ramp_months", "9", "--new_sparse_warmup_epochs", "0",
          "--new_sparse_ramp_epochs", "0"], 1.0, 0),
        ("k_new 0 -> unchanged", ["--innovation_k_new", "0"], 2.0, 30),
        ("topm larger than pool, k_new larger than topm", ["--innovation_topm", "400", "--innovation_k_new", "80"], 2.0, 30),
        ("lambda_new_reg 0, focal gamma 1 alpha 0.5, tau 0.07, q 0.975",
         ["--lambda_new_reg", "0", "--innovation_focal_gamma", "1.0", "--innovation_focal_alpha", "0.5",
          "--innovation_tau", "0.07", "--innovation_delta_quantile", "0.975"], 2.0, 30),
    ]:
        t, _ = trainer_from_flags(base_flags + flags)
        with record_topk_quantile() as calls:
            pred, out = t._innovation_step(
                pred_support=torch.tensor(w_support), pred_new_dense=torch.clamp(torch.tensor(w_new), min=0.0),
                l_new=torch.tensor(l_new), a0_raw=torch.tensor(a0_raw), a_true_raw=torch.tensor(a_true),
                dt_years=dt, triu_idx=triu, epoch=epoch)
        # candidates / kept edges from the recorded top-k calls (pool = upper-triangle positions with a0 <= 0)
        iu, ju = triu
        pool_pos = [p for p in range(len(iu)) if a0_raw[iu[p], ju[p]] <= 0]
        topks = [c for c in calls if c["fn"] == "topk"]
        cand, kept = [], []
        if len(topks) >= 2:
            cand_pos = [pool_pos[int(x)] for x in topks[0]["indices"]]
            cand = [[int(iu[p]), int(ju[p])] for p in cand_pos]
            kept = [[int(iu[cand_pos[int(x)]]), int(ju[cand_pos[int(x)]])] for x in topks[1]["indices"]]
        cases.append({
            "label": label, "flags": base_flags + flags, "dt_years": dt, "epoch": epoch,
            "gate (CLGTrainer._dt_gate_months)": CLGTrainer._dt_gate_months(dt, t.innovation_dt_offset_months, t.innovation_dt_ramp_months),
            "pred_weight": pred, "out": out,
            "candidates (derived from recorded topk #1, in its output order)": cand,
            "kept_new_edges (derived from recorded topk #2, in its output order)": kept,
            "recorded_topk_quantile_calls (in call order; topk #1 = top-M over the pool's l_new, quantile = "
            "delta over the candidates, topk #2 = keep top-K_new by q, topk #3 = metric top-K_new over pool scores)": calls,
        })
    gates = []
    for off, ramp in [(0.0, 12.0), (9.0, 9.0), (6.0, 0.0)]:
        gates.append({"offset_months": off, "ramp_months": ramp,
                      "dt_years": [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, float("nan"), -1.0],
                      "gate": [CLGTrainer._dt_gate_months(d, off, ramp) for d in
                               [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, float("nan"), -1.0]]})
    # freezing and the innovation-phase visit sampling
    t, _ = trainer_from_flags(["--fixed_support", "--innovation_enabled", "--innovation_freeze_backbone_after", "3"])
    model = CLGODE(num_nodes=4, morph_dim=2, latent_dim=2, hidden_dim=3, sex_dim=3, site_dim=3, cov_embed_dim=2,
                   numeric_cov_dim=35, solver_steps=2)
    frozen = []
    for e in range(5):
        t._maybe_freeze_backbone_for_innovation(model, e)
        frozen.append({"epoch": e, "trainable": [k for k, p in model.named_parameters() if p.requires_grad]})
    samp = []
    for flags, label in [(["--fixed_support", "--innovation_enabled", "--innovation_freeze_backbone_after", "0"], "innovation phase"),
                         ([], "normal (adjacent_pair_prob 0.7)")]:
        t, _ = trainer_from_flags(flags)
        draws = {}
        for length in (2, 3, 4, 5, 6):
            if length >= 3:
                draws[str(length)] = [list(t._sample_triplet_epoch(length, 0)) for _ in range(8)]
            else:
                draws[str(length)] = [list(t._sample_pair_epoch(length, 0)) for _ in range(2)]
        samp.append({"label": label, "flags": flags, "draws_by_length (one trainer, rng default_rng(42), drawn in this order)": draws})
    return {
        "how": "CLGTrainer._innovation_step(pred_support, pred_new_dense, l_new, a0_raw, a_true_raw, dt_years, triu, epoch) "
               "on a trainer built by main() with the flags listed (float64, N=8); torch.topk/torch.quantile "
               "recorded while it runs; _dt_gate_months; _maybe_freeze_backbone_for_innovation on a tiny CLGODE; "
               "_sample_triplet_epoch/_sample_pair_epoch draws (numpy default_rng(random_state + rank)).",
        "n": n, "a0_raw": a0_raw, "a_true_raw": a_true, "l_new": l_new, "pred_new_dense": w_new,
        "pred_support": w_support, "cases": cases, "dt_gate_months": gates,
        "freeze_backbone_after_3": frozen, "visit_sampling": samp,
    }


def section_monitor():
    t_cases = []
    val_sc = {"sc_log_mse": 0.25, "sc_log_pearson_topk": 0.6, "sc_log_pearson_sparse": 0.55}
    for metric in ["val_loss", "val_sc_log_mse", "val_sc_log_pearson_topk", "val_sc_log_pearson_sparse", "monitor_mse_plus_density"]:
        for w in ("0.0", "0.01"):
            t, _ = trainer_from_flags(["--early_stop_metric", metric, "--early_stop_density_weight", w])
            t_cases.append({
                "early_stop_metric": metric, "early_stop_density_weight": float(w),
                "requires_sc": t._monitor_requires_sc(), "higher_is_better": t._monitor_higher_is_better(),
                "value(val_loss=1.5, sc=given, val_density=3.0)": t._compute_monitor_value(1.5, val_sc, 3.0),
                "value(val_loss=1.5, sc={}, val_density=3.0)": t._compute_monitor_value(1.5, {}, 3.0),
            })
    return {"how": "CLGTrainer._compute_monitor_value / _monitor_requires_sc / _monitor_higher_is_better",
            "val_sc_metrics": val_sc, "cases": t_cases}


def section_compute_loss():
    """Whole-batch loss (_compute_loss) on a tiny deterministic model and batch."""
    rng = np.random.default_rng(21)
    n, F_, L, H, K = 6, 2, 3, 5, 4
    lengths = [3, 2]
    ages = [[10.0, 12.1, 14.0], [9.5, 11.4]]
    items = []
    for s, length in enumerate(lengths):
        base = sym_matrix(rng, n, 0.6, 3.0)
        a_raw_list, a_log_list, topo_list, strength_list, x_list = [], [], [], [], []
        for v in range(length):
            a = base.copy()
            # drift: scale existing edges, add/remove one edge per visit
            a = np.round(a * (1.0 + 0.1 * v), 3)
            i, j = (v % n), ((v + 2 + s) % n)
            if i != j:
                a[i, j] = a[j, i] = 0.0 if a[i, j] > 0 else round(0.4 + 0.3 * v, 3)
            a_r, a_l = preprocess_sc(a.astype(np.float32))
            s_, sm = compute_strengths(a_r)
            a_raw_list.append(a_r)
            a_log_list.append(a_l)
            topo_list.append(compute_ecc(a_l, k=K))
            strength_list.append(np.array([s_, sm], dtype=np.float32))
            x_list.append(rounded(rng, (n, F_), -1.0, 1.0).astype(np.float32))
        items.append({
            "a_raw": torch.from_numpy(np.stack(a_raw_list)), "a_log": torch.from_numpy(np.stack(a_log_list)),
            "x": torch.from_numpy(np.stack(x_list)), "ages": torch.tensor(ages[s], dtype=torch.float32),
            "topo": torch.from_numpy(np.stack(topo_list).astype(np.float32)),
            "strength": torch.from_numpy(np.stack(strength_list)),
            "icv": torch.full((length,), float("nan"), dtype=torch.float32), "length": length,
            "sex": 1 + s, "site": 2 - s, "subject": f"sub-{s:02d}",
        })
    batch = collate_clg_sequences(items)
    stats = NormStats(
        morph_mean=torch.full((n, F_), 0.1), morph_std=torch.full((n, F_), 0.9),
        topo_mean=torch.tensor([6.0, 5.0, 4.0, 3.0]), topo_std=torch.tensor([2.0, 2.0, 1.5, 1.0]),
    )
    triu = triu_t(n)
    torch.manual_seed(0)
    ref_model = CLGODE(num_nodes=n, morph_dim=F_, latent_dim=L, hidden_dim=H, sex_dim=3, site_dim=3,
                       cov_embed_dim=2, numeric_cov_dim=2 + K + 1, solver_steps=3)
    with torch.no_grad():
        dec = ref_model.conn_decoder
        for k, v in {"alpha": 4.0, "delta": 0.05, "gamma_new": 1.5, "beta_new": 0.2, "residual_scale": 0.8,
                     "residual_bias": -0.1, "alpha_new": 5.0, "delta_new": -0.1}.items():
            getattr(dec, k).fill_(v)
    state = {k: v.clone() for k, v in ref_model.state_dict().items()}
    det = ["--morph_noise_sigma", "0", "--sc_pos_edge_drop_prob", "0", "--adjacent_pair_prob", "1.0", "--topo_bins", str(K)]
    configs = [
        ("defaults (topo 1e-3 + GradNorm), epoch 0", [], 0),
        ("defaults (topo 1e-3 + GradNorm), epoch 25 (vel+acc on, warmup done)", [], 25),
        ("topo off, no GradNorm, bce pos 2 (= minimal core), epoch 25",
         ["--lambda_topo", "0", "--gradnorm_scope", "none", "--edge_pos_weight", "2"], 25),
        ("fixed_support + residual_skip + delta_log 0.01, epoch 3",
         ["--lambda_topo", "0", "--gradnorm_scope", "none", "--fixed_support", "--residual_skip", "--lambda_delta_log", "0.01"], 3),
        ("residual_skip no dt gate + focal(2, 0.25) + full_log 0.05 + zero_log 0.02 (w2 r4) + density 0.01 (w2 r4), epoch 3",
         ["--lambda_topo", "0", "--gradnorm_scope", "none", "--residual_skip", "--residual_no_dt_gate", "--edge_loss", "focal",
          "--focal_alpha", "0.25", "--lambda_full_log_mse", "0.05", "--lambda_zero_log", "0.02", "--zero_log_warmup_epochs", "2",
          "--zero_log_ramp_epochs", "4", "--lambda_density", "0.01", "--density_warmup_epochs", "2", "--density_ramp_epochs", "4"], 3),
        ("fixed_support + residual + innovation (topm 6, k_new 3, warmup 0, ramp 2, new_reg 0.1), epoch 0",
         ["--lambda_topo", "0", "--gradnorm_scope", "none", "--fixed_support", "--residual_skip", "--innovation_enabled",
          "--innovation_topm", "6", "--innovation_k_new", "3", "--new_sparse_warmup_epochs", "0", "--new_sparse_ramp_epochs", "2",
          "--lambda_new_reg", "0.1"], 0),
        ("topo 1e-3 with log compression off, betti_t 2, order 12, 4 bins, GradNorm, epoch 10",
         ["--disable_topo_log_compress", "--betti_t", "2", "--betti_taylor_order", "12", "--topo_loss_bins", "4"], 10),
    ]
    results = []
    for label, flags, epoch in configs:
        t, _ = trainer_from_flags(det + flags)
        model = CLGODE(num_nodes=n, morph_dim=F_, latent_dim=L, hidden_dim=H, sex_dim=3, site_dim=3, cov_embed_dim=2,
                       numeric_cov_dim=t._numeric_cov_dim(), solver_steps=3, residual_skip=t.residual_skip,
                       residual_tau=t.residual_tau, residual_no_dt_gate=t.residual_no_dt_gate, residual_cap=t.residual_cap)
        model.load_state_dict(state)
        model.train()
        loss, metrics = t._compute_loss(model, batch, triu, stats, [], epoch)
        entry = {"label": label, "flags": det + flags, "epoch": epoch, "total_loss": loss,
                 "metrics": {k: v for k, v in metrics.items() if k != "topo_raw_values"},
                 "topo_raw_values": metrics.get("topo_raw_values", []),
                 "gradnorm_weights_after": dict(t._gradnorm_weights),
                 "topo_warmup_factor": t._topo_warmup_factor(epoch)}
        if t.lambda_topo > 0:
            # the same batch again in evaluation mode: GradNorm weights are read, not updated
            model.eval()
            with torch.no_grad():
                loss_eval, _ = t._compute_loss(model, batch, triu, stats, [], epoch)
            entry["total_loss_second_call_eval_no_grad"] = loss_eval
            entry["gradnorm_weights_after_eval_call"] = dict(t._gradnorm_weights)
        results.append(entry)
    inputs = {k: batch[k] for k in ["a_raw", "a_log", "x", "ages", "topo", "strength", "lengths", "sex", "site"]}
    return {
        "how": "CLGTrainer._compute_loss(model, batch, triu, stats, volume_indices=[], epoch) on a fresh trainer built by "
               "main() with the flags listed, model = src.models.clg_ode.CLGODE (float32, N=6, F=2, L=3, H=5, "
               "cov_embed_dim 2, numeric covariates 2+topo_bins(4)+1, 3 RK4 steps, residual flags from the trainer) loaded "
               "with the state_dict below, model.train(). batch = collate_clg_sequences of 2 subjects (3 and 2 visits). "
               "Deterministic because morph_noise_sigma 0, sc_pos_edge_drop_prob 0 and adjacent_pair_prob 1.0 (a "
               "3-visit subject always gets (0,1,2); the rng is still drawn). float32 throughout (the reference's dtype).",
        "batch": inputs,
        "norm_stats": {"morph_mean": stats.morph_mean, "morph_std": stats.morph_std, "topo_mean": stats.topo_mean,
                       "topo_std": stats.topo_std},
        "model_state_dict": state,
        "configs": results,
    }


def main():
    sha = ""
    try:
        sha = subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=REF, stderr=subprocess.DEVNULL).decode().strip()
    except Exception:  # noqa: BLE001
        sha = ""
    out = {
        "reference": {"repo": "github.com/xsmilebook/sc_connectome_trajectories", "commit": sha,
                      "torch": torch.__version__, "numpy": np.__version__},
        "conventions": "matrices row-major nested lists; non-finite floats as strings 'nan'/'inf'/'-inf'; "
                       "float32 values written exactly (as doubles).",
    }
    with contextlib.redirect_stdout(sys.stderr):
        out["cli"] = section_cli()
        out["topology"] = section_topology()
        out["gradnorm"] = section_gradnorm()
        out["residual_decoder"] = section_decoder()
        out["edge_losses"] = section_edge_losses()
        out["log_domain_terms"] = section_log_terms()
        out["innovation"] = section_innovation()
        out["monitor"] = section_monitor()
        out["compute_loss"] = section_compute_loss()
    for d in TMP_DIRS:
        shutil.rmtree(d, ignore_errors=True)
    json.dump(clean(out), sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
