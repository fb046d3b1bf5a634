"""The contract table of docs/commands.md, read as data: the one list of
commands the tests hold the module, the library and the clients to
(test_contract.py), and that other tests take their command lists from."""

import os
import re
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, 'docs', 'commands.md')


@dataclass(frozen=True)
class Command:
    name: str               # 'seckill.reserve'
    arity: int
    keys: tuple             # ('key',), ('key', 'STREAM skey') or ()
    writes: bool
    deny_oom: bool
    categories: frozenset   # {'write', 'fast'}
    function: str           # 'seckill_reserve', or '' when the library has none

    @property
    def word(self):
        """'RESERVE': the name clients and adapters use."""
        return self.name.split('.', 1)[1].upper()


@dataclass(frozen=True)
class Function:
    name: str               # 'seckill_version'
    writes: bool


def _cells(line):
    return [c.strip() for c in line.strip().strip('|').split('|')]


def _tables(text):
    """Each Markdown table of the page as (header cells, rows of cells)."""
    tables, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith('|') and i + 1 < len(lines) and re.match(r'^\|(\s*-+\s*\|)+$', lines[i + 1]):
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith('|'):
                    break
                rows.append(_cells(row))
            tables.append((_cells(line), rows))
    return tables


def _table(header):
    with open(DOC, encoding='utf-8') as f:
        for head, rows in _tables(f.read()):
            if head == header:
                return rows
    raise AssertionError('docs/commands.md has no table with the columns %s' % header)


def _code(cell):
    m = re.match(r'^`([^`]*)`', cell)
    return m.group(1) if m else ''


def commands():
    """The commands of the contract table, in its order."""
    out = []
    for row in _table(['command', 'arity', 'keys', 'access', 'deny-oom', 'ACL categories', 'library', 'reply']):
        syntax, arity, keys, access, deny, cats, fn = row[:7]
        out.append(Command(
            name=_code(syntax).split()[0].lower(),
            arity=int(arity),
            keys=() if keys == 'none' else tuple(k.strip() for k in keys.split(',')),
            writes={'write': True, 'read': False}[access],
            deny_oom={'yes': True, 'no': False}[deny],
            categories=frozenset(cats.split()),
            function=_code(fn)))
    return out


def library_functions():
    """The library's functions of its own (the second table)."""
    return [Function(name=_code(row[0]), writes={'write': True, 'read': False}[row[2]])
            for row in _table(['function', 'keys', 'access', 'what it does'])]


def read_only_words():
    """The commands clients send to the library with FCALL_RO."""
    return {c.word for c in commands() if c.function and not c.writes}
