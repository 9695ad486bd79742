// run.mjs - the tests of the wgml web build, run by scripts/test.sh:
//
//   node tests/web/run.mjs [--filter SUBSTRING] [--models DIR]
//
// In Node: the WebAssembly SIMD128 kernels against the scalar ones, and the CPU
// path end to end (no browser). In Debian's headless Chromium (/usr/bin/chromium,
// driven by playwright-core, which never downloads a browser; fresh profile):
// the demo page with WebGPU on SwiftShader and with WebGPU disabled (the CPU
// wasm path), the JS API (progress, streaming, info, dispose), a corrupt
// file, the model cache, the stop button, the Asyncify build, a 24M-parameter
// synthetic model against the native CLI, and embed/rerank with small synthetic
// BERT models (written to a temporary folder) against the native CLI within 1e-4.
// Greedy text must equal the llama2.c reference. Screenshots go to build/web-artifacts/
// and are checked (the DOM text at that moment, and the PNG is not blank).
// Prints one line per test and then "N passed, N failed"; exits 1 on failure.
import { chromium } from 'playwright-core';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../../scripts/serve-web.mjs';
import { Engine } from '../../web/engine.js';
import { decodePng, imageStats } from './png.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');
const args = process.argv.slice(2);
const opt = { filter: '', models: path.resolve(repo, '../shared/models') };
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--filter') opt.filter = args[++i];
  else if (args[i] === '--models') opt.models = path.resolve(args[++i]);
}
const artifacts = path.join(repo, 'build', 'web-artifacts');
mkdirSync(artifacts, { recursive: true });

const MODEL = 'stories260K.gguf';
const PROMPT = 'Once upon a time';
// 60 greedy tokens after "Once upon a time" (BOS first), as llama2.c's run prints them.
const REFERENCE = readFileSync(path.join(opt.models, 'reference/stories260K.llama2c-run.t0.n64.once.txt'), 'utf8').replace(/\n$/, '');
const CHROMIUM = process.env.WGML_CHROMIUM || '/usr/bin/chromium';
const BASE_FLAGS = ['--no-sandbox', '--disable-gpu-sandbox', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--no-first-run', '--disable-quic'];
const WEBGPU_FLAGS = ['--enable-unsafe-webgpu', '--enable-unsafe-swiftshader', '--use-webgpu-adapter=swiftshader'];

const results = [];
async function test(name, fn) {
  if (opt.filter && !name.includes(opt.filter)) return;
  const t0 = Date.now();
  try {
    await fn();
    results.push(true);
    console.log(`ok   ${name} (${((Date.now() - t0) / 1e3).toFixed(1)} s)`);
  } catch (e) {
    results.push(false);
    console.log(`FAIL ${name} (${((Date.now() - t0) / 1e3).toFixed(1)} s): ${e && e.stack ? e.stack : e}`);
  }
}
function check(cond, what) {
  if (!cond) throw new Error(what);
}
function checkText(got, want, what) {
  if (got === want) return;
  let i = 0;
  while (i < got.length && got[i] === want[i]) i++;
  throw new Error(`${what}: differs at character ${i}:\n  got:  ${JSON.stringify(got.slice(Math.max(0, i - 20), i + 40))}\n  want: ${JSON.stringify(want.slice(Math.max(0, i - 20), i + 40))}`);
}

// ---- browser helpers ----

const profiles = [];
async function launch(webgpu) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'wgml-chromium-'));
  profiles.push(dir);
  const ctx = await chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM, headless: true, args: [...BASE_FLAGS, ...(webgpu ? WEBGPU_FLAGS : [])],
    viewport: { width: 1100, height: 820 },
  });
  return ctx;
}

async function openDemo(ctx, url) {
  const page = await ctx.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(e.message));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/favicon/.test(m.text())) page.errors.push(m.text());
  });
  await page.goto(url);
  await page.waitForFunction(() => window.wgmlDemo && window.wgmlDemo.webgpu !== null);
  return page;
}

const settled = (page, timeout = 240000) =>
  page.waitForFunction(() => !['loading', 'generating'].includes(window.wgmlDemo.status), null, { timeout, polling: 100 });

