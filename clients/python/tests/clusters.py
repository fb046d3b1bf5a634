"""Moved to seckill/testing/cluster.py (`from seckill.testing import
Cluster, wait_until`). This file stays for tests/chaos/topology.py, which
imports it through sys.path."""

from seckill.testing.cluster import Cluster, wait_until

__all__ = ['Cluster', 'wait_until']
