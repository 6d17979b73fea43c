#!/usr/bin/env python3
"""Import circles between the files of a Rust crate's src/, and loops between its folders.

An edge A -> B when file A names an item of B's module through `use crate::...`, `use super::...`,
`use self::...` or an inline `crate::...`/`super::...` path. A name that a module re-exports
(`pub use`, `pub(crate) use`, ..., a glob `pub use x::*` too) leads on to the file that defines
it: `use super::RunDir` where the parent says `pub use run_files::RunDir` is an edge to
`run_files.rs`, not to the parent. A module file using its own descendants is composition, not an
edge; a child using its parent is one. Test code (`tests.rs`, `tests/` and golden folders,
`#[cfg(test)] mod` blocks and the files of `#[cfg(test)] mod x;`) and comments do not count.

A circle is a strongly connected set of two or more files. A folder loop: in one folder, its
children (a file `x.rs` and a folder `x/` are one child; the folder's own `mod.rs`/`lib.rs` is
none) with an edge from child A to child B when any file under A imports from any file under B;
a strongly connected set of two or more children is a loop.

Usage: scripts/file_circles.py [SRC_DIR]   prints each circle and each folder loop (with one
  file edge behind every step of it), then 'file circles: N' and 'folder loops: M'
  (exit 1 if N > 0 or M > 0).
scripts/module-map.py --check reports the same circles and loops (tests/engine/architecture.rs
runs both).
"""
import os
import re
import sys

ROOTS = ("mod", "lib", "main")


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
    """'a::b::{c, d::e as f}' -> ['a::b::c', 'a::b::d::e@f'] (an alias after '@')"""
    body = re.sub(r"\s+as\s+", "@", body.strip())
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
    """file path -> module path (tuple), and module path -> file, production files only (not a
    module its parent declares `#[cfg(test)] mod x;`, nor what it holds)."""
    mod_of, file_of = {}, {}
    for d, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith(".rs"):
                continue
            p = os.path.join(d, f)
            rel = os.path.relpath(p, src)[:-3].split(os.sep)
            if rel[-1] in ROOTS:
                rel = rel[:-1]
            if (rel and rel[-1] == "tests") or "tests" in rel[:-1] or any("golden" in r for r in rel):
                continue
            mod_of[p] = tuple(rel)
            file_of.setdefault(tuple(rel), p)
    test_mods, test_files = set(), set()
    for p, here in mod_of.items():
        with open(p, encoding="utf-8", errors="replace") as fh:
            text = re.sub(r"//[^\n]*", "", fh.read())
        for m in re.finditer(
            r"#\[cfg\(test\)\]\s*(?:#\[path\s*=\s*\"([^\"]+)\"\]\s*)?"
            r"(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;",
            text,
        ):
            if m.group(1):  # relative to the folder of the file declaring it
                test_files.add(os.path.normpath(os.path.join(os.path.dirname(p), m.group(1))))
            else:
                test_mods.add(here + (m.group(2),))
    for p, mod in list(mod_of.items()):
        if p in test_files or any(mod[: len(t)] == t for t in test_mods):
            del mod_of[p]
            if file_of.get(mod) == p:
                del file_of[mod]
    return mod_of, file_of


def _split(path, here, file_of, bare=False):
    """A path named in module `here` -> (the deepest module of it that is a file, the segments
    after it), or None when it is not a path into the crate (an extern crate, a local name). With
    `bare`, a path starting with a child module of `here` counts too (as a `pub use` may say)."""
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
    elif bare and here + (segs[0],) in file_of:
        base = here
    else:
        return None
    full = base + tuple(segs)
    mod = full
    while mod not in file_of and mod:
        mod = mod[:-1]
    if mod not in file_of:
        return None
    return mod, list(full[len(mod):])


