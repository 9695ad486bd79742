// vision.mjs - the image tests of the web build (the clip family), run by
// run.mjs (`node tests/web/run.mjs --filter image`): a random-weight ViT
// classifier (wgml synth --arch vit-base --type F16 --layers 1, 17 MiB,
// written to a temporary folder), two images of deterministic pixels given
// as RGBA ({ width, height, data } and ImageData) and as PNG files (Blobs the
// browser decodes: lossless, so the same pixels), against the native CLI's
// `wgml embed --image` vectors (within 1e-4) and `wgml classify --json` top-5
// labels: in Node (the CPU wasm, no browser), in Chromium on WebGPU
// (SwiftShader) and the CPU wasm, and the demo's images tab; and a random-weight
// CLIP's text tower (texts embedded, zero-shot classification) in Node.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { encodePng } from './png.mjs';

// Two sizes: one smaller than the model's 224 (upscaled), one larger and not square.
const SIZES = [[37, 29], [301, 233]];

// Image i's pixels: RGB for the PNG, RGBA (alpha 255) for the API.
function pixels(i) {
  const [width, height] = SIZES[i];
  const rgb = new Uint8Array(3 * width * height);
  const rgba = new Uint8Array(4 * width * height);
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++) {
      const p = y * width + x;
      const v = [(x * 7 + y * 13 + 31 * i) & 255, (x * x + y * 3) & 255, (x * y * 3 + 5 + 90 * i) & 255];
      rgb.set(v, 3 * p);
      rgba.set([...v, 255], 4 * p);
    }
  return { width, height, rgb, rgba };
}

let cache = null;
// The model, the PNG files and the native CLI's answers (CPU backend).
export function visionFiles({ repo, profiles }) {
  if (cache) return cache;
  const cli = path.join(repo, 'build/wgml');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'wgml-web-vision-'));
  profiles.push(dir);
  const run = (a) => execFileSync(cli, a, { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] }).toString();
  const model = path.join(dir, 'vit-base.gguf');
  run(['synth', '--arch', 'vit-base', '--type', 'F16', '--layers', '1', '-o', model]);
  const images = SIZES.map((_, i) => pixels(i));
  const pngs = images.map((im, i) => {
    const f = path.join(dir, `image${i}.png`);
    writeFileSync(f, encodePng({ width: im.width, height: im.height, pixels: im.rgb }));
    return f;
  });
  const vectors = (extra) => run(['embed', '-m', model, '--backend', 'cpu', ...extra, '--image', ...pngs])
    .trim().split('\n').map((l) => l.trim().split(/\s+/).map(Number));
  const classified = JSON.parse(run(['classify', '-m', model, '--backend', 'cpu', '--json', '--top', '5', ...pngs]));
  const want = {
    embed: vectors([]),
    raw: vectors(['--normalize', 'none']),
    top: classified.data.map((d) => d.labels),
  };
  return (cache = { dir, model, pngs, images, want });
}

// A random-weight CLIP with its text tower (clip-vit-b32 Q8_0, one layer a tower: ~40 MiB) and the
// native CLI's text vectors and zero-shot scores of the same images.
const TEXTS = ['a photo of a cat', 'A DOG, running!', "it's 3 o'clock"];
let clipCache = null;
export function clipFiles(ctx) {
  if (clipCache) return clipCache;
  const { dir, pngs } = visionFiles(ctx);
  const cli = path.join(ctx.repo, 'build/wgml');
  const run = (a) => execFileSync(cli, a, { cwd: ctx.repo, stdio: ['ignore', 'pipe', 'pipe'] }).toString();
  const model = path.join(dir, 'clip-vit-b32.gguf');
  run(['synth', '--arch', 'clip-vit-b32', '--type', 'Q8_0', '--layers', '1', '-o', model]);
  const text = run(['embed', '-m', model, '--backend', 'cpu', '--text', ...TEXTS])
    .trim().split('\n').map((l) => l.trim().split(/\s+/).map(Number));
  const zero = JSON.parse(run(['classify', '-m', model, '--backend', 'cpu', '--json', '--top', String(TEXTS.length),
    '--image', ...pngs, '--labels', ...TEXTS]));
  return (clipCache = { model, want: { text, zero: zero.data.map((d) => d.labels) } });
}

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

