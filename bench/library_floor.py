#!/usr/bin/env python3
"""Where the Functions library's RESERVE time and memory go (issue 24):
how close to seed script A a Lua RESERVE that keeps the contract can get.

The ladder: a scratch library (seckill_floor, loaded beside
functions/seckill.lua) whose functions each add one step of the library's
RESERVE fast path (reserve_fast) to the one before: the call alone; reading
the sale's and the buyer's fields and writing the record, the buyer and the
counters (HMGET 3 + HSET 3, counters as a decimal); the packed settings and
counters field (struct.unpack/pack of its 23 doubles, the library's
META_FORMAT); the clock (TIME); the creation time in the record; the
generated id's mac (redis.sha1hex) and the status reply; the pcall wrapper
every library command runs in. Beside them: script A, script B (A + XADD),
the last step + XADD, and the library's own RESERVE, plain and on a sale
with a STREAM. Blocks of --block pipelined calls (a new user each) rotate
between them for --cycles cycles, the order shifted each cycle; a block's
server CPU per call is the server main thread's CPU time over the block
(/proc/<pid>/schedstat: reading, running and answering the calls, not the
time a loaded machine kept the thread waiting), beside the INFO
commandstats delta (fcall, evalsha: the wall time inside the calls); each
figure is the median of per-cycle ratios to the script of the same cycle,
with quartiles.

The memory: --count reservations made by the library (users u0 ...,
generated ids, no stream, LIMIT 1), by script A (its buyers set) and by the
module when it is loaded; used_memory delta and MEMORY USAGE per
reservation; then the library's hash split: its record fields alone and
its buyer fields alone copied into hashes of their own (the same strings),
and one field per reservation (the buyer field holding the record), each
with its bucket array from DEBUG HTSTATS-KEY.

    .venv/bin/python bench/library_floor.py [--cycles 21] [--block 2000] [--count 1000000]
        [--module PATH] [--server redis-server] [--out bench/reports/REPORT.md | --no-write]

Starts its own server on a free port (bench/local_server.py; the module
loaded when --module exists), prints the section, and writes it into
REPORT.md in place of its last version (`make bench-floor`).
"""

import argparse
import os
import re
import statistics
import sys
import time

import redis

from bench_common import BIG, LIBRARY, MODULE, REPORT, SCRIPT_A, SCRIPT_B, server_cpu_ns, text, write_section
from local_server import local_server
from measure_memory import fill

HEADING = "## The library's floor: where a Lua RESERVE's time and memory go"

# One step of reserve_fast a level: `level` 1 reads and writes the fields
# with the counter as a decimal, 2 the packed field, 3 the clock, 4 the
# creation time in the record, 5 the id's mac and the status reply;
# `stream`: an XADD of the entry the library appends.
FLOOR_LIB = r'''#!lua name=seckill_floor
local F, NB = '@FORMAT@', @BYTES@
local RESERVED = {ok = 'RESERVED'}
local function num(n) return string.format('%d', n) end

local function rung(level, stream)
    return function(keys, args)
        local key, user = keys[1], args[1]
        if level == 0 then return {1, user, 0} end
        local uf = 'u:' .. user
        local v = redis.call('HMGET', key, 'm', uf, 'k')
        if v[2] then return {0, false, 0} end
        local m = v[1]
        if level == 1 then
            local n = tonumber(m)
            local seq = num(n)
            redis.call('HSET', key, 'm', num(n + 1), seq, 'p1,0,0,,,0,' .. user, uf, seq .. ':1')
            return {1, seq, n}
        end
        local layout, total, shards, limit, hold, start, end_, tag_n, n, rem, pend, conf, rel, exp, buyers, hc, hn,
            hd, t0, lc, ci, sent, recv = struct.unpack(F, m)
        local tail = string.sub(m, NB + 1)
        local now = 0
        if level >= 3 then
            local t = redis.call('TIME')
            now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        end
        local seq, created, since = num(n), lc, '0'
        if level >= 4 then
            created = (n > 0 and lc > now) and lc or now
            since = num(created - t0)
        end
        local id = seq
        if level >= 5 then
            local tag = string.format('%08x', tag_n)
            id = tag .. '-' .. seq .. '-' .. string.sub(redis.sha1hex(v[3] .. '-' .. tag .. '-' .. seq), 1, 16)
        end
        if stream then
            redis.call('XADD', keys[2], '*', 'event', 'reserved', 'rid', id, 'user', user, 'qty', '1')
        end
        local left = rem - 1
        local meta = struct.pack(F, layout, total, shards, limit, hold, start, end_, tag_n, n + 1, left, pend + 1,
            conf, rel, exp, buyers + 1, n + 1, hn, hd, t0, created, ci, sent, recv) .. tail
        redis.call('HSET', key, 'm', meta, seq, 'p1,' .. since .. ',0,,,0,' .. user, uf, seq .. ':1')
        if level >= 5 then return {RESERVED, id, left} end
        return {1, id, left}
    end
end

-- The library's wrapper (functions/seckill.lua entry), without its keys.
local function wrapped(body)
    return function(keys, args)
        local ok, res = pcall(body, keys, args)
        if ok then return res end
        return redis.error_reply(tostring(res))
    end
end

for level = 0, 5 do redis.register_function('floor_' .. level, rung(level, false)) end
redis.register_function('floor_6', wrapped(rung(5, false)))
redis.register_function('floor_6s', wrapped(rung(5, true)))
'''