async function demoLoad(page, { backend, url, file }) {
  await page.selectOption('#backend', backend);
  if (file) await page.setInputFiles('#model-file', file);
  else await page.fill('#model-url', url);
  const before = await page.evaluate(() => window.wgmlDemo.loads);
  await page.click('#load');
  await page.waitForFunction((n) => window.wgmlDemo.loads > n, before, { timeout: 240000, polling: 100 });
  return page.evaluate(() => ({ status: window.wgmlDemo.status, error: window.wgmlDemo.error, info: window.wgmlDemo.info,
    progress: document.getElementById('progress').value, progressText: document.getElementById('progress-text').textContent,
    notice: document.getElementById('webgpu-notice').hidden ? '' : document.getElementById('webgpu-notice').textContent }));
}

async function demoGenerate(page, n) {
  await page.fill('#prompt', PROMPT);
  await page.fill('#max-tokens', String(n));
  await page.fill('#temperature', '0');
  const before = await page.evaluate(() => window.wgmlDemo.generations);
  await page.click('#generate');
  await page.waitForFunction((k) => window.wgmlDemo.generations > k, before, { timeout: 240000, polling: 100 });
  return page.evaluate(() => ({ status: window.wgmlDemo.status, error: window.wgmlDemo.error, info: window.wgmlDemo.info,
    output: document.getElementById('output').textContent, stats: document.getElementById('stats').textContent }));
}

// Saves a screenshot of the page and checks it: the DOM text at that moment is
// the reference, the whole page and the output box are not blank.
async function screenshotCheck(page, name) {
  const text = await page.evaluate(() => document.getElementById('output').textContent);
  const file = path.join(artifacts, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  const box = await page.locator('#output').screenshot();
  checkText(text, REFERENCE, `${name}: text on screen`);
  const whole = imageStats(decodePng(readFileSync(file)));
  const out = imageStats(decodePng(box));
  check(whole.distinctColors > 50 && whole.lumaStdDev > 20, `${name}.png looks blank: ${JSON.stringify(whole)}`);
  // light glyphs on the dark output box: a few percent of its pixels
  check(out.darkFraction > 0.5 && out.lightFraction > 0.01 && out.lightFraction < 0.4,
    `${name}: the output box does not show text: ${JSON.stringify(out)}`);
  writeFileSync(path.join(artifacts, `${name}.txt`), text);
  return file;
}

// ---- embeddings and reranking (the bert family) ----
// Small synthetic encoders (wgml synth --layers 1, 27 MiB each) written to a
// temporary folder at test time, and the native CLI's vectors and scores.
const BERT_TEXTS = ['The quick brown fox jumps over the lazy dog.', 'Grüße aus München: naïve café, 東京', 'embeddings in the browser'];
const BERT_OPTIONS = { pooling: 'cls', normalize: 'none', dimensions: 128 };
const RERANK_QUERY = 'what is a cat';
const RERANK_DOCS = ['a cat is a small animal', 'the stock market fell today', 'cats sleep a lot'];
let bertCache = null;
function bertModels() {
  if (bertCache) return bertCache;
  const cli = path.join(repo, 'build/wgml');
  check(existsSync(cli), 'build/wgml is missing (the native build makes it)');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'wgml-web-bert-'));
  profiles.push(dir);
  const run = (a) => execFileSync(cli, a, { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] }).toString();
  const files = {};
  for (const arch of ['all-minilm-l6', 'ms-marco-minilm-l6']) {
    files[arch] = path.join(dir, `${arch}.gguf`);
    run(['synth', '--arch', arch, '--type', 'F16', '--layers', '1', '-o', files[arch]]);
  }
  const vectors = (extra) => run(['embed', '-m', files['all-minilm-l6'], '--backend', 'cpu', ...extra, ...BERT_TEXTS])
    .trim().split('\n').map((l) => l.trim().split(/\s+/).map(Number));
  const want = {
    embed: vectors([]),
    options: vectors(['--pooling', 'cls', '--normalize', 'none', '--dimensions', '128']),
    rerank: run(['rerank', '-m', files['ms-marco-minilm-l6'], '--backend', 'cpu', '-q', RERANK_QUERY, ...RERANK_DOCS])
      .trim().split('\n').map((l) => Number(l.split('\t')[0])),
  };
  return (bertCache = { dir, files, want });
}
// Largest difference of two lists of vectors (of the same shape, else Infinity).
function maxDiff(got, want) {
  if (got.length !== want.length) return Infinity;
  let d = 0;
  for (let i = 0; i < want.length; i++) {
    const g = Array.from(got[i]);
    if (g.length !== want[i].length) return Infinity;
    for (let j = 0; j < g.length; j++) d = Math.max(d, Math.abs(g[j] - want[i][j]));
  }
  return d;
}
function checkEmbeddings(r, want, what) {
  check(r.embed.length === 3 && r.embed.every((v) => v.length === 384), `${what}: shapes ${r.embed.map((v) => v.length)}`);
  const d1 = maxDiff(r.embed, want.embed);
  const d2 = maxDiff(r.options, want.options);
  const d3 = maxDiff([r.scores], [want.rerank]);
  check(d1 < 1e-4, `${what}: embed differs from the native CLI by ${d1}`);
  check(d2 < 1e-4, `${what}: embed {pooling cls, normalize none, dimensions 128} differs from the native CLI by ${d2}`);
  check(d3 < 1e-4, `${what}: rerank scores ${r.scores} differ from the native CLI's ${want.rerank} by ${d3}`);
}

