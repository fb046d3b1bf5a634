"""The package's layers (README.md, "Layout"), without a server: each
folder imports only the layers below it, and every old module path still
imports, as the moved module itself."""

import ast
import importlib
import os

import pytest

import seckill

PACKAGE = os.path.dirname(os.path.abspath(seckill.__file__))

# A layer and the layers it may import (besides itself).
BELOW = {
    'plain': set(),
    'backend': {'plain'},
    'ops': {'plain'},
    'drivers': {'plain', 'ops', 'backend'},
    'library': {'plain', 'backend'},
    'testing': {'plain', 'library'},
}

# The paths the layers left behind: old path -> the module it is now.
MOVED = {
    'seckill.protocol': 'seckill.plain.protocol',
    'seckill.draw': 'seckill.plain.draw',
    'seckill.split_protocol': 'seckill.plain.split_protocol',
    'seckill.split_audit': 'seckill.plain.split_audit',
    'seckill.soldout': 'seckill.plain.soldout',
    'seckill.durability': 'seckill.plain.durability',
    'seckill.errors': 'seckill.plain.errors',
    'seckill.faults': 'seckill.plain.faults',
    'seckill.connect': 'seckill.drivers.connect',
    'seckill.aio.connect': 'seckill.drivers.aio_connect',
    'seckill._soldout_watch': 'seckill.drivers.soldout',
    'seckill.aio._soldout_watch': 'seckill.drivers.aio_soldout',
    'seckill._servers': 'seckill.testing.servers',
}


def layer_of(rel):
    """'plain' for plain/protocol.py, 'library' for library.py, ..."""
    first = rel.split(os.sep)[0]
    return first[:-3] if first.endswith('.py') else first


def imported_layers(path, rel):
    """The top-level parts of the package `path` imports (relative imports)."""
    pkg = ['seckill'] + rel.split(os.sep)[:-1]
    out = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = pkg[:len(pkg) - node.level + 1]
            target = base + (node.module.split('.') if node.module else [])
            if len(target) > 1:
                out.add(target[1])
            else:
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or '').startswith('seckill.'):
            out.add(node.module.split('.')[1])
    return out


def files_of(layer):
    top = os.path.join(PACKAGE, layer)
    if os.path.isdir(top):
        for dirpath, _, names in os.walk(top):
            for n in names:
                if n.endswith('.py'):
                    yield os.path.join(dirpath, n)
    else:
        yield top + '.py'


@pytest.mark.parametrize('layer', sorted(BELOW))
def test_a_layer_imports_only_the_layers_below_it(layer):
    allowed = BELOW[layer] | {layer}
    wrong = {}
    for path in files_of(layer):
        rel = os.path.relpath(path, PACKAGE)
        above = {part for part in imported_layers(path, rel) if layer_of(part + '.py') not in allowed}
        if above:
            wrong[rel] = sorted(above)
    assert not wrong, wrong


@pytest.mark.parametrize('old,new', sorted(MOVED.items()))
def test_an_old_path_is_the_moved_module(old, new):
    assert importlib.import_module(old) is importlib.import_module(new)


def test_old_paths_give_their_names():
    from seckill.aio.connect import connect
    from seckill.draw import beacon_name_arg, verify
    from seckill.protocol import _check_id, text
    from seckill.testing import Cluster, RedisServer, free_port
    assert text(b'x') == 'x' and _check_id('u', 'user') == 'u'
    assert callable(verify) and callable(beacon_name_arg) and callable(connect)
    assert callable(free_port) and RedisServer and Cluster
