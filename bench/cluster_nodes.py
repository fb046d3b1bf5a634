"""bench/cluster.py's readings from the nodes themselves: SECKILL.* calls per
master (INFO commandstats) and one node's RESERVE rate (redis-benchmark),
the base of the projections."""

import re
import subprocess

from seckill.testing import RedisServer

SECKILL_CMDS = ('seckill.reserve', 'seckill.send', 'seckill.recv', 'seckill.info')


def commandstats(cluster):
    out = {}
    for n in cluster.masters:
        st = n.client().info('commandstats')
        out[n.port] = {c: int(st.get('cmdstat_' + c, {}).get('calls', 0)) for c in SECKILL_CMDS}
    return out


def single_node_rate(module, n, pipeline):
    """RESERVE/s of one redis-server on one plain sale (stock never runs out,
    random users): redis-benchmark, 50 clients."""
    srv = RedisServer(module=module).start()
    try:
        srv.client().execute_command('SECKILL.INIT', 'bench:{one}', 10 ** 12, 'LIMIT', 10 ** 12)
        res = subprocess.run(['redis-benchmark', '-p', str(srv.port), '-n', str(n), '-c', '50',
                              '-P', str(pipeline), '-r', '100000000', '-q',
                              'SECKILL.RESERVE', 'bench:{one}', 'user:__rand_int__'],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        text = res.stdout.decode(errors='replace').replace('\r', '\n')
        m = re.findall(r'([0-9.]+) requests per second', text)
        return float(m[-1]) if m else 0.0
    finally:
        srv.stop()
