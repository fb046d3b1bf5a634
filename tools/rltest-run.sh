#!/usr/bin/env bash
# One RLTest run of integration tests against one server binary.
#
#   tools/rltest-run.sh NAME SERVER TEST...
#
# NAME names the run: its output goes to logs/NAME.txt and its servers' logs
# to logs/NAME/ (both git-ignored). SERVER is a redis-server or valkey-server
# binary (a path, or a name looked up in PATH). Each TEST is a folder, a file
# or file:test, as RLTest's -t takes it. RLTEST (the RLTest command) and
# RLTEST_ARGS (the options every run shares) come from the environment; the
# Makefile sets them (see its `rltest` function).
#
# RLTest's own summary is not a line CI reads: it is restated as the plain
# line "NAME: N passed, N failed" and recorded, with the server's name and
# version and the run's time, for the summary `make test` prints at its end
# (tools/test-summary.sh). Exit status: RLTest's, or 1 when it printed no
# summary or ran no test.
set -uo pipefail
if [ $# -lt 3 ]; then
	echo "usage: $0 NAME SERVER TEST..." >&2
	exit 2
fi
name=$1 server=$2
shift 2
cd "$(dirname "$0")/.."
: "${RLTEST:?RLTEST is not set}"
RLTEST_ARGS=${RLTEST_ARGS:-}

path=$(command -v "$server" || true)
# "Redis server v=7.0.15 sha=..." / "Valkey server v=8.1.8 sha=..."
version=$([ -n "$path" ] && "$path" --version 2>/dev/null)
label=$(echo "$version" | sed -n 's/^\([A-Za-z]*\) server v=\([^ ]*\).*/\1-\2/p' | tr 'A-Z' 'a-z')
if [ -z "$label" ]; then
	echo "$name: no server binary at '$server' (make deps installs them)" >&2
	tools/test-summary.sh add "$name" "missing" - - 0
	exit 1
fi

tests=()
for t in "$@"; do tests+=(-t "$t"); done
mkdir -p logs
log=logs/$name.txt
echo "== $name: $label ($path): $*"
start=$SECONDS
# shellcheck disable=SC2086 # RLTEST and RLTEST_ARGS are word lists
$RLTEST $RLTEST_ARGS --oss-redis-path "$path" --log-dir "logs/$name" --clear-logs "${tests[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
secs=$((SECONDS - start))

summary=$(sed 's/\x1b\[[0-9;]*m//g' "$log" |
	grep -o 'Total Tests Run: [0-9]*, Total Tests Failed: [0-9]*, Total Tests Passed: [0-9]*' | tail -1)
if [ -z "$summary" ]; then
	echo "$name: RLTest printed no summary (exit status $rc); see $log"
	tools/test-summary.sh add "$name" "$label" - - "$secs"
	[ "$rc" -ne 0 ] || rc=1
	exit "$rc"
fi
run=$(echo "$summary" | sed 's/.*Run: \([0-9]*\).*/\1/')
failed=$(echo "$summary" | sed 's/.*Failed: \([0-9]*\).*/\1/')
passed=$(echo "$summary" | sed 's/.*Passed: \([0-9]*\).*/\1/')
echo "$name: $passed passed, $failed failed"
tools/test-summary.sh add "$name" "$label" "$passed" "$failed" "$secs"
if [ "$run" -eq 0 ]; then
	echo "$name: RLTest ran no test"
	rc=1
fi
exit "$rc"
