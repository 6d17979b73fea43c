#!/usr/bin/env python3
"""Converts a CLG-ODE checkpoint of the PyTorch reference (github.com/xsmilebook/
sc_connectome_trajectories) into a trainer checkpoint that `trainer train-gnn --resume_from` loads.

    python scripts/pt2safetensors.py clg_ode_fold0_best.pt converted.safetensors
    trainer train-gnn ... --latent_dim L --hidden_dim H --resume_from converted.safetensors

Input: what the reference's trainer saves as its best model (`torch.save(model.state_dict(), ...)`
in src/engine/clg_trainer.py), i.e. a bare state dict; also a dict holding one under
`model_state_dict`, `state_dict`, `model`, ... (or under `--key NAME`). A DistributedDataParallel
(`module.`) or torch.compile (`_orig_mod.`) prefix is removed. The file is read with
`torch.load(weights_only=True)`: `--trust-pickle` lifts that for a file holding other objects.

Output: a safetensors file (written without the `safetensors` package: 8-byte little-endian
header length, JSON header, raw little-endian data) with one F32 tensor `model.<our name>` per
parameter and metadata `format` = `trainer-checkpoint/1`, `model` = `clg_ode`, `source` (the .pt
path) and `source_sha256`. Names are the reference's with the MLPs' `net.0`/`net.2` (morph
decoder) and `0`/`2` (ODE function) renamed `fc1`/`fc2` (`torch_name` in
src/models/clg_ode/mod.rs); the 2-D `.weight` tensors of Linear layers are transposed (Burn
stores [in, out], PyTorch [out, in]), embedding tables are not; 0-d scalars become shape [1].
The file appears complete or not at all (temporary name, fsync, rename).

Errors (not a torch file, no state dict in it, not CLG-ODE's state dict) are one line on stderr
naming the file; the exit status is 1 (2 for a usage error). Needs only torch and numpy.
Covered by tests/backends/pt_checkpoint.rs.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import sys
import tempfile
import warnings
from collections.abc import Mapping

PROG = "pt2safetensors"
try:
    import numpy as np
    import torch
except ImportError as e:  # before argparse: --help needs them too
    sys.exit(f"{PROG}: error: needs torch and numpy ({e})")

FORMAT = "trainer-checkpoint/1"
MODEL = "clg_ode"

# Our parameter names (Burn module paths of src/models/clg_ode), in checkpoint order.
_LAYERS = [
    f"{enc}.{layer}.{p}"
    for enc in ("morph_encoder", "conn_encoder")
    for layer in ("fc1", "fc_mu", "fc_logvar")
    for p in ("weight", "bias")
]
_LAYERS += ["cov_encoder.sex_embed.weight", "cov_encoder.site_embed.weight"]
_LAYERS += [
    f"ode_func.{net}.{layer}.{p}"
    for net in ("morph_net", "conn_net")
    for layer in ("fc1", "fc2")
    for p in ("weight", "bias")
]
_LAYERS += [f"morph_decoder.{layer}.{p}" for layer in ("fc1", "fc2") for p in ("weight", "bias")]
# The connection decoder's scalars. Reference versions before 2026-01-21 lack some of them (the
# oldest have none); our trainer then keeps its initial values for those.
_SCALARS = [
    f"conn_decoder.{s}"
    for s in (
        "alpha", "delta", "gamma", "beta", "residual_scale", "residual_bias",
        "alpha_new", "delta_new", "gamma_new", "beta_new",
    )
]
OURS = _LAYERS + _SCALARS


def torch_name(name: str) -> str:
    """The reference's state-dict key of one of our names (as torch_name in src/models/clg_ode)."""

    def mlp(rest: str) -> str:
        return rest.replace("fc1.", "0.", 1).replace("fc2.", "2.", 1)

    if name.startswith("morph_decoder."):
        return "morph_decoder.net." + mlp(name[len("morph_decoder."):])
    if name.startswith("ode_func."):
        return "ode_func." + mlp(name[len("ode_func."):])
    return name


