#!/usr/bin/env bash
# The pip package end to end: build target/dist and the wheel (scripts/build-wheel.py), install
# it into a fresh virtualenv, and run the quickstart from a copy of examples/quickstart with
# what the wheel installed only: no --plugins, no checkout on any search path, a fresh HOME
# (no trust keys, no compiled-plugin cache). Fails on a missing output or any warning. Then the
# Python SDK's wheel (python/curator-sdk: pure Python, its WIT world inside) in the same
# virtualenv, with PyYAML from the index: `from curator import Pipeline` runs the quickstart
# again through the curator-host the first wheel installed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" != "--no-build" ]; then
    scripts/build-dist.sh
fi
rm -rf target/wheels
python3 scripts/build-wheel.py
python3 -m pip wheel --quiet --no-deps -w target/wheels ./python/curator-sdk
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
"$tmp/venv/bin/pip" install --quiet --no-index --no-deps target/wheels/curator_sdk-*.whl
"$tmp/venv/bin/pip" install --quiet pyyaml
rm -rf "$tmp/quickstart/out"
(cd "$tmp/quickstart" && env -u CURATOR_PLUGINS -u CURATOR_TRUST_DIR -u CURATOR_HOST HOME="$tmp/home" XDG_CACHE_HOME="$tmp/home/.cache" PATH=/usr/bin:/bin \
    "$tmp/venv/bin/python" -c '
from pathlib import Path
from curator import Pipeline
from curator_sdk.build import WIT
assert (WIT / "stage.wit").is_file(), WIT
report = Pipeline.from_yaml("pipeline.yaml").run(quiet=True)
assert report.docs_out > 0 and Path("out/docs-000.jsonl").stat().st_size > 0, report
print("the Python API ran the quickstart:", report)
')
echo "wheel smoke: $(ls target/wheels) installed into a fresh virtualenv ran the quickstart"
