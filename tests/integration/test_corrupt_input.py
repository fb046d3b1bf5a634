"""Corrupt input never crashes the server: hundreds of mutated DUMP payloads
(with a valid CRC-64, so the module's loader really sees them) and mutated
AOF-rewrite commands are each refused, or load into a sale that satisfies the
invariant and answers every command."""

import os
import random
import time

from RLTest import Env

from seckill_helpers import aof_files

PAYLOADS = 400
AOF_MUTANTS = 150


def _crc64_table():
    poly = 0x95AC9329AC4BC9B5  # CRC-64/Jones, reflected: Redis's DUMP checksum
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
        table.append(crc)
    return table


CRC_TABLE = _crc64_table()


def crc64(data):
    crc = 0
    for b in data:
        crc = CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def rdb_len(n):
    if n < 64:
        return bytes([n])
    if n < 16384:
        return bytes([0x40 | (n >> 8), n & 0xFF])
    return bytes([0x80]) + n.to_bytes(4, 'big')


def read_rdb_len(buf, pos):
    first = buf[pos]
    kind = first >> 6
    if kind == 0:
        return first & 0x3F, pos + 1
    if kind == 1:
        return ((first & 0x3F) << 8) | buf[pos + 1], pos + 2
    if first == 0x80:
        return int.from_bytes(buf[pos + 1:pos + 5], 'big'), pos + 5
    raise AssertionError('unexpected length encoding %#x' % first)


def split_dump(dump):
    """DUMP = type, module id, STRING opcode, string, EOF opcode, version(2), crc(8)."""
    body, version, crc = dump[:-10], dump[-10:-8], dump[-8:]
    assert crc64(body + version) == int.from_bytes(crc, 'little'), 'CRC-64 implementation is wrong'
    assert body[0] == 7, 'not a module value (RDB_TYPE_MODULE_2)'
    header_end = 1 + 9  # 64-bit module id: 0x81 + 8 bytes
    assert body[1] == 0x81
    assert body[header_end] == 5, 'module string opcode'
    length, start = read_rdb_len(body, header_end + 1)
    encoded = body[start:start + length]
    assert body[start + length:] == b'\x00', 'module EOF opcode'
    return body[:header_end], encoded, version


def build_dump(header, encoded, version):
    body = header + b'\x05' + rdb_len(len(encoded)) + encoded + b'\x00'
    return body + version + crc64(body + version).to_bytes(8, 'little')