# (label, what the row adds, the script it is compared with first, the row
# its step is measured from)
ROWS = (
    ('script A', 'SISMEMBER, GET, DECRBY, SADD, EXPIRE (EVALSHA)', None, None),
    ('empty script', 'EVALSHA of `return {1, ARGV[1], 0}`: the call alone', 'A', None),
    ('0 empty function', 'FCALL of a function returning `{1, user, 0}`', 'A', None),
    ('1 fields', 'HMGET of the sale, buyer and id-key fields; HSET of the counters, record and buyer', 'A',
     '0 empty function'),
    ('2 + packed field', 'the counters as the 23 packed doubles: struct.unpack, struct.pack', 'A', '1 fields'),
    ('3 + clock', "redis.call('TIME')", 'A', '2 + packed field'),
    ('4 + creation time', 'the creation time (ms since the sale began) formatted into the record', 'A',
     '3 + clock'),
    ('5 + id mac, status', "the id's mac (redis.sha1hex) and a RESERVED status reply", 'A', '4 + creation time'),
    ('6 + pcall wrapper', 'the pcall every library command runs in', 'A', '5 + id mac, status'),
    ('library RESERVE', 'functions/seckill.lua seckill_reserve', 'A', '6 + pcall wrapper'),
    ('script B', 'script A + XADD', 'A', None),
    ('6 + XADD', "the last step with the library's stream entry", 'B', '6 + pcall wrapper'),
    ('library RESERVE + STREAM', 'seckill_reserve on a sale with a STREAM', 'B', '6 + XADD'),
)


def floor_library():
    """The scratch library, with the packed field's format read from the
    library itself."""
    with open(LIBRARY) as f:
        src = f.read()
    fmt = re.search(r"^local META_FORMAT = '([^']+)'", src, re.M).group(1)
    size = re.search(r'^local META_BYTES = ([\d *]+)', src, re.M).group(1).strip()
    return FLOOR_LIB.replace('@FORMAT@', fmt).replace('@BYTES@', size)


def _bytes(c):
    """A connection to c's server that answers bytes (the packed field is not text)."""
    kw = c.connection_pool.connection_kwargs
    return redis.Redis(host=kw.get('host', 'localhost'), port=kw['port'])


