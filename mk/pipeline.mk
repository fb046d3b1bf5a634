# The reference order pipeline (clients/python): the `seckill` Python
# package's tests against real redis-server, SQLite and PostgreSQL, and the
# flash-sale demo. The package and PostgreSQL are installed by the
# Makefile's pipeline-deps and pipeline-pg. The servers run on free ports
# (never 6379) and are stopped afterwards.
#
#   make pipeline-test       pytest clients/python/tests (SQLite and PostgreSQL)
#   make demo                a whole flash sale on throwaway servers, SQLite
#   make demo DB=postgres    the same against a throwaway PostgreSQL

DB ?= sqlite

.PHONY: pipeline-test demo

pipeline-test: build pipeline-deps pipeline-pg ## the Python client and order pipeline's tests (part of make test)
	@set -o pipefail; mkdir -p logs; start=$$SECONDS; \
	(cd $(PIPELINE_DIR) && $(PY) -m pytest tests -q -p no:cacheprovider) 2>&1 | tee logs/pipeline-test.txt; \
	rc=$$?; tools/test-summary.sh pytest pipeline-test pytest logs/pipeline-test.txt $$((SECONDS - start)) || rc=1; exit $$rc

demo: build pipeline-deps $(if $(filter postgres,$(DB)),pipeline-pg) ## a whole flash sale on throwaway servers (DB=sqlite|postgres)
	cd $(PIPELINE_DIR) && $(PY) -m seckill demo --db $(DB) --out demo-out

EXTRA_TESTS += pipeline-test