class Crate:
    def __init__(self, src):
        self.src = src
        self.mod_of, self.file_of = _modules(src)
        self.text, self.exports = {}, {}
        for p in self.mod_of:
            with open(p, encoding="utf-8", errors="replace") as fh:
                t = _strip(fh.read())
            self.text[p] = t
            named, globs = {}, []
            for m in re.finditer(r"\bpub(?:\s*\([^)]*\))?\s+use\s+([^;]+);", t):
                for q in _expand_use(m.group(1)):
                    path, _, alias = q.partition("@")
                    if path.endswith("::*"):
                        globs.append(path)
                        continue
                    last = path.split("::")[-1]
                    name = alias or last
                    if name != "_" and last != "self":
                        named[name] = path
            self.exports[p] = (named, globs)

    def _defines(self, p, name):
        return re.search(
            r"\b(?:struct|enum|union|trait|type|fn|const|static|mod|macro_rules!)\s+"
            + re.escape(name) + r"\b",
            self.text[p],
        )

    def locate(self, path, here, bare=False, depth=0):
        """The file that defines what `path` (named in module `here`) names, following
        re-exports."""
        s = _split(path, here, self.file_of, bare)
        if not s:
            return None
        mod, rest = s
        f = self.file_of[mod]
        if not rest or depth > 32:
            return f
        named, globs = self.exports[f]
        tail = "".join("::" + r for r in rest[1:])
        if rest[0] in named:
            t = self.locate(named[rest[0]] + tail, mod, True, depth + 1)
            return t or f
        if not self._defines(f, rest[0]):
            for g in globs:
                gs = _split(g, mod, self.file_of, True)
                if not gs or gs[1]:
                    continue
                gf = self.file_of[gs[0]]
                if self._defines(gf, rest[0]) or rest[0] in self.exports[gf][0]:
                    t = self.locate(g[:-3] + "::" + rest[0] + tail, mod, True, depth + 1)
                    return t or f
        return f


def edges(src):
    c = Crate(src)
    out = {p: set() for p in c.mod_of}
    for p, here in c.mod_of.items():
        text = c.text[p]
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", text):
            paths += [q.partition("@")[0] for q in _expand_use(m.group(1))]
        paths += re.findall(r"\b((?:crate|super)(?:::\w+)+)", text)
        for q in paths:
            t = c.locate(q, here)
            if not t or t == p:
                continue
            target = c.mod_of[t]
            if target[: len(here)] == here and len(target) > len(here):
                continue  # a module file using its own descendant
            out[p].add(t)
    return out


def _sccs(graph):
    """Strongly connected sets of two or more nodes (Tarjan's algorithm), each sorted."""
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
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def file_circles(src, graph=None):
    """The circles (sorted lists of paths relative to src's parent)."""
    graph = edges(src) if graph is None else graph
    top = os.path.dirname(src)
    return sorted(sorted(os.path.relpath(x, top) for x in c) for c in _sccs(graph))


def _children(src, p):
    """(folder, child) for every folder above file p, from src down: the child of that folder
    that holds p (None for the folder's own mod.rs/lib.rs/main.rs)."""
    parts = os.path.relpath(p, src).split(os.sep)
    out = []
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        child = part[:-3] if last else part
        out.append((tuple(parts[:k]), None if last and child in ROOTS else child))
    return out


def folder_loops(src, graph=None):
    """The folder loops: (folder relative to src's parent, sorted children, [(child, child,
    one file edge behind that step)])."""
    graph = edges(src) if graph is None else graph
    top = os.path.dirname(src)
    by_folder = {}
    for u in sorted(graph):
        cu = _children(src, u)
        for v in sorted(graph[u]):
            for (fu, a), (fv, b) in zip(cu, _children(src, v)):
                if fu != fv or a is None or b is None:
                    break
                if a != b:
                    g = by_folder.setdefault(fu, {})
                    g.setdefault(a, {}).setdefault(b, (u, v))
                    g.setdefault(b, {})
                    break
    found = []
    for folder in sorted(by_folder):
        g = by_folder[folder]
        for comp in _sccs({a: set(bs) for a, bs in g.items()}):
            steps = [
                (a, b, tuple(os.path.relpath(x, top) for x in g[a][b]))
                for a in comp
                for b in sorted(g[a])
                if b in comp
            ]
            name = os.path.join(os.path.basename(src), *folder)
            found.append((name, comp, steps))
    return found


def main():
    src = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "src")
    graph = edges(src)
    circles = file_circles(src, graph)
    loops = folder_loops(src, graph)
    for c in circles:
        print("circle:", " ".join(c))
    for folder, comp, steps in loops:
        print(f"folder loop: {folder}: {' '.join(comp)}")
        for a, b, (u, v) in steps:
            print(f"    {a} -> {b}  ({u} -> {v})")
    print(f"file circles: {len(circles)}")
    print(f"folder loops: {len(loops)}")
    return 1 if circles or loops else 0


if __name__ == "__main__":
    sys.exit(main())
