"""The shared test vectors (tests/vectors): every recorded reply of the
module and the Functions library, under RESP2 and RESP3, parsed by this
client's protocol functions must give the case's `expect`. The Go, Java and
Node clients read the same files, so no client can drift from the contract
or from the others. No server: the replies are the recorded ones."""

from __future__ import annotations

import glob
import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
VECTORS = os.path.join(ROOT, 'tests', 'vectors')


def _generator():
    """tests/vectors/generate.py: its PARSERS are the reference parsers'
    calls, and `plain` turns a recorded tree into what redis-py hands them."""
    spec = importlib.util.spec_from_file_location('vectors_generate', os.path.join(VECTORS, 'generate.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _generator()
CASES = [(os.path.basename(f), c) for f in sorted(glob.glob(os.path.join(VECTORS, '*.json')))
         for c in json.load(open(f, encoding='utf-8'))['cases']]


def test_every_file_has_cases_on_both_backends_and_protocols():
    seen = {(c['backend'], c['protocol']) for _, c in CASES}
    assert seen == {('module', 2), ('module', 3), ('functions', 2), ('functions', 3)}
    assert len(CASES) >= 200


@pytest.mark.parametrize('case', [c for _, c in CASES if c['reply']['t'] != 'error'],
                         ids=lambda c: '%s-%s-resp%d' % (c['name'], c['backend'], c['protocol']))
def test_the_client_parses_the_reply_as_the_contract_says(case):
    assert GEN.PARSERS[case['parse']](GEN.plain(case['reply'])) == case['expect']


@pytest.mark.parametrize('case', [c for _, c in CASES if c['reply']['t'] == 'error'],
                         ids=lambda c: '%s-%s-resp%d' % (c['name'], c['backend'], c['protocol']))
def test_errors_carry_their_code_first(case):
    text = case['reply']['v']
    assert case['expect'] == {'error': text, 'code': text.split(' ', 1)[0]}
    assert case['expect']['code'].isupper()
