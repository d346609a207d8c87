#!/usr/bin/env bash
# Run one cargo-fuzz target of fuzz/ for a while (docs/fuzzing.md). Installs cargo-fuzz from
# crates.io when it is missing (idempotent); uses the nightly toolchain when rustup has one,
# else (or with FUZZ_STABLE=1) the stable one with RUSTC_BOOTSTRAP=1 (cargo-fuzz passes -Z
# flags).
#
#   scripts/fuzz.sh pool_open [SECONDS]   # AddressSanitizer (the default)
#   scripts/fuzz.sh mmio_open [SECONDS]   # AddressSanitizer
#   scripts/fuzz.sh pool_ops  [SECONDS]   # no sanitizer: it has no unsafe code of its own
#   scripts/fuzz.sh journal_open|cache_open|remap_open [SECONDS]   # AddressSanitizer
#   scripts/fuzz.sh sqlite_uri [SECONDS]  # AddressSanitizer (it calls the VFS's C name rule)
#   scripts/fuzz.sh cli_args [SECONDS]    # no sanitizer: pure Rust parsers
#   FUZZ_ARGS="-fork=1 -ignore_crashes=1" scripts/fuzz.sh pool_ops 600
#
# Exit status: libFuzzer's (non-zero when it found a crash; the input is in
# fuzz/artifacts/TARGET/). The log is fuzz/fuzz-TARGET.log.
set -euo pipefail

target="${1:?usage: scripts/fuzz.sh pool_open|pool_ops|mmio_open|journal_open|cache_open|remap_open|sqlite_uri|cli_args [SECONDS]}"
seconds="${2:-600}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/fuzz"

case "$target" in
    pool_open) sanitizer=address timeout=10 ;;
    pool_ops) sanitizer=none timeout=20 ;;
    sqlite_uri) sanitizer=address timeout=10 ;;
    cli_args) sanitizer=none timeout=10 ;;
    mmio_open | journal_open | cache_open | remap_open) sanitizer=address timeout=10 ;;
    *) echo "fuzz.sh: unknown target '$target' (pool_open, pool_ops, mmio_open, journal_open, cache_open, remap_open, sqlite_uri, cli_args)" >&2; exit 2 ;;
esac

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz (cargo install --locked cargo-fuzz)" >&2
    cargo install --locked cargo-fuzz
fi

toolchain=()
if [ -z "${FUZZ_STABLE:-}" ] && command -v rustup >/dev/null && rustup toolchain list | grep -q '^nightly'; then
    toolchain=(+nightly)
else
    export RUSTC_BOOTSTRAP=1
fi

mkdir -p "corpus/$target"
# One seed per valid image kind of pool_open (byte 0 picks it; bit 6 re-seals the crc).
if [ "$target" = pool_open ] && [ -z "$(ls -A "corpus/$target")" ]; then
    for k in 0 1 2 3 4 5; do
        printf "\\x$(printf %02x "$k")" >"corpus/$target/seed-$k"
        printf "\\x$(printf %02x $((k | 64)))" >"corpus/$target/seed-$k-resealed"
    done
fi
# One seed per base log pool of mmio_open (byte 0 picks it), unmutated and with one re-sealed
# mutation of an intent record.
if [ "$target" = mmio_open ] && [ -z "$(ls -A "corpus/$target")" ]; then
    for k in 0 1 2 3; do
        printf "\\x$(printf %02x "$k")" >"corpus/$target/seed-$k"
        printf "\\x$(printf %02x "$k")\\xa5\\x00\\x00\\x00\\x00\\x01\\x03\\x00\\x00\\x00\\x00\\x00\\x00" \
            >"corpus/$target/seed-$k-intent"
    done
fi

# Seeds of the text targets: a few well-formed inputs of each kind (fields NUL-separated).
if [ "$target" = sqlite_uri ] && [ -z "$(ls -A "corpus/$target")" ]; then
    printf '/app.db\0mmio\0home=/srv/db,size=64M' >"corpus/$target/seed-mmio"
    printf 'a/../../etc/passwd\0pool\0mode=nc,inodes=4096' >"corpus/$target/seed-climb"
    printf './x.db\0\0size=1.5G,data_checksums=true' >"corpus/$target/seed-pool"
fi
if [ "$target" = cli_args ] && [ -z "$(ls -A "corpus/$target")" ]; then
    printf '\x001.5GiB' >"corpus/$target/seed-size"
    printf '\x010o640' >"corpus/$target/seed-mode"
    printf '\x02mode=nc,inodes=4096,size=64M' >"corpus/$target/seed-options"
    printf '\x03/a/./b//../c/' >"corpus/$target/seed-path"
fi

log="$root/fuzz/fuzz-$target.log"
echo "fuzz.sh: $target for ${seconds}s (sanitizer: $sanitizer), log: $log" >&2
set +e
# shellcheck disable=SC2086 # FUZZ_ARGS is a list of libFuzzer flags
cargo "${toolchain[@]}" fuzz run -s "$sanitizer" "$target" -- \
    -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=2048 ${FUZZ_ARGS:-} \
    2>&1 | tee "$log" | grep -E "^#[0-9]+.*(DONE|pulse)|ERROR|SUMMARY|Done [0-9]+ runs"
status=${PIPESTATUS[0]}
set -e
echo "fuzz.sh: $target exited with $status" >&2
exit "$status"
