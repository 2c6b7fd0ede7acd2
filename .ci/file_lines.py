#!/usr/bin/env python3
"""No non-test source file over 450 lines: the house rule that files fit on a screen.

Counts each `.rs` file under every published crate's `src/` (generated code aside) without its `#[cfg(test)]`
modules, and skips files that are test modules themselves (declared under a
`#[cfg(...test...)]` attribute). Prints every file over the limit and exits 1.
"""
import os
import re
import sys

LIMIT = 450
TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
# The crates' sources: the core, the swarm, the advisor (and the protos when split).
ROOTS = [os.path.join(TOP, d, "src") for d in (".", "swarm", "advise", "proto")]
ATTR = re.compile(r"\s*#\[cfg\((.*)\)\]\s*$")
MOD = re.compile(r"\s*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*(;|\{)")


def test_modules(path, lines):
    """The files that `path` declares as test modules (`#[cfg(test)] mod x;`)."""
    out = set()
    here = os.path.dirname(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    base = here if stem in ("mod", "lib", "main") else os.path.join(here, stem)
    for i, line in enumerate(lines):
        m = MOD.match(line)
        if not m or m.group(4) != ";":
            continue
        attrs = []
        j = i - 1
        while j >= 0 and ATTR.match(lines[j]):
            attrs.append(ATTR.match(lines[j]).group(1))
            j -= 1
        if any(re.search(r"\btest\b", a) and "not(test" not in a for a in attrs):
            name = m.group(3)
            out.add(os.path.normpath(os.path.join(base, name + ".rs")))
            out.add(os.path.normpath(os.path.join(base, name, "mod.rs")))
    return out


def non_test_lines(lines):
    """Lines outside `#[cfg(test)] mod … { … }` blocks."""
    count, i = 0, 0
    while i < len(lines):
        m = ATTR.match(lines[i])
        if m and re.search(r"\btest\b", m.group(1)) and "not(test" not in m.group(1):
            j = i + 1
            while j < len(lines) and ATTR.match(lines[j]):
                j += 1
            if j < len(lines) and MOD.match(lines[j]) and MOD.match(lines[j]).group(4) == "{":
                depth = 0
                while j < len(lines):
                    depth += lines[j].count("{") - lines[j].count("}")
                    j += 1
                    if depth <= 0:
                        break
                i = j
                continue
        count += 1
        i += 1
    return count


def main():
    files, tests = {}, set()
    for root, _, names in (w for r in ROOTS if os.path.isdir(r) for w in os.walk(r)):
        if "generated" in root.split(os.sep):
            continue
        for name in names:
            if name.endswith(".rs"):
                path = os.path.normpath(os.path.join(root, name))
                lines = open(path, encoding="utf-8").read().split("\n")
                files[path] = lines
                tests |= test_modules(path, lines)
    over = []
    for path, lines in sorted(files.items()):
        if path in tests:
            continue
        n = non_test_lines(lines)
        if n > LIMIT:
            over.append((n, os.path.relpath(path, TOP)))
    for n, path in over:
        print(f"{path}: {n} non-test lines (limit {LIMIT}): split it along its jobs")
    if over:
        sys.exit(1)
    print(f"every non-test source file is within {LIMIT} lines")


if __name__ == "__main__":
    main()
