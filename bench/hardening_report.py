"""bench/hardening.py's report: bench/reports/HARDENING.md, a section per
label side by side, rendered from the raw figures kept in a JSON block at
the end of that same file (load_data reads them back)."""

import json
import os

DATA_MARK = '<!-- hardening-data'


def mb(b):
    return '%.1f MB' % (b / 1e6) if b is not None else '—'


def ms(v, digits=1):
    return ('%.*f ms' % (digits, v)) if v is not None else '—'


def get(d, *path):
    for p in path:
        if not isinstance(d, (dict, list)):
            return None
        try:
            d = d[p]
        except (KeyError, IndexError, TypeError):
            return None
    return d


def key_figures(res):
    """(scenario, figure, target, value) rows of the side-by-side table."""
    g, i, e, r, o = (res.get(s) for s in ('growth', 'idle-cpu', 'mass-expiry', 'reconcile', 'one-buyer'))
    rows = []

    def slow(w):
        if not w:
            return None
        return '%s (at %s–%s buyers%s)' % (ms(w['us'] / 1000), k(w['from']), k(w['to']), waited(w))
    rows.append(('growth', 'slowest command, master alone (SLOWLOG)', '≤ 20 ms', slow(get(g, 'alone', 'slowest'))))
    rows.append(('growth', 'redis-benchmark max latency, master alone', '', ms(get(g, 'alone', 'bench_max_ms'))))
    rows.append(('growth', 'slowest command, master with a replica', '≤ 20 ms', slow(get(g, 'replica', 'slowest'))))
    rows.append(('growth', 'slowest command on the replica (EFFECT)', '≤ 20 ms',
                 slow(get(g, 'replica', 'replica_slowest'))))
    for s in (get(i, 'sizes') or []):
        rows.append(('idle-cpu', 'server CPU idle, %s sales' % k(s['sales']), '≤ 5 %' if s['sales'] <= 20000 else '',
                     '%.1f %%' % s['cpu_pct']))
        rows.append(('idle-cpu', 'PING p99 / max meanwhile, %s sales' % k(s['sales']), '',
                     '%s / %s' % (ms(get(s, 'ping', 'p99_ms'), 2), ping_worst(s.get('ping')))))
    for v, label in (('live', 'live'), ('restart', 'after a restart from RDB')):
        x = get(e, v)
        if x:
            rows.append(('mass-expiry', 'worst PING, %s' % label, '≤ 50 ms', ping_worst(x.get('ping'))))
            rows.append(('mass-expiry', 'all %s released after (%s)' % (
                k(x['pending_saved'] if v == 'restart' else x['pending_after_load']),
                'first PONG' if v == 'restart' else 'first due'), '',
                ms(x.get('release_ms'), 0) if x.get('all_released') else 'not within the bound'))
    if r:
        rows.append(('reconcile', 'rows per call × calls', '', '%s × %d' % ('{:,}'.format(r['chunk']), r['calls'])))
        rows.append(('reconcile', 'total time / slowest call', '', '%.2f s / %.2f s' % (
            r['total_s'], r['slowest_call_s'] or 0)))
        rows.append(('reconcile', 'worst PING during the calls', '', ping_worst(r.get('ping'))))
        rows.append(('reconcile', 'used_memory_peak / final used_memory', '', '%s / %s' % (
            mb(r['used_memory_peak']), mb(r['used_memory_end']))))
    if o:
        first, last = o['chunks'][0], o['chunks'][-1]
        rows.append(('one-buyer', 'throughput, overall (first → last chunk)', '', '%s/s (%s → %s)' % (
            k(o['rps']), k(first['rps']), k(last['rps']))))
        per_call = ['%.0f µs' % x['usec_per_call'] if x.get('usec_per_call') is not None else '—'
                    for x in (first, last)]
        rows.append(('one-buyer', 'server µs per RESERVE, first → last run', '', ' → '.join(per_call)))
        rows.append(('one-buyer', 'slowest command (SLOWLOG)', '', ms(o['slowest_us'] / 1000, 2)
                     if o['slowest_us'] else '< 1 ms'))
    return rows


def waited(x, lead='; '):
    """The CPU wait of the server in the same window, as a note on noise."""
    w = x.get('waited_ms') if isinstance(x, dict) else None
    if w is None:
        return ''
    return '%sserver waited %.0f ms for a CPU in that window' % (lead, w)


def k(v):
    if v is None:
        return '—'
    v = float(v)
    if v >= 1e6:
        return '%.2fM' % (v / 1e6)
    if v >= 1e3:
        return '%.1fk' % (v / 1e3)
    return '%.0f' % v


