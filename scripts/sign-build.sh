#!/usr/bin/env bash
# Sign the first-party plugins of one build so that runs trust them without a warning:
#   scripts/sign-build.sh HOST PLUGIN_DIR
# HOST (a curator-host binary) trusts the public keys in trust/ beside it; this puts the
# checkout's build key there (made once: target/build-key/, never copied into a dist folder)
# and writes FILE.minisig beside every plugin in PLUGIN_DIR. With CURATOR_SIGNING_KEY (a secret
# key from `curator-host plugin keygen`) the plugins are signed with that key instead, and its
# .pub (beside it) goes into trust/.
set -euo pipefail
cd "$(dirname "$0")/.."
host="$1"
plugins="$2"
if [ -n "${CURATOR_SIGNING_KEY:-}" ]; then
    key="$CURATOR_SIGNING_KEY"
    pub="${key%.key}.pub"
else
    key=target/build-key/build.key
    pub=target/build-key/build.pub
    [ -f "$key" ] || "$host" plugin keygen target/build-key/build >/dev/null
fi
trust="$(dirname "$host")/trust"
mkdir -p "$trust"
cp "$pub" "$trust/$(basename "$pub")"
for f in "$plugins"/*.wasm "$plugins"/*.so; do
    [ -e "$f" ] && "$host" plugin sign "$f" --key "$key" >/dev/null
done
echo "signed the plugins in $plugins; $host trusts their key ($trust/$(basename "$pub"))"
