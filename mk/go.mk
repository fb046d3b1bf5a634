# make go-test: the Go client (clients/go, package seckill on go-redis v9)
# against real servers it starts itself on free ports and stops by pid:
# redis-server with the module, a plain redis-server with
# functions/seckill.lua, a three-master cluster with the module (0 MOVED
# from INFO errorstats, on both backends; TRYAGAIN during a real slot
# migration), a Sentinel; the unit tests of every reply parser against the
# shared vectors (tests/vectors); go vet; the example run with go run.
# Included by the top-level Makefile; part of `make test` (EXTRA_TESTS),
# its row in the summary is go-test.
#
#   make go-test
#   make go-fuzz              the reply parsers' fuzz targets, GO_FUZZ_SECONDS each (not in make test)
#
# The modules come from the Go module proxy (`go mod download`, checked
# against the committed go.sum) into the usual module cache.

GO_DIR = $(CURDIR)/clients/go
GO_FUZZ_SECONDS ?= 30
GO_FUZZ_TARGETS = FuzzParseReplies FuzzParseReportJSON

.PHONY: go-deps go-test go-fuzz

go-deps: ## the Go toolchain check and the client's modules (go mod download)
	@command -v go >/dev/null || { echo "go-test needs the Go toolchain (1.26 or later): https://go.dev/dl/"; exit 1; }
	@go version | grep -qE 'go1\.(2[6-9]|[3-9][0-9])' || { echo "go-test needs Go 1.26 or later, found $$(go version)"; exit 1; }
	@cd $(GO_DIR) && go mod download && go mod verify >/dev/null

# go vet counts as one check beside the tests: every --- PASS / --- FAIL
# line of go test -v, subtests included, but not the fuzz targets' seed
# inputs (each vector's reply, run as a subtest of its target).
go-test: build go-deps ## the Go client: vet, unit, both backends, a cluster, a Sentinel (part of make test)
	@set -o pipefail; mkdir -p logs; start=$$SECONDS; \
	(cd $(GO_DIR) && echo "go vet ./..." && go vet ./... && echo "--- PASS: go vet") 2>&1 | tee logs/go-test.txt || \
		echo "--- FAIL: go vet" >> logs/go-test.txt; \
	(cd $(GO_DIR) && SECKILL_MODULE=$(MODULE) SECKILL_GO_REQUIRE_SERVERS=1 \
		go test -count=1 -v -timeout 300s ./...) 2>&1 | tee -a logs/go-test.txt; rc=$$?; \
	count() { grep -E "^ *--- $$1" logs/go-test.txt | grep -vc '/seed#'; }; passed=$$(count PASS); failed=$$(count FAIL); \
	[ $$failed -eq 0 ] || rc=1; \
	echo "go-test: $$passed passed, $$failed failed"; \
	server=$$(redis-server --version | sed -n 's/^\([A-Za-z]*\) server v=\([^ ]*\).*/\1-\2/p' | tr 'A-Z' 'a-z'); \
	tools/test-summary.sh add go-test "$$server" $$passed $$failed $$((SECONDS - start)); exit $$rc

go-fuzz: go-deps ## fuzz the Go client's reply parsers, GO_FUZZ_SECONDS per target (not in make test)
	@cd $(GO_DIR) && for t in $(GO_FUZZ_TARGETS); do \
		go test -run '^$$' -fuzz "^$$t$$" -fuzztime $(GO_FUZZ_SECONDS)s . || exit 1; done

EXTRA_TESTS += go-test