// ---- the tests ----

const wasmPath = path.join(repo, 'web/dist/wgml.wasm');
const modelBytes = readFileSync(path.join(opt.models, MODEL));
const speeds = {};

await test('node: WASM SIMD128 kernels match the scalar reference', async () => {
  const e = await Engine.create({ wasm: readFileSync(wasmPath), mode: 'sync', log: () => {} });
  const p = await e.call('wgmlw_kernel_check');
  const r = JSON.parse(e.cstring(p));
  check(r.isa === 'wasm-simd128', `kernels are '${r.isa}', not wasm-simd128`);
  check(Object.keys(r.types).length >= 13, `only ${Object.keys(r.types)} checked`);
  for (const [t, err] of Object.entries(r.types)) check(err < 1e-5, `${t}: SIMD differs from scalar by ${err}`);
});

await test('node: CPU wasm path generates the reference text', async () => {
  const e = await Engine.create({ wasm: readFileSync(wasmPath), mode: 'sync', log: () => {} });
  const m = await e.load({ size: modelBytes.length, read: (o, n) => modelBytes.subarray(o, o + n) }, { backend: 'cpu' });
  const s = await e.createSession(m);
  let text = '';
  const r = await e.generate(s, PROMPT, { maxTokens: 60, temperature: 0 }, (piece) => { text += piece; });
  checkText(PROMPT + text, REFERENCE, 'generated text');
  speeds.node_cpu = (r.n_generated - 1) / (r.generate_ms / 1e3);
  await e.freeSession(s);
  await e.freeModel(m);
});

await test('node: CPU wasm embed and rerank equal the native CLI', async () => {
  const { files, want } = bertModels();
  const e = await Engine.create({ wasm: readFileSync(wasmPath), mode: 'sync', log: () => {} });
  const open = (f) => {
    const b = readFileSync(f);
    return e.load({ size: b.length, read: (o, n) => b.subarray(o, o + n) }, { backend: 'cpu' });
  };
  const m = await open(files['all-minilm-l6']);
  const rr = await open(files['ms-marco-minilm-l6']);
  checkEmbeddings({ embed: await e.embed(m, BERT_TEXTS), options: await e.embed(m, BERT_TEXTS, BERT_OPTIONS),
    scores: await e.rerank(rr, RERANK_QUERY, RERANK_DOCS) }, want, 'node CPU');
  await e.freeModel(m);
  await e.freeModel(rr);
});

const { server, url: base } = await startServer({ root: repo, models: opt.models });
const demoUrl = `${base}web/`;
const modelUrl = `${base}models/${MODEL}`;

const gpuCtx = await launch(true);

