# The reference order pipeline (clients/python): the `seckill` Python
# package, its tests against real redis-server, SQLite and PostgreSQL, and
# the flash-sale demo. Included by the top-level Makefile; uses its VENV,
# PY and `build` / `py-deps` targets.
#
#   make pipeline-test       pytest clients/python/tests (SQLite and PostgreSQL)
#   make demo                a whole flash sale on throwaway servers, SQLite
#   make demo DB=postgres    the same against a throwaway PostgreSQL
#
# Installs what is missing: the package and its extras (psycopg, tqdm,
# matplotlib, pytest) into the project venv, Debian's postgresql package.
# The servers run on free ports (never 6379) and are stopped afterwards.

PIPELINE_DIR = $(CURDIR)/clients/python
PIPELINE_IMPORTS = import seckill, psycopg, tqdm, matplotlib, pytest
DB ?= sqlite

.PHONY: pipeline-deps pipeline-pg pipeline-test demo

# pip only when an import fails: a ready venv skips it.
pipeline-deps: py-deps
	@$(PY) -c '$(PIPELINE_IMPORTS)' 2>/dev/null || \
		$(VENV)/bin/pip install -q -e '$(PIPELINE_DIR)[all]'

# PostgreSQL binaries for the tests' throwaway servers (initdb, pg_ctl).
pipeline-pg:
	@dpkg -s postgresql >/dev/null 2>&1 || { echo "installing: postgresql"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends postgresql; }

# pytest's own summary line ends the run; when tools/test-summary.sh is there
# its counts also become the pipeline-test row of `make test`'s summary.
pipeline-test: build pipeline-deps pipeline-pg
	@set -o pipefail; mkdir -p logs; start=$$SECONDS; \
	(cd $(PIPELINE_DIR) && $(PY) -m pytest tests -q -p no:cacheprovider) 2>&1 | tee logs/pipeline-test.txt; \
	rc=$$?; line=$$(grep -E '^=* *[0-9]+ (passed|failed|error)' logs/pipeline-test.txt | tail -1); \
	if [ -x tools/test-summary.sh ]; then \
		count() { echo "$$line" | grep -oE "[0-9]+ $$1" | grep -oE '[0-9]+' || echo 0; }; \
		if [ -n "$$line" ]; then tools/test-summary.sh add pipeline-test pytest "$$(count passed)" \
			"$$(( $$(count failed) + $$(count error) ))" $$((SECONDS - start)); \
		else tools/test-summary.sh add pipeline-test pytest - - $$((SECONDS - start)); fi; \
	fi; exit $$rc

demo: build pipeline-deps $(if $(filter postgres,$(DB)),pipeline-pg)
	cd $(PIPELINE_DIR) && $(PY) -m seckill demo --db $(DB) --out demo-out

EXTRA_TESTS += pipeline-test
