#!/usr/bin/env bash
# Build the host and every first-party plugin from source into target/dist/:
#   target/dist/curator-host      the CLI
#   target/dist/plugins/*.wasm    the plugins (wasm32-wasip2 components)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! rustup target list --installed | grep -qx wasm32-wasip2; then
    rustup target add wasm32-wasip2
fi

# The video stages build against FFmpeg's libraries (installed from Debian's packages if missing).
scripts/install-ffmpeg.sh

# One native build of the whole workspace: the host, the native plugins, and the rest built
# with the same features `cargo test --workspace` resolves, so the test suite reuses it.
cargo build --release --locked --workspace

# Every crate under plugins/ (and plugins/catalogue/) is a first-party plugin; build them as a
# third party would:
# WASM components for wasm32-wasip2, and native (C ABI) libraries for the crates whose
# Cargo.toml says `[package.metadata.curator] kind = "native"`.
wasm=()
native=()
for dir in plugins/*/ plugins/catalogue/*/; do
    name="$(basename "$dir")"
    if [ ! -f "$dir/Cargo.toml" ]; then
        continue # the catalogue's folder itself
    elif grep -q '^kind = "library"' "$dir/Cargo.toml"; then
        continue # shared code for plugins, not a plugin
    elif grep -q '^kind = "native"' "$dir/Cargo.toml"; then
        native+=("$name")
    else
        wasm+=("$name")
    fi
done
cargo build --locked --profile guest --target wasm32-wasip2 --target-dir target/wasm "${wasm[@]/#/-p=}"

rm -rf target/dist
mkdir -p target/dist/plugins
cp target/release/curator-host target/dist/
for name in "${wasm[@]}"; do
    cp "target/wasm/wasm32-wasip2/guest/$name.wasm" target/dist/plugins/
done
for name in "${native[@]}"; do
    cp "target/release/lib$name.so" target/dist/plugins/
done
echo "built target/dist/curator-host and $(ls target/dist/plugins | wc -l) plugin(s) in target/dist/plugins/"
# Sign every plugin (FILE.minisig beside it) with this checkout's build key, which
# target/dist/trust/ holds, so the dist host runs them without an "unsigned" warning; with
# CURATOR_SIGNING_KEY, with that key (for pipelines that set `trust: signed` elsewhere).
scripts/sign-build.sh target/dist/curator-host target/dist/plugins
