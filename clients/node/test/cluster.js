'use strict';
// A throwaway three-master Redis Cluster for the tests: Debian's redis-server
// with the built module, free ports below 55535 (a node also listens on
// port + 10000), slots assigned by `redis-cli --cluster create`, every node
// stopped by its pid. Admin commands go through redis-cli, so the counters
// the tests read are not touched by the client libraries under test.

const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const REPO = path.resolve(__dirname, '..', '..', '..');

function modulePath() {
  const p = process.env.SECKILL_MODULE || path.join(REPO, 'target', 'release', 'libredis_seckill.so');
  if (!fs.existsSync(p)) {
    throw new Error(`${p} not found: build the module first (make build) or set SECKILL_MODULE`);
  }
  return p;
}

function canBind(port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

// A port nobody listens on, whose cluster bus port (+10000) is free too.
async function clusterPort(taken) {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 35000);
    if (taken.has(port) || taken.has(port + 10000)) continue;
    if ((await canBind(port)) && (await canBind(port + 10000))) {
      taken.add(port);
      taken.add(port + 10000);
      return port;
    }
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function cli(port, ...args) {
  return execFileSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args.map(String)], {
    encoding: 'utf8',
    timeout: 30000,
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();
}

async function waitFor(pred, what, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (pred()) return;
    } catch (_) {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

// `INFO section` as { field: value } (the "key:value" lines).
function parseInfo(text) {
  const out = {};
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

class Cluster {
  constructor(masters = 3) {
    this.masters = masters;
    this.nodes = []; // { port, dir, proc, id }
  }

  async start() {
    const module = modulePath();
    const taken = new Set();
    try {
      for (let i = 0; i < this.masters; i++) {
        const port = await clusterPort(taken);
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'seckill-node-'));
        const proc = spawn('redis-server', [
          '--port', String(port), '--bind', '127.0.0.1', '--dir', dir,
          '--logfile', path.join(dir, 'redis.log'), '--loadmodule', module,
          '--cluster-enabled', 'yes', '--cluster-config-file', path.join(dir, 'nodes.conf'),
          '--cluster-node-timeout', '5000', '--cluster-require-full-coverage', 'no',
          '--save', '', '--appendonly', 'no', '--daemonize', 'no',
        ], { stdio: 'ignore' });
        this.nodes.push({ port, dir, proc });
      }
      for (const n of this.nodes) {
        await waitFor(() => cli(n.port, 'PING') === 'PONG', `redis-server on ${n.port} (${n.dir}/redis.log)`);
      }
      execFileSync('redis-cli', ['--cluster', 'create', ...this.nodes.map((n) => `127.0.0.1:${n.port}`),
        '--cluster-replicas', '0', '--cluster-yes'], { stdio: 'ignore', timeout: 60000 });
      for (const n of this.nodes) {
        await waitFor(() => parseInfo(cli(n.port, 'CLUSTER', 'INFO')).cluster_state === 'ok' &&
          cli(n.port, 'CLUSTER', 'NODES').split('\n').filter((l) => l.includes('master')).length === this.masters,
        `cluster_state:ok on ${n.port}`);
      }
      for (const n of this.nodes) n.id = cli(n.port, 'CLUSTER', 'MYID');
    } catch (err) {
      await this.stop();
      throw err;
    }
    return this;
  }

  get ports() {
    return this.nodes.map((n) => n.port);
  }

  // The node that serves `key` now, with the key's slot.
  owner(key) {
    const slot = Number(cli(this.nodes[0].port, 'CLUSTER', 'KEYSLOT', key));
    for (const n of this.nodes) {
      const mine = cli(n.port, 'CLUSTER', 'NODES').split('\n').find((l) => l.includes('myself'));
      for (const range of mine.split(' ').slice(8)) {
        if (range.startsWith('[')) continue; // a slot being migrated or imported
        const [lo, hi] = range.split('-').map(Number);
        if (slot >= lo && slot <= (hi === undefined ? lo : hi)) return { ...n, slot };
      }
    }
    throw new Error(`no node serves slot ${slot}`);
  }

  // Zero every node's error and command counters (CONFIG RESETSTAT).
  resetStats() {
    for (const n of this.nodes) cli(n.port, 'CONFIG', 'RESETSTAT');
  }

  // { port: { MOVED: n, ASK: n, ... } } from INFO errorstats (errorstat_<PREFIX>:count=N).
  errorstats() {
    const out = {};
    for (const n of this.nodes) {
      const stats = {};
      for (const [k, v] of Object.entries(parseInfo(cli(n.port, 'INFO', 'errorstats')))) {
        if (k.startsWith('errorstat_')) stats[k.slice('errorstat_'.length)] = Number(/count=(\d+)/.exec(v)[1]);
      }
      out[n.port] = stats;
    }
    return out;
  }

  // One error prefix summed over every node.
  errors(prefix) {
    return Object.values(this.errorstats()).reduce((s, st) => s + (st[prefix] || 0), 0);
  }

  // cmdstat_<command> calls per node.
  calls(command) {
    const out = {};
    for (const n of this.nodes) {
      const st = parseInfo(cli(n.port, 'INFO', 'commandstats'))[`cmdstat_${command}`];
      out[n.port] = st ? Number(/calls=(\d+)/.exec(st)[1]) : 0;
    }
    return out;
  }

  async stop() {
    const waits = [];
    for (const n of this.nodes) {
      if (n.proc.exitCode === null && n.proc.signalCode === null) {
        waits.push(new Promise((resolve) => {
          const t = setTimeout(() => { n.proc.kill('SIGKILL'); }, 10000);
          n.proc.once('exit', () => { clearTimeout(t); resolve(); });
        }));
        process.kill(n.proc.pid, 'SIGTERM');
      }
    }
    await Promise.all(waits);
    for (const n of this.nodes) fs.rmSync(n.dir, { recursive: true, force: true });
    this.nodes = [];
  }
}

module.exports = { Cluster, cli, parseInfo, sleep, waitFor };
