#!/usr/bin/env python3
"""Guards the structure of the repository's crates; scripts/test.sh runs it.

    scripts/import_cycles.py [-q] [--apps DIR] [ROOT ...]

1. Import circles between the source files of a crate. Every crate under each ROOT (a folder
   with a Cargo.toml and a src/, the ROOT itself included) is read: a file `src/a.rs` (module
   `a`) depends on module `b` when it names `crate::b` (in a `use` or a path) — also through
   `use crate::{b, ..}` — or, for a child module file `src/a/c.rs`, its sibling `a::b` through
   `super::b`. A strongly
   connected component of more than one file is a circle: neither file can be read or changed
   without the other.
2. No app depends on another app: no crate under the `--apps` folder may name another crate
   under it in its dependencies, dev-dependencies or build-dependencies (target-specific ones
   included; a `path` or a `workspace = true` dependency resolved through the workspace's
   Cargo.toml). What two apps share belongs in a crate of its own.

Without arguments it checks this repository: ROOTs crates, apps, benches, demikernel, fuzz and
tests, and `--apps apps`. Prints what it found per crate and exits 1 on any circle not in
ALLOWED, on an ALLOWED entry whose circle is gone, and on an app depending on an app; 0
otherwise.
"""
import argparse
import os
import re
import sys
import tomllib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = "scripts/import_cycles.py"

# Circles known and being removed, each with why it is still here. Keyed by package name and
# the exact set of modules: a circle that grows or shrinks fails again, and so does an entry
# whose circle has gone (delete the entry then).
ALLOWED: set = set()

SKIP_DIRS = {"target", ".git", "node_modules"}


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
            # In `a::c` (src/a/c.rs), `super::b` is the sibling `a::b`.
            sib = mod[:-1] + (m.group(1),)
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


def crates_under(root):
    """Every crate folder under root (root included): a Cargo.toml beside a src/ folder."""
    found = []
    for d, subdirs, files in os.walk(root):
        subdirs[:] = sorted(s for s in subdirs if s not in SKIP_DIRS and s != "src")
        if "Cargo.toml" in files and os.path.isdir(os.path.join(d, "src")):
            found.append(d)
    return found


def package_name(crate):
    with open(os.path.join(crate, "Cargo.toml"), "rb") as f:
        manifest = tomllib.load(f)
    return manifest.get("package", {}).get("name", os.path.basename(crate))


def file_circles(crate):
    """The circles of crate's files, each a sorted list of module names, and a summary."""
    mods = modules(os.path.join(crate, "src"))
    graph = {}
    for mod, path in mods.items():
        with open(path, encoding="utf-8") as f:
            graph[mod] = deps(mod, strip_comments(f.read()), mods)
    circles = [sorted("::".join(m) for m in c) for c in sccs(graph) if len(c) > 1]
    edges = sum(len(d) for d in graph.values())
    return circles, f"{len(mods)} files, {edges} edges"


def workspace_root(crate):
    """The folder of the Cargo.toml with a [workspace] above crate (or crate's own), if any."""
    d = os.path.abspath(crate)
    while True:
        manifest = os.path.join(d, "Cargo.toml")
        if os.path.isfile(manifest):
            with open(manifest, "rb") as f:
                if "workspace" in tomllib.load(f):
                    return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def dependency_tables(manifest):
    """(table name, {dependency: spec}) for every dependency table of a manifest."""
    kinds = ("dependencies", "dev-dependencies", "build-dependencies")
    for k in kinds:
        yield k, manifest.get(k, {})
    for target, tables in manifest.get("target", {}).items():
        for k in kinds:
            yield f"target.{target}.{k}", tables.get(k, {})


def dependency_paths(crate):
    """(table, dependency, absolute folder) of every path dependency of crate."""
    with open(os.path.join(crate, "Cargo.toml"), "rb") as f:
        manifest = tomllib.load(f)
    ws = None
    for table, entries in dependency_tables(manifest):
        for name, spec in entries.items():
            if not isinstance(spec, dict):
                continue
            if "path" in spec:
                yield table, name, os.path.realpath(os.path.join(crate, spec["path"]))
            elif spec.get("workspace"):
                ws = ws or workspace_root(crate)
                if ws is None:
                    continue
                with open(os.path.join(ws, "Cargo.toml"), "rb") as f:
                    shared = tomllib.load(f)["workspace"].get("dependencies", {})
                wspec = shared.get(name)
                if isinstance(wspec, dict) and "path" in wspec:
                    yield table, name, os.path.realpath(os.path.join(ws, wspec["path"]))


def app_on_app(apps):
    """Lines naming every dependency of a crate under apps on another crate under apps."""
    app_dirs = {os.path.realpath(c): c for c in crates_under(apps)}
    bad = []
    for real, crate in sorted(app_dirs.items()):
        for table, name, dep in dependency_paths(crate):
            if dep != real and dep in app_dirs:
                bad.append(
                    f"{crate}: depends on the app {app_dirs[dep]} ([{table}] {name}); "
                    "an app may not depend on another app: move what they share into a crate"
                )
    return bad


def check(roots, apps, quiet=False):
    """Runs both checks; returns the problems found (each a line). Quiet: prints only the
    circles and the problems, then how many crates were read."""
    problems = []
    seen_allowed = set()
    scanned = set()
    for root in roots:
        for crate in crates_under(root):
            name = package_name(crate)
            scanned.add(name)
            circles, summary = file_circles(crate)
            for c in circles:
                key = (name, frozenset(c))
                line = f"{crate}: circle: " + " <-> ".join(c)
                if key in ALLOWED:
                    seen_allowed.add(key)
                    print(f"{line} (allowed for now: see ALLOWED in {HERE})")
                else:
                    problems.append(line)
                    print(line)
            if not circles and not quiet:
                print(f"{crate}: {summary}, no import circle")
    for name, mods in sorted(ALLOWED, key=lambda k: (k[0], sorted(k[1]))):
        if name in scanned and (name, mods) not in seen_allowed:
            problems.append(
                f"{name}: the allowed circle {' <-> '.join(sorted(mods))} is gone: "
                f"delete its entry in ALLOWED ({HERE})"
            )
    if apps is not None:
        bad = app_on_app(apps)
        problems.extend(bad)
        for line in bad:
            print(line)
        if not bad:
            print(f"{apps}: no app depends on another app")
    if quiet:
        print(f"{len(scanned)} crates read")
    return problems


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--apps", help="folder of the apps (no crate under it may depend on another)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only circles and problems")
    p.add_argument("roots", nargs="*", help="folders whose crates are checked for circles")
    a = p.parse_args(argv)
    if a.roots:
        roots, apps = a.roots, a.apps
    else:
        os.chdir(REPO)
        names = ["crates", "apps", "benches", "demikernel", "fuzz", "tests"]
        roots = [n for n in names if os.path.isdir(n)]
        apps = a.apps or "apps"
    problems = check(roots, apps, a.quiet)
    if problems:
        print(f"\n{len(problems)} structure problem(s):", file=sys.stderr)
        for line in problems:
            print(f"  {line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
