'use strict';
// The Node files docs/clients.md and clients/node/README.md tell users to
// save and run, run as they are: every ```js block whose first line is
// `// NAME.js: ...` is written to NAME.js in a throwaway project whose
// node_modules hold `redis` (node-redis 6), `ioredis` (6) and this package
// as `redis-seckill` (what `npm install redis /path/to/clients/node` gives),
// run with `node NAME.js` against a three-master cluster (REDIS_URL /
// REDIS_PORT point at it, as the files read them), and what it prints must
// equal the ```text block that starts with `$ node NAME.js`.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { Cluster } = require('./cluster');

const PKG = path.resolve(__dirname, '..');
const PAGES = [path.join(PKG, '..', '..', 'docs', 'clients.md'), path.join(PKG, 'README.md')];
// What `require('redis')` and `require('ioredis')` find: the newest majors
// of the aliases package.json installs for the tests.
const LIBS = { redis: 'redis6', ioredis: 'ioredis6' };

// { name, code, output } for every runnable file of a page.
function runnable(page) {
  const blocks = [];
  const re = /^```(\w*)\n([\s\S]*?)^```$/gm;
  const text = fs.readFileSync(page, 'utf8');
  for (let m = re.exec(text); m; m = re.exec(text)) blocks.push({ lang: m[1], body: m[2] });
  const files = [];
  for (const b of blocks) {
    const head = /^\/\/ ([\w.-]+\.js):/.exec(b.body);
    if (b.lang !== 'js' || !head) continue;
    const run = blocks.find((o) => o.lang === 'text' && o.body.startsWith(`$ node ${head[1]}\n`));
    assert.ok(run, `${path.basename(page)}: ${head[1]} has no \`$ node ${head[1]}\` block with its output`);
    files.push({ name: head[1], code: b.body, output: run.body.split('\n').slice(1).join('\n') });
  }
  return files;
}

let cluster;
let project;

before(async () => {
  cluster = await new Cluster(3).start();
  project = fs.mkdtempSync(path.join(os.tmpdir(), 'seckill-docs-'));
  const modules = path.join(project, 'node_modules');
  fs.mkdirSync(modules);
  for (const [name, alias] of Object.entries(LIBS)) {
    fs.symlinkSync(path.join(PKG, 'node_modules', alias), path.join(modules, name));
  }
  fs.symlinkSync(PKG, path.join(modules, 'redis-seckill'));
});

after(async () => {
  if (cluster) await cluster.stop();
  if (project) fs.rmSync(project, { recursive: true, force: true });
});

const FILES = PAGES.filter((p) => fs.existsSync(p)).flatMap((p) => runnable(p).map((f) => ({ page: p, ...f })));

test('the pages have files to run', () => {
  assert.ok(FILES.length >= 2, `found ${FILES.length} runnable files`);
});

for (const f of FILES) {
  test(`${path.basename(f.page)}: node ${f.name} prints what the page shows`, () => {
    fs.writeFileSync(path.join(project, f.name), f.code);
    const port = cluster.ports[0];
    const out = execFileSync('node', [f.name], {
      cwd: project,
      encoding: 'utf8',
      timeout: 30000,
      env: { ...process.env, REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_PORT: String(port) },
    });
    assert.equal(out, f.output);
  });
}
