#!/usr/bin/env python3
"""One version number everywhere: the crate (Cargo.toml), MODULE LIST's `ver`
(src/module/registration.rs, major*10000+minor*100+patch), the Functions
library (functions/seckill.lua), the Python package (pyproject.toml and
seckill.__version__) and CHANGELOG.md's newest entry must agree.

`make lint` runs it; `--root DIR` checks another checkout. Prints each place
and its version; exits 1 naming the ones that differ from Cargo.toml."""

import argparse
import os
import re
import sys

# (file, pattern whose group 1 is the version) in the order they are printed.
PLACES = [
    ('Cargo.toml', r'^\[package\][^\[]*?^version\s*=\s*"([^"]+)"'),
    ('src/module/registration.rs', r'redis_module!\s*\{[^}]*?\bversion:\s*([0-9_]+)\s*,'),
    ('functions/seckill.lua', r"^local\s+VERSION\s*=\s*'([^']+)'"),
    ('clients/python/pyproject.toml', r'^\[project\][^\[]*?^version\s*=\s*"([^"]+)"'),
    ('clients/python/seckill/__init__.py', r"^__version__\s*=\s*'([^']+)'"),
    ('CHANGELOG.md', r'^## \[?([0-9][0-9A-Za-z.+-]*)\]?'),
]


def module_ver(version):
    """'1.2.0' -> 10200, as RedisJSON and RediSearch encode MODULE LIST's ver;
    None when a part is not a number below 100."""
    parts = version.split('.')
    if len(parts) != 3 or not all(p.isdigit() and int(p) < 100 for p in parts):
        return None
    major, minor, patch = (int(p) for p in parts)
    return major * 10000 + minor * 100 + patch


def found(root, path, pattern):
    try:
        with open(os.path.join(root, path), encoding='utf-8') as f:
            m = re.search(pattern, f.read(), re.M | re.S)
    except OSError as e:
        return None, 'cannot read: %s' % e.strerror
    return (m.group(1), None) if m else (None, 'no version found')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--root', default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    root = ap.parse_args().root
    crate, err = found(root, *PLACES[0])
    if crate is None:
        print('check-versions: Cargo.toml: %s' % err)
        return 1
    want = module_ver(crate)
    if want is None:
        print('check-versions: Cargo.toml version %s is not major.minor.patch with parts below 100' % crate)
        return 1
    bad = []
    for path, pattern in PLACES:
        v, err = found(root, path, pattern)
        expect = str(want) if path.endswith('registration.rs') else crate
        got = v.replace('_', '') if v else None
        ok = got == expect
        print('check-versions: %-36s %s%s' % (path, v or err, '' if ok else '  (want %s)' % expect))
        if not ok:
            bad.append(path)
    if bad:
        print('check-versions: %d place(s) disagree with Cargo.toml %s: %s' % (len(bad), crate, ', '.join(bad)))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
