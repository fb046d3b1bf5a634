#!/usr/bin/env bash
# make redis-suite: Redis's own test suite (its `runtest` TCL harness) on the
# installed redis-server, without and with the module, unit by unit, and the
# [ok] / [err] / exception counts of each.
#
#   tools/redis-suite.sh [MODULE.so]        (default target/release/libredis_seckill.so)
#
# Environment:
#   REDIS_SUITE_UNITS    the units to run, one runtest --single each
#                        (default: every unit of the tree: runtest's own
#                        list in its order, then the test files it leaves
#                        out; 87 in Debian's 7.0.15), e.g. "unit/dump unit/acl"
#   REDIS_SUITE_ARGS     runtest options (default --durable: a test that throws
#                        fails and the unit goes on; an exception outside a
#                        test still stops the unit), e.g. "--durable --only
#                        'RESTORE can set LRU'"; empty for runtest's default
#   REDIS_SUITE_TIMEOUT  seconds one unit may take before it is stopped (1800)
#   REDIS_SUITE_DIR      work folder (default logs/redis-suite, git-ignored)
#
# The tests are not in this repository: they come, at run time, from the
# Debian source package of the exact redis-server version installed (apt-get
# source, through a private apt configuration whose deb-src entries mirror
# the system's Debian ones, so /etc/apt is left as it is). runtest wants its
# binaries in src/ of that tree: src/redis-server, redis-cli, redis-benchmark,
# redis-check-aof and redis-check-rdb are symlinks to Debian's installed
# binaries, so the suite tests the very binary the module is tested against.
# The module is loaded into every server the suite starts with runtest's
# `--config loadmodule PATH`.
#
# Output: a table per unit; the names of the tests that fail only with the
# module; the runs' full output in $REDIS_SUITE_DIR/{without,with}-module/.
# Exit status 1 when a test (or an exception) fails with the module and not
# without it, 2 when the suite could not be set up.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODULE=$(realpath "${1:-$ROOT/target/release/libredis_seckill.so}")
UNITS=${REDIS_SUITE_UNITS:-}
EXTRA=${REDIS_SUITE_ARGS---durable}
TIMEOUT=${REDIS_SUITE_TIMEOUT:-1800}
WORK=${REDIS_SUITE_DIR:-$ROOT/logs/redis-suite}
mkdir -p "$WORK"
WORK=$(realpath "$WORK")

die() { echo "redis-suite: $*" >&2; exit 2; }
[ -f "$MODULE" ] || die "no module at $MODULE (make build)"

# ---------------------------------------------------------------- packages
# redis-server/redis-tools: the binaries under test; tcl: runtest; dpkg-dev:
# dpkg-source, which apt-get source unpacks (and patches) the package with.
missing=""
for p in redis-server redis-tools tcl dpkg-dev; do
	dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "installing:$missing"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
fi

