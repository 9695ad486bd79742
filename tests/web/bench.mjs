// bench.mjs - tokens/s of the browser build in headless Chromium, for comparison
// with `wgml run` / `wgml bench` natively on the same machine.
//
//   node tests/web/bench.mjs [--model FILE.gguf] [--tokens 60] [--runs 3] [--prompt TEXT]
//
// For each of WebGPU (SwiftShader here) and the CPU (WebAssembly SIMD128), with
// JSPI and with the Asyncify build: loads the model once, generates greedily
// `runs` times and prints the median decode tokens/s (after the first token,
// as `wgml run` reports it) and prompt tokens/s.
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
const prompt = get('--prompt', 'Once upon a time');

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
for (const backend of ['webgpu', 'cpu'])
  for (const mode of ['jspi', 'asyncify']) {
    const r = await page.evaluate(async ({ src, backend, mode, tokens, runs, prompt }) => {
      const wgml = (await import('./wgml.js')).default;
      const t0 = performance.now();
      const m = await wgml.load(src, { backend, mode, cache: false });
      const load = performance.now() - t0;
      const out = [];
      for (let i = 0; i < runs; i++) {
        for await (const piece of m.generate(prompt, { maxTokens: tokens, temperature: 0 })) void piece;
        out.push(m.info().last);
      }
      const info = m.info();
      await m.dispose();
      return { load, out, adapter: info.adapter };
    }, { src: `${url}models/${path.basename(model)}`, backend, mode, tokens, runs, prompt });
    const tg = median(r.out.map((x) => x.tokens_per_s));
    const pp = median(r.out.map((x) => x.prompt_tokens_per_s));
    console.log(`${backend.padEnd(6)} ${mode.padEnd(8)} ${r.adapter.padEnd(36)} decode ${tg.toFixed(1).padStart(8)} tok/s  ` +
      `prompt ${pp.toFixed(1).padStart(8)} tok/s  load ${(r.load / 1e3).toFixed(2)} s`);
  }
await ctx.close();
server.close();
rmSync(dir, { recursive: true, force: true });
