#!/bin/bash
# Instructions per call, deterministic where `make bench` is noisy (shared
# cores): redis-server under valgrind --tool=callgrind, 20,000 pipelined
# calls per scenario (redis-benchmark -c 1 -P 16, random users), each on a
# fresh server; prints server instructions per call beyond an idle server.
#   bench/callgrind.sh [path/to/libredis_seckill.so]
# Inspect a profile: callgrind_annotate --inclusive=yes bench/out/cg.reserve.out
set -e
SO=${1:-$(dirname "$0")/../target/release/libredis_seckill.so}
SO=$(readlink -f "$SO")
OUT=$(dirname "$0")/out
mkdir -p "$OUT"
N=20000
B="redis-benchmark -c 1 -P 16 -n $N -r 100000000"
base() { redis-cli -p "$1" ping >/dev/null; }
reserve() { redis-cli -p "$1" SECKILL.INIT 's:{b}' 1000000000000 LIMIT 1000000 >/dev/null; $B -p "$1" SECKILL.RESERVE 's:{b}' u__rand_int__ >/dev/null; }
reserve_stream() { redis-cli -p "$1" SECKILL.INIT 's:{b}' 1000000000000 LIMIT 1000000 STREAM 's:{b}:ev' >/dev/null; $B -p "$1" SECKILL.RESERVE 's:{b}' u__rand_int__ >/dev/null; }
sold_out() { redis-cli -p "$1" SECKILL.INIT 's:{b}' 0 >/dev/null; $B -p "$1" SECKILL.RESERVE 's:{b}' u__rand_int__ >/dev/null; }
sadd() { $B -p "$1" SADD 'b:{b}' u__rand_int__ >/dev/null; }
xadd() { $B -p "$1" XADD 'e:{b}' '*' event reserved rid r__rand_int__ user u__rand_int__ qty 1 >/dev/null; }
hmget() { redis-cli -p "$1" HSET 'h:{b}' status SOLD_OUT rid r1 left 0 >/dev/null; $B -p "$1" HMGET 'h:{b}' status rid left >/dev/null; }
total() { callgrind_annotate "$OUT/cg.$1.out" 2>/dev/null | grep -m1 'PROGRAM TOTALS' | awk '{gsub(",","",$1); print $1}'; }
for s in base reserve reserve_stream sold_out sadd xadd hmget; do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.$s.out" redis-server --port "$port" --save '' \
    --dir /tmp --dbfilename "cg-$port.rdb" --loadmodule "$SO" >"$OUT/cg.$s.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
  $s "$port"
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait $pid || true
done
b=$(total base)
for s in reserve reserve_stream sold_out sadd xadd hmget; do
  printf '%-16s %8d instructions/call\n' "$s" $(( ($(total $s) - b) / N ))
done