def mutate(rng, buf):
    buf = bytearray(buf)
    kind = rng.randrange(4)
    if kind == 0 and len(buf) > 1:
        del buf[rng.randrange(1, len(buf)):]
    elif kind == 1:
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
    elif kind == 2:
        i = rng.randrange(len(buf) + 1)
        buf[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
    else:
        i = rng.randrange(len(buf))
        buf[i] = rng.choice([0, 1, 0x7F, 0x80, 0xFF])
    return bytes(buf)


def _exercise(env, conn, key):
    """A sale that loaded must hold the invariant and answer every command."""
    info = conn.execute_command('SECKILL.INFO', key)
    fields = dict(zip(info[0::2], info[1::2]))
    env.assertEqual(fields[b'invariant'], b'ok')
    env.assertEqual(int(fields[b'remaining']) + int(fields[b'pending']) + int(fields[b'confirmed']),
                    int(fields[b'total']))
    for cmd in (['SECKILL.RESERVE', key, 'fuzz-user'], ['SECKILL.RELEASE', key, 'r1'],
                ['SECKILL.CONFIRM', key, 'r2'], ['SECKILL.GET', key, 'r1'],
                ['SECKILL.RECONCILE', key, 'EXPIRE', 'ORDERS', 1, 'r3', 'u3', 1, 'APPLY'],
                ['DEBUG', 'DIGEST-VALUE', key], ['DUMP', key], ['MEMORY', 'USAGE', key]):
        try:
            conn.execute_command(*cmd)
        except Exception as e:  # an error reply is fine, a dead server is not
            env.assertFalse('Connection' in type(e).__name__, message=str(e))
    info = conn.execute_command('SECKILL.INFO', key)
    env.assertEqual(dict(zip(info[0::2], info[1::2]))[b'invariant'], b'ok')


def _source_sale(conn, key):
    conn.execute_command('SECKILL.INIT', key, 40, 'SHARDS', 3, 'LIMIT', 3, 'HOLD', 60000,
                         'STREAM', key + ':ev', 'MAXLEN', 10)
    for i in range(12):
        conn.execute_command('SECKILL.RESERVE', key, 'u%d' % i, 'QTY', 1 + i % 3, 'REQID', 'r%d' % i)
    conn.execute_command('SECKILL.CONFIRM', key, 'r2')
    conn.execute_command('SECKILL.RELEASE', key, 'r1')


def test_corrupt_dump_payloads_never_crash():
    env = Env()
    conn = env.getConnection()
    conn.execute_command('CONFIG', 'SET', 'rdbcompression', 'no')
    _source_sale(conn, 'src:{p}')
    header, encoded, version = split_dump(conn.execute_command('DUMP', 'src:{p}'))
    # The rebuilt, unmutated payload must load: the framing is right.
    env.assertTrue(conn.execute_command('RESTORE', 'copy:{p}', 0, build_dump(header, encoded, version)) in (True, b'OK'))
    env.assertEqual(conn.execute_command('DEBUG', 'DIGEST-VALUE', 'copy:{p}'),
                    conn.execute_command('DEBUG', 'DIGEST-VALUE', 'src:{p}'))
    rng = random.Random(int(os.environ.get('SECKILL_FUZZ_SEED', '7')))
    loaded = refused = 0
    for n in range(PAYLOADS):
        key = 'm%d:{p}' % n
        payload = build_dump(header, mutate(rng, encoded), version)
        try:
            conn.execute_command('RESTORE', key, 0, payload)
        except Exception as e:
            env.assertContains('bad data format', str(e).lower())  # the module's loader refused it
            refused += 1
            continue
        loaded += 1
        _exercise(env, conn, key)
    env.assertTrue(conn.ping())
    env.assertEqual(loaded + refused, PAYLOADS)
    env.assertGreater(refused, PAYLOADS // 2)
    env.debugPrint('DUMP payloads: %d loaded, %d refused' % (loaded, refused), force=True)


def _parse_resp_commands(data):
    """The commands of an AOF file (RESP arrays of bulk strings)."""
    cmds, pos = [], 0
    while pos < len(data):
        assert data[pos:pos + 1] == b'*'
        end = data.index(b'\r\n', pos)
        argc, pos = int(data[pos + 1:end]), end + 2
        args = []
        for _ in range(argc):
            end = data.index(b'\r\n', pos)
            n = int(data[pos + 1:end])
            pos = end + 2
            args.append(data[pos:pos + n])
            pos += n + 2
        cmds.append(args)
    return cmds


def _rewrite_commands(env, conn):
    conn.execute_command('CONFIG', 'SET', 'aof-use-rdb-preamble', 'no')
    conn.execute_command('CONFIG', 'SET', 'appendonly', 'yes')  # starts a rewrite
    time.sleep(0.1)
    for _ in range(200):
        info = conn.info('persistence')
        if info['aof_rewrite_in_progress'] == 0 and info['aof_rewrite_scheduled'] == 0:
            break
        time.sleep(0.05)
    base = aof_files(conn, 'b')
    env.assertEqual(len(base), 1)
    with open(base[0], 'rb') as f:
        return [c for c in _parse_resp_commands(f.read()) if c[0].upper() == b'SECKILL.EFFECT']


def _mutate_args(rng, args):
    args = list(args)
    kind = rng.randrange(4)
    i = rng.randrange(2, len(args))
    if kind == 0:
        del args[rng.randrange(3, len(args)) if len(args) > 3 else i:]
    elif kind == 1:
        args[i] = mutate(rng, args[i]) if args[i] else b'x'
    elif kind == 2:
        args.insert(i, rng.choice([b'0', b'1', b'18446744073709551616', b'-1', b'x' * 300, b'']))
    else:
        args[i] = rng.choice([b'0', b'1', b'3', b'1023', b'99999999999999999'])
    return args


def test_corrupt_aof_rewrite_commands_never_crash():
    # The mutants are replayed through a client, which the module allows
    # only when told to.
    env = Env(moduleArgs='ALLOW-CLIENT-EFFECTS yes')
    conn = env.getConnection()
    _source_sale(conn, 'src:{a}')
    commands = _rewrite_commands(env, conn)
    env.assertGreaterEqual(len(commands), 2)
    rng = random.Random(int(os.environ.get('SECKILL_FUZZ_SEED', '7')))
    applied = refused = 0
    for n in range(AOF_MUTANTS):
        key = b'aofm%d:{a}' % n
        victim = rng.randrange(len(commands))
        for j, cmd in enumerate(commands):
            args = [cmd[0], key] + cmd[2:]
            if j == victim:
                args = _mutate_args(rng, args)
            try:
                conn.execute_command(*args)
                applied += 1
            except Exception as e:
                env.assertFalse('Connection' in type(e).__name__, message=str(e))
                refused += 1
        if conn.exists(key):
            _exercise(env, conn, key)
    env.assertTrue(conn.ping())
    env.assertGreater(refused, 0)
    env.debugPrint('AOF rewrite mutants: %d commands applied, %d refused' % (applied, refused), force=True)


def _varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(buf, pos):
    n = shift = 0
    while True:
        b = buf[pos]
        n |= (b & 0x7F) << shift
        pos += 1
        shift += 7
        if not b & 0x80:
            return n, pos


MAX_TIME_MS = 253402300799999  # docs/commands.md: times up to year 9999


def test_restore_with_a_record_time_past_the_bound_is_refused():
    """A crafted payload whose one record was created near 2^64 is refused
    and creates nothing; at the bound it loads and RESERVE still answers."""
    env = Env()
    conn = env.getConnection()
    conn.execute_command('CONFIG', 'SET', 'rdbcompression', 'no')
    conn.execute_command('SECKILL.INIT', 'src:{t}', 10)
    conn.execute_command('SECKILL.RESERVE', 'src:{t}', 'u0', 'REQID', 'r0')
    header, encoded, version = split_dump(conn.execute_command('DUMP', 'src:{t}'))
    # The record: id, user, qty, state, created, deadline (commands.md's v5).
    at = encoded.index(b'\x02r0\x02u0') + 6
    _, pos = _read_varint(encoded, at)  # qty
    _, pos = _read_varint(encoded, pos)  # state
    created, end = _read_varint(encoded, pos)
    env.assertGreater(created, 10 ** 12)

    def with_created(ms):
        return build_dump(header, encoded[:pos] + _varint(ms) + encoded[end:], version)

    for ms in (2 ** 64 - 2, 2 ** 64 - 1, MAX_TIME_MS + 1):
        with env.assertResponseError(contained='Bad data format'):
            conn.execute_command('RESTORE', 'bad:{t}', 0, with_created(ms))
        env.assertEqual(conn.exists('bad:{t}'), 0)
    env.assertTrue(conn.execute_command('RESTORE', 'edge:{t}', 0, with_created(MAX_TIME_MS)) in (True, b'OK'))
    env.assertEqual(conn.execute_command('SECKILL.RESERVE', 'edge:{t}', 'u1')[0], b'RESERVED')