def transposed(name: str, ndim: int) -> bool:
    """Whether a tensor is stored transposed on our side: 2-D Linear weights, not embeddings."""
    return ndim == 2 and name.endswith(".weight") and "embed" not in name


REQUIRED = {torch_name(n): n for n in _LAYERS}
OPTIONAL = {torch_name(n): n for n in _SCALARS}
EXPECTED_KEYS = (
    "morph_encoder.{fc1,fc_mu,fc_logvar}.{weight,bias}, conn_encoder.{fc1,fc_mu,fc_logvar}."
    "{weight,bias}, cov_encoder.{sex_embed,site_embed}.weight, ode_func.{morph_net,conn_net}."
    "{0,2}.{weight,bias}, morph_decoder.net.{0,2}.{weight,bias} and conn_decoder.{"
    + ",".join(n.split(".", 1)[1] for n in _SCALARS)
    + "}"
)
STATE_DICT_KEYS = ("model_state_dict", "state_dict", "model", "model_state", "net", "module")


class Failure(Exception):
    """An error to report in one line, naming the file."""


def one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def load(path: str, trust_pickle: bool):
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise Failure(f"{path}: cannot read: {e.strerror or one_line(e)}") from None
    if not head.startswith(b"PK\x03\x04") and not head.startswith(b"\x80"):
        raise Failure(
            f"{path}: not a PyTorch file (neither torch.save's zip format nor a pickle); "
            "expected a .pt checkpoint of the reference's CLG-ODE"
        )
    try:
        return torch.load(path, map_location="cpu", weights_only=not trust_pickle)
    except Exception as e:  # noqa: BLE001 - torch raises many types for a bad file
        msg = one_line(e)
        if "Weights only load failed" in msg:
            raise Failure(
                f"{path}: torch.load(weights_only=True) refuses it: it holds objects other than "
                "tensors and plain containers (or is no torch.save file); pass --trust-pickle if "
                "you trust where the file comes from"
            ) from None
        raise Failure(f"{path}: not a readable PyTorch file: {type(e).__name__}: {msg}") from None


def is_state_dict(obj) -> bool:
    return (
        isinstance(obj, Mapping)
        and len(obj) > 0
        and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items())
    )


def describe(obj) -> str:
    if isinstance(obj, Mapping):
        keys = [repr(k) for k in list(obj)[:8]]
        more = ", ..." if len(obj) > 8 else ""
        return f"a {type(obj).__name__} with keys {', '.join(keys)}{more}" if keys else "an empty dict"
    return f"a {type(obj).__module__}.{type(obj).__name__}".replace("builtins.", "")


def find_state_dict(obj, path: str, key: str | None):
    """The state dict in `obj` and where it was (None: the file is one)."""
    if key is not None:
        cur = obj
        for part in key.split("."):
            if not isinstance(cur, Mapping) or part not in cur:
                raise Failure(f"{path}: has no entry `{key}` (it holds {describe(obj)})")
            cur = cur[part]
        if not is_state_dict(cur):
            raise Failure(f"{path}: entry `{key}` is {describe(cur)}, not a state dict")
        return cur, key
    if is_state_dict(obj):
        return obj, None
    if isinstance(obj, Mapping):
        for k in STATE_DICT_KEYS:
            if k in obj and is_state_dict(obj[k]):
                return obj[k], k
        found = [k for k, v in obj.items() if is_state_dict(v)]
        if len(found) == 1:
            return obj[found[0]], found[0]
        if len(found) > 1:
            raise Failure(
                f"{path}: holds several state dicts ({', '.join(map(repr, found))}): "
                "choose one with --key NAME"
            )
    raise Failure(
        f"{path}: no state dict in it: it holds {describe(obj)}; expected the reference "
        "trainer's torch.save(model.state_dict()) (a dict of tensors) or a dict with "
        "`model_state_dict` (or give --key NAME)"
    )


