"""The I/O: what runs the operations' steps and talks to Redis, sync
(redis-py, threads) and asyncio (redis.asyncio, tasks), side by side.

- sync.py, aio.py: the drivers that execute the steps
- soldout.py, aio_soldout.py: the local sold-out flag's pub/sub wiring
- connect.py, aio_connect.py: connect(url), the Sentinel failover follower
"""
