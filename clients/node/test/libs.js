'use strict';
// The client libraries under test, each as { name, kind, major, connect(ports, options) }.
// Several majors sit side by side under npm aliases (package.json):
// redis4/redis5/redis6 are node-redis, ioredis5/ioredis6 are ioredis.

const nodeRedis = require('../seckill-node-redis');
const ioredis = require('../seckill-ioredis');
const { toReserve } = require('../reply');

function version(pkg) {
  return require(`${pkg}/package.json`).version;
}

function nodeRedisLib(pkg) {
  return {
    name: `node-redis ${version(pkg)}`,
    kind: 'node-redis',
    major: Number(version(pkg).split('.')[0]),
    async connect(ports, { resp } = {}) {
      const { createCluster } = require(pkg);
      const options = { rootNodes: ports.map((port) => ({ url: `redis://127.0.0.1:${port}` })) };
      if (resp) options.RESP = resp; // 5.x and later; 4.x speaks RESP2 only
      const client = createCluster(options);
      client.on('error', () => {}); // connection errors surface on the calls
      await client.connect();
      return {
        client,
        sale: (key) => new nodeRedis.Sale(client, key),
        // The call without its key: what the table in docs/clients.md warns about.
        unroutedReserve: async (key, user, reqid) =>
          toReserve(await client.sendCommand(undefined, false, ['SECKILL.RESERVE', key, user, 'REQID', reqid])),
        raw: (key, args, readonly = false) => client.sendCommand(key, readonly, args),
        close: () => (client.close ? client.close() : client.disconnect()),
      };
    },
  };
}

function ioredisLib(pkg) {
  return {
    name: `ioredis ${version(pkg)}`,
    kind: 'ioredis',
    major: Number(version(pkg).split('.')[0]),
    async connect(ports, { resp } = {}) {
      const Redis = require(pkg);
      const redisOptions = resp ? { protocol: resp } : {};
      const client = new Redis.Cluster(ports.map((port) => ({ host: '127.0.0.1', port })), { redisOptions });
      client.on('error', () => {});
      await new Promise((resolve, reject) => {
        client.once('ready', resolve);
        client.once('end', () => reject(new Error('ioredis cluster did not connect')));
      });
      return {
        client,
        sale: (key) => new ioredis.Sale(client, key),
        unroutedReserve: async (key, user, reqid) =>
          toReserve(await client.call('SECKILL.RESERVE', key, user, 'REQID', reqid)),
        close: () => client.quit(),
      };
    },
  };
}

const LIBS = [
  nodeRedisLib('redis4'),
  nodeRedisLib('redis5'),
  nodeRedisLib('redis6'),
  ioredisLib('ioredis5'),
  ioredisLib('ioredis6'),
];

module.exports = { LIBS };