// got: per image [{ label, index, score }]: the CLI's top 5 (indices and labels; scores within 1e-5).
function checkTop(check, got, want, what) {
  check(Array.isArray(got) && got.length === want.length, `${what}: ${got && got.length} images classified, want ${want.length}`);
  for (let i = 0; i < want.length; i++) {
    const g = got[i].map((l) => l.index).join(',');
    const w = want[i].map((l) => l.index).join(',');
    check(g === w, `${what}: image ${i}: top-5 indices ${g}, the CLI's ${w}`);
    check(got[i].every((l, k) => l.label === want[i][k].label && Math.abs(l.score - want[i][k].score) < 1e-5),
      `${what}: image ${i}: labels/scores ${JSON.stringify(got[i])} vs the CLI's ${JSON.stringify(want[i])}`);
  }
}

// Runs the tests through run.mjs's test(): ctx has test, check, Engine,
// wasmPath, repo, profiles, openDemo, launch (a Chromium context, with WebGPU
// on SwiftShader: launch(true)), base, demoUrl, modelUrl, artifacts.
export async function visionTests(ctx) {
  const { test, check, Engine, wasmPath, openDemo, base, demoUrl } = ctx;
  let gpu = null; // started for the first browser test that runs
  const gpuCtx = async () => (gpu = gpu || (await ctx.launch(true)));
  const rgbaOf = (images) => images.map((im) => ({ width: im.width, height: im.height, data: im.rgba }));

  await test('node: CPU wasm image embed and classify (vit-base) equal the native CLI', async () => {
    const { model, images, want } = visionFiles(ctx);
    const e = await Engine.create({ wasm: readFileSync(wasmPath), mode: 'sync', log: () => {} });
    const b = readFileSync(model);
    const m = await e.load({ size: b.length, read: (o, n) => b.subarray(o, o + n) }, { backend: 'cpu' });
    const info = await e.info(m);
    check(info.family === 'clip' && JSON.stringify(info.tasks) === '["embed-image","classify"]' && info.image_size === 224 &&
      info.n_labels === 1000, `info ${JSON.stringify(info)}`);
    const v = await e.embedImages(m, rgbaOf(images));
    check(v.length === 2 && v.every((x) => x instanceof Float32Array && x.length === want.embed[0].length), `shapes ${v.map((x) => x.length)}`);
    const d1 = maxDiff(v, want.embed);
    check(d1 < 1e-4, `embedImages differs from the native CLI by ${d1}`);
    const d2 = maxDiff(await e.embedImages(m, rgbaOf(images), { normalize: 'none', batch: 1 }), want.raw);
    check(d2 < 1e-4, `embedImages { normalize: 'none', batch: 1 } differs from the native CLI by ${d2}`);
    checkTop(check, await e.classify(m, rgbaOf(images)), want.top, 'node classify');
    const all = await e.classify(m, rgbaOf(images.slice(0, 1)), { top: 0 });
    check(all[0].length === 1000 && Math.abs(all[0].reduce((s, l) => s + l.score, 0) - 1) < 1e-4, 'classify { top: 0 }: not all 1000 probabilities');
    const bad = await e.embedImages(m, [{ width: 2, height: 2, data: new Uint8Array(12) }]).then(() => 'no error', (x) => `${x.code}: ${x.message}`);
    check(/^1: embedImages: image 0 is not/.test(bad), `a short RGBA buffer: ${bad}`);
    await e.freeModel(m);
  });

  await test('node: CPU wasm CLIP text tower: embed texts and zero-shot classify equal the native CLI', async () => {
    const { images } = visionFiles(ctx);
    const { model, want } = clipFiles(ctx);
    const e = await Engine.create({ wasm: readFileSync(wasmPath), mode: 'sync', log: () => {} });
    const b = readFileSync(model);
    const m = await e.load({ size: b.length, read: (o, n) => b.subarray(o, o + n) }, { backend: 'cpu' });
    const info = await e.info(m);
    check(info.family === 'clip' && ['embed', 'embed-image', 'classify'].every((t) => info.tasks.includes(t)),
      `info ${JSON.stringify(info)}`);
    const d = maxDiff(await e.embed(m, TEXTS), want.text);
    check(d < 1e-4, `embed (CLIP's text tower) differs from the native CLI by ${d}`);
    // scores within 2e-4: CLIP's logit scale (100) turns the wasm and native kernels' small differences
    // in the Q8_0 vectors into differences of up to 1.8e-5 (measured) in the probabilities
    const got = await e.classify(m, rgbaOf(images), { labels: TEXTS, top: 0 });
    check(got.length === want.zero.length, `${got.length} images zero-shot classified`);
    for (let i = 0; i < want.zero.length; i++)
      check(got[i].length === TEXTS.length && got[i].every((l, k) => l.label === want.zero[i][k].label &&
        l.index === want.zero[i][k].index && Math.abs(l.score - want.zero[i][k].score) < 2e-4),
      `image ${i}: zero-shot ${JSON.stringify(got[i])}, the CLI's ${JSON.stringify(want.zero[i])}`);
    const bad = await e.classify(m, rgbaOf(images), { labels: [] }).then(() => 'no error', (x) => `${x.code}: ${x.message}`);
    check(/labels must be/.test(bad), `classify { labels: [] }: ${bad}`);
    await e.freeModel(m);
  });

  await test('API: images: embedImages and classify (vit-base) on WebGPU and the CPU wasm: ImageData, RGBA, PNG Blobs equal the native CLI', async () => {
    const { dir, images, want, pngs } = visionFiles(ctx);
    const page = await openDemo(await gpuCtx(), demoUrl);
    await page.route('**/wgml-vision/*', (route) => route.fulfill({ path: path.join(dir, path.basename(new URL(route.request().url()).pathname)),
      headers: { 'content-type': 'application/octet-stream' } }));
    const r = await page.evaluate(async ({ base, imgs, pngNames, llama }) => {
      const wgml = (await import('./wgml.js')).default;
      const fail = (p) => p.then(() => 'no error', (e) => `${e.name} ${e.code}: ${e.message}`);
      const rgba = imgs.map((im) => ({ width: im.width, height: im.height, data: new Uint8ClampedArray(im.rgba) }));
      const blobs = await Promise.all(pngNames.map(async (n) => (await fetch(`${base}${n}`)).blob()));
      const out = {};
      for (const backend of ['webgpu', 'cpu']) {
        const o = (out[backend] = { ms: {} });
        const m = await wgml.load(`${base}vit-base.gguf`, { backend, cache: false });
        o.info = m.info();
        const timed = async (k, f) => {
          const t0 = performance.now();
          o[k] = await f();
          o.ms[k] = Math.round(performance.now() - t0);
        };
        // SwiftShader takes ~30 s an image here: on WebGPU one image a call, the rest on the CPU wasm
        const k = backend === 'cpu' ? 2 : 1;
        await timed('imageData', async () => (await m.embedImages(rgba.slice(0, k).map((im) => new ImageData(im.data, im.width, im.height))))
          .map((v) => Array.from(v)));
        await timed('classify', () => m.classify(blobs.slice(0, k), { top: 5 }));
        if (backend === 'cpu') {
          o.isFloat32 = (await m.embedImages(rgba[0]))[0] instanceof Float32Array;
          await timed('rgba', async () => (await m.embedImages(rgba, { normalize: 'none' })).map((v) => Array.from(v)));
          await timed('blob', async () => (await m.embedImages(blobs)).map((v) => Array.from(v)));
          await timed('bitmap', async () => (await m.embedImages([await createImageBitmap(blobs[1])])).map((v) => Array.from(v)));
          await timed('classifyRgba', () => m.classify(rgba));
          o.after = (await m.classify(rgba[0], { top: 1 }))[0].length;
        }
        o.notImage = await fail(m.embedImages([new Blob(['not an image'], { type: 'image/png' })]));
        o.noImages = await fail(m.classify([]));
        o.text = await fail(m.embed('x'));
        o.live = await m.dispose();
      }
      const l = await wgml.load(llama, { backend: 'cpu' });
      out.llama = { embedImages: await fail(l.embedImages(rgba[0])), classify: await fail(l.classify(rgba[0])) };
      await l.dispose();
      return out;
    }, { base: `${base}wgml-vision/`, imgs: images.map((im) => ({ width: im.width, height: im.height, rgba: Array.from(im.rgba) })),
      pngNames: pngs.map((f) => path.basename(f)), llama: ctx.modelUrl });
    console.log(`     ms per call: WebGPU (SwiftShader) ${JSON.stringify(r.webgpu.ms)}, CPU wasm ${JSON.stringify(r.cpu.ms)}`);
    for (const backend of ['webgpu', 'cpu']) {
      const o = r[backend];
      check(o.info.backend === backend && o.info.family === 'clip' && JSON.stringify(o.info.tasks) === '["embed-image","classify"]' &&
        o.info.image_size === 224 && o.info.n_labels === 1000, `${backend}: info ${JSON.stringify(o.info)}`);
      const k = backend === 'cpu' ? 2 : 1;
      const sets = [['imageData', want.embed.slice(0, k)]];
      if (backend === 'cpu') {
        check(o.isFloat32, `${backend}: embedImages does not give Float32Arrays`);
        sets.push(['rgba', want.raw], ['blob', want.embed], ['bitmap', want.embed.slice(1)]);
        checkTop(check, o.classifyRgba, want.top, `${backend}: classify (RGBA)`);
        check(o.after === 1, `${backend}: classify after the errors: ${o.after}`);
      }
      for (const [name, w] of sets) {
        const d = maxDiff(o[name], w);
        check(d < 1e-4, `${backend}: embedImages (${name}) differs from the native CLI by ${d}`);
      }
      checkTop(check, o.classify, want.top.slice(0, k), `${backend}: classify (PNG Blobs)`);
      check(/^WgmlError 3: image: the browser could not decode the image file/.test(o.notImage), `${backend}: a bad file: ${o.notImage}`);
      check(/^WgmlError 1: classify: no images/.test(o.noImages), `${backend}: no images: ${o.noImages}`);
      check(/^WgmlError 4: .*tasks: embed-image, classify/.test(o.text), `${backend}: text embed on a ViT: ${o.text}`);
    }
    check(/^WgmlError 4: a llama model does not .*tasks: generate/.test(r.llama.embedImages), `embedImages on llama: ${r.llama.embedImages}`);
    check(/^WgmlError 4: this model has no classifier head.*tasks: generate/.test(r.llama.classify), `classify on llama: ${r.llama.classify}`);
    check(page.errors.length === 0, `page errors: ${page.errors}`);
    // last: the model's GPU buffers (the vision state's too) are freed with it
    for (const backend of ['webgpu', 'cpu'])
      check(r[backend].live.buffers === 0 && r[backend].live.bytes === 0, `${backend}: dispose left ${JSON.stringify(r[backend].live)}`);
    await page.close();
  });

  await test('page: the images tab classifies dropped PNG files (top 5 as the CLI) and shows a similarity matrix', async () => {
    const { model, pngs, want } = visionFiles(ctx);
    const page = await openDemo(await gpuCtx(), demoUrl);
    await page.selectOption('#backend', 'cpu');
    await page.setInputFiles('#model-file', model);
    const before = await page.evaluate(() => window.wgmlDemo.loads);
    await page.click('#load');
    await page.waitForFunction((n) => window.wgmlDemo.loads > n, before, { timeout: 240000, polling: 100 });
    const loaded = await page.evaluate(() => ({ status: window.wgmlDemo.status, error: window.wgmlDemo.error,
      tab: document.getElementById('images-section').hidden ? '' : 'images' }));
    check(loaded.status === 'ready' && loaded.tab === 'images', `after loading: ${JSON.stringify(loaded)}`);
    const runs = await page.evaluate(() => window.wgmlDemo.imageRuns);
    await page.setInputFiles('#image-files', pngs);
    await page.waitForFunction((n) => window.wgmlDemo.imageRuns > n, runs, { timeout: 240000, polling: 100 });
    const shown = await page.evaluate(() => ({ error: window.wgmlDemo.error, labels: window.wgmlDemo.imageLabels,
      rows: [...document.querySelectorAll('#image-results .labels')].map((ol) => [...ol.querySelectorAll('li')].map((li) => li.dataset.index)),
      matrix: [...document.querySelectorAll('#image-matrix tbody tr')].map((tr) => [...tr.querySelectorAll('td')].map((td) => Number(td.textContent))),
      zeroShot: document.getElementById('image-labels').disabled }));
    check(!shown.error, `demo error: ${shown.error}`);
    check(shown.rows.length === 2, `${shown.rows.length} images shown`);
    for (let i = 0; i < 2; i++)
      check(shown.rows[i].join(',') === want.top[i].map((l) => l.index).join(','), `image ${i}: the tab shows ${shown.rows[i]}, the CLI ${want.top[i].map((l) => l.index)}`);
    // the cosine matrix of the CLI's unit vectors
    const cos = want.embed.map((a) => want.embed.map((b) => a.reduce((s, x, k) => s + x * b[k], 0)));
    check(shown.matrix.length === 2 && shown.matrix.every((row, i) => row.length === 2 && row.every((v, j) => Math.abs(v - cos[i][j]) < 2e-3)),
      `similarity matrix ${JSON.stringify(shown.matrix)}, the CLI's ${JSON.stringify(cos)}`);
    check(shown.zeroShot, 'the zero-shot labels box is not disabled');
    await page.screenshot({ path: path.join(ctx.artifacts, 'images-tab.png'), fullPage: true });
    check(page.errors.length === 0, `page errors: ${page.errors}`);
    await page.close();
  });
  if (gpu) await gpu.close();
}
