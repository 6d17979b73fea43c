#!/usr/bin/env python3
"""Goldens for the reference's two baselines (VectorLSTM and the two-layer GCN "GNN baseline"),
computed by the reference's OWN code.

Usage (from the repository root):

    python tests/golden/baselines_golden.py /path/to/sc_connectome_trajectories \
        > tests/fixtures/baselines-golden.json

The reference checkout (github.com/xsmilebook/sc_connectome_trajectories; this file was produced
against commit 4cc09e3df8aa4f910b9c46a3b186855c3738170c) is put on sys.path and its modules are
imported; nothing of it is copied here. Needs torch (CPU is enough), numpy, pandas, scikit-learn.
See docs/baselines-surface.md for what the baselines are.

What is called is named in every section's "how" field. The training-step values come from the
reference trainers' own methods (`Trainer._train_one_epoch` / `GNNTrainer._train_one_epoch`,
`_evaluate`, `_test_metrics`, `_loss`), fed a one-batch "loader" (a Python list holding the batch the
reference's own Dataset + collate function built from the fixture files). Values that only exist
inside those methods are captured while they run: the model output (forward hook on the model),
layer outputs (forward hooks on sub-modules), the gradients (a wrapper around the optimizer's
`step` that reads `.grad` just before the real step runs), the dropout mask (the RNG state around
the dropout call is replayed on a tensor of ones). Such values are marked "recorded". Values marked
"derived" are computed here, by the formula stated, from recorded ones.

Side effects on the checkout: `scripts/evaluate.py`'s main() creates `<checkout>/outputs/logs/`
(as it always does). Everything else is written to temporary directories, removed at the end.

JSON conventions: matrices are nested lists (row-major); non-finite floats are written as the
strings "nan", "inf", "-inf"; float32 results are written as the exact float32 value (as a double).
Parameter lists are in `state_dict()` order, each {"name", "shape", "value"}.
"""
from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

REF = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
if not REF or not os.path.isdir(os.path.join(REF, "src")):
    sys.stderr.write("usage: baselines_golden.py /path/to/sc_connectome_trajectories\n")
    sys.exit(2)
sys.path.insert(0, REF)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.nn import functional as F  # noqa: E402

torch.set_num_threads(1)

import sklearn  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.model_selection import GroupKFold  # noqa: E402

from src.data.dataset import SCDataset, collate_sequences  # noqa: E402
from src.data.utils import compute_triu_indices, load_matrix, preprocess_sc  # noqa: E402
from src.engine.trainer import Trainer  # noqa: E402
from src.engine.gnn_trainer import GNNTrainer, GraphPairDataset, collate_graph_pairs  # noqa: E402
from src.models.vector_lstm import VectorLSTM  # noqa: E402
from src.models.gnn_baseline import GNNBaseline  # noqa: E402
import scripts.train_vector_lstm_baseline as tvl  # noqa: E402
import scripts.train_gnn_baseline as tgb  # noqa: E402
import scripts.evaluate as ev  # noqa: E402
import scripts.train as tr_legacy  # noqa: E402

TMP_DIRS: list[str] = []

N_NODES = 6
LSTM_LATENT = 8
GNN_HIDDEN = 5
SEED = 0


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


def tmpdir(prefix: str) -> str:
    d = tempfile.mkdtemp(prefix=prefix)
    TMP_DIRS.append(d)
    return d


def params_list(sd) -> list:
    return [{"name": k, "shape": list(v.shape), "value": v.detach().clone()} for k, v in sd.items()]


def grads_list(model) -> list:
    out = []
    for name, p in model.named_parameters():
        out.append({"name": name, "shape": list(p.shape),
                    "value": None if p.grad is None else p.grad.detach().clone()})
    return out


def adam_state(model, opt) -> list:
    names = {id(p): n for n, p in model.named_parameters()}
    out = []
    for group in opt.param_groups:
        for p in group["params"]:
            st = opt.state.get(p, {})
            out.append({"name": names[id(p)], "step": float(st["step"]) if "step" in st else None,
                        "exp_avg": st.get("exp_avg"), "exp_avg_sq": st.get("exp_avg_sq")})
    return out


def opt_hparams(opt) -> dict:
    g = opt.param_groups[0]
    return {k: g[k] for k in ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "foreach",
                              "capturable", "differentiable", "fused") if k in g}


def wrap_step(opt, sink: list, model):
    """Record every parameter's .grad just before each real optimizer step."""
    real = opt.step

    def step(*a, **kw):
        sink.append(grads_list(model))
        return real(*a, **kw)

    opt.step = step


@contextlib.contextmanager
def forward_recorder(module, sink: list, what=lambda inp, out: out):
    h = module.register_forward_hook(lambda m, inp, out: sink.append(what(inp, out)))
    try:
        yield sink
    finally:
        h.remove()


def rel(path: str, base: str) -> str:
    return os.path.relpath(path, base)


# ----------------------------------------------------------------------------------------------
# fixture cohort (files in the reference's on-disk layout)
# ----------------------------------------------------------------------------------------------

SESSIONS = ["ses-baselineYear1Arm1", "ses-2YearFollowUpYArm1", "ses-4YearFollowUpYArm1"]


