#!/usr/bin/env bash
# README command 1: build everything, then run the quickstart pipeline on the bundled data.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build-dist.sh
target/dist/curator-host run examples/quickstart/pipeline.yaml --plugins target/dist/plugins
echo "output: examples/quickstart/out/"
