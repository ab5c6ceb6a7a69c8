#!/usr/bin/env python3
"""Checks that the committed results stay small, that every doc points at real things, and that
the index of docs/ lists every page.

Usage: python3 scripts/check_docs.py [--root DIR]   check the git repository at DIR (default: this one)
       python3 scripts/check_docs.py --self-test    check the checker on small generated repositories

It reads the files git tracks (`git ls-files`), prints what it measured and every problem, and
exits 1 when there is one. The rules:

1. Budget. The tracked files under docs/results/ hold at most 5 % of the lines of all tracked
   text files (a file with a NUL byte in its first 8 KiB is binary: its bytes count, its lines
   do not), and at most 1 000 000 bytes, binary and compressed files included.
2. Machine-only paths. No tracked `*.md` (outside vendored third-party folders) names a folder
   only one machine has: `/home/...`, `/root/...` or `/work/...` anywhere, or `/tmp/...`
   except as part of a command (in a fenced code block, or in an inline code span that holds
   more than the path: `--out /tmp/x` is an example output, `/tmp/x/run.json` alone is a source).
3. Repository paths. A path that starts with one of the repository's top-level folders
   (`crates/...`, `docs/...`, `scripts/...`, `apps/...`, ...) names a tracked file or folder,
   found from the repository root, the doc's folder or the doc's crate (the nearest folder with
   a Cargo.toml); `tests/...`, `src/...`, `benches/...` and `examples/...` may be in any crate.
   A path git ignores is an output (`fuzz/corpus/`), not checked. `*` and `{a,b}` are
   expanded and must match; a path right after `/`, `.` or
   `:` is part of a URL, a longer path or a `git show COMMIT:path` and is not checked; so are
   paths inside `<...>` placeholders, which end the path where they start. CHANGELOG.md is
   exempt: it names what was removed.
4. Links. A relative link or image `[text](target)` outside code resolves, from the doc's folder,
   to a tracked file or folder; `target#anchor` (and `#anchor` alone) names a heading of that
   Markdown file (GitHub's heading ids) or an `<a id=...>` / `<a name=...>` in it.
5. The index. docs/README.md links (outside code) every tracked Markdown page under docs/
   except those under docs/results/ (which docs/results/README.md indexes), so a new page
   cannot be left out of it.
"""
import fnmatch
import os
import re
import subprocess
import sys
import tempfile

RESULTS = "docs/results/"
INDEX = "docs/README.md"
MAX_RESULTS_LINE_SHARE = 0.05
MAX_RESULTS_BYTES = 1_000_000
# Docs whose paths are history (what was removed), not pointers into the tree: rule 3 skips them.
HISTORY_DOCS = ("CHANGELOG.md",)
# Folders every crate may have: `tests/x.rs` may be found in any crate of the repository.
CRATE_FOLDERS = ("benches", "examples", "src", "tests")
# Folders a path is written from even where a repository has none of them yet.
TOP_FOLDERS = ("apps", "benches", "crates", "docs", "schemas", "scripts", "tests")
VENDORED = re.compile(r"(^|/)(vendor|vendored|third[_-]party)/")

MACHINE_PATH = re.compile(r"(?<![\w.~-])/(home|root|work|tmp)/[^\s`'\")\]>|,;]*")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def git_files(root):
    out = subprocess.run(
        ["git", "-C", root, "ls-files", "-z"], check=True, capture_output=True
    ).stdout
    return sorted(p for p in out.decode().split("\0") if p and os.path.isfile(os.path.join(root, p)))


def read(root, path):
    with open(os.path.join(root, path), "rb") as f:
        return f.read()


def is_binary(data):
    return b"\0" in data[:8192]


def budget(root, files):
    """(problems, summary) of rule 1."""
    total_lines = results_lines = results_bytes = 0
    for path in files:
        data = read(root, path)
        lines = 0 if is_binary(data) else data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        total_lines += lines
        if path.startswith(RESULTS):
            results_lines += lines
            results_bytes += len(data)
    share = results_lines / total_lines if total_lines else 0.0
    summary = (
        f"docs/results: {results_lines} of {total_lines} tracked lines ({share:.1%}, budget "
        f"{MAX_RESULTS_LINE_SHARE:.0%}), {results_bytes} bytes (budget {MAX_RESULTS_BYTES})"
    )
    problems = []
    if share > MAX_RESULTS_LINE_SHARE:
        problems.append(f"docs/results holds {share:.1%} of the tracked lines, over {MAX_RESULTS_LINE_SHARE:.0%}")
    if results_bytes > MAX_RESULTS_BYTES:
        problems.append(f"docs/results holds {results_bytes} bytes, over {MAX_RESULTS_BYTES}")
    return problems, summary


