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
	echo "usage: $0 reset | add NAME SERVER PASSED FAILED SECONDS | cargo NAME LOG SECONDS | print" >&2
	exit 2
	;;
esac
