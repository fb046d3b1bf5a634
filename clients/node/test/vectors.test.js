'use strict';
// The shared test vectors (tests/vectors/README.md): every recorded reply
// of the module and the Functions library, under RESP2 and RESP3, turned
// into what node-redis hands the recipes (simple and bulk strings as
// strings, integers as numbers, nil as null, arrays as arrays, a RESP3 map
// as an object) and parsed by reply.js, must give the case's `expect`. The
// Python, Go and Java clients read the same files. No server.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const { toReport, toReserve, toStatus } = require('../reply');

const DIR = path.resolve(__dirname, '..', '..', '..', 'tests', 'vectors');

function plain(tree) {
  switch (tree.t) {
    case 'null': return null;
    case 'array': case 'set': case 'push': return tree.v.map(plain);
    case 'map': return Object.fromEntries(tree.v.map(([k, v]) => [plain(k), plain(v)]));
    default: return tree.v;
  }
}

// A report as the contract gives it: from the RESP form, or the FORMAT JSON string.
const report = (v) => (typeof v === 'string' ? JSON.parse(v) : toReport(v));
const PARSERS = {
  reserve: toReserve,
  release: toStatus,
  confirm: toStatus,
  report: (v) => (v === null ? null : { ...report(v) }),
};

const CASES = fs.readdirSync(DIR).filter((f) => f.endsWith('.json'))
  .flatMap((f) => JSON.parse(fs.readFileSync(path.join(DIR, f), 'utf8')).cases);

test('the vectors cover both backends and both protocols', () => {
  const seen = new Set(CASES.map((c) => `${c.backend}/${c.protocol}`));
  assert.deepEqual([...seen].sort(), ['functions/2', 'functions/3', 'module/2', 'module/3']);
});

for (const c of CASES) {
  const parse = PARSERS[c.parse];
  if (!parse || c.reply.t === 'error') continue;
  test(`${c.parse}: ${c.name} (${c.backend}, RESP${c.protocol})`, () => {
    assert.deepEqual(parse(plain(c.reply)), c.expect);
  });
}
