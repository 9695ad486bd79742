// bench.mjs - tokens/s of the browser build in headless Chromium, for comparison
// with `wgml run` / `wgml bench` natively on the same machine.
//
//   node tests/web/bench.mjs [--model FILE.gguf] [--tokens 60] [--runs 3] [--prompt TEXT]
//                            [--threads 1,2] [--only cpu|webgpu]
//
// For WebGPU (SwiftShader here), JSPI and Asyncify, and for the CPU (WebAssembly
// SIMD128) with Asyncify and with JSPI at each thread count of --threads: loads
// the model once per configuration and generates greedily `runs` times, the
// CPU thread counts in alternation (one run of each per round, so that a
// neighbour's load on the machine falls on all of them alike). Prints the
// median decode tokens/s (after the first token, as `wgml run` reports it) and
// prompt tokens/s, and each thread count's ratio to the first's. The page is
// cross-origin isolated (scripts/serve-web.mjs sends COOP/COEP), which threads
// need. The default prompt is about 90 tokens, so that prefill is measured on
// more than a handful of rows.
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../../scripts/serve-web.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');
const a = process.argv.slice(2);
const get = (k, d) => (a.includes(k) ? a[a.indexOf(k) + 1] : d);
const model = path.resolve(get('--model', path.join(repo, '../shared/models/stories260K.gguf')));
const tokens = Number(get('--tokens', 60));
const runs = Number(get('--runs', 3));
const prompt = get('--prompt', 'Once upon a time there was a little girl named Lily who loved to play outside in the park with her friends. '.repeat(4).trim());
const threadCounts = get('--threads', '1,2').split(',').map(Number);
const only = get('--only', '');
const { server, url } = await startServer({ root: repo, models: path.dirname(model) });
const dir = mkdtempSync(path.join(os.tmpdir(), 'wgml-bench-'));
const ctx = await chromium.launchPersistentContext(dir, {
  executablePath: process.env.WGML_CHROMIUM || '/usr/bin/chromium', headless: true,
  args: ['--no-sandbox', '--disable-gpu-sandbox', '--enable-unsafe-webgpu', '--enable-unsafe-swiftshader',
    '--use-webgpu-adapter=swiftshader', '--disable-background-networking', '--no-first-run'],
});
const page = await ctx.newPage();
await page.goto(`${url}web/`);
const median = (v) => [...v].sort((x, y) => x - y)[Math.floor(v.length / 2)];
const src = `${url}models/${path.basename(model)}`;
console.log(`cross-origin isolated: ${await page.evaluate(() => crossOriginIsolated)}, ${runs} runs, ${tokens} tokens`);

// loads a model in the page under a name; resolves to its load time and info
const load = (name, options) => page.evaluate(async ({ src, name, options }) => {
  const wgml = (await import('./wgml.js')).default;
  const t0 = performance.now();
  const notes = [];
  const m = await wgml.load(src, { ...options, cache: false, onNote: (t) => notes.push(t) });
  (window.benchModels ||= {})[name] = m;
  return { load: performance.now() - t0, info: m.info(), notes };
}, { src, name, options });
const generate = (name) => page.evaluate(async ({ name, tokens, prompt }) => {
  const m = window.benchModels[name];
  for await (const piece of m.generate(prompt, { maxTokens: tokens, temperature: 0 })) void piece;
  return m.info().last;
}, { name, tokens, prompt });
const dispose = (name) => page.evaluate(async (name) => window.benchModels[name].dispose(), name);
const line = (label, adapter, out, loadMs, extra = '') => {
  const tg = median(out.map((x) => x.tokens_per_s));
  const pp = median(out.map((x) => x.prompt_tokens_per_s));
  console.log(`${label.padEnd(18)} ${adapter.padEnd(30)} decode ${tg.toFixed(1).padStart(8)} tok/s  prompt ${pp.toFixed(1).padStart(8)} tok/s` +
    `  (${out[0].n_prompt} prompt tokens)  load ${(loadMs / 1e3).toFixed(2)} s${extra}`);
  return { tg, pp };
};

const configs = [];
if (only !== 'cpu') for (const mode of ['jspi', 'asyncify']) configs.push({ label: `webgpu ${mode}`, options: { backend: 'webgpu', mode } });
if (only !== 'webgpu') configs.push({ label: 'cpu asyncify t1', options: { backend: 'cpu', mode: 'asyncify', threads: 1 } });
for (const c of configs) {
  const l = await load(c.label, c.options);
  const out = [];
  for (let i = 0; i < runs; i++) out.push(await generate(c.label));
  line(c.label, l.info.adapter, out, l.load);
  await dispose(c.label);
}
if (only !== 'webgpu') {
  // the thread counts side by side: all loaded, one run of each per round
  const names = threadCounts.map((t) => `cpu jspi t${t}`);
  const loaded = [];
  for (let k = 0; k < names.length; k++) loaded.push(await load(names[k], { backend: 'cpu', mode: 'jspi', threads: threadCounts[k] }));
  const outs = names.map(() => []);
  for (let i = 0; i < runs; i++) for (let k = 0; k < names.length; k++) outs[k].push(await generate(names[k]));
  let base = null;
  for (let k = 0; k < names.length; k++) {
    const got = loaded[k].info.n_threads;
    const note = got !== threadCounts[k] ? `  [asked for ${threadCounts[k]}, got ${got}: ${loaded[k].notes.join('; ')}]` : '';
    const r = line(names[k], loaded[k].info.adapter, outs[k], loaded[k].load, note);
    if (!base) base = r;
    else console.log(`${''.padEnd(18)} vs t${threadCounts[0]}: decode x${(r.tg / base.tg).toFixed(2)}, prompt x${(r.pp / base.pp).toFixed(2)}`);
  }
  for (const n of names) await dispose(n);
}
await ctx.close();
server.close();
rmSync(dir, { recursive: true, force: true });
