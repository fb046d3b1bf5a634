#!/usr/bin/env bash
# The .deb on this machine: dpkg -i, the file's mode, Debian's redis-server
# started by hand on a free port with the installed module (MODULE LIST shows
# the package's version as ver, a sale takes a reservation), a 0644 copy of
# the module refused (the execute-bit trap), then dpkg -r and the file gone.
#
#   tools/deb-test.sh DEB VERSION     (make deb-test)
#
# Exit 0 passed, 1 failed, 77 skipped: not root, redis-server not installed,
# or the package or its file already on this machine (not ours to remove).
# The package has no maintainer scripts, so installing it starts no service;
# the test never touches the system's redis-server service and checks that
# what listened on 6379 before is what listens after.
set -uo pipefail
deb=$1 version=$2
pkg=redis-seckill
so=/usr/lib/redis/modules/libredis_seckill.so
tmp=$(mktemp -d)
pid='' installed=''

say() { echo "deb-test: $*"; }
skip() { say "skipped: $*"; rm -rf "$tmp"; exit 77; }
fail() { say "FAILED: $*"; [ -f "$tmp/redis.log" ] && tail -5 "$tmp/redis.log"; exit 1; }
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	[ -n "$installed" ] && dpkg -r "$pkg" >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
is_installed() { [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]; }
listen_6379() { ss -Hltn 'sport = :6379' | wc -l; }
# shellcheck source=tools/server-lib.sh
. "$(dirname "$0")/server-lib.sh"

[ "$(id -u)" = 0 ] || skip "dpkg -i needs root"
is_installed redis-server || skip "Debian's redis-server is not installed (make sys-deps)"
is_installed "$pkg" && skip "$pkg is installed on this machine already"
[ -e "$so" ] && skip "$so exists already"
IFS=. read -r major minor patch <<<"$version"
want=$((major * 10000 + minor * 100 + patch))
before=$(listen_6379)

dpkg -i "$deb" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i $deb"; }
installed=1
mode=$(stat -c '%a %U:%G' "$so") || fail "dpkg -i left no $so"
[ "$mode" = "755 root:root" ] || fail "$so is $mode, want 755 root:root"
say "installed $pkg $(dpkg-query -W -f='${Version}' $pkg): $so $mode"

port=$(free_port)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" \
	--logfile "$tmp/redis.log" --loadmodule "$so" &
pid=$!
wait_ping "$port" "$pid" "redis-server loading the module"
ver=$(module_ver "$port")
[ "$ver" = "$want" ] || fail "MODULE LIST ver is '$ver', want $want (version $version)"
say "redis-server $(redis-server --version | grep -o 'v=[0-9.]*') on port $port: MODULE LIST ver $ver"
reply=$(redis-cli -p "$port" SECKILL.INIT deb:sale 5 && redis-cli -p "$port" SECKILL.RESERVE deb:sale u1 | head -1)
[ "$reply" = $'OK\nRESERVED' ] || fail "INIT and RESERVE answered: $reply"
kill "$pid" && wait "$pid" 2>/dev/null
pid=''

# The trap a plain COPY or a wrong install mode sets: Redis refuses a module
# file without an execute bit, even as root.
install -m 0644 "$so" "$tmp/noexec.so"
timeout 10 redis-server --port "$(free_port)" --save '' --logfile "$tmp/noexec.log" \
	--loadmodule "$tmp/noexec.so" >/dev/null 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "redis-server with a 0644 module: exit status $rc, want a refusal"
grep -q 'execute permissions' "$tmp/noexec.log" || fail "no execute-permission line in the log of the 0644 load"
say "a 0644 copy is refused: $(grep -o 'Module .*' "$tmp/noexec.log" | head -1)"

dpkg -r "$pkg" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -r $pkg"; }
installed=''
[ ! -e "$so" ] || fail "dpkg -r left $so"
is_installed "$pkg" && fail "dpkg still lists $pkg as installed"
[ "$(listen_6379)" = "$before" ] || fail "what listens on 6379 changed during the test"
say "removed $pkg: $so is gone"
say "1 passed, 0 failed"