await test('page, WebGPU (SwiftShader): greedy text equals the reference; screenshot', async () => {
  const page = await openDemo(gpuCtx, demoUrl);
  const l = await demoLoad(page, { backend: 'webgpu', url: modelUrl });
  check(l.status === 'ready', `load failed: ${l.error}`);
  check(l.info.backend === 'webgpu' && /swiftshader/i.test(l.info.adapter), `backend ${l.info.backend} / ${l.info.adapter}`);
  check(l.progress === 1, `progress bar at ${l.progress}`);
  const shown = await page.evaluate(() => [document.getElementById('info-backend').textContent, document.getElementById('info-adapter').textContent]);
  check(/WebGPU/.test(shown[0]) && /SwiftShader/i.test(shown[1]), `backend/adapter shown as ${shown}`);
  const g = await demoGenerate(page, 60);
  check(g.status === 'ready', `generation failed: ${g.error}`);
  checkText(g.output, REFERENCE, 'WebGPU output');
  check(/tokens\/s/.test(g.stats), `no tokens/s shown: ${g.stats}`);
  speeds.webgpu = g.info.last.tokens_per_s;
  await screenshotCheck(page, 'demo-webgpu');
  check(page.errors.length === 0, `page errors: ${page.errors}`);
  await page.close();
});

await test('page: a reload loads the model from the browser cache', async () => {
  const page = await openDemo(gpuCtx, demoUrl);
  const l = await demoLoad(page, { backend: 'webgpu', url: modelUrl });
  check(l.status === 'ready', `load failed: ${l.error}`);
  check(/from the browser cache/.test(l.progressText), `not from the cache: "${l.progressText}"`);
  await page.close();
});

await test('page: a corrupt file gives a readable error', async () => {
  const page = await openDemo(gpuCtx, demoUrl);
  const bad = Buffer.from(modelBytes.subarray(0, 4096));
  bad.writeUInt32LE(0xdeadbeef, 8); // the tensor count
  const l = await demoLoad(page, { backend: 'webgpu', file: { name: 'corrupt.gguf', mimeType: 'application/octet-stream', buffer: bad } });
  check(l.status === 'error', `status ${l.status}`);
  const shown = await page.evaluate(() => (document.getElementById('error').hidden ? '' : document.getElementById('error').textContent));
  check(/not a valid GGUF model file/.test(shown) && shown.length > 40, `error shown: "${shown}"`);
  const garbage = await page.evaluate(async () => {
    const wgml = (await import('./wgml.js')).default;
    try {
      await wgml.load(new Uint8Array(1000).fill(7).buffer, { backend: 'cpu' });
      return 'loaded';
    } catch (e) {
      return `${e.name} ${e.code}: ${e.message}`;
    }
  });
  check(/^WgmlError 3: .*GGUF/i.test(garbage), `garbage ArrayBuffer: ${garbage}`);
  await page.close();
});

await test('API (WebGPU): progress reaches 100%, generate streams, info, dispose frees the GPU buffers', async () => {
  const page = await openDemo(gpuCtx, demoUrl);
  const r = await page.evaluate(async (url) => {
    const wgml = (await import('./wgml.js')).default;
    const buf = await (await fetch(url)).arrayBuffer();
    const progress = [];
    const model = await wgml.load(buf, { backend: 'webgpu', onProgress: (p) => progress.push(p) });
    const before = model.info();
    const pieces = [];
    const t0 = performance.now();
    let first = 0;
    for await (const piece of model.generate('Once upon a time', { maxTokens: 12, temperature: 0 })) {
      if (!pieces.length) first = performance.now() - t0;
      pieces.push(piece);
    }
    const total = performance.now() - t0;
    const after = model.info();
    const live = await model.dispose();
    let afterDispose = '';
    try {
      await model.generate('x').next();
    } catch (e) {
      afterDispose = e.message;
    }
    return { progress, before, after, pieces, first, total, live, afterDispose };
  }, modelUrl);
  check(r.progress.length >= 2, `progress events: ${r.progress}`);
  check(r.progress.every((p, i) => p >= 0 && p <= 1 && (i === 0 || p >= r.progress[i - 1])), `progress not monotonic in 0..1: ${r.progress}`);
  check(r.progress[r.progress.length - 1] === 1, `progress ends at ${r.progress[r.progress.length - 1]}`);
  check(r.before.backend === 'webgpu' && r.before.device_memory_bytes > 0, `info before: ${JSON.stringify(r.before)}`);
  check(r.pieces.length >= 10 && r.first < r.total * 0.8, `not streamed: ${r.pieces.length} pieces, first after ${r.first} of ${r.total} ms`);
  checkText(PROMPT + r.pieces.join(''), REFERENCE.slice(0, (PROMPT + r.pieces.join('')).length), 'streamed text');
  check(r.after.tokensPerSecond > 0 && r.after.last.n_generated === 12, `info after: ${JSON.stringify(r.after.last)}`);
  check(r.after.submits > 0 && r.after.n_params === 292800, `counters: ${JSON.stringify(r.after)}`);
  check(r.live.buffers === 0 && r.live.bytes === 0 && r.live.devices === 0, `after dispose the GPU layer holds ${JSON.stringify(r.live)}`);
  check(/disposed/.test(r.afterDispose), `use after dispose: "${r.afterDispose}"`);
  await page.close();
});

