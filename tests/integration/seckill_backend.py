"""One suite, two backends: the module (default) or the Functions library.

With SECKILL_BACKEND=functions in the environment, importing this module
(seckill_helpers imports it, so every test file does) makes the integration
suite the conformance suite of functions/seckill.lua:

- every `SECKILL.X key args...` a test sends (redis-py execute_command,
  pipelines, RLTest's env.expect / env.cmd, RedisCluster, seckill_helpers'
  RawConn) goes out as `FCALL seckill_x n key [keys...] args...`, or
  `FCALL_RO` for INFO, GET and ENTRANTS (the no-writes functions; FCALL
  declares its keys read-write to ACLs, FCALL_RO read-only), with the keys
  the call declares (declared_keys below);
- the library is loaded (FUNCTION LOAD REPLACE) into every master RLTest
  starts, before its replica starts (replicas get it by replication; RDB and
  AOF keep it across restarts and reloads);
- there is no timer: as the order worker of a deployment does, a thread
  calls `FCALL seckill_expire n key [keys...]` every 100 ms for each sale the current
  test created with a HOLD, on every server of the test's environment
  (masters and replicas: a replica refuses, a promoted one releases). Tests
  that wait for holds to run out "in the background" therefore exercise
  seckill_expire, not a timer;
- a test about the module itself is skipped, with its reason printed
  (SKIPS below).

Without the variable nothing here changes anything.
"""

import os
import threading
import time
import unittest

BACKEND = os.environ.get('SECKILL_BACKEND', 'module')
if BACKEND not in ('module', 'functions'):
    raise RuntimeError('SECKILL_BACKEND must be module or functions, not %r' % BACKEND)
FUNCTIONS = BACKEND == 'functions'
MODULE = not FUNCTIONS

# What TYPE answers for a sale key.
SALE_TYPE = 'hash' if FUNCTIONS else 'seckill--'
# What an AOF rewrite without the RDB preamble holds: the module's effects,
# or the library itself (FUNCTION LOAD) ahead of the sales' hashes.
AOF_REWRITE_MARK = b'\r\nFUNCTION\r\n' if FUNCTIONS else b'SECKILL.EFFECT'

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIBRARY = os.path.join(ROOT, 'functions', 'seckill.lua')
LIBRARY_NAME = 'seckill'

# The library keeps no list of its sales (docs/monitoring.md).
NO_SALES_LIST = "SECKILL.SALES, the module's list of sales; the library has no equivalent yet"

