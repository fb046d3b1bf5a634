'use strict';
// 50 concurrent buyers against one sale on a three-master cluster, once per
// client library, through the recipe of docs/clients.md (the key given) and
// once without the key. Checked: the stock is never oversold, LIMIT holds per
// user, DUPLICATE and LIMIT carry their ids, the report's invariant is ok,
// error texts reach the caller word for word, and the MOVED redirections the
// nodes answered (INFO errorstats, summed over every node): 0 with the key.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');

const { Cluster, cli } = require('./cluster');
const { LIBS } = require('./libs');

const USERS = 50; // concurrent buyers
const TRIES = 3; // RESERVE calls each buyer sends at once
const LIMIT = 2;
const TOTAL = 60; // demand is USERS * LIMIT = 100 units: the sale sells out

let cluster;

before(async () => {
  cluster = await new Cluster(3).start();
});

after(async () => {
  if (cluster) await cluster.stop();
});

function tagOf(lib, variant) {
  return `${lib.name.replace(/[^a-z0-9]+/gi, '-')}-${variant}`;
}

// Every buyer sends TRIES reservations at once, each with its own REQID.
async function buy(reserve, tag) {
  const calls = [];
  for (let u = 0; u < USERS; u++) {
    for (let j = 0; j < TRIES; j++) {
      const user = `user:${u}`;
      const reqid = `${tag}:${u}:${j}`;
      calls.push(reserve(user, reqid).then(
        (r) => ({ user, reqid, ...r }),
        (err) => ({ user, reqid, error: err }),
      ));
    }
  }
  return Promise.all(calls);
}

// What every run must hold, with or without the key. Returns the RESERVED rows.
function checkReplies(rows) {
  const reserved = rows.filter((r) => r.status === 'RESERVED');
  const byUser = new Map();
  for (const r of reserved) {
    assert.equal(r.id, r.reqid, 'a REQID becomes the reservation id');
    byUser.set(r.user, [...(byUser.get(r.user) || []), r.id]);
  }
  assert.ok(reserved.length <= TOTAL, `reserved ${reserved.length} > total ${TOTAL}`);
  for (const [user, ids] of byUser) assert.ok(ids.length <= LIMIT, `${user} holds ${ids.length} > LIMIT ${LIMIT}`);
  for (const r of rows) {
    if (r.error) continue;
    assert.ok(['RESERVED', 'LIMIT', 'SOLD_OUT'].includes(r.status), `unexpected status ${r.status}`);
    if (r.status === 'LIMIT') {
      // LIMIT carries the id of the user's latest live reservation
      assert.ok((byUser.get(r.user) || []).includes(r.id), `LIMIT of ${r.user} carries ${r.id}`);
    }
    if (r.status === 'SOLD_OUT') assert.equal(r.id, null);
  }
  return { reserved, byUser };
}

