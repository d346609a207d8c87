# Sourced by scripts/test.sh and scripts/python.sh: the one way a test run ends.
#
#   verdict NAME STATUS PASSED FAILED
#
# prints "NAME: PASSED passed, FAILED failed", then exits 1 (with the reason on stderr) when the
# runner's exit STATUS is non-zero, when a test failed, or when no test ran at all.
verdict() {
    local name=$1 status=$2 passed=$3 failed=$4
    echo "$name: $passed passed, $failed failed"
    if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ]; then
        echo "$name: FAILED (exit status $status, $failed failed)" >&2
        exit 1
    fi
    if [ "$passed" -eq 0 ]; then
        echo "$name: no test ran — treating as failure" >&2
        exit 1
    fi
}
