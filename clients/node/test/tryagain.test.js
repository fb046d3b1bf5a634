'use strict';
// TRYAGAIN during a slot migration, for real: the sale's stream is MIGRATEd
// to the importing node before the sale, so the sale's node answers
// "TRYAGAIN the sale's STREAM key is not on this node ..." until the sale
// follows and the slot is handed over. node-redis raises TRYAGAIN at once
// and the recipe's withTryAgain retries it; ioredis retries it by itself
// (retryDelayOnTryAgain 100 ms, within maxRedirections 16).

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');

const { Cluster, cli, sleep } = require('./cluster');
const { LIBS } = require('./libs');
const { withTryAgain } = require('../reply');

let cluster;

before(async () => {
  cluster = await new Cluster(3).start();
});

after(async () => {
  if (cluster) await cluster.stop();
});

// Starts moving the key's slot from its owner to another master and moves
// the stream first. finish() moves the sale and hands the slot over on
// every node.
function migrateStreamFirst(key, stream) {
  const src = cluster.owner(key);
  const dst = cluster.nodes.find((n) => n.port !== src.port);
  const slot = src.slot;
  assert.equal(cli(dst.port, 'CLUSTER', 'SETSLOT', slot, 'IMPORTING', src.id), 'OK');
  assert.equal(cli(src.port, 'CLUSTER', 'SETSLOT', slot, 'MIGRATING', dst.id), 'OK');
  assert.equal(cli(src.port, 'MIGRATE', '127.0.0.1', dst.port, '', 0, 5000, 'KEYS', stream), 'OK');
  // the premise, seen from redis-cli on the sale's node
  assert.match(cli(src.port, 'SECKILL.RESERVE', key, 'user:cli'), /^TRYAGAIN the sale's STREAM key is not on this node/);
  return {
    src,
    dst,
    finish() {
      assert.equal(cli(src.port, 'MIGRATE', '127.0.0.1', dst.port, '', 0, 5000, 'KEYS', key), 'OK');
      for (const n of [dst, src, ...cluster.nodes.filter((m) => m.port !== src.port && m.port !== dst.port)]) {
        assert.equal(cli(n.port, 'CLUSTER', 'SETSLOT', slot, 'NODE', dst.id), 'OK');
      }
    },
  };
}

async function saleWithStream(conn, tag) {
  const key = `sale:{${tag}}`;
  const stream = `sale:{${tag}}:events`;
  const sale = conn.sale(key);
  assert.equal(await sale.init(10, { limit: 5, stream }), 'OK');
  assert.equal((await sale.reserve('user:0', { reqid: `${tag}-0` })).status, 'RESERVED'); // the stream exists
  return { key, stream, sale };
}

async function afterMigration(sale, m, stream) {
  const info = await sale.info();
  assert.equal(info.invariant, 'ok');
  assert.equal(info.pending, 2);
  assert.equal(Number(cli(m.dst.port, 'XLEN', stream)), 2, 'both entries in the one stream, on the new node');
  assert.equal(Number(cli(m.src.port, 'CLUSTER', 'COUNTKEYSINSLOT', m.src.slot)), 0, 'no second stream left behind');
}

for (const lib of LIBS.filter((l) => l.kind === 'node-redis')) {
  test(`${lib.name}: raises TRYAGAIN at once; withTryAgain retries until the sale has moved`, async (t) => {
    const conn = await lib.connect(cluster.ports);
    try {
      const tag = `ta-${lib.name.replace(/[^a-z0-9]+/gi, '-')}`;
      const { key, stream, sale } = await saleWithStream(conn, tag);
      const m = migrateStreamFirst(key, stream);

      const t0 = Date.now();
      await assert.rejects(sale.reserve('user:1', { reqid: `${tag}-bare` }), (err) => /^TRYAGAIN /.test(err.message));
      const bareMs = Date.now() - t0;

      let retries = 0;
      // withTryAgain's defaults wait at least about 0.56 s over their 8 calls:
      // the migration finishes well inside that, even on a loaded machine.
      const pending = withTryAgain(() => sale.reserve('user:1', { reqid: `${tag}-1` }), { onRetry: () => { retries++; } });
      await sleep(100);
      m.finish();
      const r = await pending;
      assert.deepEqual(r, { status: 'RESERVED', id: `${tag}-1`, remaining: 8 });
      assert.ok(retries >= 1, 'withTryAgain retried');
      t.diagnostic(`bare call rejected with TRYAGAIN after ${bareMs} ms; withTryAgain: ${retries} retries, then RESERVED on the new node`);
      await afterMigration(sale, m, stream);
    } finally {
      await conn.close();
    }
  });
}

for (const lib of LIBS.filter((l) => l.kind === 'ioredis')) {
  test(`${lib.name}: retries TRYAGAIN by itself, then gives up`, async (t) => {
    const conn = await lib.connect(cluster.ports);
    try {
      const tag = `ta-${lib.name.replace(/[^a-z0-9]+/gi, '-')}`;
      const { key, stream, sale } = await saleWithStream(conn, tag);
      const m = migrateStreamFirst(key, stream);

      // The migration stalls: how long ioredis keeps retrying before it raises.
      // Its TRYAGAIN retry goes to a random node (tryConnection(random)),
      // which may answer MOVED: both spend the 16 redirections, so the last
      // error is either.
      let t0 = Date.now();
      let lastError;
      await assert.rejects(sale.reserve('user:1', { reqid: `${tag}-stalled` }), (err) => {
        lastError = err.message;
        return /^Too many Cluster redirections\. Last error: ReplyError: (TRYAGAIN|MOVED) /.test(err.message);
      });
      const gaveUpMs = Date.now() - t0;
      assert.ok(gaveUpMs >= 500, `ioredis retried for ${gaveUpMs} ms`);

      // The migration finishes within the retries: the caller never sees TRYAGAIN.
      t0 = Date.now();
      const pending = sale.reserve('user:1', { reqid: `${tag}-1` });
      await sleep(250);
      m.finish();
      assert.deepEqual(await pending, { status: 'RESERVED', id: `${tag}-1`, remaining: 8 });
      t.diagnostic(`stalled migration: raised after ${gaveUpMs} ms of retries ("${lastError.slice(0, 80)}..."); ` +
        `finished after 250 ms: RESERVED after ${Date.now() - t0} ms`);
      await afterMigration(sale, m, stream);
    } finally {
      await conn.close();
    }
  });
}
