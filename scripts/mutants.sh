#!/usr/bin/env bash
# The mutation suite of the crash harness: apply each seeded bug (scripts/mutants/*.patch) to a
# scratch copy of the committed tree (never to this working tree), build atomfs-crashtest,
# run `atomfs-crashtest --engine ENGINE` at its default settings, and print one line per
# mutant: caught or missed, by which check, after how many images and seconds.
#
#   scripts/mutants.sh                 every mutant
#   scripts/mutants.sh NAME...         the mutants whose file name contains one of NAME
#   scripts/mutants.sh --rotate K N    K mutants starting at index (N*K mod count): the CI slice
#   scripts/mutants.sh --list          the mutants and their bugs
#
# Environment: ATOMFS_MUTANTS_DIR (scratch directory, default /tmp/atomfs-mutants; it must
# lie under /tmp/atomfs-* or /dev/shm/atomfs-*), ATOMFS_MUTANTS_TIMEOUT (seconds per run,
# default 300). The scratch copy is `git archive HEAD`: commit what you want to test.
# Exit status: 0 when every mutant that applied was caught, 1 otherwise.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SCRATCH=${ATOMFS_MUTANTS_DIR:-/tmp/atomfs-mutants}
TIMEOUT=${ATOMFS_MUTANTS_TIMEOUT:-300}
case "$SCRATCH" in
/tmp/atomfs-*|/dev/shm/atomfs-*) ;;
*) echo "mutants: ATOMFS_MUTANTS_DIR must be under /tmp/atomfs-* or /dev/shm/atomfs-*" >&2; exit 2 ;;
esac

mapfile -t ALL < <(ls "$ROOT"/scripts/mutants/*.patch)
SELECTED=()
if [[ ${1:-} == --list ]]; then
    for p in "${ALL[@]}"; do
        printf '%-32s %s\n' "$(basename "$p" .patch)" "$(sed -n 's/^bug: //p' "$p")"
    done
    exit 0
elif [[ ${1:-} == --rotate ]]; then
    k=${2:?--rotate K N}; n=${3:?--rotate K N}
    for ((i = 0; i < k && i < ${#ALL[@]}; i++)); do
        SELECTED+=("${ALL[$(( (n * k + i) % ${#ALL[@]} ))]}")
    done
elif [[ $# -gt 0 ]]; then
    for p in "${ALL[@]}"; do
        for want in "$@"; do
            [[ $(basename "$p") == *"$want"* ]] && SELECTED+=("$p") && break
        done
    done
else
    SELECTED=("${ALL[@]}")
fi

# The check that reported a violation line (`WHAT at WHERE`).
classify() {
    case "$1" in
    *"recovery crashed"*) echo "a crashed recovery" ;;
    *"second recovery"*) echo "the second recovery" ;;
    *"panic in recovery"*) echo "recovery (panic)" ;;
    *"recovery failed"*) echo "recovery (error)" ;;
    *"fsck"*) echo "fsck" ;;
    *"metadata"*) echo "the metadata oracle" ;;
    *"store and model disagree"*) echo "the model (live results)" ;;
    *) echo "the tree oracle" ;;
    esac
}

mkdir -p "$SCRATCH"
SRC="$SCRATCH/src"
export CARGO_TARGET_DIR="$SCRATCH/target"
missed=0
caught=0
skipped=0
for patch in "${SELECTED[@]}"; do
    name=$(basename "$patch" .patch)
    engine=$(sed -n 's/^engine: //p' "$patch")
    # A fresh copy of the committed tree at the same path every time (cargo reuses the
    # builds of everything the patch does not touch).
    rm -rf "$SRC"
    mkdir -p "$SRC"
    git -C "$ROOT" archive HEAD | tar -x -C "$SRC"
    if ! (cd "$SRC" && patch -p1 --quiet --forward < "$patch") > "$SCRATCH/$name.patch.log" 2>&1; then
        echo "$name: SKIPPED (the patch does not apply: the code moved; see $SCRATCH/$name.patch.log)"
        skipped=$((skipped + 1))
        continue
    fi
    if ! (cd "$SRC" && cargo build --quiet --release -p atomfs-crashtest) > "$SCRATCH/$name.build.log" 2>&1; then
        echo "$name: SKIPPED (does not build: $SCRATCH/$name.build.log)"
        skipped=$((skipped + 1))
        continue
    fi
    log="$SCRATCH/$name.log"
    start=$(date +%s%N)
    set +e
    (cd "$SCRATCH" && timeout "$TIMEOUT" "$CARGO_TARGET_DIR/release/atomfs-crashtest" --engine "$engine") > "$log" 2>&1
    rc=$?
    set -e
    secs=$(( ($(date +%s%N) - start) / 1000000000 ))
    images=$(sed -n 's/^crashtest .*crash images \([0-9]*\),.*/\1/p' "$log" | tail -1)
    # Only the simulator's violations count: process kills lose no store, so they say
    # nothing about persistence ordering and are reported apart.
    line=$(grep '^  violation' "$log" | grep -v ' at torture round ' | head -1 |
        sed 's/^  violation (seed [0-9]*): //' || true)
    kills=$(grep '^  violation' "$log" | grep -c ' at torture round ' || true)
    if [[ $rc -eq 1 && -n $line ]]; then
        printf '%s: caught by %s (%s images in the run, %s s): %s\n' "$name" "$(classify "$line")" \
            "${images:-?}" "$secs" "$(echo "$line" | cut -c1-100)"
        caught=$((caught + 1))
    elif [[ $rc -eq 0 || ($rc -eq 1 && $kills -gt 0) ]]; then
        printf '%s: MISSED after %s images, %s s%s\n' "$name" "${images:-?}" "$secs" \
            "$([[ $kills -gt 0 ]] && echo " (process kills reported $kills violations, not counted)")"
        missed=$((missed + 1))
    else
        printf '%s: caught by a crash or timeout of the run (exit %s) after %s s (%s)\n' "$name" "$rc" "$secs" "$log"
        caught=$((caught + 1))
    fi
done
echo "mutants: ${#SELECTED[@]} run, $caught caught, $missed missed, $skipped skipped"
[[ $missed -eq 0 ]]