def split_code(text):
    """The doc as (kind, text, first line) pieces: 'fence' for fenced code blocks, 'prose' else."""
    pieces, buf, start, fence = [], [], 1, None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None and m:
            if buf:
                pieces.append(("prose", "\n".join(buf), start))
            buf, start, fence = [line], n, m.group(1)
        elif fence is not None and m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
            buf.append(line)
            pieces.append(("fence", "\n".join(buf), start))
            buf, start, fence = [], n + 1, None
        else:
            buf.append(line)
    if buf:
        pieces.append(("fence" if fence else "prose", "\n".join(buf), start))
    return pieces


def prose_parts(text):
    """Prose as ('code', span) and ('text', rest) parts, each with its offset in text."""
    out, at = [], 0
    for paragraph in re.split(r"(\n\s*\n)", text):
        pos = 0
        for m in CODE_SPAN.finditer(paragraph):
            out.append(("text", paragraph[pos : m.start()], at + pos))
            out.append(("code", m.group(2), at + m.start(2)))
            pos = m.end()
        out.append(("text", paragraph[pos:], at + pos))
        at += len(paragraph)
    return out


def slug(heading):
    """GitHub's id for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text):
    ids, seen = set(), {}
    for kind, piece, _ in split_code(text):
        if kind != "prose":
            continue
        for line in piece.split("\n"):
            m = HEADING.match(line)
            if m:
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                ids.add(base if n == 0 else f"{base}-{n}")
        ids.update(HTML_ANCHOR.findall(piece))
    return ids


class Repo:
    def __init__(self, root):
        self.root = root
        self.files = git_files(root)
        self.file_set = set(self.files)
        self.dirs = {""}
        for f in self.files:
            parts = f.split("/")
            for i in range(1, len(parts)):
                self.dirs.add("/".join(parts[:i]))
        self.top = sorted(
            {f.split("/")[0] for f in self.files if "/" in f and not f.startswith(".")} | set(TOP_FOLDERS)
        )
        self.path_re = (
            re.compile(r"(?<![\w./:~@$-])((?:" + "|".join(map(re.escape, self.top)) + r")/[\w.*{},/+@-]*)")
            if self.top
            else None
        )
        self._anchors = {}
        self._ignored = {}
        self.crates = sorted(os.path.dirname(f) for f in self.files if f.endswith("Cargo.toml") and "/" in f)

    def exists(self, path):
        path = path.rstrip("/")
        return path in self.file_set or path in self.dirs

    def matches(self, pattern):
        """Whether a path with `*` / `{a,b}` names at least one tracked file or folder."""
        m = re.search(r"\{([^{}]*)\}", pattern)
        if m:
            return all(
                self.matches(pattern[: m.start()] + alt + pattern[m.end() :]) for alt in m.group(1).split(",")
            )
        if "*" in pattern:
            pattern = pattern.rstrip("/")
            return any(fnmatch.fnmatchcase(p, pattern) for p in self.file_set | self.dirs)
        return self.exists(pattern)

    def ignored(self, path):
        """Whether git ignores path (as a file or as a folder): an output, not a source."""
        if path not in self._ignored:
            self._ignored[path] = any(
                subprocess.run(["git", "-C", self.root, "check-ignore", "-q", p], capture_output=True).returncode == 0
                for p in (path, path + "/")
            )
        return self._ignored[path]

    def crate_dir(self, doc):
        d = os.path.dirname(doc)
        while d:
            if f"{d}/Cargo.toml" in self.file_set:
                return d
            d = os.path.dirname(d)
        return None

    def anchors_of(self, path):
        if path not in self._anchors:
            self._anchors[path] = anchors(read(self.root, path).decode("utf-8", "replace"))
        return self._anchors[path]

    def docs(self):
        return [f for f in self.files if f.endswith(".md") and not VENDORED.search(f)]


def line_of(text, offset, first):
    return first + text.count("\n", 0, offset)


def check_doc(repo, doc):
    text = read(repo.root, doc).decode("utf-8", "replace")
    here = os.path.dirname(doc)
    crate = repo.crate_dir(doc)
    problems = []

    def bad(line, what):
        problems.append(f"{doc}:{line}: {what}")

    def check_machine_paths(chunk, first, in_command):
        for m in MACHINE_PATH.finditer(chunk):
            if m.group(1) == "tmp" and in_command:
                continue
            bad(line_of(chunk, m.start(), first), f"names a path only one machine has: {m.group(0)}")

    def check_repo_paths(chunk, first):
        if repo.path_re is None or doc in HISTORY_DOCS:
            return
        for m in repo.path_re.finditer(chunk):
            if chunk[m.end() : m.end() + 1] == "<":
                continue  # a template: `crates/datapath-<name>`
            path = m.group(1).rstrip(".,;:").rstrip("/")
            bases = ["", here] + ([crate] if crate else [])
            anywhere = bases + (repo.crates if path.split("/")[0] in CRATE_FOLDERS else [])
            if any(repo.matches(os.path.normpath(os.path.join(b, path))) for b in anywhere):
                continue
            if any(repo.ignored(os.path.normpath(os.path.join(b, path))) for b in bases):
                continue  # an output the build or a command writes, such as fuzz/corpus/
            bad(line_of(chunk, m.start(), first), f"names a repository path that does not exist: {path}")

    def check_link(target, line):
        if SCHEME.match(target) or target.startswith("//"):
            return
        path, _, anchor = target.partition("#")
        path = path.split("?", 1)[0]
        if path:
            resolved = os.path.normpath(os.path.join(here, path))
            if resolved.startswith(".."):
                bad(line, f"links outside the repository: {target}")
                return
            if not repo.exists(resolved):
                bad(line, f"links to a file or folder that does not exist: {target}")
                return
        else:
            resolved = doc
        if anchor and resolved.endswith(".md") and resolved in repo.file_set:
            if anchor not in repo.anchors_of(resolved):
                bad(line, f"links to a heading that does not exist: {target}")

    for kind, piece, first in split_code(text):
        if kind == "fence":
            check_machine_paths(piece, first, in_command=True)
            check_repo_paths(piece, first)
            continue
        for part_kind, part, offset in prose_parts(piece):
            line = line_of(piece, offset, first)
            if part_kind == "code":
                check_machine_paths(part, line, in_command=bool(re.search(r"\s", part.strip())))
                check_repo_paths(part, line)
            else:
                check_machine_paths(part, line, in_command=False)
                check_repo_paths(part, line)
                for m in LINK.finditer(part):
                    check_link(m.group(1), line_of(part, m.start(), line))
                for m in REF_DEF.finditer(part):
                    check_link(m.group(1), line_of(part, m.start(), line))
    return problems


def linked(repo, doc):
    """The tracked files a doc's relative links (outside code) point at."""
    text = read(repo.root, doc).decode("utf-8", "replace")
    here, out = os.path.dirname(doc), set()
    for kind, piece, _ in split_code(text):
        if kind != "prose":
            continue
        for part_kind, part, _ in prose_parts(piece):
            if part_kind != "text":
                continue
            targets = [m.group(1) for m in LINK.finditer(part)] + [m.group(1) for m in REF_DEF.finditer(part)]
            for target in targets:
                if SCHEME.match(target) or target.startswith("//"):
                    continue
                path = target.partition("#")[0].split("?", 1)[0]
                if path:
                    out.add(os.path.normpath(os.path.join(here, path)))
    return out


