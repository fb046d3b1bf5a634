"""The redis-cli sessions the docs tell users to type run as typed.

Every fenced block in README.md and docs/*.md whose first line opens a
redis-cli session is one; the opening names the server it runs against:

- `$ redis-cli -p 7379`: redis-server with the module (what `make start`
  serves on port 7379);
- `$ redis-cli -p 7380`: redis-server without the module, with the Functions
  library loaded by the command docs/managed-redis.md gives for port 7380
  (LOAD_LIBRARY, run from the repository's root with the server's port).

In a session, lines `127.0.0.1:PORT> COMMAND` are what the user types, the
lines after each are the reply redis-cli prints. Each session is sent, line
by line, to a real `redis-cli --no-raw` (the same argument splitting and
reply formatting as an interactive one) against a fresh server of its kind,
and its output must equal the page. In a reply, `<...>` (for example
`<entry id>`) stands for one value that differs on every run.

A fenced block that shows a redis-cli prompt (`127.0.0.1:PORT>`, or a bare
`> COMMAND`) without one of these openings fails `test_every_prompt_block_
is_a_session`: a page cannot show typed commands that no test runs.
Syntax summaries (a command's arguments, no prompt) are not sessions.

docs/split-sales.md's Python example runs as pasted against a three-master
cluster with the module (conftest's `cluster`, in place of `make cluster`'s
port 7000), twice, and prints what the page shows after it.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
from typing import Dict, List, Tuple

import pytest

from seckill.testing import RedisServer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PAGES = [os.path.join(ROOT, 'README.md')] + sorted(glob.glob(os.path.join(ROOT, 'docs', '*.md')))
# How docs/managed-redis.md loads the library into its server on 7380.
LOAD_LIBRARY = 'redis-cli -p 7380 -x FUNCTION LOAD REPLACE < functions/seckill.lua'
# The opening line of a session -> (port in its prompt, the server it runs against).
OPENINGS: Dict[str, Tuple[int, str]] = {
    '$ redis-cli -p 7379': (7379, 'module'),
    '$ redis-cli -p 7380': (7380, 'functions'),
}
FENCE = re.compile(r'^```')
# A line a user would type at redis-cli: its prompt, or the bare `> ` some
# pages used to write.
PROMPT_LINE = re.compile(r'^(127\.0\.0\.1:\d+> |> [A-Z])')


def blocks(path: str) -> List[Tuple[int, List[str]]]:
    """(line number of the opening fence, the lines inside) of each fenced block."""
    out, block, first = [], None, 0
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f.read().splitlines(), 1):
            if FENCE.match(line):
                if block is not None:
                    out.append((first, block))
                    block = None
                else:
                    block, first = [], n
            elif block is not None:
                block.append(line)
    return out


def sessions(path: str) -> List[Tuple[int, str, List[str]]]:
    """(line number of the opening, its opening, the block's lines after it)
    of each session in a page."""
    return [(n + 1, b[0], b[1:]) for n, b in blocks(path) if b and b[0] in OPENINGS]


def commands_and_replies(lines: List[str], prompt: str = '127.0.0.1:7379> ') -> Tuple[List[str], List[str]]:
    commands, replies = [], []
    for line in lines:
        if line.startswith(prompt):
            commands.append(line[len(prompt):])
        elif PROMPT_LINE.match(line):
            raise AssertionError('a prompt that is not the session\'s %r: %r' % (prompt, line))
        elif not commands:
            raise AssertionError('a reply before the first command: %r' % line)
        else:
            replies.append(line)
    return commands, replies


def matches(expected: str, got: str) -> bool:
    parts = re.split(r'<[^<>]+>', expected)
    pattern = r'[^"\s]+'.join(re.escape(p) for p in parts)
    return re.fullmatch(pattern, got) is not None


CASES = [(os.path.relpath(p, ROOT), line, opening, lines)
         for p in PAGES for line, opening, lines in sessions(p)]


def test_the_pages_have_sessions():
    assert any(page == 'README.md' for page, _, _, _ in CASES), 'the README lost its redis-cli session'
    assert any(page == 'docs/managed-redis.md' and OPENINGS[o][1] == 'functions'
               for page, _, o, _ in CASES), 'docs/managed-redis.md lost its library session'


def test_the_library_page_loads_as_the_test_does():
    with open(os.path.join(ROOT, 'docs', 'managed-redis.md'), encoding='utf-8') as f:
        assert LOAD_LIBRARY in f.read().splitlines(), 'docs/managed-redis.md no longer says %r' % (
            LOAD_LIBRARY)


def test_every_prompt_block_is_a_session():
    """A block that shows redis-cli prompts is a session the test runs."""
    untested = ['%s:%d' % (os.path.relpath(p, ROOT), n) for p in PAGES for n, b in blocks(p)
                if not (b and b[0] in OPENINGS) and any(PROMPT_LINE.match(x) for x in b)]
    assert not untested, ('blocks with redis-cli prompts that are not sessions (open them with '
                          'one of %s): %s' % (sorted(OPENINGS), untested))


def start_server(kind: str, module: str) -> RedisServer:
    """A fresh server of the session's kind: the module, or the library
    loaded the way docs/managed-redis.md says (no module)."""
    if kind == 'module':
        return RedisServer(module).start()
    server = RedisServer(load_module=False).start()
    try:
        out = subprocess.run(LOAD_LIBRARY.replace('7380', str(server.port)), shell=True, cwd=ROOT,
                             capture_output=True, text=True, timeout=30)
        assert out.stdout == 'seckill\n', 'FUNCTION LOAD answered %r %r' % (out.stdout, out.stderr)
    except BaseException:
        server.stop()
        raise
    return server


@pytest.mark.parametrize('page,line,opening,lines', CASES,
                         ids=['%s:%d' % (p, n) for p, n, _, _ in CASES])
def test_session_runs_as_typed(module, page, line, opening, lines):
    port, kind = OPENINGS[opening]
    commands, expected = commands_and_replies(lines, '127.0.0.1:%d> ' % port)
    server = start_server(kind, module)
    try:
        out = subprocess.run(['redis-cli', '--no-raw', '-p', str(server.port)],
                             input='\n'.join(commands) + '\n', capture_output=True, text=True,
                             timeout=30)
    finally:
        server.stop()
    got = out.stdout.splitlines()
    where = '%s, the session at line %d (%s)' % (page, line, kind)
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


def test_a_prompt_of_another_port_is_refused():
    with pytest.raises(AssertionError, match='not the session'):
        commands_and_replies(['127.0.0.1:7379> PING', 'PONG'], '127.0.0.1:7380> ')


SPLIT_PAGE = os.path.join(ROOT, 'docs', 'split-sales.md')


def python_example(path: str) -> Tuple[str, List[str]]:
    """The page's one Python block, and the output the `$ python ...` block
    after it shows."""
    found = blocks(path)
    with open(path, encoding='utf-8') as f:
        fences = [line for line in f.read().splitlines() if FENCE.match(line)]
    langs = fences[0::2]
    py = [i for i, lang in enumerate(langs) if lang == '```python']
    assert len(py) == 1, '%s: one ```python block expected, found %d' % (path, len(py))
    i = py[0]
    out = found[i + 1][1] if i + 1 < len(found) else []
    assert out and out[0].startswith('$ python '), (
        '%s: the Python block is not followed by a `$ python FILE` block of its output' % path)
    return '\n'.join(found[i][1]) + '\n', out[1:]


def test_split_sales_python_runs_as_pasted(cluster):
    code, expected = python_example(SPLIT_PAGE)
    assert code.count('port=7000') == 1, 'the example connects to make cluster\'s port 7000'
    code = code.replace('port=7000', 'port=%d' % cluster.masters[0].port)
    for run in (1, 2):      # replace=True: the same output on every run
        out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, 'docs/split-sales.md example, run %d:\n%s' % (run, out.stderr)
        assert out.stdout.splitlines() == expected, (
            'docs/split-sales.md example, run %d: the page shows %r, it printed %r'
            % (run, expected, out.stdout.splitlines()))
