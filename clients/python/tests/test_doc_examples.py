"""The redis-cli sessions the docs tell users to type run as typed.

Every fenced block in README.md and docs/*.md whose first line is
`$ redis-cli -p 7379` is a session: lines `127.0.0.1:7379> COMMAND` are
what the user types, the lines after each are the reply redis-cli prints.
Each session is sent, line by line, to a real `redis-cli --no-raw` (the
same argument splitting and reply formatting as an interactive one) against
a fresh redis-server with the module, and its output must equal the page.
In a reply, `<...>` (for example `<entry id>`) stands for one value that
differs on every run.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
from typing import List, Tuple

import pytest

from seckill._servers import RedisServer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PAGES = [os.path.join(ROOT, 'README.md')] + sorted(glob.glob(os.path.join(ROOT, 'docs', '*.md')))
OPENING = '$ redis-cli -p 7379'
PROMPT = '127.0.0.1:7379> '
FENCE = re.compile(r'^```')


def sessions(path: str) -> List[Tuple[int, List[str]]]:
    """(line number, the block's lines after the opening) of each session in a page."""
    out, block, first = [], None, 0
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f.read().splitlines(), 1):
            if FENCE.match(line):
                if block is not None:
                    if block and block[0] == OPENING:
                        out.append((first + 1, block[1:]))
                    block = None
                else:
                    block, first = [], n
            elif block is not None:
                block.append(line)
    return out


def commands_and_replies(lines: List[str]) -> Tuple[List[str], List[str]]:
    commands, replies = [], []
    for line in lines:
        if line.startswith(PROMPT):
            commands.append(line[len(PROMPT):])
        elif not commands:
            raise AssertionError('a reply before the first command: %r' % line)
        else:
            replies.append(line)
    return commands, replies


def matches(expected: str, got: str) -> bool:
    parts = re.split(r'<[^<>]+>', expected)
    pattern = r'[^"\s]+'.join(re.escape(p) for p in parts)
    return re.fullmatch(pattern, got) is not None


CASES = [(os.path.relpath(p, ROOT), line, lines) for p in PAGES for line, lines in sessions(p)]


def test_the_pages_have_sessions():
    assert any(page == 'README.md' for page, _, _ in CASES), 'the README lost its redis-cli session'


@pytest.mark.parametrize('page,line,lines', CASES, ids=['%s:%d' % (p, n) for p, n, _ in CASES])
def test_session_runs_as_typed(module, page, line, lines):
    commands, expected = commands_and_replies(lines)
    server = RedisServer(module).start()
    try:
        out = subprocess.run(['redis-cli', '--no-raw', '-p', str(server.port)],
                             input='\n'.join(commands) + '\n', capture_output=True, text=True,
                             timeout=30)
    finally:
        server.stop()
    got = out.stdout.splitlines()
    where = '%s, the session at line %d' % (page, line)
    for i, (want, have) in enumerate(zip(expected, got)):
        assert matches(want, have), '%s, reply line %d: the page says %r, redis-cli printed %r' % (
            where, i + 1, want, have)
    assert len(got) == len(expected), '%s: the page shows %d reply lines, redis-cli printed %d:\n%s' % (
        where, len(expected), len(got), out.stdout)


@pytest.mark.parametrize('expected,got,ok', [
    ('1) "<entry id>"', '1) "1796186096533-0"', True),
    ('1) "<entry id>"', '1) "a b"', False),
    ('(integer) 99', '(integer) 98', False),
    ('OK', 'OK', True),
])
def test_placeholders_stand_for_one_value(expected, got, ok):
    assert matches(expected, got) is ok