def index(repo):
    """Problems of rule 5: the pages under docs/ that docs/README.md does not link."""
    pages = [
        f for f in repo.docs() if f.startswith("docs/") and f.endswith(".md") and f != INDEX and not f.startswith(RESULTS)
    ]
    if not pages:
        return []
    if INDEX not in repo.file_set:
        return [f"{INDEX} is missing: it is the index of the pages under docs/"]
    links = linked(repo, INDEX)
    return [f"{INDEX} does not link {page}: add it to the index" for page in pages if page not in links]


def check(root):
    """Every problem of the repository at root, and the budget's summary line."""
    repo = Repo(root)
    problems, summary = budget(root, repo.files)
    for doc in repo.docs():
        problems.extend(check_doc(repo, doc))
    problems.extend(index(repo))
    return problems, summary


def self_test():
    """Each rule against a repository built for it: a good one passes, each broken one fails."""
    good = {
        "Cargo.toml": "[workspace]\n",
        "crates/a/Cargo.toml": "[package]\n",
        "crates/a/src/lib.rs": "\n" * 400,
        "crates/a/tests/t.rs": "\n",
        "crates/a/README.md": "Tested in `tests/t.rs` and `crates/a/src/lib.rs`; see [docs](../../docs/guide.md#first-steps).\n",
        "docs/guide.md": (
            "# Guide\n\n## First steps\n\nRun `scripts/run.sh --out /tmp/x` (writes `results/x.json`);\n"
            "see [the results](results/README.md), [below](#first-steps), `crates/*/src/lib.rs`,\n"
            "`crates/a/{src,tests}`, `git show 1234abc:docs/gone.md`, https://example.com/crates/nope,\n"
            "[a folder](../crates/a/), `crates/datapath-<name>`, `tests/t.rs` and `docs/out/run.json`.\n\n"
            "```sh\nscripts/run.sh > /tmp/out.txt\n```\n"
        ),
        "docs/results/README.md": "# Results\n\nOne table.\n",
        "docs/README.md": "# Docs\n\n- [The guide](guide.md#first-steps)\n- [Results](results/README.md)\n",
        "scripts/run.sh": "#!/bin/sh\n",
        ".gitignore": "/docs/out/\n",
    }
    broken = {
        "a missing repository path": ("docs/guide.md", "See crates/a/src/gone.rs.\n", "does not exist: crates/a/src/gone.rs"),
        "a missing relative link": ("docs/guide.md", "See [x](../apps/none.md).\n", "does not exist: ../apps/none.md"),
        "a missing heading": ("docs/guide.md", "See [x](results/README.md#two).\n", "heading that does not exist"),
        "a glob matching nothing": ("docs/guide.md", "See `apps/*/README.md`.\n", "does not exist: apps/*/README.md"),
        "a home folder": ("docs/guide.md", "Built in /home/me/cf.\n", "only one machine has: /home/me/cf"),
        "a scratch folder in a command": ("docs/guide.md", "```sh\n/work/quiet/run.sh\n```\n", "/work/quiet/run.sh"),
        "a /tmp file as a source": ("docs/guide.md", "Trials from `/tmp/r/points.json`.\n", "/tmp/r/points.json"),
        "a /tmp folder in prose": ("docs/guide.md", "Raw data in /tmp/r.\n", "only one machine has: /tmp/r"),
        "results over budget": ("docs/results/big.md", "x\n" * 60, "over 5%"),
        "results over a megabyte": ("docs/results/big.bin", "\0" * 1_000_001, "bytes, over"),
        "a page the index leaves out": ("docs/more/other.md", "# Other\n", "does not link docs/more/other.md"),
        "a page named only in code": (
            "docs/README.md",
            "`other.md`\n\n```\n[x](other.md)\n```\n",
            "does not link docs/other.md",
            {"docs/other.md": "# Other\n"},
        ),
    }
    failures = []

    def run(files):
        with tempfile.TemporaryDirectory() as d:
            for path, body in files.items():
                os.makedirs(os.path.join(d, os.path.dirname(path)), exist_ok=True)
                with open(os.path.join(d, path), "w") as f:
                    f.write(body)
            subprocess.run(["git", "init", "-q", d], check=True)
            subprocess.run(["git", "-C", d, "add", "-A"], check=True)
            return check(d)[0]

    problems = run(good)
    if problems:
        failures.append("the good repository failed: " + "; ".join(problems))
    for name, (path, body, expect, *extra) in broken.items():
        files = dict(good)
        files[path] = files.get(path, "") + body if path.endswith(".md") else body
        for more in extra:
            files.update(more)
        problems = run(files)
        if not any(expect in p for p in problems):
            failures.append(f"{name} was not caught (expected '{expect}', got {problems})")
    for f in failures:
        print(f"check_docs self-test: {f}")
    print(f"check_docs self-test: {len(broken) + 1 - len(failures)} of {len(broken) + 1} cases right")
    return 1 if failures else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if len(argv) == 3 and argv[1] == "--root":
        root = argv[2]
    elif len(argv) != 1:
        print(__doc__.split("\n\n")[0].replace("Usage: ", "usage: ", 1), file=sys.stderr)
        return 2
    problems, summary = check(root)
    print(summary)
    for p in problems:
        print(p)
    print(f"{len(problems)} problem(s)" if problems else "docs: every path and link resolves; every page under docs/ is in the index; results within budget")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