def _runs(c):
    """label -> (commandstats name, the call of user number i)."""
    c.execute_command('FUNCTION', 'LOAD', 'REPLACE', floor_library())
    sha = {'A': c.script_load(SCRIPT_A), 'B': c.script_load(SCRIPT_B),
           'empty': c.script_load('return {1, ARGV[1], 0}')}
    c.set('{f}floor:stock', BIG)
    c.execute_command('FCALL', 'seckill_init', 1, '{f}floor:lib', BIG, 'LIMIT', 1)
    c.execute_command('FCALL', 'seckill_init', 2, '{f}floor:libs', '{f}floor:libs:ev', BIG, 'LIMIT', 1,
                      'STREAM', '{f}floor:libs:ev')
    # The rungs start from a sale's own settings and counters (and id key).
    c.execute_command('FCALL', 'seckill_init', 1, '{f}floor:ref', BIG, 'LIMIT', 1)
    meta, idk = c.hmget('{f}floor:ref', 'm', 'k')
    for name in ('1', '2', '3', '4', '5', '6', '6s'):
        c.hset('{f}floor:' + name, mapping={'m': '0' if name == '1' else meta, 'k': idk})

    def fcall(name, *keys):
        return 'fcall', lambda i: ('FCALL', name, len(keys), *keys, 'u%d' % i)

    return {
        'script A': ('evalsha', lambda i: ('EVALSHA', sha['A'], 2, '{f}floor:stock', '{f}floor:buyers', 'u%d' % i, 1)),
        'script B': ('evalsha', lambda i: ('EVALSHA', sha['B'], 3, '{f}floor:stock', '{f}floor:buyers', '{f}floor:events',
                                           'u%d' % i, 1, 'r%d' % i)),
        'empty script': ('evalsha', lambda i: ('EVALSHA', sha['empty'], 0, 'u%d' % i)),
        '0 empty function': fcall('floor_0', '{f}floor:0'),
        '1 fields': fcall('floor_1', '{f}floor:1'),
        '2 + packed field': fcall('floor_2', '{f}floor:2'),
        '3 + clock': fcall('floor_3', '{f}floor:3'),
        '4 + creation time': fcall('floor_4', '{f}floor:4'),
        '5 + id mac, status': fcall('floor_5', '{f}floor:5'),
        '6 + pcall wrapper': fcall('floor_6', '{f}floor:6'),
        '6 + XADD': fcall('floor_6s', '{f}floor:6s', '{f}floor:6s:ev'),
        'library RESERVE': fcall('seckill_reserve', '{f}floor:lib'),
        'library RESERVE + STREAM': fcall('seckill_reserve', '{f}floor:libs', '{f}floor:libs:ev'),
    }


def _stats(c, cmd):
    s = c.info('commandstats').get('cmdstat_' + cmd, {'usec': 0, 'calls': 0})
    return s['usec'], s['calls']


def _block(c, pid, cmd, make, first, count):
    """(server CPU us, INFO commandstats us) per call of make(first) ...
    make(first + count - 1), pipelined; the INFO calls fall outside the CPU
    reading."""
    u0, n0 = _stats(c, cmd)
    cpu = server_cpu_ns(pid)
    pipe = c.pipeline(transaction=False)
    for i in range(first, first + count):
        pipe.execute_command(*make(i))
    pipe.execute()
    cpu = server_cpu_ns(pid) - cpu
    u1, n1 = _stats(c, cmd)
    return cpu / count / 1000, (u1 - u0) / (n1 - n0)


def ladder(c, cycles, size):
    """{'cpu': {label: [server CPU us per call, one a cycle]}, 'usec': the
    same from INFO commandstats}."""
    c = _bytes(c)
    pid = c.info('server')['process_id']
    runs = _runs(c)
    names = [r[0] for r in ROWS]
    times = {'cpu': {n: [] for n in names}, 'usec': {n: [] for n in names}}
    user = 0
    for cycle in range(cycles):
        for n in names[cycle % len(names):] + names[:cycle % len(names)]:
            cmd, make = runs[n]
            cpu, usec = _block(c, pid, cmd, make, user, size)
            times['cpu'][n].append(cpu)
            times['usec'][n].append(usec)
            user += size
    for key in c.scan_iter('{f}floor:*'):
        c.delete(key)
    return times