await test('API (Asyncify build): CPU from a URL stream and WebGPU without JSPI', async () => {
  check(existsSync(path.join(repo, 'web/dist/wgml-asyncify.wasm')), 'web/dist/wgml-asyncify.wasm was not built (binaryen missing?)');
  const page = await openDemo(gpuCtx, demoUrl);
  const r = await page.evaluate(async (url) => {
    const wgml = (await import('./wgml.js')).default;
    const out = {};
    for (const [backend, n] of [['cpu', 60], ['webgpu', 6]]) {
      const model = await wgml.load(url, { backend, mode: 'asyncify', cache: false });
      let text = '';
      for await (const piece of model.generate('Once upon a time', { maxTokens: n, temperature: 0 })) text += piece;
      out[backend] = { text, info: model.info() };
      await model.dispose();
    }
    return out;
  }, modelUrl);
  check(r.cpu.info.mode === 'asyncify' && r.webgpu.info.mode === 'asyncify', `modes ${r.cpu.info.mode} ${r.webgpu.info.mode}`);
  check(r.webgpu.info.backend === 'webgpu', `backend ${r.webgpu.info.backend}`);
  checkText(PROMPT + r.cpu.text, REFERENCE, 'Asyncify CPU text');
  checkText(PROMPT + r.webgpu.text, REFERENCE.slice(0, PROMPT.length + r.webgpu.text.length), 'Asyncify WebGPU text');
  check(r.webgpu.text.length > 10, `Asyncify WebGPU text: "${r.webgpu.text}"`);
  await page.close();
});

await test('API: a 24M-parameter model (wgml synth stories15m Q8_0) streams from a URL; WebGPU and CPU match the native CLI', async () => {
  const cli = path.join(repo, 'build/wgml');
  check(existsSync(cli), 'build/wgml is missing (the native build makes it)');
  const rel = 'build/web-models/stories15m-Q8_0.gguf';
  const file = path.join(repo, rel);
  if (!existsSync(file)) {
    mkdirSync(path.dirname(file), { recursive: true });
    execFileSync(cli, ['synth', '--arch', 'stories15m', '--type', 'Q8_0', '-o', file], { cwd: repo, stdio: 'pipe' });
  }
  // random weights have near ties: compare with the same backend natively (SwiftShader, one CPU thread)
  const native = (extra, n) => execFileSync(cli, ['run', '-m', file, '--temp', '0', '-n', String(n), '-p', PROMPT, ...extra],
    { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] }).toString().replace(/\n$/, '');
  const wantGpu = native(['--adapter', 'swiftshader'], 3);
  const wantCpu = native(['--backend', 'cpu', '-t', '1'], 16);
  const page = await openDemo(gpuCtx, demoUrl);
  const r = await page.evaluate(async ({ url, prompt }) => {
    const wgml = (await import('./wgml.js')).default;
    const out = {};
    for (const [backend, n] of [['webgpu', 3], ['cpu', 16]]) {
      const progress = [];
      const model = await wgml.load(url, { backend, cache: false, onProgress: (p) => progress.push(p) });
      let text = '';
      for await (const piece of model.generate(prompt, { maxTokens: n, temperature: 0 })) text += piece;
      out[backend] = { text, info: model.info(), progress: progress.length };
      await model.dispose();
    }
    return out;
  }, { url: `${base}${rel}`, prompt: PROMPT });
  check(r.webgpu.info.backend === 'webgpu' && r.webgpu.info.n_params > 24e6, `info ${JSON.stringify(r.webgpu.info)}`);
  check(r.webgpu.progress > 10, `only ${r.webgpu.progress} progress events for 25 MiB`);
  checkText(PROMPT + r.webgpu.text, wantGpu, 'WebGPU text vs native SwiftShader');
  checkText(PROMPT + r.cpu.text, wantCpu, 'CPU wasm text vs native CPU');
  await page.close();
});