# "file:test" -> why the library does not run it. Each is about the module
# itself (its type, its RDB encoding, SECKILL.EFFECT, its timer, keyspace
# events, INFO seckill, COMMAND INFO) or a contract difference that
# docs/managed-redis.md lists; tests/functions/test_library.py checks
# the library's side of each difference.
SKIPS = {
    'test_commands:test_keyspace_events':
        'module keyspace events (seckill.reserve, ...); the library PUBLISHes seckill.soldout/restock on '
        'seckill:events:<key> instead (test_library:test_stock_edges_are_published)',
    'test_commands:test_info_seckill_counters': 'INFO seckill is a module INFO section; a library cannot add one',
    'test_commands:test_resp3_maps':
        'contract difference: under RESP3 the library answers reports as flat field/value arrays '
        '(Lua tables are unordered; test_library:test_resp3_replies)',
    'test_commands:test_holds_run_out_wherever_the_sale_goes':
        "the module's timer follows RENAME/MOVE/COPY/RESTORE; the library has no timer (the worker calls "
        'seckill_expire for the sale names it serves)',
    'test_commands:test_holds_run_out_after_swapdb': "the module's timer follows SWAPDB; the library has no timer",
    'test_commands:test_effect_command_refuses_what_does_not_fit': 'SECKILL.EFFECT is the module\'s replication command',
    'test_bad_args:test_commands_are_flagged_for_the_server':
        'COMMAND GETKEYS/INFO of the module commands; the library\'s flags: test_library:test_function_flags',
    'test_corrupt_input:test_corrupt_dump_payloads_never_crash': "the module type's RDB encoding",
    'test_corrupt_input:test_corrupt_aof_rewrite_commands_never_crash': 'SECKILL.EFFECT commands of an AOF rewrite',
    'test_corrupt_input:test_restore_with_a_record_time_past_the_bound_is_refused':
        "the module type's RDB encoding (a library sale is plain hashes its functions write)",
    'test_stream_in_effect:test_aof_replay_rebuilds_the_stream_and_carries_one_command_per_reserve':
        'the module\'s SECKILL.EFFECT PENDING form in the AOF',
    'test_transfers:test_version_1_payload_loads': "the module's version-1 RDB fixture",
    'test_transfers:test_info_seckill_counters': 'INFO seckill is a module INFO section',
    'test_transfers:test_command_info': 'COMMAND GETKEYS/INFO of the module commands',
    'test_transfers:test_stock_edge_events':
        'module keyspace events; the library publishes on seckill:events:<key> '
        '(test_library:test_stock_edges_are_published)',
    'test_hardening:test_shutdown_waiting_for_a_lagging_replica':
        "the module's timer during a paused SHUTDOWN (its own servers load the module)",
    'test_hardening:test_cluster_failover_while_holds_fall_due':
        "the module's timer during CLUSTER FAILOVER (its own servers load the module)",
    'test_hardening:test_reserve_during_slot_migration_keeps_one_stream':
        "the module's TRYAGAIN while the stream's slot migrates (its own servers load the module); "
        'the library: test_library:test_stream_elsewhere_changes_nothing',
    'test_hardening:test_slot_migration_keeps_one_stream_before_any_reservation':
        "the module's TRYAGAIN while the stream's slot migrates (its own servers load the module)",
    'test_hardening:test_a_copy_never_writes_the_live_stream':
        'contract difference: the library cannot see RENAME, so a renamed sale stops writing its stream '
        '(test_library:test_a_copy_never_writes_the_live_stream)',
    'test_hardening:test_expiry_in_bounded_chunks':
        "the module's EXPIRE effects in the AOF; the library's bound: test_library:test_expiry_is_bounded",
    'test_hardening:test_idle_sales_cost_nothing': "the module timer's INFO seckill counters",
    'test_hardening:test_effect_refuses_plain_clients': 'SECKILL.EFFECT',
    'test_hardening:test_effect_allowed_by_module_argument': 'SECKILL.EFFECT and module arguments',
    'test_hardening:test_refused_effects_do_not_flood_the_log': 'SECKILL.EFFECT',
    'test_hardening:test_restore_refuses_a_stream_in_another_slot': "the module type's RDB load checks",
    'test_hardening:test_key_events_do_not_touch_keys': "the module's keyspace-event handlers",
    'test_hardening:test_reconcile_apply_is_one_effect_per_call':
        "the module's BATCH effect in the AOF; the library's: test_library:test_one_call_is_one_transaction",
    'test_commands:test_stock_edge_spans_the_whole_write':
        'module keyspace events; the library publishes on seckill:events:<key> '
        '(test_library:test_stock_edges_are_published)',
    'test_acl:test_front_end':
        "the ACL lines of the module's commands; the library's callers need +fcall/+fcall_ro and the "
        'commands it runs (docs/managed-redis.md)',
    'test_acl:test_driver': "the ACL lines of the module's commands (docs/managed-redis.md)",
    'test_acl:test_acl_categories': "the module commands' ACL categories",
    'test_fence:test_effects_carry_the_recorded_id':
        "the module's SECKILL.EFFECT INIT ... FENCE and UNFENCE forms in the AOF",
    'test_sales_list:test_pages_in_byte_order': NO_SALES_LIST,
    'test_sales_list:test_follows_deletes_and_overwrites': NO_SALES_LIST,
    'test_sales_list:test_follows_renames_moves_copies_and_swapdb': NO_SALES_LIST,
    'test_sales_list:test_follows_restore_and_reloads': NO_SALES_LIST,
    'test_sales_list:test_follows_aof_replay': NO_SALES_LIST,
    'test_sales_list:test_replica_follows_effects_and_full_syncs': NO_SALES_LIST,
    'test_sales_list:test_keyless_read_only_command': "SECKILL.SALES's command flags",
    'test_sales_list:test_cost_at_a_million_keys': NO_SALES_LIST,
    'test_sales_list:test_with_counts_follow_each_sales_report': NO_SALES_LIST,
    'test_atomic_migration:test_sale_moves_whole_while_buyers_keep_reserving':
        "the module's atomic slot migration (its own servers load the module)",
    'test_atomic_migration:test_target_state_at_cutover_is_the_source_state_and_back':
        "the module's atomic slot migration (its own servers load the module)",
    'test_atomic_migration:test_cancelled_migration_leaves_the_sale_on_the_source':
        "the module's atomic slot migration (its own servers load the module)",
    'test_draw:test_waitlist_search_past_the_draw_continues_on_the_timer':
        "the module's bound on the waitlist's search (2048 places per command, then its timer's visits, "
        'counted by INFO seckill); the library caps it at 128 places per call, continued by later calls',
    'test_draw:test_waitlist_search_stopped_by_a_restart_goes_on':
        "the module's timer continues a search stopped at its bound after a load; the library has no timer",
    'test_draw:test_waitlist_search_stopped_by_a_failover_goes_on':
        "the module's timer continues a search stopped at its bound on a promoted replica; the library has no timer",
}

