#!/usr/bin/env bash
# CI: the generated NeMo filter crates (plugins/catalogue/nemo_*) are exactly what
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
workspace=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print("\n".join(p["manifest_path"] for p in json.load(sys.stdin)["packages"]))')
while IFS= read -r crate; do
    grep -qF -- "/$crate/Cargo.toml" <<< "$workspace" || { echo "not a workspace member: $crate" >&2; exit 1; }
done <<< "$members"
echo "generated crates: $(wc -l <<< "$members") up to date"
