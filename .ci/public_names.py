#!/usr/bin/env python3
"""Counts a crate's public names from its rustdoc output: one per item page (struct,
enum, fn, trait, constant, macro, type alias, static), unique by kind and name, the
redirect pages rustdoc writes at a re-exported item's private path left out, and the
generated `proto` module apart. Usage: public_names.py target/doc/CRATE [LIMIT]
(a count above LIMIT fails).
"""
import collections
import os
import re
import sys

root = sys.argv[1]
limit = int(sys.argv[2]) if len(sys.argv) > 2 else None
by_module = collections.defaultdict(set)
for folder, _, files in os.walk(root):
    rel = os.path.relpath(folder, root)
    for name in files:
        m = re.match(r"(struct|enum|fn|trait|constant|macro|type|static|union)\.(.+)\.html$", name)
        if not m:
            continue
        with open(os.path.join(folder, name), errors="ignore") as page:
            if 'http-equiv="refresh"' in page.read(800):
                continue
        module = "(root)" if rel == "." else rel.split(os.sep)[0]
        by_module[module].add((m.group(1), m.group(2)))
names = set().union(*(v for k, v in by_module.items() if k != "proto"))
for module, items in sorted(by_module.items()):
    print(f"  {module:<14} {len(items)}")
print(f"{root}: {len(names)} public names outside `proto` ({len(by_module.get('proto', ()))} generated)")
if limit is not None and len(names) > limit:
    print(f"error: more than {limit}", file=sys.stderr)
    sys.exit(1)