# Skipped only on servers that freeze the clock inside MULTI/EXEC (Redis 8.2,
# Valkey 8.1 and 9.1 do; Redis 7.0 does not): these tests sleep inside MULTI
# and expect the next call to see the time pass. A function reads the clock
# with TIME, which such servers answer with the transaction's start; the
# module reads the system clock. test_library:test_lazy_expiry_outside_multi
# checks lazy expiry without MULTI.
FROZEN_CLOCK_SKIPS = {
    'test_commands:test_hold_lazy_expiry':
        'contract difference on this server: TIME inside MULTI/EXEC is the transaction\'s start, so a hold '
        'cannot run out between two calls of one transaction (test_library:test_lazy_expiry_outside_multi)',
    'test_commands:test_reconcile_expire':
        'contract difference on this server: TIME inside MULTI/EXEC is the transaction\'s start '
        '(test_library:test_lazy_expiry_outside_multi)',
}


def clock_frozen_in_multi(conn):
    """Whether TIME stands still inside MULTI/EXEC on this server."""
    p = conn.pipeline(transaction=True)
    p.execute_command('TIME')
    p.execute_command('DEBUG', 'SLEEP', '0.01')
    p.execute_command('TIME')
    first, _, second = p.execute()
    return first == second


# Functions that do not write: sent with FCALL_RO.
READ_ONLY = ('INFO', 'GET', 'ENTRANTS')
COMMANDS = ('INIT', 'RESERVE', 'RELEASE', 'CONFIRM', 'RECONCILE', 'INFO', 'GET', 'SEND', 'RECV',
            'ENTER', 'DRAW', 'ENTRANTS', 'UNFENCE')


def _text(a):
    if isinstance(a, bytes):
        return a.decode('latin-1')
    return str(a)


def fcall_form(args):
    """`SECKILL.X key args...` as `FCALL seckill_x 1 key args...` (a tuple);
    anything else unchanged (and everything, on the module backend)."""
    if not FUNCTIONS or not args:
        return args
    name = _text(args[0])
    if ' ' in name or not name.upper().startswith('SECKILL.'):
        return args
    sub = name[len('SECKILL.'):].upper()
    if sub not in COMMANDS:
        return args
    verb = 'FCALL_RO' if sub in READ_ONLY else 'FCALL'
    fn = 'seckill_' + sub.lower()
    if len(args) == 1:
        return (verb, fn, 0)
    _track(args)
    keys = (args[1],) + declared_keys(sub, args)
    return (verb, fn, len(keys)) + keys + tuple(args[2:])


