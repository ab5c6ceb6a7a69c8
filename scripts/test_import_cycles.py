#!/usr/bin/env python3
"""Tests of scripts/import_cycles.py on small fixture trees (scripts/test.sh runs them):
a circle fails, the same crate without it passes, an app depending on an app fails whichever
dependency table names it, and the allow-list takes only its exact circle and fails once that
circle is gone."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import import_cycles  # noqa: E402


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def crate(root, rel, name, files, deps=""):
    """A crate at root/rel named name, with src files {module path: text} and extra
    Cargo.toml text (dependency tables)."""
    d = os.path.join(root, rel)
    write(os.path.join(d, "Cargo.toml"), f'[package]\nname = "{name}"\nversion = "0.1.0"\n{deps}')
    write(os.path.join(d, "src", "lib.rs"), "".join(f"mod {m.split('/')[0]};\n" for m in files))
    for m, text in files.items():
        write(os.path.join(d, "src", m + ".rs"), text)
    return d


class Fixture(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def run_check(self, *args):
        """(exit code, stdout + stderr) of the script on args."""
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = import_cycles.main(list(args))
        return code, out.getvalue()


class FileCircles(Fixture):
    def test_a_circle_fails_and_names_its_files(self):
        crate(self.root, "crates/a", "a", {
            "x": "use crate::y::Y;\npub struct X;\n",
            "y": "pub struct Y(crate::x::X);\n",
            "z": "use crate::x::X;\n",
        })
        code, out = self.run_check(os.path.join(self.root, "crates"))
        self.assertEqual(code, 1, out)
        self.assertIn("circle: x <-> y", out)
        self.assertNotIn("z <->", out)

    def test_the_same_crate_without_the_circle_passes(self):
        crate(self.root, "crates/a", "a", {
            "x": "use crate::y::Y;\npub struct X;\n",
            # Named only in a comment and a doc comment: not an import.
            "y": "// crate::x::X\n/// [`crate::x::X`]\npub struct Y;\n",
        })
        code, out = self.run_check(os.path.join(self.root, "crates"))
        self.assertEqual(code, 0, out)
        self.assertIn("no import circle", out)

    def test_a_circle_through_a_use_list_or_super_fails(self):
        crate(self.root, "crates/b", "b", {
            "p/q": "use super::r::R;\npub struct Q;\n",
            "p/r": "use super::q::Q;\npub struct R;\n",
            "p": "mod q;\nmod r;\n",
            "s": "use crate::{t, u};\n",
            "t": "use crate::s;\n",
            "u": "",
        })
        code, out = self.run_check(os.path.join(self.root, "crates"))
        self.assertEqual(code, 1, out)
        self.assertIn("circle: p::q <-> p::r", out)
        self.assertIn("circle: s <-> t", out)

    def test_the_root_folder_may_itself_be_a_crate(self):
        crate(self.root, "benches", "benches", {"x": "use crate::y;\n", "y": "use crate::x;\n"})
        code, out = self.run_check(os.path.join(self.root, "benches"))
        self.assertEqual(code, 1, out)


def ring(mods):
    """Source files in which each module names the next, the last the first: one circle."""
    mods = sorted(mods)
    return {m: f"use crate::{mods[(i + 1) % len(mods)]}::X;\n" for i, m in enumerate(mods)}


class AllowList(Fixture):
    """With an allow-list of one entry of its own (the script's real entries stay out)."""

    NAME, MODS = "allowed-crate", frozenset({"error", "imports", "schema"})
    CIRCLE = ring(MODS)

    def setUp(self):
        super().setUp()
        self.real = import_cycles.ALLOWED
        import_cycles.ALLOWED = {(self.NAME, self.MODS)}

    def tearDown(self):
        import_cycles.ALLOWED = self.real
        super().tearDown()

    def test_the_allowed_circle_passes(self):
        crate(self.root, "crates/allowed", self.NAME, self.CIRCLE)
        code, out = self.run_check(os.path.join(self.root, "crates"))
        self.assertEqual(code, 0, out)
        self.assertIn("allowed for now", out)

    def test_a_grown_circle_is_not_the_allowed_one(self):
        first = sorted(self.MODS)[0]
        files = dict(self.CIRCLE, extra=f"use crate::{first}::X;\n")
        files[first] += "use crate::extra::Y;\n"
        crate(self.root, "crates/allowed", self.NAME, files)
        code, out = self.run_check(os.path.join(self.root, "crates"))
        self.assertEqual(code, 1, out)

    def test_an_entry_whose_circle_is_gone_fails(self):
        crate(self.root, "crates/allowed", self.NAME, {m: "" for m in self.MODS})
        code, out = self.run_check(os.path.join(self.root, "crates"))
        self.assertEqual(code, 1, out)
        self.assertIn("is gone: delete its entry", out)

    def test_another_crate_with_the_same_circle_is_not_allowed(self):
        crate(self.root, "crates/other", "other", self.CIRCLE)
        code, out = self.run_check(os.path.join(self.root, "crates"))
        self.assertEqual(code, 1, out)


class AppsOnApps(Fixture):
    def apps(self, deps):
        crate(self.root, "crates/shared", "shared", {})
        crate(self.root, "apps/store", "store", {})
        crate(self.root, "apps/bench", "bench", {}, deps)
        return self.run_check("--apps", os.path.join(self.root, "apps"), os.path.join(self.root, "apps"))

    def test_an_app_on_a_crate_passes(self):
        code, out = self.apps('[dependencies]\nshared = { path = "../../crates/shared" }\n')
        self.assertEqual(code, 0, out)
        self.assertIn("no app depends on another app", out)

    def test_an_app_on_an_app_fails_in_any_table(self):
        for table in ["dependencies", "dev-dependencies", "build-dependencies",
                      "target.'cfg(unix)'.dependencies"]:
            with self.subTest(table=table):
                code, out = self.apps(f'[{table}]\nstore = {{ path = "../store" }}\n')
                self.assertEqual(code, 1, out)
                self.assertIn("depends on the app", out)
                self.assertIn("store", out)

    def test_an_app_on_an_app_through_the_workspace_fails(self):
        write(os.path.join(self.root, "Cargo.toml"),
              '[workspace]\nmembers = []\n[workspace.dependencies]\n'
              'store = { path = "apps/store" }\n')
        code, out = self.apps("[dependencies]\nstore = { workspace = true }\n")
        self.assertEqual(code, 1, out)

    def test_a_registry_dependency_of_the_same_name_is_not_an_app(self):
        code, out = self.apps('[dependencies]\nstore = "1"\n')
        self.assertEqual(code, 0, out)


if __name__ == "__main__":
    unittest.main()
