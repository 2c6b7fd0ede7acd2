#!/usr/bin/env python3
"""The workspace's crates point one way: each published crate depends (normal, build
or dev) only on crates of a lower layer. Reads `cargo metadata --format-version 1`
on stdin. A published crate missing from LAYERS fails: a new crate is placed first.
"""
import json
import sys

# sw4rm-proto <- sw4rm-timeouts <- {sw4rm-swarm, sw4rm-advise}
LAYERS = {
    "sw4rm-proto": 0,
    "sw4rm-timeouts": 1,
    "sw4rm-swarm": 2,
    "sw4rm-advise": 2,
}

meta = json.load(sys.stdin)
members = set(meta["workspace_members"])
failures = []
for package in meta["packages"]:
    if package["id"] not in members:
        continue
    name = package["name"]
    published = package.get("publish") != []
    if name not in LAYERS:
        if published:
            failures.append(f"{name} is published but has no layer in .ci/crate_graph.py")
        continue
    for dep in package["dependencies"]:
        below = LAYERS.get(dep["name"])
        if below is None:
            continue
        kind = dep.get("kind") or "normal"
        if below >= LAYERS[name]:
            failures.append(
                f"{name} (layer {LAYERS[name]}) depends ({kind}) on {dep['name']} "
                f"(layer {below}): crates depend only on lower layers"
            )
        else:
            print(f"{name} -> {dep['name']} ({kind})")
for failure in failures:
    print(f"error: {failure}", file=sys.stderr)
sys.exit(1 if failures else 0)
