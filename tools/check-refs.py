#!/usr/bin/env python3
"""Every file the repository names is in it: the relative links of the
Markdown files, and the repository paths (`src/...`, `docs/...`,
`tests/...`, ...) that docs, code and comments cite. Prints each dangling
reference as FILE:LINE: PATH and exits 1 if there is one (part of
`make lint`).

    python3 tools/check-refs.py

Paths are those of `git ls-files` plus the folders they are in, so a file
not yet added fails until it is. A path with a placeholder (`<key>`, `*`,
`...`, `$VAR`, `{...}`) or one that a command creates (reports, logs,
build output) is not a reference to a file of the repository and is left
out.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The top folders whose paths are checked wherever they are cited.
TOPS = ('src', 'docs', 'tests', 'clients', 'functions', 'bench', 'tools', 'mk', 'fuzz', 'contrib', '.ci')
CITED = re.compile(r'(?<![\w./-])((?:%s)/[\w./-]*[\w/])' % '|'.join(re.escape(t) for t in TOPS))
LINK = re.compile(r'\]\(([^)\s#]+)(?:#[^)]*)?\)')
# What a build, a run or a test writes: cited, never committed.
MADE = re.compile(r'(^|/)(target|logs|node_modules|__pycache__|\.venv|build|dist|demo-out)(/|$)'
                  r'|^bench/out/|^bench/reports/.+\.(md|svg|json|txt)$|^bench/loadgen/loadgen$|\.(so|log|rdb|aof|pyc)$')
# Files whose paths are those of another tree (the Redis source tree that
# tools/redis-suite.sh runs the server's own suite from).
FOREIGN = {'tools/redis-suite.sh'}
SCANNED = re.compile(r'\.(md|rs|py|lua|go|java|js|sh|mk|toml|conf|example|txt|yml|yaml)$|(^|/)(Makefile|run|Dockerfile)$')


def tracked():
    out = subprocess.run(['git', 'ls-files'], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    files = set(out.split())
    dirs = {os.path.dirname(f) for f in files}
    while '' in dirs:
        dirs.discard('')
    for d in list(dirs):
        while d:
            dirs.add(d)
            d = os.path.dirname(d)
    return files, dirs


def exists(path, files, dirs, cited_in):
    """Whether path is in the repository, from its root or from a folder
    the citing file is in (clients/python's docs cite `tests/...` of
    clients/python)."""
    base = os.path.dirname(cited_in)
    while True:
        full = os.path.normpath(os.path.join(base, path))
        if full in files or full in dirs:
            return True
        if not base:
            return False
        base = os.path.dirname(base)


CD = re.compile(r'\bcd ([\w./-]+)')


def references(rel, text):
    """(line, path, folders it may be relative to) for each reference in
    one file: a Markdown link is relative to the file's folder; a cited
    path to the root, or to the folder a `cd DIR` on its line or the two
    before it moved to (a command shown as typed)."""
    base = os.path.dirname(rel)
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if rel.endswith('.md'):
            for target in LINK.findall(line):
                if re.match(r'^[a-z]+:', target) or target.startswith('/'):
                    continue            # a URL, or an absolute path on the reader's machine
                yield n, os.path.normpath(os.path.join(base, target)), ()
        cds = tuple(CD.findall(' '.join(lines[max(0, n - 3):n])))
        for path in CITED.findall(line):
            yield n, path.rstrip('.'), cds


def placeholder(path):
    """A pattern or a name made up for an example, not a file."""
    return bool(re.search(r'[<>*{}$]|\.\.\.|XXX|NAME|PATH|/\d+$', path))


def main():
    files, dirs = tracked()
    bad = []
    for rel in sorted(files):
        if not SCANNED.search(rel) or rel.startswith(os.path.join('fuzz', 'corpus')):
            continue
        try:
            with open(os.path.join(ROOT, rel), encoding='utf-8') as f:
                text = f.read()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        if rel in FOREIGN:
            continue
        for n, path, cds in references(rel, text):
            if placeholder(path) or MADE.search(path) or exists(path, files, dirs, rel) \
                    or any(exists(os.path.join(d, path), files, dirs, '') for d in cds):
                continue
            bad.append('%s:%d: %s' % (rel, n, path))
    for line in bad:
        print(line)
    print('check-refs: %d file(s) scanned, %d dangling reference(s)' % (
        sum(1 for f in files if SCANNED.search(f)), len(bad)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