def _q(values):
    """'median (q1–q3)'."""
    q1, _, q3 = statistics.quantiles(values, n=4)
    return '%.2f (%.2f–%.2f)' % (statistics.median(values), q1, q3)


def ladder_lines(times):
    cpu, usec = times['cpu'], times['usec']
    a, b = cpu['script A'], cpu['script B']
    lines = ['| step | adds | server CPU µs/call | adds µs | ÷ script A | script A ÷ it | ÷ script B |'
             ' commandstats µs/call, ÷ script A |',
             '|---|---|---:|---:|---:|---:|---:|---:|']
    for label, what, base, prev in ROWS:
        t = cpu[label]
        step = '%.2f' % statistics.median(x - y for x, y in zip(t, cpu[prev])) if prev else ''
        to_a = _q([x / y for x, y in zip(t, a)])
        speed = _q([y / x for x, y in zip(t, a)])
        to_b = _q([x / y for x, y in zip(t, b)]) if base == 'B' or label == 'script B' else ''
        wall = '%.2f, %.2f' % (statistics.median(usec[label]),
                               statistics.median(x / y for x, y in zip(usec[label], usec['script A'])))
        lines.append('| %s | %s | %.2f | %s | %s | %s | %s | %s |' % (label, what, statistics.median(t), step, to_a,
                                                                    speed, to_b, wall))
    return lines


# -- memory ----------------------------------------------------------------

def _used(c):
    return c.info('memory')['used_memory']


def _buckets(c, key):
    """Buckets of the key's hash table(s) (DEBUG HTSTATS-KEY; two while it
    rehashes); NaN for a key that has none (a module's, a listpack)."""
    try:
        out = text(c.execute_command('DEBUG', 'HTSTATS-KEY', key))
    except redis.ResponseError:
        return float('nan')
    return sum(int(n) for n in re.findall(r'table size: (\d+)', out)) or float('nan')


def _measure(c, count, key, make):
    """{used, usage, buckets} per reservation of what make() makes in `key`."""
    base = _used(c)
    make()
    used = _used(c) - base
    return {'used': used / count, 'usage': (c.memory_usage(key, samples=0) or 0) / count,
            'buckets': _buckets(c, key) * 8 / count}


def _raw(v):
    return v if isinstance(v, bytes) else v.encode()


def _copy(c, dst, count, pick):
    """HSETs into `dst` the pairs pick(batch) makes of each batch of the
    library sale's (field, value) pairs; {used, usage, buckets, field,
    value} per reservation (field and value: mean lengths)."""
    lens = [0, 0, 0]

    def copy():
        cursor = None
        while cursor != 0:
            cursor, batch = c.hscan('mem:lib', cursor or 0, count=10000)
            pairs = pick([(_raw(f), _raw(v)) for f, v in batch.items()])
            if pairs:
                c.hset(dst, mapping=dict(pairs))
            for f, v in pairs:
                lens[0] += len(f)
                lens[1] += len(v)
                lens[2] += 1
    out = _measure(c, count, dst, copy)
    assert c.hlen(dst) == count, (dst, c.hlen(dst))
    out['field'], out['value'] = lens[0] / lens[2], lens[1] / lens[2]   # (HSCAN may repeat a field)
    c.delete(dst)
    return out


def _one_field(c, batch):
    """(u:user, the record) of each buyer field of `batch`."""
    buyers = [(f, v.split(b':')[0]) for f, v in batch if f.startswith(b'u:')]
    records = c.hmget('mem:lib', [seq for _, seq in buyers]) if buyers else []
    return [(f, _raw(r)) for (f, _), r in zip(buyers, records)]


