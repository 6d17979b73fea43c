#!/usr/bin/env python3
"""Import circles between the files of a Rust crate's src/ (file level, inside folders too).

An edge A -> B when file A names an item of B's module through `use crate::...`, `use super::...`,
`use self::...` or an inline `crate::...`/`super::...` path. A module file using its own
descendants is composition, not an edge; a child using its parent is one. Test code (`tests.rs`,
`tests/` and golden folders, `#[cfg(test)] mod` blocks) and comments do not count.
A circle is a strongly connected set of two or more files.

Usage: scripts/file_circles.py [SRC_DIR]   prints each circle, then 'file circles: N' (exit 1 if N > 0)
scripts/module-map.py --check reports the same circles (tests/engine/architecture.rs runs it).
"""
import os
import re
import sys


def _strip(text):
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def _expand_use(body):
    """'a::b::{c, d::e}' -> ['a::b::c', 'a::b::d::e']"""
    body = re.sub(r"\s+", "", body)
    m = re.match(r"^(.*?)\{(.*)\}$", body)
    if not m:
        return [body]
    head, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    if cur:
        parts.append(cur)
    return [q for part in parts for q in _expand_use(head + part)]


def _modules(src):
    """file path -> module path (tuple), and module path -> file, production files only."""
    mod_of, file_of = {}, {}
    for d, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith(".rs"):
                continue
            p = os.path.join(d, f)
            rel = os.path.relpath(p, src)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            if (rel and rel[-1] == "tests") or "tests" in rel[:-1] or any("golden" in r for r in rel):
                continue
            mod_of[p] = tuple(rel)
            file_of.setdefault(tuple(rel), p)
    return mod_of, file_of


def _resolve(path, here, file_of):
    segs = [s for s in path.split("::") if s and s != "*"]
    if not segs:
        return None
    if segs[0] == "crate":
        base, segs = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base = here
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
    else:
        return None
    mod = base + tuple(segs)
    while mod not in file_of and mod:
        mod = mod[:-1]
    return file_of.get(mod)


def edges(src):
    mod_of, file_of = _modules(src)
    out = {p: set() for p in mod_of}
    for p, here in mod_of.items():
        with open(p, encoding="utf-8", errors="replace") as fh:
            text = _strip(fh.read())
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", text):
            paths += _expand_use(m.group(1))
        paths += re.findall(r"\b((?:crate|super)(?:::\w+)+)", text)
        for q in paths:
            t = _resolve(q.replace(" as ", " ").split(" ")[0], here, file_of)
            if not t or t == p:
                continue
            target = mod_of[t]
            if target[: len(here)] == here and len(target) > len(here):
                continue  # a module file using its own descendant
            out[p].add(t)
    return out


def file_circles(src):
    """The circles (sorted lists of paths relative to src's parent), Tarjan's algorithm."""
    graph = edges(src)
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(os.path.relpath(x, os.path.dirname(src)) for x in comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def main():
    src = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "src")
    circles = file_circles(src)
    for c in circles:
        print("circle:", " ".join(c))
    print(f"file circles: {len(circles)}")
    return 1 if circles else 0


if __name__ == "__main__":
    sys.exit(main())