def strip_prefix(sd: Mapping) -> dict:
    sd = dict(sd)
    for prefix in ("module.", "_orig_mod."):
        if all(k.startswith(prefix) for k in sd):
            sd = {k[len(prefix):]: v for k, v in sd.items()}
    return sd


def check_clg_ode(sd: dict, path: str) -> dict:
    """The model's sizes, after checking that `sd` is a CLG-ODE state dict."""
    missing = [k for k in REQUIRED if k not in sd]
    if missing:
        if len(missing) == len(REQUIRED):
            held = ", ".join(list(sd)[:5]) + (", ..." if len(sd) > 5 else "")
            what = f"has none of CLG-ODE's {len(REQUIRED)} layer tensors (it holds {len(sd)}: {held})"
        else:
            what = f"lacks {len(missing)} of CLG-ODE's {len(REQUIRED)} layer tensors: {', '.join(missing[:5])}"
            what += ", ..." if len(missing) > 5 else ""
        raise Failure(f"{path}: not a CLG-ODE state dict: {what}; expected keys {EXPECTED_KEYS}")
    shape = {k: tuple(v.shape) for k, v in sd.items()}
    try:
        h, f = shape["morph_encoder.fc1.weight"]
        latent = shape["morph_encoder.fc_mu.weight"][0]
        sex, embed = shape["cov_encoder.sex_embed.weight"]
        site = shape["cov_encoder.site_embed.weight"][0]
        numeric = shape["ode_func.morph_net.0.weight"][1] - 2 * latent - 2 * embed - 1
    except (ValueError, IndexError):
        raise Failure(
            f"{path}: not a CLG-ODE state dict: a layer tensor has the wrong number of dimensions"
        ) from None
    ode_in = 2 * latent + 2 * embed + numeric + 1
    if numeric < 0:
        raise Failure(
            f"{path}: not a CLG-ODE state dict: `ode_func.morph_net.0.weight` has "
            f"{ode_in} inputs, fewer than 2*latent_dim + 2*cov_embed_dim + 1 = {ode_in - numeric}"
        )
    want = {}
    for enc in ("morph_encoder", "conn_encoder"):
        want |= {
            f"{enc}.fc1.weight": (h, f), f"{enc}.fc1.bias": (h,),
            f"{enc}.fc_mu.weight": (latent, h), f"{enc}.fc_mu.bias": (latent,),
            f"{enc}.fc_logvar.weight": (latent, h), f"{enc}.fc_logvar.bias": (latent,),
        }
    want |= {"cov_encoder.sex_embed.weight": (sex, embed), "cov_encoder.site_embed.weight": (site, embed)}
    for net in ("morph_net", "conn_net"):
        want |= {
            f"ode_func.{net}.0.weight": (h, ode_in), f"ode_func.{net}.0.bias": (h,),
            f"ode_func.{net}.2.weight": (latent, h), f"ode_func.{net}.2.bias": (latent,),
        }
    want |= {
        "morph_decoder.net.0.weight": (h, latent), "morph_decoder.net.0.bias": (h,),
        "morph_decoder.net.2.weight": (f, h), "morph_decoder.net.2.bias": (f,),
    }
    want |= {k: () for k in OPTIONAL}
    for k, s in want.items():
        if k in sd and shape[k] != s and not (s == () and shape[k] == (1,)):
            raise Failure(
                f"{path}: not a CLG-ODE state dict: `{k}` has shape {list(shape[k])}, expected "
                f"{list(s)} (morph_dim {f}, latent_dim {latent}, hidden_dim {h})"
            )
    return {
        "morph_dim": f, "latent_dim": latent, "hidden_dim": h, "sex_vocab": sex,
        "site_vocab": site, "cov_embed_dim": embed, "numeric_cov_dim": numeric,
    }


