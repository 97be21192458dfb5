#!/usr/bin/env bash
# Build the host and every first-party plugin from source into target/dist/:
#   target/dist/curator-host      the CLI
#   target/dist/plugins/*.wasm    the plugins (wasm32-wasip2 components)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! rustup target list --installed | grep -qx wasm32-wasip2; then
    rustup target add wasm32-wasip2
fi

cargo build --release --locked -p curator-host

# Every crate under plugins/ is a first-party plugin; build them as a third party would.
packages=()
for dir in plugins/*/; do
    packages+=(-p "$(basename "$dir")")
done
cargo build --locked --profile guest --target wasm32-wasip2 --target-dir target/wasm "${packages[@]}"

rm -rf target/dist
mkdir -p target/dist/plugins
cp target/release/curator-host target/dist/
for dir in plugins/*/; do
    cp "target/wasm/wasm32-wasip2/guest/$(basename "$dir").wasm" target/dist/plugins/
done
echo "built target/dist/curator-host and $(ls target/dist/plugins | wc -l) plugin(s) in target/dist/plugins/"