def table(cols, rows):
    """A markdown table; a column name starting with '<' is left-aligned."""
    return (['| %s |' % ' | '.join(c.lstrip('<') for c in cols),
             '|%s|' % '|'.join('---' if c.startswith('<') else '---:' for c in cols)] +
            ['| %s |' % ' | '.join('' if x is None else str(x) for x in r) for r in rows] + [''])


def n(v):
    return '{:,}'.format(v)


def slow_ms(us, digits=1):
    return ms(us / 1000, digits) if us else '< 1 ms'


def ping_worst(p):
    """The worst PING, with the CPU waits of the server and the probe during it,
    and the worst PING less those waits (what the server itself stalled)."""
    if not p or not p.get('n'):
        return '—'
    if 'net_max_ms' not in p:
        return ms(p.get('max_ms'))
    return '%s (CPU waits in it: server %s, probe %s); less CPU waits: %s' % (
        ms(p['max_ms']), ms(p['max_server_wait_ms'], 0), ms(p['max_probe_wait_ms'], 0), ms(p['net_max_ms']))


def lat_ms(v):
    return ms(v, 0) if v else '< 10 ms'  # latency-monitor-threshold 10


def section(label, run):
    m, res, when, a = run['meta'], run['results'], run['when'], run['meta']['args']
    out = ['## %s' % label, '',
           '- module: `%s` (sha256 %s…, %s bytes, built %s)' % (m['module'], m['sha256'], n(m['size']), m['mtime']),
           '- code: %s' % m['commit'],
           '- last run %s, redis-server %s; each scenario below says when it ran, the load average then'
           ' and the module (sha256 prefix) it measured' % (m['date'], m['redis_version']),
           '- commands: %s' % ', '.join('`%s`' % x for x in m.get('commands', []))]
    out += ['- **%s failed** (%s); any figures of it below are from an earlier run' % (sc, why)
            for sc, why in sorted(run.get('failed', {}).items())] + ['']

    def head(name, text, note=''):
        return ['### %s (%s%s)' % (name, when.get(name, ''), note), '', text, '']
    g = res.get('growth')
    if g:
        out += head('growth',
                    '`SECKILL.INIT big 100000000 LIMIT 1000`, then `redis-benchmark -P 16 -c 50 -r 100000000 -n %s'
                ' SECKILL.RESERVE big user:<run>:__rand_int__` repeated (a new prefix per run) until the sale has'
                ' %s buyers; SLOWLOG read and reset after each run, so the slowest command is placed between two'
                    ' buyer counts.' % (n(a['growth_chunk']), n(a['growth_buyers'])), '; SLOWLOG threshold 1 ms')
        rows = []
        for phase, name in (('alone', 'master alone'), ('replica', 'master, replica attached')):
            p = g.get(phase)
            if not p:
                continue
            w = p['slowest']
            rows.append([name, n(p['buyers']), n(p['sent']), '%.0f s' % p['seconds'], ms(w['us'] / 1000),
                         '%s–%s' % (k(w['from']), k(w['to'])), ms(w.get('waited_ms'), 0), ms(p['bench_max_ms']),
                         lat_ms(p['latency_max_ms']), mb(p['used_memory'])])
            if phase == 'replica':
                rw = p['replica_slowest']
                rows.append(['the replica (applying `SECKILL.EFFECT`)', '', '', '', ms(rw['us'] / 1000),
                             '%s–%s' % (k(rw['from']), k(rw['to'])), ms(rw.get('waited_ms'), 0), '',
                             lat_ms(p['replica_latency_max_ms']), ''])
        out += table(['<', 'buyers reached', 'reservations', 'time', 'slowest command', '<at buyers',
                      'server waited for a CPU in that run', 'redis-benchmark max', 'LATENCY max', 'used_memory'], rows)
        out += ['Per run: the slowest command in ms, and in brackets how long the server waited for a CPU'
                ' during that run (a slow command in a run with a long wait is the machine, not the module).', '']
        alone, withrep = g['alone']['chunks'], (g.get('replica') or {}).get('chunks', [])

        def cell(us, w):
            return '%s (%s)' % (('%.0f' % (us / 1000)) if us else '<1', ('%.0f' % w) if w is not None else '?')
        rows = []
        for i in range(max(len(alone), len(withrep))):
            x = alone[i] if i < len(alone) else None
            y = withrep[i] if i < len(withrep) else None
            rows.append([k((x or y)['buyers']), cell(x['slow_us'], x.get('waited_ms')) if x else '',
                         cell(y['slow_us'], y.get('waited_ms')) if y else '',
                         cell(y['replica_slow_us'], y.get('replica_waited_ms')) if y else ''])
        out += table(['buyers after the run', 'master alone', 'master (replica attached)', 'its replica'], rows)
    i = res.get('idle-cpu')
    if i:
        out += head('idle-cpu',
                    'N sales `SECKILL.INIT s:{i} 10 HOLD 3600000` + one `SECKILL.RESERVE s:{i} u1` each (sent with'
                ' `redis-cli --pipe`), 1 s of rest, then the server\'s utime+stime over %d s of idleness'
                    ' (`/proc/<pid>/stat`), while one connection PINGs every 10 ms.' % a['idle_seconds'])
        out += table(['sales', 'server CPU', 'empty server', 'PING p50', 'p99', '<max', 'pings', 'sales tracked',
                      'used_memory', 'server waited for a CPU'],
                     [[n(x['sales']), '%.1f %%' % x['cpu_pct'], '%.1f %%' % x['baseline_pct'],
                       ms(x['ping'].get('p50_ms'), 2), ms(x['ping'].get('p99_ms'), 2), ping_worst(x['ping']),
                       x['ping']['n'], x['tracked'] if x['tracked'] is not None else '—', mb(x['used_memory']),
                       ms(x.get('waited_ms'), 0)]
                      for x in i['sizes']])
    e = res.get('mass-expiry')
    if e:
        out += head('mass-expiry',
                    '`SECKILL.INIT s:{x} 1000000 LIMIT 1 HOLD %d STREAM s:{x}:ev`, %s RESERVEs of distinct users'
                ' (`REQID r<i>`) through `redis-cli --pipe`; then one connection PINGs back to back (no pipeline)'
                ' until SECKILL.INFO shows no pending hold (polled every 20 ms, bounded by %d s).'
                ' Restart: the same, `SAVE`d while all are pending, the server killed, a new one started from'
                ' the RDB once every hold is due; the probe connects as soon as it listens.' % (
                        a['expiry_hold_ms'], n(a['expiry_holds']), a['expiry_wait']))
        rows = []
        for v in ('live', 'restart'):
            x = e.get(v)
            if not x:
                continue
            p = x['ping']
            after = ('%s after %s' % (ms(x['release_ms'], 0), 'the first PONG' if v == 'restart' else
                                      'the first hold fell due') if x.get('all_released') else 'not within the bound')
            ref = x.get('first_pong') if v == 'restart' else x['due_first_ms'] / 1000
            at = ('%+.0f ms' % ((p['max_at'] - ref) * 1000)) if p.get('max_at') and ref else '—'
            rows.append([v, '%.1f s' % x['load_s'], n(x.get('pending_saved', x['pending_after_load'])),
                         ping_worst(p), at, ms(p.get('p99_ms'), 2), p.get('over_50ms', 0), after, n(x['expired']),
                         slow_ms(x['slowlog_us']),
                         ms(x.get('waited_ms'), 0) + (' (since it started)' if v == 'restart' else '')])
        out += table(['<variant', 'load', 'pending', '<worst PING', 'sent at (from the first due / first PONG)',
                      'p99', 'PINGs > 50 ms', '<all released after',
                      'expired', 'SLOWLOG max', 'server waited for a CPU'], rows)
        x = e.get('restart')
        if x:
            out += ['Restart: SAVE %.2f s; the server accepted connections %.0f ms after it was started and'
                    ' answered PONG (loading done) after %.0f ms; the worst reply while loading (`-LOADING`) took %s.'
                    ' The worst PING above counts from the first PONG.' % (
                        x['save_s'], (x['connected'] - x['started']) * 1000,
                        ((x['first_pong'] or x['started']) - x['started']) * 1000,
                        ms(get(x, 'loading', 'max_ms')) if get(x, 'loading', 'n') else
                        'nothing (no `-LOADING` reply seen)'), '']
    r = res.get('reconcile')
    if r:
        out += head('reconcile',
                    '`SECKILL.INIT r:{r} 1000000 LIMIT 1 STREAM r:{r}:ev` on a master with `--appendonly yes` and one'
                ' replica; %s ledger rows `o<i> u<i> 1` unknown to the sale sent as `SECKILL.RECONCILE r:{r}'
                ' ORDERS n ... APPLY`, %s rows per call; another connection PINGs back to back meanwhile.'
                ' Call time is the client\'s (send to parsed reply; total: the sum over calls, without building'
                    ' the commands); SLOWLOG is the server\'s.' % (
                        n(r['rows']), n(r['chunk'])))
        out += table(['calls', 'total', 'slowest call', 'SLOWLOG max', '<worst PING', 'used_memory before',
                      'used_memory_peak', 'used_memory end', 'replica SLOWLOG max', 'replica peak / end',
                      'server waited for a CPU'],
                     [['%d × %s' % (r['calls'], n(r['chunk'])), '%.2f s' % r['total_s'],
                       '%.2f s' % (r['slowest_call_s'] or 0), slow_ms(r['slowlog_us']), ping_worst(r.get('ping')),
                       mb(r['used_memory_before']), mb(r['used_memory_peak']), mb(r['used_memory_end']),
                       slow_ms(r['replica_slowlog_us']), '%s / %s' % (mb(r['replica_peak']), mb(r['replica_used_end'])),
                       ms(r.get('waited_ms'), 0)]])
        out += ['Orders classified: %s; confirmed %s on the master, %s on the replica (caught up: %s);'
                ' invariant %s. `used_memory end` is read once the replica has caught up, 1 s after the last call;'
                ' then MEMORY USAGE is %s for the sale and %s for its stream.' % (
                    ', '.join('%s %s' % (kk[7:], n(v)) for kk, v in sorted(r['counts'].items())),
                    n(r['confirmed']), n(r['replica_confirmed'] or 0),
                    'yes' if r['replica_caught_up'] else 'no', r['invariant'], mb(r.get('sale_usage')),
                    mb(r.get('stream_usage')))]
        for f in r['refusals']:
            out.append('A call of %s rows was refused (`%s`); the script fell back to %s rows per call.' % (
                n(f['chunk']), f['error'], n(f['fallback'])))
        out.append('')
    o = res.get('one-buyer')
    if o:
        out += head('one-buyer',
                    '`SECKILL.INIT one 1000000000 LIMIT 100000000`, then `redis-benchmark -P 16 -c 50 -n %s'
                ' SECKILL.RESERVE one user:1` repeated: %s RESERVEs by one user in %.1f s, %s/s overall'
                ' (%.1f µs of server CPU per call on average, INFO commandstats); %s of them pending at the end.' % (
                    n(a['one_buyer_chunk']), n(o['n']), o['seconds'], k(o['rps']), o['usec_per_call'] or 0,
                        n(o['pending'])))
        out += table(['RESERVEs so far', 'ops/s', 'server µs per call (this run)', 'redis-benchmark max',
                      'slowest command', 'server waited for a CPU'],
                     [[n(ch['done']), '{:,.0f}'.format(ch['rps']),
                       ('%.0f' % ch['usec_per_call']) if ch.get('usec_per_call') is not None else '—',
                       ms(ch['max_ms']), slow_ms(ch['slow_us'], 2), ms(ch.get('waited_ms'), 0)]
                      for ch in o['chunks']])
    return out