await test('API: embed and rerank (bert family) on WebGPU (JSPI, Asyncify) and the CPU wasm equal the native CLI; wrong tasks reject', async () => {
  const { dir, want } = bertModels();
  const page = await openDemo(gpuCtx, demoUrl);
  // the models are served from the temporary folder
  await page.route('**/wgml-bert/*.gguf', (route) => route.fulfill({ path: path.join(dir, path.basename(new URL(route.request().url()).pathname)),
    headers: { 'content-type': 'application/octet-stream' } }));
  const r = await page.evaluate(async ({ base, llama, texts, options, query, docs }) => {
    const wgml = (await import('./wgml.js')).default;
    const out = {};
    const fail = (p) => p.then(() => 'no error', (e) => `${e.name} ${e.code}: ${e.message}`);
    for (const backend of ['webgpu', 'cpu']) {
      const o = (out[backend] = {});
      const m = await wgml.load(`${base}all-minilm-l6.gguf`, { backend, cache: false });
      o.info = m.info();
      o.embed = (await m.embed(texts)).map((v) => Array.from(v));
      o.isFloat32 = (await m.embed(texts[0]))[0] instanceof Float32Array;
      o.options = (await m.embed(texts, options)).map((v) => Array.from(v));
      o.generate = await fail(m.generate('hello').next());
      o.rerankOnEmbedder = await fail(m.rerank('q', ['d']));
      o.badPooling = await fail(m.embed('x', { pooling: 'max' }));
      o.after = (await m.embed('still works'))[0].length;
      o.live = await m.dispose();
      const rr = await wgml.load(`${base}ms-marco-minilm-l6.gguf`, { backend, cache: false });
      o.rerankInfo = rr.info();
      o.scores = Array.from(await rr.rerank(query, docs));
      await rr.dispose();
    }
    // the Asyncify build (browsers without JSPI) unwinds through wgmlw_embed too
    const a = await wgml.load(`${base}all-minilm-l6.gguf`, { backend: 'webgpu', mode: 'asyncify', cache: false });
    out.asyncify = { info: a.info(), embed: (await a.embed(texts)).map((v) => Array.from(v)) };
    await a.dispose();
    const l = await wgml.load(llama, { backend: 'cpu' });
    out.llama = { info: l.info(), embed: await fail(l.embed(['x'])), rerank: await fail(l.rerank('q', ['d'])) };
    let text = '';
    for await (const piece of l.generate('Once upon a time', { maxTokens: 4, temperature: 0 })) text += piece;
    out.llama.text = text;
    await l.dispose();
    return out;
  }, { base: `${base}wgml-bert/`, llama: modelUrl, texts: BERT_TEXTS, options: BERT_OPTIONS, query: RERANK_QUERY, docs: RERANK_DOCS });
  for (const backend of ['webgpu', 'cpu']) {
    const o = r[backend];
    check(o.info.backend === backend && o.info.family === 'bert' && JSON.stringify(o.info.tasks) === '["embed"]' &&
      o.info.pooling === 'mean' && o.info.n_embd === 384, `${backend}: info ${JSON.stringify(o.info)}`);
    check(o.rerankInfo.family === 'bert' && JSON.stringify(o.rerankInfo.tasks) === '["rerank"]', `${backend}: reranker info ${JSON.stringify(o.rerankInfo)}`);
    check(o.isFloat32, `${backend}: embed does not give Float32Arrays`);
    checkEmbeddings(o, want, backend);
    check(/^WgmlError 4: a bert model does not generate text.*tasks: embed/.test(o.generate), `${backend}: generate on bert: ${o.generate}`);
    check(/^WgmlError 4: this model does not rerank/.test(o.rerankOnEmbedder), `${backend}: rerank on an embedder: ${o.rerankOnEmbedder}`);
    check(/^WgmlError 1: unknown pooling 'max'/.test(o.badPooling), `${backend}: bad pooling: ${o.badPooling}`);
    check(o.after === 384, `${backend}: embed after the errors: ${o.after}`);
    check(o.live.buffers === 0 && o.live.devices === 0, `${backend}: after dispose the GPU layer holds ${JSON.stringify(o.live)}`);
  }
  check(r.asyncify.info.mode === 'asyncify' && r.asyncify.info.backend === 'webgpu', `Asyncify: ${r.asyncify.info.mode} ${r.asyncify.info.backend}`);
  const da = maxDiff(r.asyncify.embed, want.embed);
  check(da < 1e-4, `Asyncify WebGPU: embed differs from the native CLI by ${da}`);
  check(r.llama.info.family === 'llama' && JSON.stringify(r.llama.info.tasks) === '["generate"]' && !('pooling' in r.llama.info),
    `llama info ${JSON.stringify(r.llama.info)}`);
  check(/^WgmlError 4: a llama model does not embed text.*tasks: generate/.test(r.llama.embed), `embed on llama: ${r.llama.embed}`);
  check(/^WgmlError 4: this model does not rerank/.test(r.llama.rerank), `rerank on llama: ${r.llama.rerank}`);
  checkText(PROMPT + r.llama.text, REFERENCE.slice(0, PROMPT.length + r.llama.text.length), 'generate after the failed embed');
  await page.close();
});