for (const lib of LIBS) {
  test(`${lib.name}: 50 buyers, the key given (docs/clients.md recipe)`, async (t) => {
    const conn = await lib.connect(cluster.ports);
    try {
      const tag = tagOf(lib, 'routed');
      const key = `sale:{${tag}}`;
      const stream = `sale:{${tag}}:events`;
      const sale = conn.sale(key);
      const owner = cluster.owner(key);

      assert.equal(await sale.init(TOTAL, { shards: 4, limit: LIMIT, stream }), 'OK');
      assert.equal(await sale.init(TOTAL, { limit: LIMIT }), 'EXISTS');
      // the counters cover the buyers and every call after them
      cluster.resetStats();

      const rows = await buy((user, reqid) => sale.reserve(user, { reqid }), tag);
      const failed = rows.filter((r) => r.error);
      assert.deepEqual(failed.map((r) => r.error.message), [], 'no call fails with the key given');
      const { reserved, byUser } = checkReplies(rows);
      assert.equal(reserved.length, TOTAL, 'demand above the stock sells all of it');
      assert.ok(rows.some((r) => r.status === 'LIMIT'), 'some buyers hit LIMIT');
      assert.ok(rows.some((r) => r.status === 'SOLD_OUT'), 'the late ones get SOLD_OUT');

      // A retry of a REQID that reserved: DUPLICATE with the same id, no change.
      const again = await Promise.all(reserved.map((r) => sale.reserve(r.user, { reqid: r.reqid })));
      for (const [i, r] of again.entries()) {
        assert.equal(r.status, 'DUPLICATE');
        assert.equal(r.id, reserved[i].id);
      }

      let info = await sale.info();
      assert.equal(info.invariant, 'ok');
      assert.equal(info.total, TOTAL);
      assert.equal(info.remaining, 0);
      assert.equal(info.pending, TOTAL);
      assert.equal(info.confirmed, 0);
      assert.equal(info.buyers, byUser.size);
      assert.deepEqual(info.shards, [0, 0, 0, 0]);

      // CONFIRM one, RELEASE another: the statuses, their repeats, GET.
      const [first, second] = reserved;
      assert.deepEqual(await sale.confirm(first.id), { status: 'CONFIRMED', remaining: 0 });
      assert.deepEqual(await sale.confirm(first.id), { status: 'ALREADY_CONFIRMED', remaining: 0 });
      assert.deepEqual(await sale.release(first.id), { status: 'CONFIRMED', remaining: 0 });
      assert.deepEqual(await sale.release(second.id), { status: 'RELEASED', remaining: 1 });
      assert.deepEqual(await sale.release(second.id), { status: 'ALREADY_RELEASED', remaining: 1 });
      assert.deepEqual(await sale.confirm('no-such-id'), { status: 'NOT_FOUND', remaining: 1 });
      const rec = await sale.get(first.id);
      assert.equal(rec.user, first.user);
      assert.equal(rec.qty, 1);
      assert.equal(rec.state, 'confirmed');
      assert.equal(await sale.get('no-such-id'), null);

      info = await sale.info();
      assert.equal(info.invariant, 'ok');
      assert.deepEqual([info.remaining, info.pending, info.confirmed, info.released], [1, TOTAL - 2, 1, 1]);

      // RECONCILE with the ledger: the confirmed order is ok, a pending one
      // is pending, one that never reached this sale is unknown.
      const report = await sale.reconcile({
        orders: [[first.id, first.user, 1], [reserved[2].id, reserved[2].user, 1], ['lost-1', 'user:x', 1]],
      });
      assert.equal(report.orders_ok, 1);
      assert.equal(report.orders_pending, 1);
      assert.equal(report.orders_unknown, 1);
      assert.deepEqual(report.orders_unknown_ids, ['lost-1']);
      assert.equal(report.invariant, 'ok');

      // An error reply reaches the caller word for word.
      const expected = cli(owner.port, 'SECKILL.RESERVE', key, 'user:0', 'QTY', '0');
      assert.match(expected, /^ERR /);
      await assert.rejects(sale.reserve('user:0', { qty: 0 }), (err) => err.message === expected);

      // The stream got one entry per state change: 60 reserved, 1 confirmed, 1 released.
      assert.equal(Number(cli(owner.port, 'XLEN', stream)), TOTAL + 2);

      const moved = cluster.errors('MOVED');
      const ask = cluster.errors('ASK');
      const calls = cluster.calls('seckill.reserve');
      t.diagnostic(`MOVED with the key given: ${moved} (ASK ${ask}); seckill.reserve calls per node ` +
        `${JSON.stringify(calls)}, owner ${owner.port}`);
      assert.equal(moved, 0, 'MOVED redirections with the key given');
      assert.equal(ask, 0);
      for (const [port, n] of Object.entries(calls)) {
        if (Number(port) !== owner.port) assert.equal(n, 0, `RESERVE reached node ${port}, not the owner`);
      }

      // A sale that does not exist (on whichever node its key lives).
      assert.equal(await conn.sale('sale:{no-such-sale}').info(), null);
      assert.deepEqual(await conn.sale('sale:{no-such-sale}').reserve('user:0'), { status: 'NO_SALE', id: null, remaining: 0 });
    } finally {
      await conn.close();
    }
  });

  test(`${lib.name}: 50 buyers without the key (measured)`, async (t) => {
    const conn = await lib.connect(cluster.ports);
    try {
      const tag = tagOf(lib, 'unrouted');
      const key = `sale:{${tag}}`;
      const sale = conn.sale(key);
      assert.equal(await sale.init(TOTAL, { shards: 4, limit: LIMIT }), 'OK');
      cluster.resetStats();

      const rows = await buy((user, reqid) => conn.unroutedReserve(key, user, reqid), tag);
      const moved = cluster.errors('MOVED');
      const failed = rows.filter((r) => r.error);
      const { reserved } = checkReplies(rows);
      t.diagnostic(`MOVED without the key: ${moved} for ${rows.length} calls; ` +
        `${failed.length} calls failed${failed.length ? ` (${[...new Set(failed.map((r) => r.error.message.split(' ')[0]))].join(', ')})` : ''}`);

      // A failed call was refused by a node that does not hold the key: it
      // changed nothing, so the server holds exactly what the callers were told.
      for (const r of failed) assert.match(r.error.message, /MOVED|redirection/i);
      const info = await sale.info();
      assert.equal(info.invariant, 'ok');
      assert.equal(info.pending, reserved.length, 'every reservation made was reported to its caller');
      assert.equal(info.remaining, TOTAL - reserved.length);
      // Without the key the calls land on any node: the reason for the recipe.
      assert.ok(moved > 0, 'calls without the key are redirected');
    } finally {
      await conn.close();
    }
  });
}