def to_f32(name: str, t, path: str):
    t = t.detach().cpu()
    if not t.is_floating_point():
        raise Failure(f"{path}: `{name}` is a {t.dtype} tensor, expected floating point")
    a = t.to(torch.float32).contiguous().numpy()
    return np.ascontiguousarray(a, dtype="<f4")


def safetensors_bytes(tensors: dict, metadata: dict) -> tuple[bytes, list]:
    """Header (length + JSON, padded to 8 bytes) and the tensors' data, in name order."""
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        a = tensors[name]
        data = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text, chunks


def write_atomic(out: str, head: bytes, chunks: list) -> None:
    directory = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(directory):
        raise Failure(f"{out}: the directory {directory} does not exist")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(out) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(head)
            for c in chunks:
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise Failure(f"{out}: cannot write: {e.strerror or one_line(e)}") from None
        raise


def convert(src: str, out: str, key: str | None, trust_pickle: bool) -> tuple[int, dict, list]:
    obj = load(src, trust_pickle)
    sd, where = find_state_dict(obj, src, key)
    sd = strip_prefix(sd)
    sizes = check_clg_ode(sd, src)
    notes = []
    tensors = {}
    for tname, ours in {**REQUIRED, **OPTIONAL}.items():
        if tname not in sd:
            continue
        a = to_f32(tname, sd[tname], src)
        if a.ndim == 0:
            a = a.reshape(1)
        elif transposed(ours, a.ndim):
            a = np.ascontiguousarray(a.T, dtype="<f4")
        tensors["model." + ours] = a
    absent = [k for k in OPTIONAL if k not in sd]
    if absent:
        notes.append(
            f"{len(absent)} connection-decoder scalars are not in this (older) checkpoint and keep "
            f"their initial values: {', '.join(absent)}"
        )
    extra = [k for k in sd if k not in REQUIRED and k not in OPTIONAL]
    if extra:
        notes.append(f"ignored {len(extra)} tensors CLG-ODE does not have: {', '.join(extra[:10])}")
    with open(src, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    metadata = {
        "format": FORMAT,
        "model": MODEL,
        "source": os.path.abspath(src),
        "source_sha256": digest,
        "converted_by": "scripts/pt2safetensors.py",
        "reference_sizes": json.dumps(sizes, sort_keys=True),
    }
    if where is not None:
        metadata["source_key"] = str(where)
    head, chunks = safetensors_bytes(tensors, metadata)
    write_atomic(out, head, chunks)
    return len(tensors), sizes, notes


def main() -> int:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Convert a reference CLG-ODE .pt checkpoint for `trainer train-gnn --resume_from`.",
    )
    p.add_argument("input", help="the reference's .pt file (e.g. clg_ode_fold0_best.pt)")
    p.add_argument("output", help="the safetensors file to write")
    p.add_argument("--key", help="where the state dict is in a dict checkpoint (dots for nesting)")
    p.add_argument(
        "--trust-pickle", action="store_true",
        help="load with torch.load(weights_only=False): runs code in the file, only for trusted files",
    )
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    try:
        n, sizes, notes = convert(args.input, args.output, args.key, args.trust_pickle)
    except Failure as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    if sizes["numeric_cov_dim"] != 35:
        notes.append(
            f"the ODE takes {sizes['numeric_cov_dim']} numeric covariates (35 by default: age, "
            "s, s_mean and --topo_bins 32): pass the reference run's --topo_bins"
        )
    for note in notes:
        print(f"{PROG}: note: {note}", file=sys.stderr)
    print(
        f"{PROG}: {n} tensors converted from {args.input} to {args.output} "
        f"(morph_dim {sizes['morph_dim']}, site_vocab {sizes['site_vocab']}, numeric covariates "
        f"{sizes['numeric_cov_dim']}): train with --latent_dim {sizes['latent_dim']} "
        f"--hidden_dim {sizes['hidden_dim']} --resume_from {args.output}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