def fixture_matrix(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    """Raw 'streamline count'-like matrix, 2 decimals. kind: 'sym' (symmetric, zero diagonal),
    'asym' (small asymmetry and a non-zero diagonal, to exercise preprocess_sc), 'isolated'
    (symmetric, node n-1 has no edges)."""
    a = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            if rng.random() < 0.7:
                a[i, j] = a[j, i] = round(float(rng.uniform(0.5, 20.0)), 2)
    if kind == "asym":
        for i in range(n):
            a[i, i] = round(float(rng.uniform(0.5, 3.0)), 2)
        for (i, j) in [(0, 2), (1, 4), (3, 5)]:
            a[i, j] = round(a[i, j] + float(rng.uniform(0.25, 2.0)), 2)
    if kind == "isolated":
        a[n - 1, :] = 0.0
        a[:, n - 1] = 0.0
    return a


def write_csv(path: str, a: np.ndarray) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in a:
            f.write(",".join(repr(float(x)) for x in row) + "\n")


def build_cohort():
    """sub-A: 3 visits (baseline asymmetric + non-zero diagonal); sub-B: 2 visits with morphology +
    a 4-year scan WITHOUT a morphology file (dropped by the morphology filter); sub-C: 2 visits
    (2-year one has an isolated node); sub-D: 3 visits; sub-E: 1 visit."""
    rng = np.random.default_rng(20260122)
    root = tmpdir("blgold_")  # NB: no "baseline"/"2year"/... in temp names (see infer_sesid)
    sc_dir = os.path.join(root, "sc")
    morph_root = os.path.join(root, "morph")
    os.makedirs(sc_dir)
    plan = {
        "sub-A": [("ses-baselineYear1Arm1", "asym", True), ("ses-2YearFollowUpYArm1", "sym", True),
                  ("ses-4YearFollowUpYArm1", "sym", True)],
        "sub-B": [("ses-baselineYear1Arm1", "sym", True), ("ses-2YearFollowUpYArm1", "sym", True),
                  ("ses-4YearFollowUpYArm1", "sym", False)],
        "sub-C": [("ses-baselineYear1Arm1", "sym", True), ("ses-2YearFollowUpYArm1", "isolated", True)],
        "sub-D": [("ses-baselineYear1Arm1", "sym", True), ("ses-2YearFollowUpYArm1", "sym", True),
                  ("ses-4YearFollowUpYArm1", "sym", True)],
        "sub-E": [("ses-baselineYear1Arm1", "sym", True)],
    }
    files = []
    for sid, visits in plan.items():
        for ses, kind, has_morph in visits:
            a = fixture_matrix(rng, N_NODES, kind)
            fname = f"{sid}_{ses}.csv"
            write_csv(os.path.join(sc_dir, fname), a)
            if has_morph:
                mdir = os.path.join(morph_root, ses)
                os.makedirs(mdir, exist_ok=True)
                with open(os.path.join(mdir, f"Schaefer400_Morphology_{sid}.csv"), "w") as f:
                    f.write("dummy\n")
            files.append({"file": fname, "subject": sid, "session": ses, "kind": kind,
                          "has_morphology_file": has_morph, "csv_values": a,
                          "load_matrix (float32)": load_matrix(os.path.join(sc_dir, fname), max_nodes=N_NODES)})
    return root, sc_dir, morph_root, files


def seq_names(sequences, sc_dir):
    return [{"subject": sid, "files": [rel(p, sc_dir) for p in paths]} for sid, paths in sequences]


# ----------------------------------------------------------------------------------------------
# VectorLSTM
# ----------------------------------------------------------------------------------------------

def section_vector_lstm(sc_dir, morph_root):
    res_dir = tmpdir("lstm_res_")
    cfg = {"latent_dim": LSTM_LATENT, "batch_size": 4, "learning_rate": 1e-4, "max_nodes": N_NODES,
           "topo_bins": 32, "random_state": 42, "torch.manual_seed before model construction": SEED}
    trainer = Trainer(sc_dir=sc_dir, results_dir=res_dir, model_class=VectorLSTM, latent_dim=LSTM_LATENT,
                      batch_size=4, max_epochs=1, patience=10, learning_rate=1e-4, random_state=42,
                      morph_root=morph_root, topo_bins=32, max_nodes=N_NODES, cv_folds=5, cv_fold=None)
    sequences = trainer._build_sequences()
    out = {"how": "Trainer(model_class=VectorLSTM, latent_dim=8, batch_size=4, learning_rate=1e-4 (the CLI "
                  "default), max_nodes=6, morph_root=fixture) from src/engine/trainer.py; every value below is "
                  "produced by that trainer's methods or by the reference's SCDataset/collate_sequences.",
           "config": cfg}
    out["sequences"] = {"how": "Trainer._build_sequences() (list_subject_sequences(min_length=1) + morphology "
                               "filter); file names relative to the fixture sc dir.",
                        "value": seq_names(sequences, sc_dir)}
    idx_all = list(range(len(sequences)))
    train_loader, val_loader = trainer._get_loaders_for_indices(sequences, idx_all, idx_all)
    items = [{"subject": it["subject"], "length": it["length"], "x": it["x"], "y": it["y"],
              "dtype": str(it["x"].dtype)} for it in val_loader.dataset]
    batches = list(val_loader)
    out["dataset"] = {
        "how": "Trainer._get_loaders_for_indices(sequences, all, all): drops subjects with < 2 scans, "
               "wraps the rest in SCDataset(seqs, triu_idx of max_nodes) -- items x = visits[:-1], "
               "y = visits[1:], each visit = load_matrix(path) (default max_nodes 400) upper triangle "
               "(k=1, row-major), NO symmetrisation / log. 'batches' = the val DataLoader (shuffle=False, "
               "batch_size 4, collate_sequences: zero padding to the longest x, mask 1 on real steps).",
        "kept_subjects": [it["subject"] for it in items],
        "items": items,
        "batches": [{k: b[k] for k in ("x", "y", "mask", "lengths", "subjects")} for b in batches],
    }
    batch = batches[0]
    D = batch["x"].shape[-1]

    torch.manual_seed(SEED)
    model = VectorLSTM(input_dim=D, latent_dim=LSTM_LATENT)
    init_sd = copy.deepcopy(model.state_dict())
    out["model"] = {"how": f"torch.manual_seed({SEED}); VectorLSTM(input_dim={D}, latent_dim={LSTM_LATENT}) "
                           "(num_layers=1); state_dict() in order.",
                    "input_dim": D, "latent_dim": LSTM_LATENT, "init_params": params_list(init_sd)}

    # eval loss at init (Trainer._evaluate), with layer outputs recorded
    inter = {"encoder_out": [], "relu_out": [], "lstm_out": [], "lstm_h_n": [], "lstm_c_n": [], "y_pred": []}
    hooks = [
        model.encoder.register_forward_hook(lambda m, i, o: inter["encoder_out"].append(o.detach().clone())),
        model.activation.register_forward_hook(lambda m, i, o: inter["relu_out"].append(o.detach().clone())),
        model.lstm.register_forward_hook(lambda m, i, o: (inter["lstm_out"].append(o[0].detach().clone()),
                                                           inter["lstm_h_n"].append(o[1][0].detach().clone()),
                                                           inter["lstm_c_n"].append(o[1][1].detach().clone()))
                                         and None),  # a hook must return None (else it replaces the output)
        model.register_forward_hook(lambda m, i, o: inter["y_pred"].append(o.detach().clone())),
    ]
    val_loss_init = trainer._evaluate(model, [batch])
    for h in hooks:
        h.remove()
    forward = {k: v[0] for k, v in inter.items()}
    y, mask = batch["y"], batch["mask"]
    diff = (forward["y_pred"] - y) ** 2 * mask.unsqueeze(-1)
    out["forward"] = {
        "how": "the batch above through the initial model inside Trainer._evaluate (recorded by forward hooks): "
               "encoder_out = Linear on (B*T, D) before ReLU, relu_out after ReLU (shape (B*T, H)), lstm_out "
               "(B, T, H) batch_first with zero initial state over the padded sequence (no packing), h_n/c_n "
               "(1, B, H) after the LAST (padded) step, y_pred (B, T, D). Same in train mode (no dropout).",
        "input": "dataset.batches[0] (x (B, T, D) float32, y, mask)",
        **forward,
        "loss_eval (Trainer._evaluate return value)": val_loss_init,
        "loss_derived (sum((y_pred-y)^2 * mask[...,None]) / (sum(mask) * D), float32)":
            (diff.sum() / (mask.sum() * D)).item(),
    }

    # one (then a second) training step via Trainer._train_one_epoch on the same one-batch loader
    opt = torch.optim.Adam(model.parameters(), lr=trainer.learning_rate)
    grads: list = []
    wrap_step(opt, grads, model)
    preds: list = []
    with forward_recorder(model, preds, lambda i, o: o.detach().clone()):
        loss1 = trainer._train_one_epoch(model, [batch], opt)
        p1 = copy.deepcopy(model.state_dict())
        st1 = adam_state(model, opt)
        loss2 = trainer._train_one_epoch(model, [batch], opt)
        p2 = copy.deepcopy(model.state_dict())
    out["train_step"] = {
        "how": "optimizer = torch.optim.Adam(model.parameters(), lr=trainer.learning_rate) exactly as "
               "Trainer._train_cv builds it; Trainer._train_one_epoch(model, [batch], optimizer) twice. "
               "loss = its return value (= the single batch's loss.item()); grads recorded at optimizer.step; "
               "params_after = state_dict after the step; adam_state after step 1.",
        "optimizer": {"class": "torch.optim.Adam", **opt_hparams(opt)},
        "step1": {"y_pred": preds[0], "loss": loss1, "grads": grads[0], "params_after": params_list(p1),
                  "adam_state_after": st1},
        "step2": {"y_pred": preds[1], "loss": loss2, "grads": grads[1], "params_after": params_list(p2)},
    }

    # test-time path (Trainer._test_metrics) with the INITIAL weights
    test_model = VectorLSTM(input_dim=D, latent_dim=LSTM_LATENT)
    test_model.load_state_dict(init_sd)
    calls: list = []
    with forward_recorder(test_model, calls, lambda i, o: {"x": i[0].detach().clone(), "y_pred": o.detach().clone()}):
        test_metrics, sc_metrics = trainer._test_metrics(test_model, sequences, idx_all)
    out["test_metrics"] = {
        "how": "Trainer._test_metrics(model with init_params, sequences, all indices): for each subject "
               "x = upper triangle of preprocess_sc(load_matrix(visit 0))[0] (symmetrised, zero diagonal, raw "
               "scale) as a (1, 1, D) sequence; prediction = model(x)[0, 0]; target = preprocess_sc(visit 1) "
               "(or visit 0 itself when the subject has one scan). mse = sklearn mean_squared_error over "
               "(subjects, D); pearson on the flattened, centred vectors with +1e-8 inside each sqrt; "
               "sc = mean over subjects of compute_sc_metrics(vector_to_matrix(pred), vector_to_matrix(true), "
               "triu, topo_bins=32).",
        "calls": [{"subject": sequences[i][0], **c} for i, c in enumerate(calls)],
        "test_metrics": test_metrics,
        "test_sc_metrics": sc_metrics,
    }
    return out


# ----------------------------------------------------------------------------------------------
# GNN baseline
# ----------------------------------------------------------------------------------------------

class DropoutRecorder:
    """Records the dropout mask actually drawn, by replaying the RNG state on a tensor of ones."""

    def __init__(self, module):
        self.module = module
        self.calls = []
        self._state = None
        self.h1 = module.register_forward_pre_hook(self.pre)
        self.h2 = module.register_forward_hook(self.post)

    def pre(self, m, inp):
        self._state = torch.get_rng_state()

    def post(self, m, inp, outp):
        x = inp[0]
        rec = {"training": m.training, "p": m.p, "input": x.detach().clone(), "output": outp.detach().clone()}
        if m.training:
            after = torch.get_rng_state()
            torch.set_rng_state(self._state)
            scaled = F.dropout(torch.ones_like(x), m.p, True)
            torch.set_rng_state(after)
            assert torch.equal(outp, x * scaled), "dropout replay mismatch"
            rec["keep_mask"] = (scaled != 0).to(torch.int64)
            rec["scale (kept entries of F.dropout(ones))"] = scaled[scaled != 0][0].item() if bool((scaled != 0).any()) else None
        self.calls.append(rec)
        return None

    def remove(self):
        self.h1.remove()
        self.h2.remove()


def gcn_norm_derived(adj: torch.Tensor) -> torch.Tensor:
    n = adj.shape[-1]
    a_hat = adj + torch.eye(n, dtype=adj.dtype).unsqueeze(0)
    d = a_hat.sum(dim=-1).pow(-0.5)
    d[torch.isinf(d)] = 0.0
    return d.unsqueeze(-1) * a_hat * d.unsqueeze(-2)


def section_gnn(sc_dir, morph_root):
    res_dir = tmpdir("gnn_res_")
    cfg = {"hidden_dim": GNN_HIDDEN, "batch_size": 2, "learning_rate": 1e-4, "max_nodes": N_NODES,
           "topo_bins": 32, "random_state": 42, "torch.manual_seed before model construction": SEED}
    trainer = GNNTrainer(sc_dir=sc_dir, morph_root=morph_root, results_dir=res_dir, model_class=GNNBaseline,
                         model_kwargs={"hidden_dim": GNN_HIDDEN}, batch_size=2, max_epochs=1, patience=8,
                         learning_rate=1e-4, random_state=42, topo_bins=32, max_nodes=N_NODES, cv_folds=5,
                         cv_fold=None)
    sequences = trainer._build_sequences()
    idx_all = list(range(len(sequences)))
    out = {"how": "GNNTrainer(model_class=GNNBaseline, model_kwargs={'hidden_dim': 5}, batch_size=2 (CLI default), "
                  "learning_rate=1e-4 (CLI default), max_nodes=6, morph_root=fixture) from src/engine/gnn_trainer.py.",
           "config": cfg,
           "sequences": {"how": "GNNTrainer._build_sequences()", "value": seq_names(sequences, sc_dir)}}
    train_pairs = trainer._pairs_for_sequences(sequences, idx_all, include_singleton=False)
    test_pairs = trainer._pairs_for_sequences(sequences, idx_all, include_singleton=True)
    pr = lambda ps: [{"subject": p.subject_id, "src": rel(p.src_path, sc_dir), "tgt": rel(p.tgt_path, sc_dir)} for p in ps]  # noqa: E731
    ds = GraphPairDataset(train_pairs, N_NODES)
    loader = torch.utils.data.DataLoader(ds, batch_size=2, shuffle=False, collate_fn=collate_graph_pairs)
    batches = list(loader)
    out["pairs"] = {
        "how": "GNNTrainer._pairs_for_sequences(sequences, all, include_singleton=False) (training/validation) "
               "and include_singleton=True (test): EVERY consecutive scan pair of a subject; with the flag, "
               "a one-scan subject gives the identity pair (scan, scan).",
        "train_val_pairs": pr(train_pairs),
        "test_pairs": pr(test_pairs),
    }
    out["dataset"] = {
        "how": "GraphPairDataset(train_val_pairs, max_nodes=6)[i] = {a_in: preprocess_sc(load_matrix(src))[0], "
               "a_out: preprocess_sc(load_matrix(tgt))[0]} (0.5*(A+A^T), zero diagonal, raw scale, float32); "
               "'batches' = DataLoader(batch_size=2, shuffle=False, collate_fn=collate_graph_pairs) (stack).",
        "items": [ds[i] for i in range(len(ds))],
        "batches": batches,
    }
    batch = batches[0]

    torch.manual_seed(SEED)
    model = GNNBaseline(hidden_dim=GNN_HIDDEN)
    init_sd = copy.deepcopy(model.state_dict())
    out["model"] = {"how": f"torch.manual_seed({SEED}); GNNBaseline(hidden_dim={GNN_HIDDEN}); state_dict() in order.",
                    "hidden_dim": GNN_HIDDEN, "dropout_p": model.dropout.p, "init_params": params_list(init_sd)}

    def record_forward(run):
        inter = {"gcn1_in_x": [], "gcn1_out": [], "gcn2_out": [], "y_pred": []}
        hooks = [
            model.gcn1.register_forward_hook(lambda m, i, o: (inter["gcn1_in_x"].append(i[0].detach().clone()),
                                                              inter["gcn1_out"].append(o.detach().clone()))
                                             and None),
            model.gcn2.register_forward_hook(lambda m, i, o: inter["gcn2_out"].append(o.detach().clone())),
            model.register_forward_hook(lambda m, i, o: inter["y_pred"].append(o.detach().clone())),
        ]
        dr = DropoutRecorder(model.dropout)
        losses = []
        real_loss = trainer._loss

        def loss_rec(pred, target):
            v = real_loss(pred, target)
            losses.append(v.detach().clone())
            return v

        trainer._loss = loss_rec
        try:
            ret = run()
        finally:
            del trainer._loss
            for h in hooks:
                h.remove()
            dr.remove()
        return ret, inter, dr.calls, losses

    # eval-mode forward + loss (GNNTrainer._evaluate): dropout is the identity
    val_loss_init, inter, drops, losses = record_forward(lambda: trainer._evaluate(model, [batch]))
    a_in, a_out = batch["a_in"], batch["a_out"]
    pred = inter["y_pred"][0]
    iu = trainer.triu_idx
    dl = torch.log1p(pred.clamp(min=0))[:, iu[0], iu[1]] - torch.log1p(a_out.clamp(min=0))[:, iu[0], iu[1]]
    out["forward_eval"] = {
        "how": "batch 0 through the initial model inside GNNTrainer._evaluate (model.eval(): dropout off). "
               "Recorded: gcn1_in_x = log1p(a_in.sum(-1, keepdim)) (B, N, 1); gcn1_out = GCNLayer 1 output "
               "before ReLU; gcn2_out = GCNLayer 2 output before ReLU; y_pred = final (B, N, N). "
               "gcn_norm_derived = D^-1/2 (A+I) D^-1/2 with D = rowsum(A+I) (the formula of GCNLayer.forward, "
               "evaluated here). loss = GNNTrainer._loss(pred, a_out) (recorded) and _evaluate's return value.",
        "input": "dataset.batches[0] (a_in (B, N, N) float32 is the model input, a_out the target)",
        "gcn_norm_derived": gcn_norm_derived(a_in),
        "gcn1_in_x": inter["gcn1_in_x"][0], "gcn1_out": inter["gcn1_out"][0], "gcn2_out": inter["gcn2_out"][0],
        "dropout_training": drops[0]["training"],
        "y_pred": pred,
        "loss_recorded": losses[0],
        "loss_eval (GNNTrainer._evaluate return value)": val_loss_init,
        "loss_derived (mean over (B, E) of (log1p(clamp(pred,0)) - log1p(clamp(a_out,0)))^2 on the upper triangle)":
            (dl ** 2).mean().item(),
    }

    # training steps (GNNTrainer._train_one_epoch): dropout ON, mask recorded
    opt = torch.optim.Adam(model.parameters(), lr=trainer.learning_rate)
    grads: list = []
    wrap_step(opt, grads, model)
    steps = []
    for k in range(2):
        loss_k, inter_k, drops_k, losses_k = record_forward(lambda: trainer._train_one_epoch(model, [batch], opt))
        steps.append({
            "dropout_keep_mask": drops_k[0]["keep_mask"],
            "dropout_scale": drops_k[0]["scale (kept entries of F.dropout(ones))"],
            "dropout_input (= relu(gcn1_out))": drops_k[0]["input"],
            "gcn1_out": inter_k["gcn1_out"][0], "gcn2_out": inter_k["gcn2_out"][0],
            "y_pred": inter_k["y_pred"][0],
            "loss_recorded": losses_k[0],
            "loss (return value)": loss_k,
            "grads": grads[k],
            "params_after": params_list(copy.deepcopy(model.state_dict())),
        })
        if k == 0:
            steps[0]["adam_state_after"] = adam_state(model, opt)
    out["train_step"] = {
        "how": "optimizer = torch.optim.Adam(model.parameters(), lr=1e-4) as GNNTrainer._train_cv builds it; "
               "GNNTrainer._train_one_epoch(model, [batch0], optimizer) twice (model.train(): dropout p=0.1 ON). "
               f"The global torch RNG is the one left by torch.manual_seed({SEED}) + model construction + the "
               "eval pass above (no RNG use there). The dropout keep mask (B, N, hidden) is recorded by replaying "
               "the RNG state on ones; kept entries are multiplied by dropout_scale = 1/(1-p) as float32.",
        "optimizer": {"class": "torch.optim.Adam", **opt_hparams(opt)},
        "step1": steps[0],
        "step2": steps[1],
    }

    # test path
    test_model = GNNBaseline(hidden_dim=GNN_HIDDEN)
    test_model.load_state_dict(init_sd)
    trainer.model = test_model
    calls: list = []
    with forward_recorder(test_model, calls, lambda i, o: {"a_in": i[0].detach().clone(), "y_pred": o.detach().clone()}):
        test_metrics, sc_metrics = trainer._test_metrics(sequences, idx_all)
    out["test_metrics"] = {
        "how": "GNNTrainer._test_metrics(sequences, all indices) with self.model = GNNBaseline loaded with "
               "init_params (eval mode): test pairs (include_singleton=True) in DataLoader batches of 2; "
               "per pair the (N, N) prediction and target (raw scale, NOT log) go into the flattened upper "
               "triangles for mse (sklearn mean_squared_error) / pearson (+1e-8 in each sqrt), and into "
               "compute_sc_metrics(pred, target, triu, 32) averaged over pairs.",
        "calls": calls,
        "test_metrics": test_metrics,
        "test_sc_metrics": sc_metrics,
    }
    return out


# ----------------------------------------------------------------------------------------------
# splits
# ----------------------------------------------------------------------------------------------

def section_splits():
    out = {"how": "Trainer._split_outer / GNNTrainer._split_outer on fake sequences [('sub-XXX', ['p']), ...] "
                  "(subject ids sorted, one entry per subject, as list_subject_sequences returns them), then "
                  "GroupKFold(n_splits=cv_folds).split(indices, groups=groups) exactly as both _train_cv do; "
                  "fold indices mapped back to sequence indices (indices[rel]).",
           "sklearn": sklearn.__version__, "cases": []}
    d = tmpdir("split_")
    lt = Trainer(sc_dir=d, results_dir=d, model_class=VectorLSTM, max_nodes=N_NODES)
    gt = GNNTrainer(sc_dir=d, morph_root=d, results_dir=d, model_class=GNNBaseline, max_nodes=N_NODES)
    for n_subj, rs, folds in [(12, 42, 5), (23, 42, 5), (23, 7, 5), (10, 42, 2)]:
        seqs = [(f"sub-{i:03d}", ["p"]) for i in range(n_subj)]
        lt.random_state = rs
        gt.random_state = rs
        tv, te, subjects = lt._split_outer(seqs)
        tv2, te2, _ = gt._split_outer(seqs)
        assert (tv, te) == (tv2, te2)
        groups = np.array([subjects[i] for i in tv])
        indices = np.array(tv)
        fl = []
        for k, (a, b) in enumerate(GroupKFold(n_splits=folds).split(indices, groups=groups)):
            fl.append({"fold": k, "train": indices[a].tolist(), "val": indices[b].tolist()})
        out["cases"].append({"n_subjects": n_subj, "random_state": rs, "cv_folds": folds,
                             "trainval": tv, "test": te, "folds": fl})
    return out


# ----------------------------------------------------------------------------------------------
# checkpoint aliasing (quirk)
# ----------------------------------------------------------------------------------------------

def section_checkpoints(sc_dir, morph_root):
    """Runs each trainer's _train_cv for one fold and compares the saved 'best' checkpoint with
    per-epoch weight snapshots."""
    out = {"how": "Trainer._train_cv / GNNTrainer._train_cv on the fixture, cv_folds=2, cv_fold=0, trainval = the "
                  "sequences with >= 2 scans, max_epochs=6, patience=100, learning_rate 0.5 (VectorLSTM) / 0.05 (GNN) "
                  "(large on purpose, so the validation loss is not monotone), torch.manual_seed(1) first. The model class is "
                  "wrapped only to keep a handle on the instance; _train_one_epoch is wrapped to deep-copy the "
                  "weights after every epoch and _evaluate to record the per-epoch validation loss. Then the "
                  "checkpoint file the method saved is compared with every snapshot (max abs difference). "
                  "CPU run: GNNTrainer's `{k: v.cpu() ...}` is also a no-copy alias on CPU (on CUDA it copies).",
           "cases": []}
    for kind in ("vector_lstm", "gnn"):
        res = tmpdir(f"ckpt_{kind}_")
        holder = {}
        if kind == "vector_lstm":
            def factory(**kw):
                m = VectorLSTM(**kw)
                holder["m"] = m
                return m
            t = Trainer(sc_dir=sc_dir, results_dir=res, model_class=factory, latent_dim=LSTM_LATENT, batch_size=4,
                        max_epochs=6, patience=100, learning_rate=0.5, random_state=42, morph_root=morph_root,
                        max_nodes=N_NODES, cv_folds=2, cv_fold=0)
        else:
            def factory(**kw):
                m = GNNBaseline(**kw)
                holder["m"] = m
                return m
            t = GNNTrainer(sc_dir=sc_dir, morph_root=morph_root, results_dir=res, model_class=factory,
                           model_kwargs={"hidden_dim": GNN_HIDDEN}, batch_size=2, max_epochs=6, patience=100,
                           learning_rate=0.05, random_state=42, max_nodes=N_NODES, cv_folds=2, cv_fold=0)
        seqs = t._build_sequences()
        tv = [i for i, (_, p) in enumerate(seqs) if len(p) >= 2]
        subjects = [s for s, _ in seqs]
        snaps, vals = [], []
        real_train, real_eval = t._train_one_epoch, t._evaluate

        def train_wrap(model, loader, opt):
            r = real_train(model, loader, opt)
            snaps.append(copy.deepcopy(model.state_dict()))
            return r

        def eval_wrap(model, loader):
            r = real_eval(model, loader)
            vals.append(r)
            return r

        t._train_one_epoch, t._evaluate = train_wrap, eval_wrap
        torch.manual_seed(1)
        with contextlib.redirect_stdout(io.StringIO()):
            path = t._train_cv(seqs, tv, subjects)
        saved = torch.load(path, map_location="cpu")
        diffs = [max(float((saved[k] - s[k]).abs().max()) for k in saved) for s in snaps]
        best_epoch = int(np.argmin(vals))
        out["cases"].append({
            "trainer": kind,
            "saved_file": os.path.basename(path),
            "val_loss_per_epoch": vals,
            "best_epoch (0-based, strict < keeps the first minimum)": best_epoch,
            "max_abs_diff_saved_vs_snapshot_per_epoch": diffs,
            "saved_equals_epoch": [i for i, d in enumerate(diffs) if d == 0.0],
            "summary (best_model_path: file name only)": {
                **t.summary, "best_model_path": os.path.basename(t.summary.get("best_model_path", ""))},
        })
    return out


# ----------------------------------------------------------------------------------------------
# scripts/evaluate.py
# ----------------------------------------------------------------------------------------------

def section_evaluate():
    rng = np.random.default_rng(5)
    d = tmpdir("eval400_")
    sc = os.path.join(d, "sc")
    res = os.path.join(d, "res")
    os.makedirs(sc)
    os.makedirs(res)
    n = 400
    for sid in ("sub-P", "sub-Q"):
        for ses in SESSIONS:
            a = np.zeros((n, n))
            iu = np.triu_indices(n, k=1)
            pick = rng.random(iu[0].shape[0]) < 0.02
            vals = np.round(rng.uniform(1.0, 30.0, size=int(pick.sum())), 1)
            a[iu[0][pick], iu[1][pick]] = vals
            a = a + a.T
            np.savetxt(os.path.join(sc, f"{sid}_{ses}.csv"), a, fmt="%g", delimiter=",")
    runs = []
    for label, extra in [("default mode", []), ("--timepoint_eval", ["--timepoint_eval"])]:
        argv = ["evaluate.py", "--sc_dir", sc, "--results_dir", res, "--latent_dim", "8"] + extra
        old = sys.argv
        sys.argv = argv
        torch.manual_seed(0)
        err = None
        tb_last = None
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                ev.main()
        except Exception as e:  # noqa: BLE001
            err = f"{type(e).__name__}: {e}"
            frames = traceback.extract_tb(e.__traceback__)
            tb_last = [f"{rel(f.filename, REF)}:{f.lineno} {f.line}" for f in frames if f.filename.startswith(REF)]
        finally:
            sys.argv = old
        written = sorted(os.listdir(res))
        rec = {"mode": label, "argv_tail": argv[1:], "error": err, "traceback": tb_last, "files_written": written}
        if "vector_lstm_timepoint_eval.json" in written:
            with open(os.path.join(res, "vector_lstm_timepoint_eval.json")) as f:
                rec["vector_lstm_timepoint_eval.json (random init weights: no checkpoint found)"] = json.load(f)
        runs.append(rec)
    return {"how": "scripts/evaluate.main() with sys.argv set (paths replaced by placeholders in argv_tail), on a "
                   "cohort of 2 subjects x 3 scans of 400x400 matrices (the script hard-codes 400 nodes), "
                   "--latent_dim 8, no vector_lstm_results.json / splits csv in results_dir (so test subjects = "
                   "the first --n_subjects=32 sequences and the model keeps its random initialisation).",
            "runs": [{**r, "argv_tail": ["SC" if a == sc else "RES" if a == res else a for a in r["argv_tail"]]}
                     for r in runs]}


# ----------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------

def describe_parser(parser, replace: dict) -> dict:
    defaults = vars(parser.parse_args([]))
    for k, v in replace.items():
        defaults[k] = v
    flags = []
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        flags.append({
            "flag": action.option_strings[0],
            "dest": action.dest,
            "kind": "store_true" if action.nargs == 0 else (action.type.__name__ if action.type else "str"),
            "default": defaults[action.dest],
            "choices": list(action.choices) if action.choices else None,
        })
    return {"n_flags": len(flags), "flags": flags, "parse_args([])": defaults}


SUBMIT_FLAGS = {
    "vector_lstm": ["--config", "configs/paths.yaml", "--sc_dir", "SC", "--morph_root", "MR", "--results_dir", "RD",
                    "--run_name", "vector_lstm_TS_jobJ/fold0", "--cv_folds", "5", "--cv_fold", "0",
                    "--latent_dim", "512", "--batch_size", "4", "--max_epochs", "80", "--patience", "10",
                    "--learning_rate", "1e-4", "--random_state", "42", "--topo_bins", "32"],
    "gnn": ["--config", "configs/paths.yaml", "--sc_dir", "SC", "--morph_root", "MR", "--results_dir", "RD",
            "--run_name", "gnn_baseline_TS_jobJ/fold0", "--cv_folds", "5", "--cv_fold", "0",
            "--hidden_dim", "64", "--batch_size", "2", "--max_epochs", "50", "--patience", "8",
            "--learning_rate", "1e-4", "--random_state", "42", "--topo_bins", "32"],
}


def run_main_capture(module, trainer_cls, argv):
    """Run a training entry point's main() from the checkout root (its --config default is relative to
    the working directory) with the trainer's run() replaced by a no-op; returns the trainer."""
    captured = {}

    def fake_run(self):
        captured["t"] = self

    real = trainer_cls.run
    trainer_cls.run = fake_run
    old_argv, old_cwd = sys.argv, os.getcwd()
    sys.argv = ["x.py"] + argv
    os.chdir(REF)
    try:
        module.main()
    finally:
        os.chdir(old_cwd)
        sys.argv = old_argv
        trainer_cls.run = real
    return captured["t"]


def section_cli():
    out = {"how": "build_arg_parser() of each script: every option in order of definition with its type and "
                  "parse_args([]) default (evaluate.py / train.py path defaults depend on the checkout location "
                  "and are replaced). 'submit_scripts': the flags scripts/submit_*_baseline.sh pass (env defaults, "
                  "SLURM_ARRAY_TASK_ID=0), parsed by the same parser. 'main_glue': main() run from the checkout "
                  "root with Trainer.run / GNNTrainer.run replaced by a no-op: the constructed trainer's attributes "
                  "(temp paths shown relative to the temp results dir)."}
    ph = "(<checkout>/...; machine dependent)"
    out["train_vector_lstm_baseline"] = describe_parser(tvl.build_arg_parser(), {})
    out["train_gnn_baseline"] = describe_parser(tgb.build_arg_parser(), {})
    out["evaluate"] = describe_parser(ev.build_arg_parser(), {"sc_dir": ph.replace("...", "data/processed/sc_connectome/schaefer400"),
                                                              "results_dir": ph.replace("...", "outputs/results/vector_lstm")})
    out["train (legacy VectorLSTM entry point)"] = describe_parser(
        tr_legacy.build_arg_parser(), {"sc_dir": ph.replace("...", "data/processed/sc_connectome/schaefer400"),
                                       "results_dir": ph.replace("...", "outputs/results/vector_lstm")})
    out["submit_scripts"] = {
        "vector_lstm (scripts/submit_vector_lstm_baseline.sh)": {
            "argv": SUBMIT_FLAGS["vector_lstm"],
            "parsed": vars(tvl.build_arg_parser().parse_args(SUBMIT_FLAGS["vector_lstm"]))},
        "gnn (scripts/submit_gnn_baseline.sh)": {
            "argv": SUBMIT_FLAGS["gnn"],
            "parsed": vars(tgb.build_arg_parser().parse_args(SUBMIT_FLAGS["gnn"]))},
    }
    glue = {}
    for name, module, cls, attrs in [
        ("train_vector_lstm_baseline", tvl, Trainer,
         ["latent_dim", "batch_size", "max_epochs", "patience", "learning_rate", "random_state", "topo_bins",
          "max_nodes", "cv_folds", "cv_fold"]),
        ("train_gnn_baseline", tgb, GNNTrainer,
         ["model_kwargs", "batch_size", "max_epochs", "patience", "learning_rate", "random_state", "topo_bins",
          "max_nodes", "cv_folds", "cv_fold"]),
    ]:
        cases = []
        for flags in ([], ["--run_name", "  demo/fold3 ", "--cv_fold", "3"], ["--run_name", "x"]):
            rd = tmpdir("glue_")
            t = run_main_capture(module, cls, ["--results_dir", rd] + flags)
            rec = {"flags (besides --results_dir TMP)": flags}
            rec.update({a: getattr(t, a) for a in attrs})
            rec["results_dir"] = "TMP/" + rel(t.results_dir, rd) if t.results_dir != rd else "TMP"
            rec["sc_dir"] = "<checkout>/" + rel(t.sc_dir, REF)
            rec["morph_root"] = "<checkout>/" + rel(t.morph_root, REF)
            rec["model_class"] = t.model_class.__name__
            rec["triu_len"] = int(t.triu_idx[0].shape[0])
            rec["device"] = "cuda if torch.cuda.is_available() else cpu"
            aj = os.path.join(t.results_dir, "args.json")
            if os.path.exists(aj):
                with open(aj) as f:
                    a = json.load(f)
                a["results_dir"] = "TMP"
                rec["args.json"] = a
            cases.append(rec)
        glue[name] = cases
    out["main_glue"] = glue
    return out


# ----------------------------------------------------------------------------------------------

def main():
    sha = ""
    try:
        sha = subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=REF, stderr=subprocess.DEVNULL).decode().strip()
    except Exception:  # noqa: BLE001
        sha = ""
    if not sha:
        sha = "4cc09e3df8aa4f910b9c46a3b186855c3738170c (not a git checkout; commit stated by the generator)"
    out = {
        "reference": {"repo": "github.com/xsmilebook/sc_connectome_trajectories", "commit": sha,
                      "torch": torch.__version__, "numpy": np.__version__, "pandas": pd.__version__,
                      "sklearn": sklearn.__version__},
        "conventions": "matrices row-major nested lists; non-finite floats as strings 'nan'/'inf'/'-inf'; "
                       "float32 values written exactly (as doubles); parameter lists in state_dict order as "
                       "{name, shape, value}. Fixture file names are relative to the fixture's sc dir.",
    }
    with contextlib.redirect_stdout(sys.stderr):
        root, sc_dir, morph_root, files = build_cohort()
        out["fixture"] = {
            "how": "CSV files written here (comma separated, no header, repr() of each float64) in the reference's "
                   "layout: <sc>/<subject>_<session>.csv; morphology index = files "
                   "<morph>/<session>/Schaefer400_Morphology_<subject>.csv (only the names matter). "
                   "'load_matrix (float32)' = src.data.utils.load_matrix(file, max_nodes=6).",
            "n_nodes": N_NODES,
            "files": files,
            "morphology_files": sorted(rel(os.path.join(dp, f), morph_root)
                                       for dp, _, fs in os.walk(morph_root) for f in fs),
            "triu_idx (compute_triu_indices(6))": [compute_triu_indices(N_NODES)[0], compute_triu_indices(N_NODES)[1]],
        }
        out["vector_lstm"] = section_vector_lstm(sc_dir, morph_root)
        out["gnn"] = section_gnn(sc_dir, morph_root)
        out["splits"] = section_splits()
        out["checkpoint_aliasing"] = section_checkpoints(sc_dir, morph_root)
        out["evaluate_py"] = section_evaluate()
        out["cli"] = section_cli()
    for d in TMP_DIRS:
        shutil.rmtree(d, ignore_errors=True)
    json.dump(clean(out), sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
