"""The contract table of docs/commands.md is what the server says and what
the clients send. On the module backend: COMMAND INFO's arity, flags
(write / readonly, denyoom), key positions and ACL categories, and COMMAND
DOCS, for every command of the table and no other. On the functions
backend: FUNCTION LIST's functions and flags (`no-writes` exactly where the
table says read, no `allow-oom`, which some managed services refuse). On
both: the read-only sets of the test adapter and of the Python, Go and
Java clients (read from their sources) are the table's."""

import os
import re

from RLTest import Env

import contract
from seckill_backend import COMMANDS, FUNCTIONS, READ_ONLY
from seckill_helpers import server_version

ROOT = contract.ROOT


def _env():
    env = Env(decodeResponses=True)
    env.skipOnCluster()
    c = env.getConnection()
    # redis-py's parser of COMMAND replies does not know module commands'
    # shape: take the raw reply.
    c.set_response_callback('COMMAND', lambda r, **kw: r)
    return env, c


def _has_category_api(c):
    name, version = server_version(c)
    return name == 'valkey' or version >= (7, 2, 0)


def _command_info(c, name):
    (info,) = c.execute_command('COMMAND', 'INFO', name)
    return info


def test_module_registration_is_the_table():
    env, c = _env()
    if FUNCTIONS:
        env.skip()
    table = {cmd.name: cmd for cmd in contract.commands()}
    registered = set(c.execute_command('COMMAND', 'LIST', 'FILTERBY', 'MODULE', 'seckill'))
    env.assertEqual(registered, set(table))
    categories_api = _has_category_api(c)
    for name, cmd in table.items():
        info = _command_info(c, name)
        env.assertEqual(info[0], name)
        env.assertEqual(info[1], cmd.arity, message=name)
        flags = set(info[2])
        env.assertEqual('write' in flags, cmd.writes, message=name)
        env.assertEqual('readonly' in flags, not cmd.writes, message=name)
        env.assertEqual('denyoom' in flags, cmd.deny_oom, message=name)
        env.assertEqual('movablekeys' in flags, len(cmd.keys) > 1, message=name)
        env.assertEqual(tuple(info[3:6]), (1, 1, 1) if cmd.keys else (0, 0, 0), message=name)
        categories = {cat.lstrip('@') for cat in info[6]}
        env.assertEqual(categories, set(cmd.categories) if categories_api else set(), message=name)
    docs = c.execute_command('COMMAND', 'DOCS', *table)
    documented = {docs[i]: dict(zip(docs[i + 1][0::2], docs[i + 1][1::2])) for i in range(0, len(docs), 2)}
    env.assertEqual(set(documented), set(table))
    for name, doc in documented.items():
        env.assertTrue(doc.get('summary'), message=name)


def test_stream_key_is_a_declared_key_of_init():
    """The table's second key of INIT (STREAM skey) is what COMMAND GETKEYS finds."""
    env, c = _env()
    if FUNCTIONS:
        env.skip()
    env.assertEqual(c.execute_command('COMMAND', 'GETKEYS', 'SECKILL.INIT', 'sale:{1}', 5, 'STREAM', 'ev:{1}'),
                    ['sale:{1}', 'ev:{1}'])
    env.assertEqual(c.execute_command('COMMAND', 'GETKEYS', 'SECKILL.RESERVE', 'sale:{1}', 'u1'), ['sale:{1}'])


def _library(c):
    (lib,) = c.execute_command('FUNCTION', 'LIST', 'LIBRARYNAME', 'seckill')
    lib = dict(zip(lib[0::2], lib[1::2]))
    out = {}
    for fn in lib['functions']:
        fn = dict(zip(fn[0::2], fn[1::2]))
        out[fn['name']] = set(fn['flags'])
    return out


def test_library_registration_is_the_table():
    env, c = _env()
    if not FUNCTIONS:
        env.skip()
    want = {cmd.function: cmd.writes for cmd in contract.commands() if cmd.function}
    want.update({fn.name: fn.writes for fn in contract.library_functions()})
    got = _library(c)
    env.assertEqual(set(got), set(want))
    for name, writes in want.items():
        flags = got.get(name, set())
        env.assertEqual('no-writes' in flags, not writes, message=name)
        env.assertFalse('allow-oom' in flags, message=name)


def _source(*path):
    with open(os.path.join(ROOT, *path), encoding='utf-8') as f:
        return f.read()


def _words(pattern, text):
    m = re.search(pattern, text, re.S)
    assert m, 'no match for %r' % pattern
    return {a or b for a, b in re.findall(r'"([A-Z]+)"|\'([A-Z]+)\'', m.group(1))}


def test_clients_read_only_sets_are_the_table():
    env = Env(decodeResponses=True)
    want = contract.read_only_words()
    env.assertEqual(set(READ_ONLY), want)
    env.assertEqual(set(COMMANDS), {cmd.word for cmd in contract.commands() if cmd.function})
    env.assertEqual(_words(r'READ_ONLY = frozenset\(\{(.*?)\}\)', _source('clients', 'python', 'seckill', 'backend.py')),
                    want)
    env.assertEqual(_words(r'var readOnly = map\[string\]bool\{(.*?)\}\n', _source('clients', 'go', 'args.go')), want)
    env.assertEqual(_words(r'READ_ONLY = Set\.of\((.*?)\);',
                           _source('clients', 'java', 'src', 'main', 'java', 'io', 'seckill', 'Backend.java')), want)