def memory(c, count, module):
    """Bytes per reservation at `count` reservations: the library, its
    split, script A, the module (when `module`)."""
    c = _bytes(c)
    c.flushall()
    out = {'count': count}
    c.execute_command('FCALL', 'seckill_init', 1, 'mem:lib', BIG, 'LIMIT', 1)
    out['library'] = _measure(c, count, 'mem:lib', lambda: fill(
        c, count, lambda n: ('FCALL', 'seckill_reserve', 1, 'mem:lib', 'u%d' % n)))
    info = c.execute_command('FCALL_RO', 'seckill_info', 1, 'mem:lib')
    info = {text(k): text(v) for k, v in zip(info[0::2], info[1::2])}
    assert int(info['reservations']) == count and info['invariant'] == 'ok', info
    out['fields'] = c.hlen('mem:lib')
    out['records'] = _copy(c, 'mem:rec', count, lambda b: [(f, v) for f, v in b if f.isdigit()])
    out['buyers'] = _copy(c, 'mem:buy', count, lambda b: [(f, v) for f, v in b if f.startswith(b'u:')])
    out['one'] = _copy(c, 'mem:one', count, lambda b: _one_field(c, b))
    c.flushall()
    sha = c.script_load(SCRIPT_A)
    c.set('mem:stock', BIG)
    out['script A'] = _measure(c, count, 'mem:buyers', lambda: fill(
        c, count, lambda n: ('EVALSHA', sha, 2, 'mem:stock', 'mem:buyers', 'u%d' % n, 1)))
    assert c.scard('mem:buyers') == count
    c.flushall()
    if module:
        c.execute_command('SECKILL.INIT', 'mem:mod', BIG, 'LIMIT', 1)
        out['module'] = _measure(c, count, 'mem:mod', lambda: fill(
            c, count, lambda n: ('SECKILL.RESERVE', 'mem:mod', 'u%d' % n)))
        c.flushall()
    return out


def memory_lines(mem):
    n = '{:,}'.format(mem['count'])
    lines = ['| %s reservations | used_memory delta, B per reservation | MEMORY USAGE | of which bucket array |'
             ' mean field / value bytes |' % n, '|---|---:|---:|---:|---:|']
    rows = [('module (SECKILL.RESERVE)', 'module', ''),
            ('library: the sale hash (%s fields)' % '{:,}'.format(mem['fields']), 'library', ''),
            ('… its record fields alone (seq → record)', 'records', 'x'),
            ('… its buyer fields alone (u:user → seq:qty)', 'buyers', 'x'),
            ('one field per reservation (u:user → record), for comparison', 'one', 'x'),
            ('script A: the buyers set', 'script A', '')]
    for label, k, lens in rows:
        if k not in mem:
            continue
        m = mem[k]
        lines.append('| %s | %.1f | %.1f | %s | %s |' % (
            label, m['used'], m['usage'], '' if m['buckets'] != m['buckets'] else '%.1f' % m['buckets'],
            '%.1f / %.1f' % (m['field'], m['value']) if lens else ''))
    return lines


