#!/usr/bin/env python3
"""The library paths that code outside `src/` (besides `src/main.rs`) names.

Prints one `trainer::…` path a line: every path the binary (`src/main.rs`), the integration
tests (`tests/**`), the benches (`benches/**`) and the workspace crates (`crates/*/`) spell,
whether inline (`trainer::exit::Exit::Ok`), in a `use trainer::{…}` group (nested groups,
`self`, `as` renames), or through a name such a `use` brought in (`use trainer::cluster;` then
`cluster::gpu::probe_driver`). These are the modules and items that must stay `pub`;
everything else may be `pub(crate)` or narrower (docs/architecture.md, "Visibility").

    python3 scripts/external-api.py            # the paths
    python3 scripts/external-api.py --modules  # the module paths among them (prefixes)
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def outside_files():
    yield ROOT / "src" / "main.rs"
    for folder in ("tests", "benches", "crates", "examples"):
        base = ROOT / folder
        if base.is_dir():
            yield from sorted(p for p in base.rglob("*.rs") if "target" not in p.parts)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def split_top(group):
    """Splits `a, b::{c, d}, e` at the commas outside braces."""
    parts, depth, cur = [], 0, ""
    for ch in group:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def expand(prefix, tree):
    """(path, bound name) pairs of one use tree below `prefix`."""
    tree = tree.strip()
    if tree.endswith("}") and "{" in tree:
        head, _, inner = tree.partition("{")
        head = head.strip().rstrip(":").strip()
        base = prefix + ([s for s in head.split("::") if s] if head else [])
        out = []
        for part in split_top(inner[:-1]):
            out += expand(base, part)
        return out
    alias = None
    m = re.match(rf"^(.*?)\s+as\s+({IDENT})$", tree)
    if m:
        tree, alias = m.group(1).strip(), m.group(2)
    segs = [s.strip() for s in tree.split("::") if s.strip()]
    if segs == ["self"]:
        return [(prefix, alias or prefix[-1])]
    if segs == ["*"]:
        return [(prefix + ["*"], None)]
    path = prefix + segs
    return [(path, alias or path[-1])]


def paths_of(text):
    text = strip_comments(text)
    found, bound = set(), {}
    for m in re.finditer(r"\buse\s+(::)?trainer\s*::\s*([^;]*);", text, flags=re.S):
        for path, name in expand(["trainer"], m.group(2)):
            found.add(tuple(path))
            if name and name != "_":
                bound[name] = path
    for m in re.finditer(rf"\btrainer((?:\s*::\s*{IDENT})+)", text):
        segs = [s.strip() for s in m.group(1).split("::") if s.strip()]
        found.add(tuple(["trainer"] + segs))
    # Paths through a name a `use` bound (`use trainer::cluster;` … `cluster::gpu::X`).
    changed = True
    while changed:
        changed = False
        for name, base in list(bound.items()):
            for m in re.finditer(rf"(?<![A-Za-z0-9_:]){name}((?:\s*::\s*{IDENT})+)", text):
                segs = [s.strip() for s in m.group(1).split("::") if s.strip()]
                path = tuple(list(base) + segs)
                if path not in found:
                    found.add(path)
                    changed = True
    return found


def main():
    found = set()
    for path in outside_files():
        text = path.read_text(errors="replace")
        if "trainer" in text:
            found |= paths_of(text)
    if "--modules" in sys.argv:
        mods = set()
        for p in found:
            for i in range(2, len(p)):
                mods.add("::".join(p[:i]))
        print("\n".join(sorted(mods)))
    else:
        print("\n".join(sorted("::".join(p) for p in found)))


if __name__ == "__main__":
    main()
