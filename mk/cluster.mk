# make bench-cluster: the figures that predict how one split sale scales over
# the masters of a Redis Cluster (issue 8): a three-master cluster of
# redis-server processes with the module (free ports below 55535, stopped by
# pid), random users, demand 3x the stock; the RESERVE share of the busiest
# node, extra round trips per RESERVE by path, pool calls, false SOLD_OUT
# answers, units unsold, oversell against the ledger, the end game's length,
# a measured single-node RESERVE rate and a projection for P = 1..16.
# Writes bench/CLUSTER.md. Not part of `make test`: figures, not assertions.
#
#   make bench-cluster
#   make bench-cluster CLUSTER_ARGS='--stock 50000 --procs 6 --threads 8'
#   make bench-cluster MODULE=/path/to/other/libredis_seckill.so

CLUSTER_ARGS ?=

.PHONY: bench-cluster
bench-cluster: build pipeline-deps
	$(PY) bench/cluster.py --module $(MODULE) $(CLUSTER_ARGS)