def section(times, mem, args, load):
    """The REPORT.md section (a list of lines; lines[1] the heading)."""
    lines = ['', HEADING, '',
             'Written by `%s` on %s (redis-server %s, library %s; load average %s at the start, %s at the end; the'
             ' machine\'s two cores are shared, so the figures that matter are the ratios within a cycle).'
             % (args.command, time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), args.redis_version,
                args.library_version, load[0], load[1]), '',
             "Each step is a function of a scratch library that adds one piece of the library's RESERVE fast path"
             ' (`reserve_fast` in functions/seckill.lua) to the step before; the rows below the library add the'
             " stream. %d cycles; in each, a block of %s pipelined calls (a new user every call) runs on every row,"
             " the order shifted each cycle. Server CPU µs per call: the server main thread's CPU time over the"
             ' block (`/proc/<pid>/schedstat`: reading, running and answering the calls, not the time the shared'
             ' machine kept the thread waiting) ÷ calls; the last column, the `INFO commandstats` delta (`fcall`,'
             ' `evalsha`: the wall time inside the calls, waits included). Every figure is the median over the'
             ' cycles (quartiles in brackets); a ratio is taken within its cycle; "adds µs": the median per-cycle'
             ' difference to the step before.'
             % (args.cycles, '{:,}'.format(args.block)), '']
    lines += ladder_lines(times)
    a = times['cpu']['script A']

    def speed(label, base=a):
        return statistics.median(y / x for x, y in zip(times['cpu'][label], base))
    floor, lib = speed('6 + pcall wrapper'), speed('library RESERVE')
    floor_b, lib_b = (speed(k, times['cpu']['script B']) for k in ('6 + XADD', 'library RESERVE + STREAM'))
    lines += ['', "Reading it: the library's RESERVE runs at %.2f× script A's speed, and with a STREAM at %.2f× script"
              " B's. The contract's minimum in Lua, step 6 (two hash fields a reservation, the packed counters, a"
              ' clock read, an unguessable id, a status reply, the error wrapper), runs at %.2f× script A (%.2f×'
              ' script B with the stream entry), and step 1, the fields read and written and nothing else, at'
              ' %.2f×: %s' % (lib, lib_b, floor, floor_b, speed('1 fields'),
                              'so 0.8× script A is out of reach for a Lua function that keeps the contract.'
                              if floor < 0.8 else 'so 0.8× script A is within reach of a leaner function.')]
    if mem:
        rec, buy, one = mem['records'], mem['buyers'], mem['one']
        lines += ['', 'Memory, %s reservations on an empty server (users `u0` …, generated ids, no stream, LIMIT 1),'
                  ' made through a pipeline; then the library\'s hash copied, the same strings, into a hash of its'
                  ' record fields alone, one of its buyer fields alone, and one with a single field per reservation;'
                  ' bucket array: `DEBUG HTSTATS-KEY` table size × 8 B ÷ reservations.' % '{:,}'.format(mem['count']),
                  '']
        lines += memory_lines(mem)
        lines += ['', 'A hash field costs a dict entry, an allocation for its name and one for its value, and its'
                  ' share of the bucket array. The library keeps two fields a reservation: the record field %.1f B'
                  ' (%.1f B of it buckets) and the buyer field %.1f B (%.1f B buckets), %.1f B together against'
                  ' %.1f B in the sale, whose one table for both fields holds %.1f B of buckets a reservation. One'
                  ' field a reservation holding the record measures %.1f B, script A\'s set member %.1f B: %s'
                  % (rec['used'], rec['buckets'], buy['used'], buy['buckets'], rec['used'] + buy['used'],
                     mem['library']['used'], mem['library']['buckets'], one['used'], mem['script A']['used'],
                     'under the two-field layout 100 B a reservation is out of reach.'
                     if min(rec['used'], buy['used']) * 2 > 100 else 'two fields can fit in 100 B.')]
    lines += ['', 'Reproduce: `make bench-floor` (`.venv/bin/python bench/library_floor.py`; `--cycles`, `--block`,'
              ' `--count`).']
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--cycles', type=int, default=21)
    p.add_argument('--block', type=int, default=2000)
    p.add_argument('--count', type=int, default=1_000_000, help='reservations of the memory figures (0: none)')
    p.add_argument('--module', default=MODULE, help='loaded for the memory figures when it exists')
    p.add_argument('--server', default='redis-server')
    p.add_argument('--out', default=REPORT)
    p.add_argument('--no-write', action='store_true', help='print the section only')
    args = p.parse_args()
    args.command = ' '.join(['bench/library_floor.py'] + sys.argv[1:])
    load = ['%.1f' % os.getloadavg()[0]]
    module = os.path.exists(args.module)
    extra = ['--enable-debug-command', 'local'] + (['--loadmodule', os.path.abspath(args.module)] if module else [])
    with local_server(args.server, args=extra) as c:
        args.redis_version = c.info('server')['redis_version']
        args.library_version = text(c.execute_command('FCALL_RO', 'seckill_version', 1, 'seckill:probe'))
        times = ladder(c, args.cycles, args.block)
        print('\n'.join(ladder_lines(times)), flush=True)
        mem = memory(c, args.count, module) if args.count else None
    load.append('%.1f' % os.getloadavg()[0])
    lines = section(times, mem, args, load)
    print('\n'.join(lines))
    if not args.no_write:
        write_section(args.out, lines)
    return 0


if __name__ == '__main__':
    sys.exit(main())