# ------------------------------------------------------- the source's tests
VERSION=$(dpkg-query -W -f='${Version}' redis-server)   # 5:7.0.15-1~deb12u10
SOURCE_PKG=$(dpkg-query -W -f='${source:Package}' redis-server)
UPSTREAM=${VERSION#*:}
UPSTREAM=${UPSTREAM%%-*}                                # 7.0.15
SRC=$WORK/source/$SOURCE_PKG-$UPSTREAM

if [ "$(cat "$WORK/source/.version" 2>/dev/null)" != "$VERSION" ] || [ ! -x "$SRC/runtest" ]; then
	echo "redis-suite: fetching the source package $SOURCE_PKG=$VERSION"
	rm -rf "$WORK/source" "$WORK/apt"
	mkdir -p "$WORK/source" "$WORK/apt/parts" "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial"
	: > "$WORK/apt/empty.list"
	# deb-src twins of the system's Debian entries (the release's own suites:
	# CODENAME, CODENAME-updates, CODENAME-security), deb822 and one-line.
	CODENAME=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[ -n "$CODENAME" ] || die "no VERSION_CODENAME in /etc/os-release"
	python3 - "$CODENAME" "$WORK/apt/parts" <<'EOF'
import glob, re, sys
code, parts = sys.argv[1:]
ours = {code, code + '-updates', code + '-security'}
stanzas, lines = [], []
for path in sorted(glob.glob('/etc/apt/sources.list.d/*.sources')):
    for stanza in re.split(r'\n\s*\n', open(path).read()):
        f = {}
        for line in stanza.splitlines():
            if line.startswith('#') or line[:1].isspace() or ':' not in line:
                continue
            k, v = line.split(':', 1)
            f[k.strip().lower()] = v.strip()
        suites = set(f.get('suites', '').split())
        if 'deb' in f.get('types', '').split() and f.get('enabled', 'yes') != 'no' and suites and suites <= ours:
            s = ['Types: deb-src', 'URIs: ' + f['uris'], 'Suites: ' + f['suites'],
                 'Components: ' + f.get('components', 'main')]
            if 'signed-by' in f:
                s.append('Signed-By: ' + f['signed-by'])
            stanzas.append('\n'.join(s) + '\n')
for path in ['/etc/apt/sources.list'] + sorted(glob.glob('/etc/apt/sources.list.d/*.list')):
    try:
        text = open(path).read()
    except OSError:
        continue
    for line in text.splitlines():
        m = re.match(r'\s*deb(\s+\[[^\]]*\])?\s+(\S+)\s+(\S+)\s', line)
        if m and m.group(3) in ours:
            lines.append('deb-src' + line.split('#')[0].strip()[3:] + '\n')
if stanzas:
    open(parts + '/deb-src.sources', 'w').write('\n'.join(stanzas))
if lines:
    open(parts + '/deb-src.list', 'w').write(''.join(lines))
EOF
	ls "$WORK/apt/parts/"deb-src.* >/dev/null 2>&1 || die "no Debian entry for $CODENAME in /etc/apt to make a deb-src entry from"
	APT=(apt-get -q -o "Dir::Etc::SourceList=$WORK/apt/empty.list" -o "Dir::Etc::SourceParts=$WORK/apt/parts"
		-o "Dir::State::Lists=$WORK/apt/lists" -o "Dir::Cache=$WORK/apt/cache" -o APT::Sandbox::User=root)
	"${APT[@]}" update >"$WORK/apt/update.log" 2>&1 || { cat "$WORK/apt/update.log"; die "apt-get update of the deb-src entries failed"; }
	(cd "$WORK/source" && "${APT[@]}" source "$SOURCE_PKG=$VERSION") >"$WORK/apt/source.log" 2>&1 ||
		{ tail -20 "$WORK/apt/source.log"; die "apt-get source $SOURCE_PKG=$VERSION failed"; }
	[ -x "$SRC/runtest" ] || die "no runtest in $SRC"
	echo "$VERSION" > "$WORK/source/.version"
fi

# runtest runs src/redis-server etc. of the tree: Debian's installed binaries.
for b in redis-server redis-cli redis-benchmark redis-check-aof redis-check-rdb; do
	bin=$(command -v "$b") || die "$b is not installed"
	ln -sf "$bin" "$SRC/src/$b"
done
SERVER_VERSION=$("$SRC/src/redis-server" --version)
case "$SERVER_VERSION" in
*"v=$UPSTREAM "*) ;;
*) die "the installed server ($SERVER_VERSION) is not the source's version $UPSTREAM" ;;
esac

# Every unit by default: runtest's own list (::all_tests: what `./runtest`
# with no --single runs; 7.0's test_helper.tcl spells it out, later trees
# glob the folders of test_dirs), then the *.tcl files of unit/, unit/type/,
# unit/cluster/ and integration/ that the list leaves out (in 7.0.15:
# integration/aof-race, unit/cluster/announced-endpoints and
# unit/cluster/packet), less the helpers other files source
# (unit/type/list-common). 87 units in Debian's 7.0.15. unit/moduleapi is
# not among them (runtest-moduleapi runs it, with test modules built from
# the tree).
if [ -z "$UNITS" ]; then
	helper=$SRC/tests/test_helper.tcl
	listed=$(sed -n '/^set ::all_tests {/,/^}/{/^set ::all_tests {/d;/^}/d;p}' "$helper" | sed 's/#.*//')
	files=$(cd "$SRC/tests" && find unit unit/type unit/cluster integration -maxdepth 1 -name '*.tcl' |
		sed 's/\.tcl$//' | LC_ALL=C sort -u)
	sourced=$(cd "$SRC" && grep -rhoE 'source "?tests/[^" ]+\.tcl' tests/unit tests/integration |
		sed -E 's/^source "?tests\///; s/\.tcl$//' | sort -u)
	sourced=$(echo $sourced)
	UNITS=$(echo $listed)
	for f in $files; do
		case " $UNITS $sourced " in
		*" $f "*) ;;
		*) UNITS="$UNITS $f" ;;
		esac
	done
	UNITS=$(echo $UNITS)
	[ -n "$UNITS" ] || die "no unit found under $SRC/tests"
fi

# ------------------------------------------------------------------- runs
count() { grep -c "$2" "$1" || true; }

