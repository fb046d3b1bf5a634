"""Throwaway servers on free ports, stopped by pid: for the package's tests,
the benches (bench/cluster.py, bench/soldout.py, clients/python/bench) and
`python -m seckill demo`. Nothing a shop's application needs.

- servers.py: `free_port`, `module_path`, `RedisServer` (the module, or
  none), `start_redis(backend)` (the module, or the Functions library
  loaded), `SentinelServer`, `PostgresServer`
- cluster.py: `Cluster`, N masters with replicas on demand, on either
  backend; `wait_until`
"""

from .cluster import Cluster, wait_until
from .servers import (PostgresServer, RedisServer, SentinelServer, free_port, install_library, module_path,
                      start_redis)

__all__ = ['Cluster', 'PostgresServer', 'RedisServer', 'SentinelServer', 'free_port', 'install_library',
           'module_path', 'start_redis', 'wait_until']
