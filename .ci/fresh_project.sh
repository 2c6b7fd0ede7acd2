#!/usr/bin/env bash
# A new user's first try, from each packaged crate. The core: a fresh `cargo new` project that
# follows only the README's "Add it" (its [dependencies] block, the crate taken from
# the .crate file `cargo package` wrote) and "A first call" (its code, as src/main.rs),
# built and run against the embedded server.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
crate="target/package/sw4rm-timeouts-$version.crate"
test -f "$crate" || { echo "no $crate: run cargo package first"; exit 1; }

# Outside the repository: a package unpacked under it would join its workspace.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$crate" -C "$work"
# Every packaged crate names the protos' by version: their package stands in.
proto_crate="target/package/sw4rm-proto-$version.crate"
test -f "$proto_crate" || { echo "no $proto_crate: run cargo package first"; exit 1; }
tar -xzf "$proto_crate" -C "$work"
cargo new --quiet --bin "$work/first-try"
app="$work/first-try"

# The README's blocks, by their headings.
block() { # heading, fence language
  awk -v h="$1" -v lang="$2" '
    $0 == h { inside = 1; next }
    inside && /^## / { exit }
    inside && $0 ~ "^```" lang { grab = 1; next }
    grab && /^```/ { exit }
    grab { print }
  ' README.md
}
deps=$(block "## Add it" "toml" | grep -v '^\[dependencies\]')
test -n "$deps" || { echo "README: no [dependencies] under 'Add it'"; exit 1; }
block "## A first call" "rust" > "$app/src/main.rs"
test -s "$app/src/main.rs" || { echo "README: no code under 'A first call'"; exit 1; }

# The crate from the package, not the registry; the project is a workspace of its own.
deps=$(printf '%s\n' "$deps" | sed "s|sw4rm-timeouts = { version = \"[^\"]*\"|sw4rm-timeouts = { path = \"$work/sw4rm-timeouts-$version\"|")
printf '%s\n' "$deps" >> "$app/Cargo.toml"
# The packaged core names sw4rm-proto by version: its package stands in.
printf '\n[patch.crates-io]\nsw4rm-proto = { path = "%s" }\n' "$work/sw4rm-proto-$version" >> "$app/Cargo.toml"

# A fresh project's run: a workspace of its own, built with the versions this
# repository tested with; its manifest and output printed, the output kept in $out.
run_project() {
  printf '\n[workspace]\n' >> "$1/Cargo.toml"
  cp Cargo.lock "$1/Cargo.lock"
  echo "-- $1/Cargo.toml"
  cat "$1/Cargo.toml"
  out=$(CARGO_TARGET_DIR="$root/target" cargo run --quiet --manifest-path "$1/Cargo.toml")
  echo "$out"
}
run_project "$app"
echo "$out" | grep -q "the server saw /sw4rm.registry.RegistryService/Heartbeat with grpc-timeout Some(\"5000000u\")"
echo "$out" | grep -q "the server saw /sw4rm.registry.RegistryService/Heartbeat with grpc-timeout Some(\"1000000u\")"
# The clamp's warning the README promises, printed by the subscriber it installs.
echo "$out" | grep -q "WARN.*SW4RM timeout override clamped to the profile's bounds"
echo "first try: built and ran from the packaged crate"

# The protos' crate: a fresh project from proto/README.md's "Add it" and "A first
# message" (the crate from its package).
cargo new --quiet --bin "$work/proto-try"
app="$work/proto-try"
deps=$(cd proto && block "## Add it" "toml" | grep -v '^\[dependencies\]')
test -n "$deps" || { echo "proto/README: no [dependencies] under 'Add it'"; exit 1; }
(cd proto && block "## A first message" "rust") > "$app/src/main.rs"
test -s "$app/src/main.rs" || { echo "proto/README: no code under 'A first message'"; exit 1; }
deps=$(printf '%s\n' "$deps" | sed "s|^sw4rm-proto = .*|sw4rm-proto = { path = \"$work/sw4rm-proto-$version\" }|")
printf '%s\n' "$deps" >> "$app/Cargo.toml"
run_project "$app"
echo "$out" | grep -q "^a HeartbeatRequest for agent-7 is 9 bytes on the wire" \
  || { echo "proto try: no message printed"; exit 1; }
echo "proto try: built and ran from the packaged crate"

# The swarm's crate: a fresh project from swarm/README.md's "Add it" (both crates from
# their packages) and "A first handoff" (its code, as src/main.rs).
swarm_crate="target/package/sw4rm-swarm-$version.crate"
test -f "$swarm_crate" || { echo "no $swarm_crate: run cargo package first"; exit 1; }
tar -xzf "$swarm_crate" -C "$work"
cargo new --quiet --bin "$work/swarm-try"
app="$work/swarm-try"
deps=$(cd swarm && block "## Add it" "toml" | grep -v '^\[dependencies\]')
test -n "$deps" || { echo "swarm/README: no [dependencies] under 'Add it'"; exit 1; }
(cd swarm && block "## A first handoff" "rust") > "$app/src/main.rs"
test -s "$app/src/main.rs" || { echo "swarm/README: no code under 'A first handoff'"; exit 1; }
deps=$(printf '%s\n' "$deps" \
  | sed "s|^sw4rm-swarm = .*|sw4rm-swarm = { path = \"$work/sw4rm-swarm-$version\" }|" \
  | sed "s|sw4rm-timeouts = { version = \"[^\"]*\"|sw4rm-timeouts = { path = \"$work/sw4rm-timeouts-$version\"|")
printf '%s\n' "$deps" >> "$app/Cargo.toml"
# The packaged sw4rm-swarm names the core by version: the core's package stands in.
printf '\n[patch.crates-io]\nsw4rm-timeouts = { path = "%s" }\nsw4rm-proto = { path = "%s" }\n' "$work/sw4rm-timeouts-$version" "$work/sw4rm-proto-$version" >> "$app/Cargo.toml"
run_project "$app"
echo "$out" | grep -q "the server saw RequestHandoff with depth 1 and" \
  || { echo "swarm try: no stamped handoff printed"; exit 1; }
echo "swarm try: built and ran from the packaged crates"

# The operator's crate: a fresh project from advise/README.md's "Add it" (its
# [dependencies] block, both crates from their packages, and its code as main's body).
advise_crate="target/package/sw4rm-advise-$version.crate"
test -f "$advise_crate" || { echo "no $advise_crate: run cargo package first"; exit 1; }
tar -xzf "$advise_crate" -C "$work"
cargo new --quiet --bin "$work/advise-try"
app="$work/advise-try"
deps=$(cd advise && block "## Add it" "toml" | grep -v '^\[dependencies\]')
test -n "$deps" || { echo "advise/README: no [dependencies] under 'Add it'"; exit 1; }
code=$(cd advise && block "## Add it" "rust")
test -n "$code" || { echo "advise/README: no code under 'Add it'"; exit 1; }
# The code's `use` lines first, the rest as main's body.
{ printf '%s\n' "$code" | grep '^use '; echo 'fn main() {'; printf '%s\n' "$code" | grep -v '^use '; echo '}'; } > "$app/src/main.rs"
deps=$(printf '%s\n' "$deps" \
  | sed "s|^sw4rm-advise = .*|sw4rm-advise = { path = \"$work/sw4rm-advise-$version\" }|" \
  | sed "s|^sw4rm-timeouts = .*|sw4rm-timeouts = { path = \"$work/sw4rm-timeouts-$version\" }|")
printf '%s\n' "$deps" >> "$app/Cargo.toml"
# The packaged sw4rm-advise names the core by version: the core's package stands in.
printf '\n[patch.crates-io]\nsw4rm-timeouts = { path = "%s" }\nsw4rm-proto = { path = "%s" }\n' "$work/sw4rm-timeouts-$version" "$work/sw4rm-proto-$version" >> "$app/Cargo.toml"
run_project "$app"
echo "$out" | grep -q "^# SW4-002 timeouts proposed by sw4rm-timeouts advise from 0 calls on 0 routes" \
  || { echo "advise try: no overlay printed"; exit 1; }
echo "advise try: built and ran from the packaged crates"
