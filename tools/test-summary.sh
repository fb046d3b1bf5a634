#!/usr/bin/env bash
# The summary `make test` prints at its end: one row per stage (the server it
# ran on, its counts, its time), then the sum as the plain closing line
# "make-test: N passed, N failed".
#
#   tools/test-summary.sh reset
#   tools/test-summary.sh add NAME SERVER PASSED FAILED SECONDS
#         (PASSED and FAILED are "-" when the stage printed no count)
#   tools/test-summary.sh cargo NAME LOG SECONDS
#         (counts from the "test result:" lines of cargo test's output in LOG)
#   tools/test-summary.sh pytest NAME SERVER LOG SECONDS
#         (counts from pytest's closing line in LOG; errors count as failed)
#   tools/test-summary.sh node NAME SERVER LOG SECONDS
#         (counts from node --test's "ℹ pass N" / "ℹ fail N" lines in LOG)
# `pytest` and `node` also print "NAME: N passed, N failed", and exit 1 when
# LOG has no count.
#   tools/test-summary.sh print
#
# `print` exits 1 when a stage gave no count or any test failed. The rows live
# in logs/summary.tsv (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
FILE=logs/summary.tsv

case "${1:-}" in
reset)
	mkdir -p logs
	: > "$FILE"
	;;
add)
	[ $# -eq 6 ] || { echo "usage: $0 add NAME SERVER PASSED FAILED SECONDS" >&2; exit 2; }
	mkdir -p logs
	printf '%s\t%s\t%s\t%s\t%s\n' "$2" "$3" "$4" "$5" "$6" >> "$FILE"
	;;
cargo)
	[ $# -eq 4 ] || { echo "usage: $0 cargo NAME LOG SECONDS" >&2; exit 2; }
	# "test result: ok. 85 passed; 0 failed; 0 ignored; ..." (one per test binary)
	counts=$(grep -o 'test result: [A-Za-z]*\. [0-9]* passed; [0-9]* failed' "$3" |
		awk '{p += $4; f += $6; n++} END {if (n) print p, f}' || true)
	if [ -n "$counts" ]; then
		set -- "$2" "$4" $counts
		"$0" add "$1" "cargo-test" "$3" "$4" "$2"
	else
		"$0" add "$2" "cargo-test" - - "$4"
	fi
	;;
pytest | node)
	[ $# -eq 5 ] || { echo "usage: $0 $1 NAME SERVER LOG SECONDS" >&2; exit 2; }
	kind=$1 name=$2 server=$3 log=$4 seconds=$5
	if [ "$kind" = pytest ]; then
		line=$(grep -E '^=* *[0-9]+ (passed|failed|error)' "$log" | tail -1 || true)
		count() { echo "$line" | grep -oE "[0-9]+ $1" | grep -oE '^[0-9]+' || echo 0; }
		[ -n "$line" ] && passed=$(count passed) && failed=$(( $(count failed) + $(count error) ))
	else
		count() { sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E "^ℹ $1 [0-9]+$" | tail -1 | grep -oE '[0-9]+$' || true; }
		passed=$(count pass) failed=$(count fail)
	fi
	if [ -n "${passed:-}" ] && [ -n "${failed:-}" ]; then
		echo "$name: $passed passed, $failed failed"
		"$0" add "$name" "$server" "$passed" "$failed" "$seconds"
	else
		echo "$name: the test runner printed no count; see $log"
		"$0" add "$name" "$server" - - "$seconds"
		exit 1
	fi
	;;
print)
	[ -s "$FILE" ] || { echo "make-test: no stage recorded a count" >&2; exit 1; }
	echo
	echo "== summary =="
	awk -F'\t' '
		BEGIN { printf "%-24s %-16s %8s %8s %8s\n", "stage", "server", "passed", "failed", "seconds" }
		{
			printf "%-24s %-16s %8s %8s %8s\n", $1, $2, $3, $4, $5
			if ($3 == "-") { missing = missing " " $1 } else { p += $3; f += $4 }
			s += $5
		}
		END {
			printf "%-24s %-16s %8s %8s %8s\n", "all", "", p, f, s
			if (missing != "") {
				print "make-test: no count from" missing " (see logs/<stage>.txt)"
				exit 1
			}
			print "make-test: " p " passed, " f " failed"
			exit (f > 0)
		}' "$FILE"
	;;
*)
	echo "usage: $0 reset | add NAME SERVER PASSED FAILED SECONDS | cargo NAME LOG SECONDS | pytest|node NAME SERVER LOG SECONDS | print" >&2
	exit 2
	;;
esac
