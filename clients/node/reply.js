'use strict';
// Reply shapes shared by the node-redis and ioredis recipes (docs/clients.md).

// A report (INFO, GET, RECONCILE) as a plain object, whatever the protocol
// gave: a flat [field, value, ...] array (RESP2, or RESP3 through a Lua
// shim), a Map, or an object (node-redis 5/6 decode a RESP3 map into one).
// Nested arrays (`shards`, `peers`, `orders_*_ids`) stay arrays. nil -> null.
function toReport(reply) {
  if (reply === null || reply === undefined) return null;
  if (Array.isArray(reply)) {
    const out = {};
    for (let i = 0; i + 1 < reply.length; i += 2) out[String(reply[i])] = reply[i + 1];
    return out;
  }
  if (reply instanceof Map) return Object.fromEntries(reply);
  return { ...reply };
}

// RESERVE: [status, reservation id or nil, remaining].
function toReserve(reply) {
  const [status, id, remaining] = reply;
  return { status: String(status), id: id === null || id === undefined ? null : String(id), remaining: Number(remaining) };
}

// RELEASE / CONFIRM: [status, remaining].
function toStatus(reply) {
  return { status: String(reply[0]), remaining: Number(reply[1]) };
}

// INIT's options object -> arguments.
function initArgs(total, { shards, limit, holdMs, startMs, endMs, ttlS, stream, maxlen, replace } = {}) {
  const a = [String(total)];
  if (shards !== undefined) a.push('SHARDS', String(shards));
  if (limit !== undefined) a.push('LIMIT', String(limit));
  if (holdMs !== undefined) a.push('HOLD', String(holdMs));
  if (startMs !== undefined) a.push('START', String(startMs));
  if (endMs !== undefined) a.push('END', String(endMs));
  if (ttlS !== undefined) a.push('TTL', String(ttlS));
  if (stream !== undefined) {
    a.push('STREAM', stream);
    if (maxlen !== undefined) a.push('MAXLEN', String(maxlen));
  }
  if (replace) a.push('REPLACE');
  return a;
}

function reserveArgs(user, { qty, reqid } = {}) {
  const a = [user];
  if (qty !== undefined) a.push('QTY', String(qty));
  if (reqid !== undefined) a.push('REQID', reqid);
  return a;
}

// RECONCILE's options -> arguments; orders are [rid, user, qty] rows.
function reconcileArgs({ expire, orders, apply } = {}) {
  const a = [];
  if (expire) a.push('EXPIRE');
  if (orders && orders.length) {
    a.push('ORDERS', String(orders.length));
    for (const [rid, user, qty] of orders) a.push(rid, user, String(qty));
  }
  if (apply) a.push('APPLY');
  return a;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// TRYAGAIN: the sale's stream moved to another node before the sale did
// (a slot migration is under way). Nothing was changed; the call is safe to
// repeat, and with a REQID any repeat is idempotent anyway (DUPLICATE).
// Retries with exponential backoff and jitter, `attempts` calls in all
// (defaults: 8 calls, 10 ms doubling to 500 ms: at most about 1.1 s of
// waiting), then raises the last TRYAGAIN. Any other error is raised at once.
async function withTryAgain(fn, { attempts = 8, baseMs = 10, maxMs = 500, onRetry } = {}) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!(err && /^TRYAGAIN\b/.test(err.message)) || attempt >= attempts) throw err;
      const backoff = Math.min(maxMs, baseMs * 2 ** (attempt - 1));
      if (onRetry) onRetry(err, attempt);
      await sleep(backoff / 2 + Math.random() * (backoff / 2));
    }
  }
}

module.exports = { toReport, toReserve, toStatus, initArgs, reserveArgs, reconcileArgs, withTryAgain, sleep };
