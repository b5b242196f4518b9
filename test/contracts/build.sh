#!/usr/bin/env bash
# Compiles the test contracts in src/ with the solc pinned in package-lock.json
# (solc-js, installed by `npm ci` here) and writes each contract's ABI
# (<Name>.abi, JSON) and creation bytecode (<Name>.bin, hex) to OUTDIR,
# by default internal/testcontracts/artefacts, which is committed.
# internal/testcontracts's staleness test runs it into a temporary directory
# and compares the files byte for byte with the committed ones.
#
#   cd test/contracts && npm ci && ./build.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/../../internal/testcontracts/artefacts}"
solc="$here/node_modules/solc/solc.js"
if [ ! -f "$solc" ]; then
	echo "build.sh: $solc missing: run npm ci in $here first" >&2
	exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$here"
# Relative paths and --base-path keep the absolute checkout path out of the
# contracts' metadata, whose hash ends the bytecode.
node "$solc" --bin --abi --optimize --base-path . -o "$tmp" src/*.sol

mkdir -p "$out"
for src in src/*.sol; do
	name="$(basename "$src" .sol)"
	prefix="$tmp/src_${name}_sol_${name}"
	[ -s "$prefix.abi" ] && [ -s "$prefix.bin" ] || { echo "build.sh: solc wrote no $name" >&2; exit 1; }
	cp "$prefix.abi" "$out/$name.abi"
	cp "$prefix.bin" "$out/$name.bin"
done
