#!/usr/bin/env python3
"""Lists import circles between the source files of each crate under a folder (default: apps/).

A file `src/a.rs` (module `a`) depends on module `b` when it names `crate::b` (in a `use` or a
path) — also through `use crate::{b, ..}` — or, for a child module file `src/a/c.rs`, `super::b`.
Prints each crate's strongly connected components of more than one file ("circle") and exits 1
when there is one; exits 0 with "no import circle" otherwise.
"""
import os
import re
import sys


def modules(src):
    """Module path (tuple) -> file, for every .rs file under src/."""
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(root, f), src)[:-3].split(os.sep)
            if rel[-1] == "mod":
                rel = rel[:-1]
            if rel in (["lib"], ["main"]) or rel and rel[0] == "bin":
                continue
            mods[tuple(rel)] = os.path.join(root, f)
    return mods


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def deps(mod, text, mods):
    out = set()
    for m in re.finditer(r"crate::\{([^}]*)\}", text):
        for name in re.findall(r"\b([a-z_][a-z0-9_]*)\b", m.group(1)):
            if (name,) in mods:
                out.add((name,))
    for m in re.finditer(r"crate::([a-z_][a-z0-9_]*)(?:::([a-z_][a-z0-9_]*))?", text):
        a, b = m.group(1), m.group(2)
        if b and (a, b) in mods:
            out.add((a, b))
        elif (a,) in mods:
            out.add((a,))
    if len(mod) > 1:
        for m in re.finditer(r"super::([a-z_][a-z0-9_]*)", text):
            sib = mod[:-2] + (m.group(1),)
            if sib in mods:
                out.add(sib)
    out.discard(mod)
    # A child module naming its parent is not a circle of files: a parent contains its child.
    return {d for d in out if mod[: len(d)] != d and d[: len(mod)] != mod}


def sccs(graph):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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
            out.append(comp)

    for v in graph:
        if v not in index:
            visit(v)
    return out


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else "apps"
    found = False
    for crate in sorted(os.listdir(top)):
        src = os.path.join(top, crate, "src")
        if not os.path.isdir(src):
            continue
        mods = modules(src)
        graph = {}
        for mod, path in mods.items():
            with open(path, encoding="utf-8") as f:
                graph[mod] = deps(mod, strip_comments(f.read()), mods)
        circles = [c for c in sccs(graph) if len(c) > 1]
        edges = sum(len(d) for d in graph.values())
        for c in circles:
            found = True
            print(f"{crate}: circle: " + " <-> ".join("::".join(m) for m in sorted(c)))
        if not circles:
            print(f"{crate}: {len(mods)} files, {edges} edges, no import circle")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
