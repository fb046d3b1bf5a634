'use strict';
// SECKILL commands from node-redis 4, 5 and 6 (docs/clients.md).
//
// node-redis knows nothing of module commands, so on a cluster it cannot
// find the key in the arguments: give it as sendCommand's first argument
// (`firstKey`), and the call goes straight to the node that serves it. Left
// undefined, node-redis sends the call to some node and follows the MOVED
// replies, and gives up on a few calls under concurrency; see the tests.
//
//   const { createCluster } = require('redis');
//   const cluster = await createCluster({ rootNodes: [{ url: 'redis://10.0.0.1:7000' }] }).connect();
//   const sale = new Sale(cluster, 'sale:{1001}');
//   const { status, id } = await withTryAgain(() => sale.reserve('user:42', { reqid: 'order-7f3a' }));

const {
  toReport, toReserve, toStatus, initArgs, reserveArgs, reconcileArgs, withTryAgain,
} = require('./reply');

// One SECKILL call routed by its key. `client` is a node-redis cluster
// (createCluster) or a plain client (createClient), whose sendCommand takes
// the arguments only.
function seckill(client, key, command, args = [], readonly = false) {
  const argv = [command, key, ...args];
  return isCluster(client) ? client.sendCommand(key, readonly, argv) : client.sendCommand(argv);
}

function isCluster(client) {
  return 'masters' in client; // RedisCluster in 4.x, 5.x and 6.x; a RedisClient has none
}

class Sale {
  constructor(client, key) {
    this.client = client;
    this.key = key;
  }

  call(command, args, readonly = false) {
    return seckill(this.client, this.key, command, args, readonly);
  }

  // 'OK' (created or replaced) or 'EXISTS' (nothing changed).
  init(total, options) {
    return this.call('SECKILL.INIT', initArgs(total, options));
  }

  // { status, id, remaining }. DUPLICATE carries the id of the REQID's
  // reservation, LIMIT the id of the user's latest live reservation; the
  // other refusals carry null.
  async reserve(user, options) {
    return toReserve(await this.call('SECKILL.RESERVE', reserveArgs(user, options)));
  }

  async release(id) {
    return toStatus(await this.call('SECKILL.RELEASE', [id]));
  }

  async confirm(id) {
    return toStatus(await this.call('SECKILL.CONFIRM', [id]));
  }

  // The report as an object, or null when the sale does not exist.
  async info() {
    return toReport(await this.call('SECKILL.INFO', [], true));
  }

  async get(id) {
    return toReport(await this.call('SECKILL.GET', [id], true));
  }

  async reconcile(options) {
    return toReport(await this.call('SECKILL.RECONCILE', reconcileArgs(options)));
  }

  // INFO key FORMAT JSON: the same report as one JSON string (nil when the
  // sale does not exist).
  async infoJson() {
    const text = await this.call('SECKILL.INFO', ['FORMAT', 'JSON'], true);
    return text === null ? null : JSON.parse(text);
  }
}

module.exports = { Sale, seckill, withTryAgain };
