'use strict';
// redis-seckill for Node.js: the SECKILL commands from node-redis 4/5/6 and
// ioredis 5/6 (docs/clients.md). Each recipe takes a client you created;
// the package itself depends on neither library.
//
//   const { Sale, withTryAgain } = require('redis-seckill/node-redis');
//   const { Sale } = require('redis-seckill/ioredis');

module.exports = {
  nodeRedis: require('./seckill-node-redis'),
  ioredis: require('./seckill-ioredis'),
  reply: require('./reply'),
};
