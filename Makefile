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
APT_PACKAGES := redis-server redis-tools libclang-dev clang python3-venv
# RLTest options shared by every environment: random free ports (never
# 6379), DEBUG enabled for digests and reloads, logs under logs/.
RLTEST_ARGS := --module $(MODULE) --randomize-ports --enable-debug-command \
	--check-exitcode -t tests/integration

.PHONY: run test build deps sys-deps py-deps unit integration clean

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

integration: build py-deps
	cd $(CURDIR) && $(RLTEST) $(RLTEST_ARGS)

test: deps build unit integration

clean:
	cargo clean
	rm -rf logs $(VENV)