# The other keys calls on a sale declare (docs/managed-redis.md, "Calling
# it"), as a client that has seen the sale's INITs knows them: every STREAM
# an INIT of the key named (more keys than a call touches are accepted), and
# the draw keys of a key an INIT made a draw sale. Kept for the whole run:
# a test's sale reaches another server by replication, DUMP/RESTORE or
# RENAME (a renamed sale writes no stream).
_streams = {}
_draws = set()
DRAW_SUFFIXES = (':secret', ':entrants', ':perm', ':wait')


def _raw(a):
    """A key as the server sees it (bytes), for comparing and joining."""
    if isinstance(a, bytes):
        return a
    return str(a).encode('utf-8')


def _init_keys(key, rest):
    upper = [_text(a).upper() for a in rest]
    with _lock:
        for i, w in enumerate(upper[:-1]):
            if w == 'STREAM' and _raw(rest[i + 1]) not in _streams.setdefault(key, []):
                _streams[key].append(_raw(rest[i + 1]))
        if 'DRAW' in upper:
            _draws.add(key)


def declared_keys(sub, args):
    """The keys after the sale key that `SECKILL.<sub> key args...` declares."""
    key = _raw(args[1])
    if sub == 'INIT':
        _init_keys(key, args[2:])
    if sub in ('INFO', 'GET'):
        return ()
    with _lock:
        draw = key in _draws
        streams = tuple(_streams.get(key, ()))
    if sub == 'ENTRANTS':
        return (key + b':entrants',) if draw else ()
    if draw:
        # <key>:secret only where the call may touch it (INIT, DRAW): a role
        # without access to it still enters and settles.
        suffixes = DRAW_SUFFIXES if sub in ('INIT', 'DRAW') else DRAW_SUFFIXES[1:]
        return streams + tuple(key + s.encode() for s in suffixes)
    return streams


# ------------------------------------------------------------ the library

def library_code():
    with open(LIBRARY, 'rb') as f:
        return f.read()


def _pairs(reply):
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[0::2], reply[1::2]))


def load_library(conn):
    """FUNCTION LOAD REPLACE the library unless this exact code is loaded.
    A replica refuses (READONLY): it gets the library from its master."""
    import redis
    code = library_code()
    try:
        libs = conn.execute_command('FUNCTION', 'LIST', 'LIBRARYNAME', LIBRARY_NAME, 'WITHCODE')
        for lib in libs or []:
            d = {_text(k): v for k, v in _pairs(lib).items()}
            have = d.get('library_code')
            if _text(d.get('library_name')) == LIBRARY_NAME and have is not None:
                if (have if isinstance(have, bytes) else have.encode('latin-1')) == code:
                    return True
        conn.execute_command('FUNCTION', 'LOAD', 'REPLACE', code)
        return True
    except redis.ResponseError as e:
        if 'READONLY' in str(e) or 'read only' in str(e).lower():
            return False
        raise


# ------------------------------------------------- the expiry worker thread

_lock = threading.Lock()
_keys = set()          # sale keys the current test created with a HOLD
_env_of = [None]       # the RLTest env runner those keys belong to
_worker = [None]
PERIOD = 0.1


def _current_runner():
    try:
        from RLTest.env import Env
        inst = Env.RTestInstance
        env = inst.currEnv if inst else None
        return env.envRunner if env is not None else None
    except Exception:  # noqa: BLE001 - no env: nothing to do
        return None


def _track(args):
    """Remembers the key of an INIT with a HOLD other than 0."""
    if len(args) < 3 or _text(args[0]).upper() != 'SECKILL.INIT':
        return
    rest = [_text(a) for a in args[2:]]
    for i, word in enumerate(rest[:-1]):
        if word.upper() == 'HOLD' and rest[i + 1].strip('0') != '':
            runner = _current_runner()
            with _lock:
                if _env_of[0] is not runner:
                    _env_of[0] = runner
                    _keys.clear()
                _keys.add(args[1])
            _start_worker()
            return


