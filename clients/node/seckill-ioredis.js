'use strict';
// SECKILL commands from ioredis 5 and 6 (docs/clients.md).
//
// ioredis finds a command's keys in its own table of Redis commands, which
// has no module commands, and `call` has no way to name the key: on a
// cluster `redis.call('SECKILL.RESERVE', key, ...)` goes to some node and
// follows the MOVED reply. A command defined with defineCommand and
// numberOfKeys: 1 is routed by its first argument, so each SECKILL command
// gets a one-line Lua shim (EVALSHA; ioredis sends EVAL once per node when
// the script is not cached there yet).
//
// redis.pcall returns the module's error reply as it is (TRYAGAIN, ERR ...,
// WRONGTYPE), so the caller gets the module's text word for word, and
// ioredis still retries TRYAGAIN itself. Inside a script the reply is RESP2:
// the reports arrive as flat [field, value, ...] arrays under RESP3 too.
//
//   const Redis = require('ioredis');
//   const cluster = new Redis.Cluster([{ host: '10.0.0.1', port: 7000 }]);
//   const sale = new Sale(cluster, 'sale:{1001}');
//   const { status, id } = await sale.reserve('user:42', { reqid: 'order-7f3a' });

const { toReport, toReserve, toStatus, initArgs, reserveArgs, reconcileArgs } = require('./reply');

const COMMANDS = {
  seckillInit: 'SECKILL.INIT',
  seckillReserve: 'SECKILL.RESERVE',
  seckillRelease: 'SECKILL.RELEASE',
  seckillConfirm: 'SECKILL.CONFIRM',
  seckillReconcile: 'SECKILL.RECONCILE',
  seckillInfo: 'SECKILL.INFO',
  seckillGet: 'SECKILL.GET',
};

// Adds redis.seckillReserve(key, user, ...) and the others to a Redis or
// Cluster instance (once per instance).
function defineSeckill(redis) {
  for (const [name, command] of Object.entries(COMMANDS)) {
    if (typeof redis[name] === 'function') continue;
    redis.defineCommand(name, {
      numberOfKeys: 1,
      lua: `return redis.pcall('${command}', KEYS[1], unpack(ARGV))`,
    });
  }
  return redis;
}

class Sale {
  constructor(redis, key) {
    this.redis = defineSeckill(redis);
    this.key = key;
  }

  // 'OK' (created or replaced) or 'EXISTS' (nothing changed).
  init(total, options) {
    return this.redis.seckillInit(this.key, ...initArgs(total, options));
  }

  // { status, id, remaining }: DUPLICATE and LIMIT carry an id.
  async reserve(user, options) {
    return toReserve(await this.redis.seckillReserve(this.key, ...reserveArgs(user, options)));
  }

  async release(id) {
    return toStatus(await this.redis.seckillRelease(this.key, id));
  }

  async confirm(id) {
    return toStatus(await this.redis.seckillConfirm(this.key, id));
  }

  async info() {
    return toReport(await this.redis.seckillInfo(this.key));
  }

  async get(id) {
    return toReport(await this.redis.seckillGet(this.key, id));
  }

  async reconcile(options) {
    return toReport(await this.redis.seckillReconcile(this.key, ...reconcileArgs(options)));
  }

  async infoJson() {
    const text = await this.redis.seckillInfo(this.key, 'FORMAT', 'JSON');
    return text === null ? null : JSON.parse(text);
  }
}

module.exports = { Sale, defineSeckill, COMMANDS };
