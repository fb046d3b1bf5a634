"""bench/hardening.py's servers: a redis-server with the module on a free
port, pinned to one CPU and niced in a session of its own, every one of them
known by pid (LIVE) so that an error or a signal ends them all, and only
them; the waits for a replica's link and catch-up."""

import os
import subprocess
import time

import redis

from local_server import free_port

SERVER_CPU, CLIENT_CPU = '0', '1'
SLOWLOG_US = 1000
# Servers and the PING probe run at this nice level (--nice), so that the
# compilers and tests sharing the machine preempt them less. With the
# kernel's autogroups a nice level counts only within a session, so each of
# them gets a session of its own whose autogroup gets that nice level too.
NICE = [-10]

# Every server started by bench/hardening.py, by pid, so that an error or a
# signal anywhere still ends them (and only them).
LIVE = {}
# /proc/<pid>/stat counts CPU time in these ticks.
CLK_TCK = os.sysconf('SC_CLK_TCK')


def own_priority():
    """In a child before exec: a session (autogroup) of its own, niced."""
    os.setsid()
    try:
        with open('/proc/self/autogroup', 'w') as f:
            f.write(str(NICE[0]))
    except OSError:
        pass


class Server:
    """A redis-server with the module, on a free port, pinned to one CPU.

    `nice` and `taskset` exec redis-server, so the pid is the server's own
    (its /proc/<pid>/stat is what idle-cpu reads)."""

    def __init__(self, name, module, workdir, cpu=SERVER_CPU, extra=(), dbfilename=None, wait=True, port=None):
        self.name = name
        self.port = port or free_port()
        self.dir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.logpath = os.path.join(workdir, '%s.log' % name)
        cmd = ['nice', '-n', str(NICE[0]), 'taskset', '-c', cpu,
               'redis-server', '--port', str(self.port), '--bind', '127.0.0.1',
               '--dir', workdir, '--dbfilename', dbfilename or ('%s.rdb' % name),
               '--appenddirname', '%s-aof' % name, '--save', '', '--appendonly', 'no',
               '--enable-debug-command', 'local',
               '--slowlog-log-slower-than', str(SLOWLOG_US), '--slowlog-max-len', '10000',
               '--latency-monitor-threshold', '10',
               '--loadmodule', module] + [str(a) for a in extra]
        self.logfile = open(self.logpath, 'w')
        self.proc = subprocess.Popen(cmd, stdout=self.logfile, stderr=subprocess.STDOUT, preexec_fn=own_priority)
        self.pid = self.proc.pid
        LIVE[self.pid] = self
        self.conn = redis.Redis(port=self.port, decode_responses=True, socket_timeout=300)
        if wait:
            self.wait_ready()

    def wait_ready(self, seconds=120):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError('%s exited (%s); see %s' % (self.name, self.proc.returncode, self.logpath))
            try:
                self.conn.ping()
                return
            except (redis.ConnectionError, redis.ResponseError):
                time.sleep(0.02)
        raise RuntimeError('%s did not start in %d s; see %s' % (self.name, seconds, self.logpath))

    def cpu_ticks(self):
        with open('/proc/%d/stat' % self.pid) as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime (fields 14, 15)

    def waited_ms(self):
        """How long the server's main thread has waited for a CPU while
        runnable (/proc/<pid>/schedstat): the machine's noise, not the module's."""
        try:
            with open('/proc/%d/schedstat' % self.pid) as f:
                return int(f.read().split()[1]) / 1e6
        except (OSError, IndexError, ValueError):
            return 0.0

    def stop(self):
        if self.pid not in LIVE:
            return
        del LIVE[self.pid]
        if self.proc.poll() is None:
            self.proc.kill()  # SIGKILL by pid: --save "" anyway, nothing to flush
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self.logfile.close()


def stop_all(*_):
    for srv in list(LIVE.values()):
        srv.stop()


def on_signal(signum, _frame):
    stop_all()
    raise SystemExit(128 + signum)


def wait_link(master, replica, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if replica.conn.info('replication').get('master_link_status') == 'up':
            return
        time.sleep(0.05)
    raise RuntimeError('replica did not connect in %d s' % seconds)


def wait_caught_up(master, replica, seconds=120):
    """Waits until the replica has processed the master's whole stream."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        target = master.conn.info('replication')['master_repl_offset']
        if replica.conn.info('replication').get('slave_repl_offset', -1) >= target:
            return True
        time.sleep(0.05)
    return False
