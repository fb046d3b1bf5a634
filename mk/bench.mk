# Benchmarks: figures, not assertions, never part of `make test`. Each starts
# its own servers on free ports (never 6379) and stops them by pid; reports
# go to bench/reports/. MODULE=/path/to/other.so measures another build.
#
#   make bench            the module against the seed Lua scripts and native
#                         commands, paired-round ratios, latency under load,
#                         and the backend column (the module, the Functions
#                         library, scripts A and B: ops/s, CPU per call,
#                         memory at 1M, expiry of 100k holds) with the
#                         library's floor: bench/reports/REPORT.md and
#                         chart.svg (BENCH_ARGS='--out /tmp/x.md';
#                         '--loadgen path' skips building bench/loadgen;
#                         MODULE=other.so measures a build without building)
#   make bench-backends   the backend column and the library's floor alone,
#                         written into REPORT.md in place of their last
#                         version (BACKENDS_ARGS='--backend-rounds 3')
#   make bench-floor      where the library's RESERVE time and memory go: a
#                         ladder of Lua functions, each one step of RESERVE,
#                         against scripts A and B, and bytes per reservation
#                         at 1M split by hash field (the module's beside
#                         them when it is built): its section of REPORT.md
#                         (FLOOR_ARGS='--cycles 31' or '--count 0')
#   make bench-callgrind  server instructions per call (deterministic)
#   make bench-hardening  stalls, idle CPU and memory peaks at huge sizes:
#                         bench/reports/HARDENING.md, in the section of
#                         HARDENING_LABEL (HARDENING_ARGS='--only growth')
#   make bench-draw       draw sales at 1M entrants: ENTER and DRAW per call
#                         from SLOWLOG, RESERVE beside them (DRAW_ARGS=...)
#   make bench-cluster    one split sale over a three-master cluster:
#                         bench/reports/CLUSTER.md
#                         (CLUSTER_ARGS='--stock 50000 --procs 6')

BENCH_ARGS ?=
HARDENING_LABEL ?= after
HARDENING_ARGS ?=
CLUSTER_ARGS ?=
DRAW_ARGS ?=
BACKENDS_ARGS ?=
FLOOR_ARGS ?=

.PHONY: bench bench-backends bench-floor bench-callgrind bench-hardening bench-cluster bench-draw

bench: $(if $(filter $(CURDIR)/target/release/libredis_seckill.so,$(MODULE)),build) py-deps ## figures: RESERVE against the seed scripts, native commands and the Functions library (bench/reports/REPORT.md)
	$(PY) bench/bench.py --module $(MODULE) $(BENCH_ARGS)

bench-backends: $(if $(filter $(CURDIR)/target/release/libredis_seckill.so,$(MODULE)),build) py-deps ## figures: the module, the library and scripts A and B in paired rounds, and the library's floor (REPORT.md sections)
	$(PY) bench/backends.py --module $(MODULE) $(BACKENDS_ARGS)

bench-floor: $(if $(wildcard $(MODULE)),,build) py-deps ## figures: the library's RESERVE step by step against scripts A and B, bytes per reservation at 1M and what they consist of
	$(PY) bench/library_floor.py --module $(MODULE) $(FLOOR_ARGS)

bench-callgrind: build ## server instructions per call under callgrind (RESERVE, RESERVE + STREAM, sold out, natives)
	@dpkg -s valgrind >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq valgrind)
	bash bench/callgrind.sh $(MODULE)

bench-hardening: build py-deps ## figures: stalls, idle CPU, memory at huge sizes (bench/reports/HARDENING.md)
	$(PY) bench/hardening.py --module $(MODULE) --label $(HARDENING_LABEL) $(HARDENING_ARGS)

bench-cluster: build pipeline-deps ## figures: one split sale over a three-master cluster (bench/reports/CLUSTER.md)
	$(PY) bench/cluster.py --module $(MODULE) $(CLUSTER_ARGS)

bench-draw: $(if $(filter $(CURDIR)/target/release/libredis_seckill.so,$(MODULE)),build) py-deps ## figures: ENTER and DRAW per call at 1M entrants (SLOWLOG)
	$(PY) bench/draw.py --module $(MODULE) $(DRAW_ARGS)
