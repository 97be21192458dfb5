#!/usr/bin/env bash
# The pip package end to end: build target/dist and the wheel (scripts/build-wheel.py), install
# it into a fresh virtualenv, and run the quickstart from a copy of examples/quickstart with
# what the wheel installed only: no --plugins, no checkout on any search path, a fresh HOME
# (no trust keys, no compiled-plugin cache). Fails on a missing output or any warning.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" != "--no-build" ]; then
    scripts/build-dist.sh
fi
rm -rf target/wheels
python3 scripts/build-wheel.py
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --no-index target/wheels/curator_host-*.whl
cp -r examples/quickstart "$tmp/quickstart"
rm -rf "$tmp/quickstart/out"
(cd "$tmp/quickstart" && env -u CURATOR_PLUGINS -u CURATOR_TRUST_DIR HOME="$tmp/home" XDG_CACHE_HOME="$tmp/home/.cache" \
    "$tmp/venv/bin/curator-host" run pipeline.yaml) 2>&1 | tee "$tmp/log"
test -s "$tmp/quickstart/out/docs-000.jsonl"
if grep -E ' WARN ' "$tmp/log"; then
    echo "the quickstart from the wheel printed a warning" >&2
    exit 1
fi
echo "wheel smoke: $(ls target/wheels) installed into a fresh virtualenv ran the quickstart"
