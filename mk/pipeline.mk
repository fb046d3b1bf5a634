# The reference order pipeline (clients/python): the `seckill` Python
# package's tests against real redis-server, SQLite and PostgreSQL, and the
# flash-sale demo. The package and PostgreSQL are installed by the
# Makefile's pipeline-deps and pipeline-pg. The servers run on free ports
# (never 6379) and are stopped afterwards.
#
#   make pipeline-test       pytest clients/python/tests (SQLite and PostgreSQL;
#                            the pipeline's and SplitSale's tests on the module
#                            and on the Functions library: two summary rows)
#   make demo                a whole flash sale on throwaway servers, SQLite
#   make demo DB=postgres    the same against a throwaway PostgreSQL

DB ?= sqlite

.PHONY: pipeline-test demo-deps demo

# One pytest run; the summary gets a row per backend: `pytest/module` (the
# tests on the module, and those that need no Redis) and `pytest/functions`
# (the [functions] variants of the tests marked both_backends: no module, the
# library loaded), counted from the run's JUnit XML (skips not counted, as
# pytest's closing line). Without the XML, one row from that closing line.
PIPELINE_XML = $(CURDIR)/logs/pipeline-test.xml
define PIPELINE_COUNTS
import re, sys, xml.etree.ElementTree as ET
n = {b: [0, 0] for b in ("module", "functions")}
for case in ET.parse(sys.argv[1]).iter("testcase"):
    kids = {c.tag for c in case}
    if "skipped" in kids:
        continue
    b = "functions" if re.search(r"[\[-]functions[\]-]", case.get("name", "")) else "module"
    n[b][bool(kids & {"failure", "error"})] += 1
print(" ".join("%d %d" % tuple(n[b]) for b in ("module", "functions")))
endef
export PIPELINE_COUNTS

pipeline-test: build pipeline-deps pipeline-pg ## the Python client and order pipeline's tests, on both backends (part of make test)
	@set -o pipefail; mkdir -p logs; start=$$SECONDS; rm -f $(PIPELINE_XML); \
	(cd $(PIPELINE_DIR) && $(PY) -m pytest tests -q -p no:cacheprovider --junitxml=$(PIPELINE_XML)) 2>&1 | \
		tee logs/pipeline-test.txt; \
	rc=$$?; secs=$$((SECONDS - start)); \
	if counts=$$($(PY) -c "$$PIPELINE_COUNTS" $(PIPELINE_XML) 2>/dev/null); then \
		set -- $$counts; \
		echo "pipeline-test: module $$1 passed, $$2 failed; functions $$3 passed, $$4 failed"; \
		tools/test-summary.sh add pipeline-test pytest/module $$1 $$2 $$secs; \
		tools/test-summary.sh add pipeline-test pytest/functions $$3 $$4 0; \
	else \
		tools/test-summary.sh pytest pipeline-test pytest logs/pipeline-test.txt $$secs || rc=1; \
	fi; exit $$rc

# The demo needs the client with its demo extras (and psycopg for
# PostgreSQL), not the test tools and server wheels of py-deps: a fresh
# checkout's `make demo` installs only those into the venv.
DEMO_EXTRAS = demo$(if $(filter postgres,$(DB)),$(comma)postgres)
DEMO_IMPORTS = import seckill, tqdm, matplotlib$(if $(filter postgres,$(DB)),$(comma) psycopg)
comma := ,
demo-deps: ## the Python client and the demo's extras only, in the venv
	@[ -x $(PY) ] || python3 -m venv $(VENV)
	@$(PY) -c '$(DEMO_IMPORTS)' 2>/dev/null || $(VENV)/bin/pip install -q -e '$(PIPELINE_DIR)[$(DEMO_EXTRAS)]'

demo: build demo-deps $(if $(filter postgres,$(DB)),pipeline-pg) ## a whole flash sale on throwaway servers (DB=sqlite|postgres)
	cd $(PIPELINE_DIR) && $(PY) -m seckill demo --db $(DB) --out demo-out

EXTRA_TESTS += pipeline-test
