#!/usr/bin/env python3
"""Compares two output trees of scripts/identity-check.sh file by file; exit 1 on a difference.

JSON / JSON lines: timing keys removed, then equal as values. CSV: timing columns removed.
safetensors: tensor names, dtypes, shapes and bytes equal, metadata equal with timings removed
(JSON metadata parsed). Left out: run_meta.json, TensorBoard event files, logs. Everything else:
byte for byte. A path is "the same" relative to each tree's root; the roots' own names are
replaced in text before comparing (a path written into a file)."""
import csv
import io
import json
import os
import re
import struct
import sys

TIMING = re.compile(
    r"(seconds|_per_s$|^per_s$|created_at|finished_at|started_at|elapsed|^host$|hostname|"
    r"^pid$|wall|^time$|_time$|timestamp|date|modified|^bytes$)"
)
SKIP = re.compile(r"(^|/)(run_meta\.json|events\.out\.tfevents\..*|.*\.log|\.lock)$")


def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if not TIMING.search(k)}
    if isinstance(v, list):
        return [strip(x) for x in v]
    if isinstance(v, str) and v[:1] in "{[":
        try:
            return strip(json.loads(v))
        except ValueError:
            return v
    return v


def mask_timing_columns(text):
    """A text table's `wall_s` and `cpu_s` values (the two columns before the run's path, the
    table's last) replaced by `T`: the rows under a header that ends `wall_s cpu_s run`."""
    out, table = [], False
    for line in text.splitlines():
        words = line.split()
        if words[-3:] == ["wall_s", "cpu_s", "run"]:
            table = True
        elif not words:
            table = False
        elif table and len(words) >= 3 and all(re.fullmatch(r"[-+0-9.e]+", w) for w in words[-3:-1]):
            line = " ".join(words[:-3] + ["T", "T", words[-1]])
        out.append(line)
    return "\n".join(out)


def csv_rows(text):
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return rows
    keep = [i for i, h in enumerate(rows[0]) if not TIMING.search(h)]
    return [[r[i] for i in keep if i < len(r)] for r in rows]


def safetensors(data):
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    meta = strip(header.pop("__metadata__", {}))
    tensors = {
        k: (v["dtype"], v["shape"], body[v["data_offsets"][0] : v["data_offsets"][1]])
        for k, v in header.items()
    }
    return meta, tensors


def load(path, root):
    data = open(path, "rb").read()
    if path.endswith(".safetensors"):
        return safetensors(data)
    text = data.decode("utf-8", "replace").replace(root, "<ROOT>")
    text = re.sub(r"bin-(before|after)", "bin-X", text)
    if path.endswith(".jsonl"):
        return [strip(json.loads(l)) for l in text.splitlines() if l.strip()]
    if path.endswith(".json"):
        try:
            return strip(json.loads(text))
        except ValueError:
            return text
    if path.endswith(".csv"):
        return csv_rows(text)
    return mask_timing_columns(text)


def files(root):
    out = set()
    for d, _, names in os.walk(root):
        for n in names:
            rel = os.path.relpath(os.path.join(d, n), root)
            if not SKIP.search(rel):
                out.add(rel)
    return out


def main(a, b):
    fa, fb = files(a), files(b)
    bad = 0
    for rel in sorted(fa ^ fb):
        print(f"only in {'before' if rel in fa else 'after'}: {rel}")
        bad += 1
    for rel in sorted(fa & fb):
        if load(os.path.join(a, rel), a) != load(os.path.join(b, rel), b):
            print(f"differs: {rel}")
            bad += 1
    print(f"{len(fa & fb)} files compared, {bad} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
