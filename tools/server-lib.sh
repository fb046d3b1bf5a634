# Shell helpers the packaging checks share (tools/deb-test.sh,
# tools/docker-test.sh): a free port, the wait for a server's PING, and the
# module version MODULE LIST shows. Sourced; each caller defines fail().

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# wait_ping PORT PID WHAT: until the server on PORT answers PONG (5 s);
# fail() when the process PID exits first.
wait_ping() {
	for _ in $(seq 50); do
		redis-cli -p "$1" PING 2>/dev/null | grep -q PONG && return 0
		kill -0 "$2" 2>/dev/null || fail "$3 exited"
		sleep 0.1
	done
	fail "$3 did not answer PING on port $1"
}

# module_ver PORT: the `ver` of MODULE LIST (raw: name, seckill, ver, N, ...).
module_ver() { redis-cli -p "$1" MODULE LIST | awk 'p == "ver" { print; exit } { p = $0 }'; }