# run_unit MODE UNIT: one runtest of UNIT; its output in $WORK/MODE-module/UNIT.log
run_unit() {
	local mode=$1 unit=$2 log args=()
	log="$WORK/$mode-module/${unit//\//_}.log"
	mkdir -p "$WORK/$mode-module"
	[ "$mode" = with ] && args=(--config loadmodule "$MODULE")
	local start=$SECONDS rc=0
	# Server logs are kept (--dont-clean) until the next unit, to count the
	# servers that loaded the module.
	find "$SRC/tests/tmp" -mindepth 1 ! -name .gitignore -delete
	# timeout runs runtest in a process group of its own and stops all of it
	# (test clients and servers too) when the unit overruns.
	# shellcheck disable=SC2086 # EXTRA is a list of options
	(cd "$SRC" && timeout -k 30 "$TIMEOUT" ./runtest --single "$unit" --clients 1 --dont-clean "${args[@]}" $EXTRA) \
		>"$log" 2>&1 </dev/null || rc=$?
	local secs=$((SECONDS - start))
	sed -i 's/\x1b\[[0-9;]*m//g' "$log"   # runtest's colours
	local servers loaded
	servers=$(find "$SRC/tests/tmp" -path '*/server*' -name stdout 2>/dev/null | wc -l || true)
	loaded=$(grep -l "Module '[^']*' loaded from $MODULE" "$SRC"/tests/tmp/server*/stdout 2>/dev/null | wc -l || true)
	local ok err exc skip state
	ok=$(count "$log" '^\[ok\]:')
	err=$(count "$log" '^\[err\]:')
	exc=$(count "$log" '^\[exception\]:')
	skip=$(count "$log" '^\[\(skip\|ignore\)\]:')
	if grep -q 'All tests passed without errors' "$log"; then state=passed
	elif grep -q 'The following tests failed' "$log"; then state=failed
	elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then state="timeout(${TIMEOUT}s)"
	elif [ "$exc" -gt 0 ]; then state=aborted
	else state="exit-$rc"
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$unit" "$ok" "$err" "$exc" "$skip" "$secs" "$state" >>"$WORK/results.tsv"
	printf '  %-8s %-26s ok %4s  err %3s  exception %s  skipped %3s  %5ss  %-8s servers %3s, with the module %3s\n' \
		"$mode" "$unit" "$ok" "$err" "$exc" "$skip" "$secs" "$state" "$servers" "$loaded"
}

# The failing tests of a run, one per line: "[err]: NAME in FILE" lines and
# the first line of an exception.
failures() {
	[ -f "$1" ] || return 0
	sed -n 's/^\[err\]: //p; s/^\[exception\]: \(.*\)/exception: \1/p' "$1" | sort -u
}

echo "redis-suite: $SERVER_VERSION"
echo "  tests: Debian source package $SOURCE_PKG $VERSION, $SRC"
echo "  module: $MODULE"
echo "  units ($(echo $UNITS | wc -w)): $UNITS"
: >"$WORK/results.tsv"
for mode in without with; do
	rm -rf "$WORK/$mode-module"
	for unit in $UNITS; do
		run_unit "$mode" "$unit"
	done
done

echo
echo "== redis-suite: Redis $UPSTREAM ($VERSION), without / with the module =="
awk -F'\t' '
	{ key = $2; if (!(key in seen)) { seen[key] = 1; order[n++] = key }
	  r[$1, key] = sprintf("%4d %4d %4d %5d %6s %-14s", $3, $4, $5, $6, $7 "s", $8)
	  ok[$1] += $3; err[$1] += $4; exc[$1] += $5 }
	END {
		printf "%-24s | %-42s | %-42s\n", "", "without module", "with module"
		h = sprintf("%4s %4s %4s %5s %6s %-14s", "ok", "err", "exc", "skip", "time", "state")
		printf "%-24s | %s | %s\n", "unit", h, h
		for (i = 0; i < n; i++) printf "%-24s | %s | %s\n", order[i], r["without", order[i]], r["with", order[i]]
		printf "\nwithout module: %d ok, %d err, %d exceptions\n", ok["without"], err["without"], exc["without"]
		printf "with module:    %d ok, %d err, %d exceptions\n", ok["with"], err["with"], exc["with"]
	}' "$WORK/results.tsv"

status=0
for unit in $UNITS; do
	f=${unit//\//_}.log
	without=$(failures "$WORK/without-module/$f")
	with=$(failures "$WORK/with-module/$f")
	if [ -n "$with" ]; then
		echo
		echo "$unit: failing with the module:"
		while IFS= read -r t; do
			if grep -qxF -- "$t" <<<"$without"; then
				echo "  $t   (fails without the module too)"
			else
				echo "  $t"
				status=1
			fi
		done <<<"$with"
	fi
	gone=$(comm -23 <(echo "$without") <(echo "$with") | grep . || true)
	if [ -n "$gone" ]; then
		echo
		echo "$unit: failing without the module only (or not reached with it):"
		echo "$gone" | sed 's/^/  /'
	fi
done
echo
echo "logs: $WORK/{without,with}-module/<unit>.log"
exit $status
