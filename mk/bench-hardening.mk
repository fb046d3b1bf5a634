# make bench-hardening: the stall / idle-CPU / memory-peak figures of issue 7
# (bench/hardening.py), for one module build, written to bench/HARDENING.md
# in the section of HARDENING_LABEL (other labels' sections are kept, so
# builds sit side by side). Not part of `make test`: figures, not assertions.
# It does not build: measure another build with MODULE=/path/to/the.so.
#
#   make bench-hardening MODULE=/work/before/libredis_seckill.so HARDENING_LABEL=before
#   make bench-hardening HARDENING_LABEL=after HARDENING_ARGS='--reconcile-chunk 1000'
#   make bench-hardening HARDENING_ARGS='--only growth,mass-expiry'

MODULE ?= $(CURDIR)/target/release/libredis_seckill.so
HARDENING_LABEL ?= after
HARDENING_ARGS ?=

.PHONY: bench-hardening
bench-hardening: py-deps
	$(CURDIR)/.venv/bin/python bench/hardening.py --module $(MODULE) --label $(HARDENING_LABEL) $(HARDENING_ARGS)
