#!/usr/bin/env python3
"""Keeps docs/architecture.md true to src/.

Usage: scripts/module-map.py [--check | --write | --edges]
  --check  (default) exit 1, naming what is wrong, when
             * a top-level module of src/ is missing from the "Import layers" table (or listed
               twice, or listed but gone),
             * a module imports (`crate::X`, production code only) from its own layer or one
               above it,
             * a room's line count in the "Module map" table is off by more than 10%
               (then run --write);
             * files import each other in a circle anywhere in src/, or the children of a folder
               (its files and subfolders) import each other in a loop (scripts/file_circles.py:
               file-level `use crate::`/`super::` imports, through `pub use` re-exports, inside
               folders too);
  --write  rewrite the Module map's line counts from src/;
  --edges  print every import edge between top-level modules with the layers.
Production code = not tests.rs, not golden/ folders, not `#[cfg(test)] mod` blocks, not
comments (as ../shared/tools/module-cycles.py counts). tests/engine/architecture.rs runs --check.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from file_circles import edges as file_edges, file_circles, folder_loops  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
DOC = os.path.join(ROOT, "docs", "architecture.md")
TOLERANCE = 0.10


def top_modules():
    return sorted(
        n[:-3] if n.endswith(".rs") else n
        for n in os.listdir(SRC)
        if n not in ("main.rs", "lib.rs") and (n.endswith(".rs") or os.path.isdir(os.path.join(SRC, n)))
    )


def strip_tests(text):
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return re.sub(r"^\s*//.*$", "", "".join(out), flags=re.M)


def edges(tops):
    found = {}
    for root, _, files in os.walk(SRC):
        rel = os.path.relpath(root, SRC)
        for f in files:
            if not f.endswith(".rs") or f == "tests.rs" or "golden" in root:
                continue
            top = rel.split(os.sep)[0] if rel != "." else f[:-3]
            if top not in tops:
                continue
            with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                text = strip_tests(fh.read())
            for m in re.finditer(r"crate::(\w+)", text):
                t = m.group(1)
                if t in tops and t != top:
                    found.setdefault(top, set()).add(t)
    return found


def lines_of(name):
    path = os.path.join(SRC, name.rstrip("/"))
    if os.path.isdir(path):
        total = 0
        for root, _, files in os.walk(path):
            for f in files:
                if f.endswith(".rs"):
                    with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                        total += sum(1 for _ in fh)
        return total
    if os.path.isfile(path):
        with open(path, encoding="utf-8", errors="replace") as fh:
            return sum(1 for _ in fh)
    return None


def table(doc, heading):
    """Rows (line index, cells) of the first table after `heading`."""
    lines = doc.split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith("## ") and heading in l)
    rows = []
    for i in range(start + 1, len(lines)):
        l = lines[i]
        if l.startswith("## "):
            break
        if l.startswith("|") and not re.match(r"^\|\s*-", l):
            rows.append((i, [c.strip() for c in l.strip().strip("|").split("|")]))
        elif rows and not l.startswith("|"):
            break
    return lines, rows[1:]  # without the header


def room_names(cell):
    return re.findall(r"`([^`]+)`", cell)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "--check"
    with open(DOC, encoding="utf-8") as fh:
        doc = fh.read()
    tops = top_modules()
    problems = []

    # Module map: line counts.
    lines, rooms = table(doc, "Module map")
    for i, cells in rooms:
        names = room_names(cells[0])
        counts = [lines_of(n) for n in names]
        if any(c is None for c in counts):
            problems.append(f"Module map: {cells[0]} names a file or folder not in src/")
            continue
        actual = sum(counts)
        stated = int(cells[1])
        if mode == "--write":
            cells[1] = str(actual)
            lines[i] = "| " + " | ".join(cells) + " |"
        elif abs(actual - stated) > TOLERANCE * actual:
            problems.append(
                f"Module map: {cells[0]} has {actual} lines, the table says {stated} "
                f"(run scripts/module-map.py --write)"
            )
    if mode == "--write":
        with open(DOC + ".tmp", "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines))
        os.replace(DOC + ".tmp", DOC)
        print(f"wrote the line counts of {len(rooms)} rooms into {os.path.relpath(DOC, ROOT)}")
        return 0

    # Import layers.
    _, layer_rows = table(doc, "Import layers")
    layer = {}
    for _, cells in layer_rows:
        for m in room_names(cells[1]):
            if m in layer:
                problems.append(f"Import layers: `{m}` is listed twice")
            layer[m] = int(cells[0])
    for m in tops:
        if m not in layer:
            problems.append(f"Import layers: top-level module `{m}` is not in the table")
    for m in layer:
        if m not in tops:
            problems.append(f"Import layers: `{m}` is not a top-level module of src/")
    graph = edges(tops)
    for a in sorted(graph):
        for b in sorted(graph[a]):
            if mode == "--edges":
                print(f"{a} ({layer.get(a, '?')}) -> {b} ({layer.get(b, '?')})")
            elif a in layer and b in layer and layer[b] >= layer[a]:
                problems.append(
                    f"Import layers: `{a}` (layer {layer[a]}) imports `{b}` (layer {layer[b]}): "
                    f"a module imports only from layers below it"
                )
    if mode == "--check":
        graph = file_edges(SRC)
        for circle in file_circles(SRC, graph):
            problems.append("Import circle between files: " + " -> ".join(circle + circle[:1]))
        for folder, children, steps in folder_loops(SRC, graph):
            problems.append(
                f"Import loop between the children of {folder}/: "
                + ", ".join(f"{a} -> {b} ({u} -> {v})" for a, b, (u, v) in steps)
            )
    for p in problems:
        print(p)
    if mode == "--check":
        print(f"architecture.md: {len(problems)} problem(s)")
    return 1 if problems and mode == "--check" else 0


if __name__ == "__main__":
    sys.exit(main())