def _quick(conn):
    """A connection like `conn` that fails at once (no retries, short
    timeouts): a server of the previous test may be gone."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
    kw = conn.connection_pool.connection_kwargs
    common = dict(password=kw.get('password'), socket_timeout=2, socket_connect_timeout=0.5,
                  retry=Retry(NoBackoff(), 0))
    if kw.get('path'):
        return redis.Redis(unix_socket_path=kw['path'], **common)
    return redis.Redis(host=kw.get('host', 'localhost'), port=kw['port'], **common)


def _servers(runner):
    """A connection to every server of the environment: masters, replica."""
    out = []
    try:
        shards = getattr(runner, 'shards', None) or [runner]
        for shard in shards:
            out.append(_quick(shard.getConnection()))
            if getattr(shard, 'useSlaves', False):
                out.append(_quick(shard.getSlaveConnection()))
    except Exception:  # noqa: BLE001 - the env is going down
        pass
    return out


def _tick(conns):
    with _lock:
        keys = list(_keys)
    for conn in conns:
        try:
            p = conn.pipeline(transaction=False)
            for k in keys:
                declared = (k,) + declared_keys('EXPIRE', ('SECKILL.EXPIRE', k))
                p.execute_command('FCALL', 'seckill_expire', len(declared), *declared)
            p.execute(raise_on_error=False)
        except Exception:  # noqa: BLE001 - a server restarting, a replica: retried next tick
            pass


def _run_worker():
    conns, conns_of = [], None
    while True:
        time.sleep(PERIOD)
        runner = _current_runner()
        with _lock:
            active = runner is not None and _env_of[0] is runner and bool(_keys)
        if not active:
            continue
        if conns_of is not runner:
            for c in conns:
                try:
                    c.close()
                except Exception:  # noqa: BLE001
                    pass
            conns, conns_of = _servers(runner), runner
        _tick(conns)


def _start_worker():
    with _lock:
        if _worker[0] is None:
            t = threading.Thread(target=_run_worker, name='seckill-expire-worker', daemon=True)
            _worker[0] = t
            t.start()


# ----------------------------------------------------------------- install

def _install():
    import redis.connection as rc

    for cls in (rc.PythonRespSerializer, rc.HiredisRespSerializer):
        orig = cls.pack

        def pack(self, *args, _orig=orig):
            return _orig(self, *fcall_form(args))
        cls.pack = pack

    # RedisCluster routes a command by its keys, which it asks the server
    # for; SECKILL.X's key is its first argument.
    from redis.cluster import RedisCluster
    orig_keys = RedisCluster._get_command_keys

    def get_keys(self, *args):
        if args and _text(args[0]).upper().startswith('SECKILL.') and len(args) > 1:
            return [args[1]]
        return orig_keys(self, *args)
    RedisCluster._get_command_keys = get_keys

    from RLTest.env import Env, Defaults
    from RLTest.redis_std import StandardEnv

    orig_init = Env.__init__

    def env_init(self, *args, **kwargs):
        name = kwargs.get('testName') or Defaults.curr_test_name or ''
        reason = SKIPS.get(name)
        if reason:
            print('\tSKIP (functions backend): %s: %s' % (name, reason))
            raise unittest.SkipTest(reason)
        orig_init(self, *args, **kwargs)
        reason = FROZEN_CLOCK_SKIPS.get(name)
        if reason and clock_frozen_in_multi(self.getConnection()):
            print('\tSKIP (functions backend): %s: %s' % (name, reason))
            raise unittest.SkipTest(reason)
    Env.__init__ = env_init

    orig_wait = StandardEnv.waitForRedisToStart

    def wait_then_load(self, con, proc, *args, **kwargs):
        r = orig_wait(self, con, proc, *args, **kwargs)
        if proc is not None and proc is getattr(self, 'masterProcess', None):
            load_library(con)
        return r
    StandardEnv.waitForRedisToStart = wait_then_load


if FUNCTIONS:
    _install()