await gpuCtx.close();
const cpuCtx = await launch(false);

await test('page, WebGPU disabled: falls back to the CPU wasm, says so; text equals the reference; screenshot', async () => {
  const page = await openDemo(cpuCtx, demoUrl);
  const early = await page.evaluate(() => document.getElementById('webgpu-notice').textContent);
  check(/WebGPU is not available/.test(early), `no WebGPU notice: "${early}"`);
  const l = await demoLoad(page, { backend: 'auto', file: path.join(opt.models, MODEL) });
  check(l.status === 'ready', `load failed: ${l.error}`);
  check(l.info.backend === 'cpu' && l.info.adapter === 'wasm-simd128', `backend ${l.info.backend} / ${l.info.adapter}`);
  check(/runs on the CPU/.test(l.notice), `no fallback notice: "${l.notice}"`);
  const g = await demoGenerate(page, 60);
  check(g.status === 'ready', `generation failed: ${g.error}`);
  checkText(g.output, REFERENCE, 'CPU output');
  speeds.cpu = g.info.last.tokens_per_s;
  await screenshotCheck(page, 'demo-cpu');
  check(page.errors.length === 0, `page errors: ${page.errors}`);
  await page.close();
});

await test('page: the stop button stops a long generation', async () => {
  const page = await openDemo(cpuCtx, demoUrl);
  const l = await demoLoad(page, { backend: 'cpu', url: modelUrl });
  check(l.status === 'ready', `load failed: ${l.error}`);
  await page.fill('#max-tokens', '4000');
  await page.fill('#temperature', '0.8');
  await page.click('#generate');
  await page.waitForFunction(() => (document.getElementById('generated') || {}).textContent?.length > 100, null, { timeout: 60000 });
  await page.click('#stop');
  await settled(page, 60000);
  const r = await page.evaluate(() => window.wgmlDemo.info.last);
  check(r && r.stop === 'stopped by callback' && r.n_generated < 4000, `after stop: ${JSON.stringify(r)}`);
  await page.close();
});

await cpuCtx.close();
server.close();
for (const d of profiles) rmSync(d, { recursive: true, force: true });

const fmt = (v) => (v ? `${v.toFixed(1)} tokens/s` : 'n/a');
console.log(`speeds (stories260K, 60 greedy tokens): WebGPU SwiftShader ${fmt(speeds.webgpu)}, CPU wasm in Chromium ${fmt(speeds.cpu)}, CPU wasm in Node ${fmt(speeds.node_cpu)}`);
writeFileSync(path.join(artifacts, 'speeds.json'), JSON.stringify(speeds, null, 2));
const passed = results.filter(Boolean).length;
const failed = results.length - passed;
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
