#!/usr/bin/env python3
"""Licence and ban check of the dependency tree (what `cargo deny check licenses bans`
checks, without a tool to install): every package's SPDX licence expression must be
satisfiable with the allowed licences, and no banned crate may be in the tree.

Reads `cargo metadata --format-version 1 --all-features` on stdin."""

import json
import re
import sys

ALLOWED = {
    "MIT", "MIT-0", "Apache-2.0", "Apache-2.0 WITH LLVM-exception", "BSD-2-Clause",
    "BSD-3-Clause", "ISC", "Zlib", "Unicode-3.0", "Unicode-DFS-2016", "CC0-1.0",
    "Unlicense", "CDLA-Permissive-2.0", "OpenSSL", "MPL-2.0",
}
# TLS is rustls only: OpenSSL's bindings must not come in by a feature.
BANNED = {"openssl", "openssl-sys", "native-tls"}


def tokens(expr):
    expr = expr.replace("/", " OR ")
    return re.findall(r"\(|\)|[A-Za-z0-9.+-]+(?: WITH [A-Za-z0-9.+-]+)?", expr)


def parse(toks):
    """expr := term (OR term)*; term := atom (AND atom)*; atom := id | ( expr )"""
    def atom(i):
        if toks[i] == "(":
            v, i = expr(i + 1)
            return v, i + 1
        return toks[i] in ALLOWED, i + 1

    def term(i):
        v, i = atom(i)
        while i < len(toks) and toks[i] == "AND":
            w, i = atom(i + 1)
            v = v and w
        return v, i

    def expr(i):
        v, i = term(i)
        while i < len(toks) and toks[i] == "OR":
            w, i = term(i + 1)
            v = v or w
        return v, i

    return expr(0)[0]


def main():
    meta = json.load(sys.stdin)
    bad = []
    for p in meta["packages"]:
        lic = p.get("license")
        if not lic:
            bad.append(f"{p['name']} {p['version']}: no SPDX licence expression")
        elif not parse(tokens(lic)):
            bad.append(f"{p['name']} {p['version']}: licence {lic!r} is not allowed")
        if p["name"] in BANNED:
            bad.append(f"{p['name']} {p['version']}: banned crate")
    for b in bad:
        print(b)
    print(f"{len(meta['packages'])} packages checked, {len(bad)} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
