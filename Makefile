# redis-seckill: build, run and test the module in a real redis-server.
#
#   make run    install what is missing, build, start redis-server with the
#               module on port $(PORT) (redis.conf.example)
#   make test   install what is missing, build, run unit, property and
#               integration tests (RLTest against real redis-server processes)

SHELL := /bin/bash
PORT ?= 7379
MODULE := $(CURDIR)/target/release/libredis_seckill.so
VENV := $(CURDIR)/.venv
PY := $(VENV)/bin/python
RLTEST := $(VENV)/bin/RLTest
APT_PACKAGES := redis-server redis-tools libclang-dev python3-venv
# RLTest options shared by every environment: random free ports (never
# 6379), DEBUG enabled for digests and reloads, logs under logs/.
RLTEST_ARGS := --module $(MODULE) --randomize-ports --enable-debug-command \
	--check-exitcode -t tests/integration

.PHONY: run test build deps sys-deps py-deps unit integration bench fuzz valgrind clean

build: sys-deps
	cargo build --release

# Debian packages: installed only when missing, so a ready machine skips apt.
sys-deps:
	@missing=""; for p in $(APT_PACKAGES); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --no-install-recommends $$missing; \
	fi

py-deps: $(VENV)/.installed
$(VENV)/.installed: tests/integration/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -r tests/integration/requirements.txt
	touch $@

deps: sys-deps py-deps

run: build
	redis-server redis.conf.example --port $(PORT) --loadmodule $(MODULE)

unit:
	cargo test --lib

# RLTest's own summary is not a line CI reads: restate it as "N passed, N failed".
integration: build py-deps
	@set -o pipefail; cd $(CURDIR) && $(RLTEST) $(RLTEST_ARGS) 2>&1 | tee logs-integration.txt; rc=$$?; \
	summary=$$(sed 's/\x1b\[[0-9;]*m//g' logs-integration.txt | grep -o 'Total Tests Run: [0-9]*, Total Tests Failed: [0-9]*, Total Tests Passed: [0-9]*' | tail -1); \
	run=$$(echo "$$summary" | sed 's/.*Run: \([0-9]*\).*/\1/'); failed=$$(echo "$$summary" | sed 's/.*Failed: \([0-9]*\).*/\1/'); \
	passed=$$(echo "$$summary" | sed 's/.*Passed: \([0-9]*\).*/\1/'); rm -f logs-integration.txt; \
	[ -n "$$summary" ] && echo "integration: $$passed passed, $$failed failed"; \
	[ -n "$$summary" ] && [ "$$run" -gt 0 ] || rc=1; exit $$rc

test: deps build unit integration

# Not part of `make test`: figures, not assertions. Starts its own
# redis-server on a free port, writes bench/REPORT.md and bench/chart.svg.
bench: build py-deps
	$(PY) bench/bench.py

# Not part of `make test`: coverage-guided fuzzing of the RDB decoder and the
# argument / effect parsers (cargo fuzz, libFuzzer), FUZZ_SECONDS per target.
FUZZ_SECONDS ?= 60
FUZZ_TOOLCHAIN := $(shell rustup toolchain list 2>/dev/null | grep -q '^nightly' && echo +nightly)
fuzz:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
	for t in decode args; do \
		RUSTC_BOOTSTRAP=1 cargo $(FUZZ_TOOLCHAIN) fuzz run --fuzz-dir fuzz -O $$t -- \
			-max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 || exit 1; \
	done

# Not part of `make test`: the integration suite with every redis-server under
# valgrind (RLTest's valgrind mode); fails on errors and definite leaks.
valgrind: build py-deps
	@dpkg -s valgrind >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq valgrind)
	$(RLTEST) $(RLTEST_ARGS) -V --vg-suppressions $(CURDIR)/tests/integration/valgrind.sup

clean:
	cargo clean
	rm -rf logs $(VENV)
