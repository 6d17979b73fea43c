#!/usr/bin/env python3
"""A reference CLG-ODE checkpoint (.pt), written by the reference's OWN model and trainer code, for
tests/backends/pt_checkpoint.rs (scripts/pt2safetensors.py, then `trainer train-gnn --resume_from`).

Usage (from the repository root; re-running it rewrites both files):

    python tests/golden/pt_checkpoint.py /path/to/sc_connectome_trajectories [--commit SHA]

writes tests/fixtures/reference-clg-ode.pt and tests/fixtures/reference-clg-ode.json.

The reference checkout (github.com/xsmilebook/sc_connectome_trajectories; these files were produced
against commit 4cc09e3df8aa4f910b9c46a3b186855c3738170c with torch 2.9.0, CPU) is put on sys.path
and its modules are imported; nothing of it is copied here. --commit names the commit when the
checkout is not a git work tree (otherwise `git rev-parse HEAD` is used). Needs torch, numpy,
pandas, scikit-learn (what src.engine.clg_trainer imports).

How: the model is built by the reference trainer's own `CLGTrainer._build_model` (called on a
stand-in trainer holding the sizes below and a stand-in dataset holding the cohort's vocabularies:
the real ones need the cohort files), after `torch.manual_seed(SEED)`. Every parameter then gets
N(0, 0.05²) noise from the same generator, so that no tensor keeps a constant initial value (the
connection decoder's scalars start at 10, 0 and 1): a tensor mixed up with another or a wrong
transposition shows. It is saved as the reference trainer saves its best model:
`best_state = model.state_dict(); torch.save(best_state, fold_model_path)`
(src/engine/clg_trainer.py). torch.save writes identical bytes for identical tensors and file
name, so re-running with the same torch version reproduces the fixture.

The sizes are those `trainer train-gnn` derives from the cohort of `trainer synth-connectome
--subjects 16 --nodes 6 --seed 7` (5 sites: site vocabulary 6; 4 morphology metrics; 35 numeric
covariates = age, s, s_mean, 32 ECC bins) with `--latent_dim 4 --hidden_dim 8`.

The JSON holds: the reference commit, the torch version, the cohort and flags the test uses, the
sizes, and every tensor in PyTorch layout and state_dict order: {"name", "shape", "values"} with
"values" the row-major data as exact float32 values (written as doubles).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import types

SEED = 20240607
SIZES = dict(latent_dim=4, hidden_dim=8, solver_steps=3)
COHORT = dict(subjects=16, nodes=6, seed=7)
# What the cohort implies (CLGDataset: metric_order, sex_vocab_size = 3, site_vocab_size = sites + 1).
MORPH_METRICS = 4
SITE_VOCAB = 6
NAME = "reference-clg-ode"

p = argparse.ArgumentParser()
p.add_argument("reference", help="a checkout of xsmilebook/sc_connectome_trajectories")
p.add_argument("--commit", help="its commit, when it is not a git work tree")
p.add_argument("--out-dir", default=os.path.join(os.path.dirname(__file__), "..", "fixtures"))
args = p.parse_args()
REF = os.path.abspath(args.reference)
if not os.path.isfile(os.path.join(REF, "src", "models", "clg_ode.py")):
    sys.exit(f"{REF}: not a checkout of sc_connectome_trajectories (no src/models/clg_ode.py)")
commit = args.commit
if commit is None:
    try:
        commit = subprocess.run(
            ["git", "-C", REF, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        sys.exit(f"{REF}: not a git work tree: name the commit with --commit SHA")
sys.path.insert(0, REF)

import torch  # noqa: E402

from src.engine.clg_trainer import CLGTrainer  # noqa: E402
from src.models.clg_ode import CLGODE  # noqa: E402

torch.set_num_threads(1)

# The trainer attributes `_build_model` and `_numeric_cov_dim` read (defaults of
# scripts/train_clg_ode.py for all but the sizes).
trainer = types.SimpleNamespace(
    latent_dim=SIZES["latent_dim"],
    hidden_dim=SIZES["hidden_dim"],
    solver_steps=SIZES["solver_steps"],
    residual_skip=False,
    residual_tau=1.0,
    residual_no_dt_gate=False,
    residual_cap=0.5,
    topo_bins=32,
    use_s_mean=True,
)
trainer._numeric_cov_dim = lambda: CLGTrainer._numeric_cov_dim(trainer)
dataset = types.SimpleNamespace(
    max_nodes=COHORT["nodes"],
    metric_order=[f"metric{i}" for i in range(MORPH_METRICS)],
    sex_vocab_size=3,
    site_vocab_size=SITE_VOCAB,
)

torch.manual_seed(SEED)
model = CLGTrainer._build_model(trainer, dataset)
assert isinstance(model, CLGODE)
with torch.no_grad():
    for prm in model.parameters():
        prm.add_(0.05 * torch.randn_like(prm))

out_dir = os.path.abspath(args.out_dir)
os.makedirs(out_dir, exist_ok=True)
pt = os.path.join(out_dir, NAME + ".pt")
best_state = model.state_dict()
torch.save(best_state, pt)

fixture = {
    "reference": {
        "repository": "https://github.com/xsmilebook/sc_connectome_trajectories",
        "commit": commit,
        "generator": "tests/golden/pt_checkpoint.py",
        "how": "CLGTrainer._build_model after torch.manual_seed(seed), N(0, 0.05^2) noise on "
        "every parameter, torch.save(model.state_dict(), path) as CLGTrainer._train_cv",
        "seed": SEED,
    },
    "torch_version": torch.__version__,
    "cohort": COHORT,
    "flags": [
        "--latent_dim", str(SIZES["latent_dim"]),
        "--hidden_dim", str(SIZES["hidden_dim"]),
        "--solver_steps", str(SIZES["solver_steps"]),
    ],
    "sizes": {
        "morph_dim": MORPH_METRICS,
        **SIZES,
        "sex_vocab": 3,
        "site_vocab": SITE_VOCAB,
        "cov_embed_dim": 8,
        "numeric_cov_dim": trainer._numeric_cov_dim(),
    },
    "tensors": [
        {
            "name": k,
            "shape": list(v.shape),
            "values": [float(x) for x in v.detach().reshape(-1).tolist()],
        }
        for k, v in best_state.items()
    ],
}
# One line per tensor.
tensors = fixture.pop("tensors")
text = json.dumps(fixture, indent=1)[:-2]
text += ',\n "tensors": [\n  ' + ",\n  ".join(json.dumps(t) for t in tensors) + "\n ]\n}\n"
json.loads(text)
with open(os.path.join(out_dir, NAME + ".json"), "w", encoding="utf-8") as f:
    f.write(text)
print(f"wrote {pt} ({os.path.getsize(pt)} bytes, {len(best_state)} tensors) and {NAME}.json")
