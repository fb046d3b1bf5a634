# make clients-test: the node-redis and ioredis recipes of docs/clients.md
# (clients/node) against a three-master Redis Cluster of Debian's
# redis-server with the module, under Node's built-in test runner: 50
# concurrent buyers per library with the key given (0 MOVED asserted) and
# without it (measured), the reply types under RESP2 and RESP3, TRYAGAIN
# during a real slot migration, and the files docs/clients.md tells users to
# save and run (test/docs.test.js). The cluster runs on free ports below 55535
# and is stopped by pid. Included by the top-level Makefile; part of
# `make test` (EXTRA_TESTS), its row in the summary is clients-test.
#
#   make clients-test
#
# node_modules are installed here by `npm ci` from package-lock.json (the
# versions pinned in clients/node/package.json), never committed.

CLIENTS_NODE_DIR = $(CURDIR)/clients/node

.PHONY: clients-node-deps clients-test

# Node.js 20 or later and npm (Debian's packages when missing); `npm ci` only
# when node_modules is older than the lock file.
clients-node-deps:
	@command -v node >/dev/null && command -v npm >/dev/null || { echo "installing: nodejs npm"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends nodejs npm; }
	@node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' || \
		{ echo "clients-test needs Node.js 20 or later, found $$(node --version)"; exit 1; }
	@cd $(CLIENTS_NODE_DIR) && { [ node_modules/.package-lock.json -nt package-lock.json ] || \
		npm ci --no-audit --no-fund --loglevel=error; }

# The runner's own summary ("ℹ pass N", "ℹ fail N") ends the log; its counts
# become "clients-test: N passed, N failed" and the summary row.
clients-test: build clients-node-deps ## the node-redis and ioredis recipes against a three-master cluster (part of make test)
	@set -o pipefail; mkdir -p logs; start=$$SECONDS; \
	(cd $(CLIENTS_NODE_DIR) && SECKILL_MODULE=$(MODULE) npm test --silent) 2>&1 | tee logs/clients-test.txt; \
	rc=$$?; server=$$(redis-server --version | sed -n 's/^\([A-Za-z]*\) server v=\([^ ]*\).*/\1-\2/p' | tr 'A-Z' 'a-z'); \
	tools/test-summary.sh node clients-test "$$server" logs/clients-test.txt $$((SECONDS - start)) || rc=1; exit $$rc

EXTRA_TESTS += clients-test
