#!/usr/bin/env bash
# CI: the generated NeMo filter crates (plugins/nemo_*) are exactly what
# scripts/gen-nemo-plugins.py writes (after cargo fmt), and each is a workspace member.
set -euo pipefail
cd "$(dirname "$0")/.."
members=$(python3 scripts/gen-nemo-plugins.py)
cargo fmt --all
if [ -n "$(git status --porcelain -- plugins/)" ]; then
    git status --short -- plugins/
    git diff --stat -- plugins/
    echo "the generated crates differ from scripts/gen-nemo-plugins.py: rerun it (and cargo fmt), then commit" >&2
    exit 1
fi
while IFS= read -r line; do
    grep -qF -- "$line" Cargo.toml || { echo "not a workspace member in Cargo.toml: $line" >&2; exit 1; }
done <<< "$members"
echo "generated crates: $(wc -l <<< "$members") up to date"