HEADER = """# Hardening figures (issue 7)

Written by `make bench-hardening` (bench/hardening.py): stalls, idle CPU and
memory peaks of one module build, one section per label, so that builds sit
side by side. Each scenario starts its own redis-server(s) on free ports
(`--save ""` unless it needs an RDB), server pinned to CPU 0, the load
generators, the replica and the PING probe to CPU 1; the servers and the
probe run at nice -10 (`--nice`), each in a session (scheduler autogroup)
of its own niced alike, so that the other work on the machine preempts
them less.

**Noise.** The machine has 2 cores and other work (compiling, tests) ran
on them during these runs: throughputs and millisecond-scale latencies are
noisy and only comparable within a run. Stalls of hundreds of
milliseconds, CPU% of an idle server and memory peaks are still clearly
visible above that noise. To tell the two apart, each figure comes with
how long the server's main thread waited for a CPU while runnable in the
same window (`/proc/<pid>/schedstat`): a slow command in a window where the
server waited about as long is the machine, not the module.

Reproduce:

```sh
make bench-hardening MODULE=/path/to/libredis_seckill.so HARDENING_LABEL=before
make bench-hardening HARDENING_LABEL=after HARDENING_ARGS='--reconcile-chunk 1000'
.venv/bin/python bench/hardening.py --module PATH --label NAME [--only growth,idle-cpu,...]
```
"""


def render(data):
    labels = list(data['runs'])
    out = [HEADER, '## Side by side', '']
    table = {}
    order = []
    for label in labels:
        for sc, fig, target, value in key_figures(data['runs'][label]['results']):
            if (sc, fig) not in table:
                table[(sc, fig)] = {'target': target}
                order.append((sc, fig))
            table[(sc, fig)][label] = value
    out.append('| scenario | figure | target | %s |' % ' | '.join(labels))
    out.append('|---|---|---|%s' % ('---:|' * len(labels)))
    for sc, fig in order:
        row = table[(sc, fig)]
        out.append('| %s | %s | %s | %s |' % (sc, fig, row['target'],
                                              ' | '.join(str(row.get(lb) or '—') for lb in labels)))
    out.append('')
    for label in labels:
        out += section(label, data['runs'][label])
    out += [DATA_MARK, json.dumps(data, indent=1, sort_keys=True), '-->', '']
    return '\n'.join(out)


def load_data(path):
    if not os.path.exists(path):
        return {'runs': {}}
    text = open(path).read()
    at = text.find(DATA_MARK)
    if at < 0:
        return {'runs': {}}
    body = text[at + len(DATA_MARK):]
    body = body[:body.rfind('-->')]
    return json.loads(body)
