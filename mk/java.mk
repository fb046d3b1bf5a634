# make java-test: the Java client (clients/java, Maven, Java 17) under JUnit 5:
# the parsers against the shared reply vectors (tests/vectors) without Redis,
# then the Sale API on real servers it starts itself: a redis-server with the
# module (and the Functions library beside it), a plain one with the library
# only, and a three-master Redis Cluster with the module, every call checked
# for 0 MOVED in INFO errorstats; on Jedis (RESP2, RESP3), Lettuce (sync RESP3
# and RESP2, async) and Redisson (the library), both backends; the docs'
# Spring Data Redis and Redisson recipes compiled, run, and checked against
# docs/clients.md (clients/java/src/test/java/io/seckill/recipes). Free ports,
# servers stopped by pid. Included by the top-level Makefile; part of
# `make test` (EXTRA_TESTS), its row in the summary is java-test.
#
#   make java-test
#   make java-test JAVA_VECTORS=/path/to/vectors
#
# Maven downloads its plugins and the dependencies into ~/.m2 on the first
# run (51 MB, 10 MB of it Spring Data Redis for the docs' recipe, test scope).
# Measured here on 2 shared cores: 37 s with a warm cache; `mvn test` alone
# 34 s warm, 58 s with an empty one (-Dmaven.repo.local=/tmp/empty; make:
# MVN="mvn -Dmaven.repo.local=/tmp/empty"). Debian's Maven writes colour
# resets even with -B; they are stripped from the log.

JAVA_DIR = $(CURDIR)/clients/java
JAVA_REPORTS = $(JAVA_DIR)/target/surefire-reports
JAVA_VECTORS ?= $(CURDIR)/tests/vectors
MVN ?= mvn

.PHONY: java-deps java-test

# Java 17 or later and Maven (Debian's packages when missing).
java-deps:
	@command -v javac >/dev/null && command -v $(MVN) >/dev/null || { echo "installing: openjdk-17-jdk-headless maven"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless maven; }
	@v=$$(javac -version 2>&1 | sed -n 's/^javac \([0-9]*\).*/\1/p'); [ "$${v:-0}" -ge 17 ] || \
		{ echo "java-test needs Java 17 or later, found $$(javac -version 2>&1)"; exit 1; }

# Surefire's XML reports give the counts (tests - failures - errors - skipped
# passed; failures + errors failed): "java-test: N passed, N failed" and the
# summary row. Skipped tests (UNFENCE on a server without the fence) are
# printed on their own line, not counted.
java-test: build java-deps ## the Java client on Jedis, Lettuce and Redisson against real servers and a cluster (part of make test)
	@set -o pipefail; mkdir -p logs; start=$$SECONDS; rm -rf $(JAVA_REPORTS); \
	(cd $(JAVA_DIR) && SECKILL_MODULE=$(MODULE) $(MVN) -q -B -Dstyle.color=never test \
		-Dseckill.vectors=$(JAVA_VECTORS)) 2>&1 | sed -u 's/\x1b\[[0-9;]*m//g' | tee logs/java-test.txt; \
	rc=$$?; secs=$$((SECONDS - start)); \
	server=$$(redis-server --version | sed -n 's/^\([A-Za-z]*\) server v=\([^ ]*\).*/\1-\2/p' | tr 'A-Z' 'a-z'); \
	counts=$$(cat $(JAVA_REPORTS)/TEST-*.xml 2>/dev/null | grep -o '<testsuite [^>]*>' | awk -F'"' '{ \
		for (i = 1; i < NF; i++) { \
			if ($$i ~ / tests=$$/) t += $$(i + 1); if ($$i ~ / failures=$$/) f += $$(i + 1); \
			if ($$i ~ / errors=$$/) e += $$(i + 1); if ($$i ~ / skipped=$$/) s += $$(i + 1); } } \
		END { if (NR) print t - f - e - s, f + e, s }'); \
	if [ -n "$$counts" ]; then \
		set -- $$counts; \
		echo "java-test: $$1 passed, $$2 failed"; echo "java-test: $$3 skipped"; \
		tools/test-summary.sh add java-test "$$server" $$1 $$2 $$secs; \
	else \
		echo "java-test: no Surefire reports in $(JAVA_REPORTS)"; \
		tools/test-summary.sh add java-test "$$server" - - $$secs; rc=1; \
	fi; exit $$rc

EXTRA_TESTS += java-test
