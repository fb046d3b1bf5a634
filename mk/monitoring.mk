# contrib/monitoring (docs/monitoring.md): the redis_exporter script, the
# Prometheus relabelling and the rules, tested for real. Debian's
# prometheus (2.42, with promtool) and prometheus-redis-exporter (1.45) are
# installed when missing; every server runs on a free port and is stopped
# by its pid.
#
#   make monitoring-test   promtool check/test of the rules, then
#                          tests/monitoring (exporter -> Prometheus at 1M keys
#                          and 1,000 sales; prints the scrape's server time;
#                          the pipeline's endpoints, the dashboard's queries,
#                          the oversell alert)
#   make monitor           the demo's sale with Prometheus, the exporters and
#                          the pipeline's endpoints on free ports; prints the
#                          page to open; Ctrl-C stops them (by pid)
#   make monitor-screenshot  the same, headless: docs/monitoring-prometheus.png

MONITORING_PACKAGES := prometheus prometheus-redis-exporter

.PHONY: monitoring-deps monitoring-test monitor monitor-screenshot

monitoring-deps: ## Debian's prometheus and prometheus-redis-exporter
	@missing=""; for p in $(MONITORING_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; fi

monitoring-test: build pipeline-deps monitoring-deps ## the monitoring pieces, live (part of make test)
	@set -o pipefail; mkdir -p logs; start=$$SECONDS; \
	{ cd contrib/monitoring && promtool check rules rules.yml && promtool test rules rules_test.yml; } 2>&1 | \
		tee logs/monitoring-test.txt; rc=$$?; \
	SECKILL_MODULE=$(MODULE) $(PY) -m pytest tests/monitoring -q -s -p no:cacheprovider 2>&1 | \
		tee -a logs/monitoring-test.txt; [ $$? = 0 ] || rc=1; \
	tools/test-summary.sh pytest monitoring-test pytest logs/monitoring-test.txt $$((SECONDS - start)) || rc=1; \
	exit $$rc

monitor: build pipeline-deps monitoring-deps ## the demo's sale watched in Prometheus (Ctrl-C stops it)
	$(PY) contrib/monitoring/monitor.py --module $(MODULE) --out monitor-out

monitor-screenshot: build pipeline-deps monitoring-deps ## docs/monitoring-prometheus.png (headless Chromium)
	@command -v chromium >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; }
	$(PY) contrib/monitoring/monitor.py --module $(MODULE) --out monitor-out --duration 20 --exit \
		--screenshot docs/monitoring-prometheus.png

EXTRA_TESTS += monitoring-test
