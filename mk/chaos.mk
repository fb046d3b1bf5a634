# Chaos: kill -9 the master in the middle of a flash sale, again and again,
# with 20 ms on every replication link, and count what the order pipeline
# oversold (docs/chaos.md). Real redis-server and redis-sentinel (Debian's
# packages, sys-deps), free ports, every process stopped by pid.
#
#   make chaos        the long form: 30 failovers per backend (module,
#                     Functions library) under Sentinel, 5 cluster
#                     failovers per backend, one split brain:
#                     logs/chaos.md and .json
#                     (CHAOS_ARGS='--failovers 50 --delay-ms 40')
#   make chaos-test   the short form, a stage of make test: 2 failovers per
#                     backend, 1 cluster failover, 1 split brain; fails
#                     unless nothing was oversold, lost or taken via the
#                     old master (logs/chaos-test.md)
#
# CHAOS_CLIENT=baseline measures the pipeline without issue 22's API (WAIT,
# the fence); the default, hardened, refuses to run without it.

CHAOS_ARGS ?=
CHAOS_CLIENT ?= hardened
CHAOS = SECKILL_MODULE=$(MODULE) $(PY) tests/chaos/chaos.py --client $(CHAOS_CLIENT)

.PHONY: chaos chaos-test

chaos: build pipeline-deps ## figures: 30 failovers per backend at 20 ms replication delay, 5 cluster failovers per backend, a split brain (logs/chaos.md)
	$(CHAOS) --runs module,functions,cluster,cluster-functions,split-brain \
		--failovers 30 --cluster-failovers 5 --out logs/chaos.md $(CHAOS_ARGS)

chaos-test: build pipeline-deps ## the short chaos form: 2 failovers per backend, 1 cluster failover, 1 split brain (part of make test)
	@set -o pipefail; mkdir -p logs; start=$$SECONDS; \
	$(CHAOS) --runs module,functions,cluster,split-brain --failovers 2 --cluster-failovers 1 \
		--check --out logs/chaos-test.md $(CHAOS_ARGS) 2>&1 | \
		tee logs/chaos-test.txt; rc=$$?; secs=$$((SECONDS - start)); \
	line=$$(grep -E '^chaos-check: [0-9]+ passed, [0-9]+ failed' logs/chaos-test.txt | tail -1); \
	if [ -n "$$line" ]; then \
		set -- $$(echo "$$line" | grep -oE '[0-9]+'); \
		tools/test-summary.sh add chaos-test sentinel+cluster $$1 $$2 $$secs; \
	else \
		tools/test-summary.sh add chaos-test sentinel+cluster - - $$secs; rc=1; \
	fi; exit $$rc

EXTRA_TESTS += chaos-test
