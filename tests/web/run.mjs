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
// BERT models (written to a temporary folder) against the native CLI within 1e-4,
// and Kokoro text to speech (the tiny checkpoint of ../shared/kokoro converted by
// the native CLI): audio against `wgml speak` on WebGPU and the CPU wasm, G2P in
// the page (espeak-ng from web/node_modules/phonemizer) against `wgml phonemize`
// and the shared G2P vectors, chunks streamed per sentence, the demo's speech tab;
// Whisper transcription (the shared random-weight micro model, whisper.cpp .bin
// and GGUF) of the reference `jfk` clip against `wgml transcribe` and the
// reference kit's greedy tokens, on the CPU wasm (samples, word times, a WAV Blob
// the browser decodes, an AudioBuffer) and WebGPU, and the demo's transcribe tab.
// Images (tests/web/vision.mjs): a random-weight ViT classifier's embedImages
// and classify (RGBA, ImageData, PNG Blobs) against `wgml embed --image` and
// `wgml classify` on WebGPU, the CPU wasm and in Node, and the demo's images tab.
// Greedy text must equal the llama2.c reference. Screenshots go to build/web-artifacts/
// and are checked (the DOM text at that moment, and the PNG is not blank).
// Prints one line per test and then "N passed, N failed"; exits 1 on failure.
import { chromium } from 'playwright-core';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startServer } from '../../scripts/serve-web.mjs';
import { Engine } from '../../web/engine.js';
import { decodePng, imageStats } from './png.mjs';
import { visionTests } from './vision.mjs';

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
  '--disable-sync', '--no-first-run', '--disable-quic',
  // a microphone for the transcribe tab's recording: Chromium's fake device (a beep), allowed without asking
  '--use-fake-device-for-media-stream', '--use-fake-ui-for-media-stream'];
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

// ---- speech (the kokoro family) ----
// kokoro-tiny.pth (random weights, the real structure) with the three shared
// voices, converted by the native CLI into a temporary folder, and what the
// native CLI says for the same phonemes, voice and seed: on the CPU (one
// thread) and on SwiftShader (started at once, in the background: Kokoro on
// SwiftShader runs at about 4x real time).
const KOKORO_DIR = path.resolve(opt.models, '../kokoro');
const KOKORO_PHONEMES = 'həlˈoʊ wˈɜːld. hˌaʊ ɑːɹ juː?'; // two sentences, on the CPU
const KOKORO_VOICE = 'af_heart:0.6,am_adam:0.4';
const KOKORO_SEED = 5;
const KOKORO_GPU_PHONEMES = 'hˈaɪ. bˈaɪ!'; // short: SwiftShader
const KOKORO_GPU_SEED = 7;
const SPEECH_TEXT = 'Hello there. Mr. Smith paid $5.50 for 12 apples! How are you today?';
// sentences for `wgml phonemize` (when espeak-ng is installed) besides the shared vectors
const G2P_SENTENCES = ['Hello there. Mr. Smith paid $5.50 for 12 apples! How are you today?',
  "It's 7:30 in the morning; the café (on 5th Avenue) opens at 8.", 'Kokoro speaks in 1999, 2024 and 3.14 seconds.'];
let kokoroCache = null;
function kokoroFiles() {
  if (kokoroCache) return kokoroCache;
  const cli = path.join(repo, 'build/wgml');
  check(existsSync(cli), 'build/wgml is missing (the native build makes it)');
  check(existsSync(path.join(KOKORO_DIR, 'kokoro-tiny.pth')), `${KOKORO_DIR}/kokoro-tiny.pth is missing`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'wgml-web-kokoro-'));
  profiles.push(dir);
  const run = (a) => execFileSync(cli, a, { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] }).toString();
  const model = path.join(dir, 'kokoro-tiny.gguf');
  run(['convert', 'kokoro', path.join(KOKORO_DIR, 'kokoro-tiny.pth'), '--config', path.join(KOKORO_DIR, 'config-kokoro-tiny.json'),
    '--voices', path.join(KOKORO_DIR, 'voices'), '-o', model]);
  const speak = (backend, phonemes, voice, seed, name) => [cli, ['speak', '-m', model, ...backend, '-v', voice, '--seed', String(seed),
    '--phonemes', phonemes, '--wav-format', 'f32', '-o', path.join(dir, `${name}.wav`), '--words', path.join(dir, `${name}.tsv`)]];
  const [c1, a1] = speak(['--adapter', 'swiftshader'], KOKORO_GPU_PHONEMES, 'af_heart', KOKORO_GPU_SEED, 'swiftshader');
  const swiftshader = promisify(execFile)(c1, a1, { cwd: repo }).then(() => readWav(path.join(dir, 'swiftshader.wav')));
  swiftshader.catch(() => {}); // awaited by its test
  const [c2, a2] = speak(['--backend', 'cpu', '--threads', '1'], KOKORO_PHONEMES, KOKORO_VOICE, KOKORO_SEED, 'cpu');
  execFileSync(c2, a2, { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] });
  const words = readFileSync(path.join(dir, 'cpu.tsv'), 'utf8').trim().split('\n').map((l) => {
    const [start, end, word] = l.split('\t');
    return { word, start: Number(start), end: Number(end) };
  });
  // text to phonemes: the shared vectors (kokoro-js's own output, which the
  // native G2P matches exactly), and `wgml phonemize` where espeak-ng is installed
  const tsv = (lang) => readFileSync(path.join(KOKORO_DIR, `g2p-${lang}.tsv`), 'utf8').trim().split('\n')
    .map((l) => l.split('\t')).map(([text, phonemes]) => ({ text, phonemes }));
  let native = null;
  try {
    execFileSync('sh', ['-c', 'command -v espeak-ng'], { stdio: 'ignore' });
    const f = path.join(dir, 'sentences.txt');
    writeFileSync(f, G2P_SENTENCES.join('\n') + '\n');
    native = run(['phonemize', '-f', f]).replace(/\n$/, '').split('\n');
  } catch {
    console.log('     (no espeak-ng here: the page\'s G2P is compared with the shared vectors only)');
  }
  return (kokoroCache = { dir, model, cpu: readWav(path.join(dir, 'cpu.wav')), words, swiftshader,
    g2p: { 'en-us': tsv('en-us'), 'en-gb': tsv('en-gb') }, native });
}
// The float samples of a WAV file (format 3, 32-bit float, as `wgml speak --wav-format f32` writes it).
function readWav(file) {
  const b = readFileSync(file);
  check(b.toString('ascii', 0, 4) === 'RIFF' && b.toString('ascii', 8, 12) === 'WAVE', `${file} is not a WAV file`);
  for (let off = 12; off + 8 <= b.length;) {
    const id = b.toString('ascii', off, off + 4);
    const size = b.readUInt32LE(off + 4);
    if (id === 'data') return new Float32Array(b.buffer.slice(b.byteOffset + off + 8, b.byteOffset + off + 8 + size));
    off += 8 + size + (size & 1);
  }
  throw new Error(`${file} has no data chunk`);
}
// How far got is from want: SNR in dB, the largest and the median |difference|, each relative to want's peak.
function audioDistance(got, want) {
  check(got.length === want.length, `${got.length} samples, the native CLI made ${want.length}`);
  let signal = 0;
  let noise = 0;
  let peak = 0;
  const d = new Float32Array(want.length);
  for (let i = 0; i < want.length; i++) {
    d[i] = Math.abs(got[i] - want[i]);
    signal += want[i] * want[i];
    noise += d[i] * d[i];
    peak = Math.max(peak, Math.abs(want[i]));
  }
  let max = 0;
  for (const x of d) max = Math.max(max, x);
  d.sort();
  return { snr: noise ? 10 * Math.log10(signal / noise) : Infinity, max: max / peak, median: d[d.length >> 1] / peak, peak };
}
// The CPU wasm against the native CPU backend: the same durations (sample
// counts, word times), and the audio as close as two CPU builds get. The
// kernels differ (WebAssembly SIMD128 against AVX-512), and those rounding
// differences reach the sine source's phase and the voiced/unvoiced switch of
// a random-weight model's F0 around 10 Hz: ~33 dB SNR, median |d| ~1e-4 of the
// peak. A wrong voice row, seed or speed gives 0-2 dB.
function checkCpuSpeech(got, words, k, what) {
  const d = audioDistance(got, k.cpu);
  check(d.snr >= 20 && d.median <= 1e-3, `${what}: audio differs from \`wgml speak --backend cpu\`: ${JSON.stringify(d)}`);
  check(words.length === k.words.length && words.every((w, i) => w.word === k.words[i].word &&
    Math.abs(w.start - k.words[i].start) < 6e-4 && Math.abs(w.end - k.words[i].end) < 6e-4),
  `${what}: word times ${JSON.stringify(words)} differ from the native CLI's ${JSON.stringify(k.words)}`);
  return d;
}
const concat = (parts) => {
  const out = new Float32Array(parts.reduce((n, a) => n + a.length, 0));
  let at = 0;
  for (const a of parts) out.set(a, (at += a.length) - a.length);
  return out;
};
const speechStats = {};

// ---- speech recognition (the whisper family) ----
// ../shared/whisper's random-weight micro model (whisper.cpp .bin; for WebGPU a
// GGUF of it, `wgml synth --arch whisper-micro`, bit for bit the same weights,
// streamed in), the reference kit's `jfk` clip (11 s, 16 kHz) as a float WAV,
// and what `wgml transcribe` says for it. Greedy, English, no fallback, 48
// tokens per window as the kit decodes: the segments' tokens are then the
// start of the kit's `rules` list (official transcribe() keeps the tokens up
// to the last timestamp pair; the rest would be decoded again from there).
// WebGPU on SwiftShader takes ~15 s per encoder layer of a 30 s window here,
// so it runs a 1-layer cut of the model (`--layers 1`), 8 tokens, against the
// native CLI for that model.
const WHISPER_DIR = path.resolve(opt.models, '../whisper');
const WHISPER_OPTIONS = { language: 'en', noFallback: true, maxTokens: 48 };
const WHISPER_CLI_OPTIONS = ['-l', 'en', '--no-fallback', '--max-tokens', '48'];
const WHISPER_GPU_OPTIONS = { language: 'en', noFallback: true, maxTokens: 8 };
let whisperCache = null;
function whisperFiles() {
  if (whisperCache) return whisperCache;
  const cli = path.join(repo, 'build/wgml');
  check(existsSync(cli), 'build/wgml is missing (the native build makes it)');
  const bin = path.join(WHISPER_DIR, 'whisper-micro-random.bin');
  check(existsSync(bin), `${bin} is missing`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'wgml-web-whisper-'));
  profiles.push(dir);
  const run = (a) => execFileSync(cli, a, { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] }).toString();
  const gguf = path.join(dir, 'whisper-micro-l1.gguf');
  run(['synth', '--arch', 'whisper-micro', '--type', 'F16', '--layers', '1', '--vocab', bin, '-o', gguf]);
  const npy = readFileSync(path.join(WHISPER_DIR, 'reference/whisper-micro-random/jfk/audio.npy'));
  const audio = new Float32Array(npy.buffer.slice(npy.byteOffset + 10 + npy.readUInt16LE(8)));
  const wav = path.join(dir, 'jfk.wav');
  writeFileSync(wav, floatWav(audio, 16000));
  writeFileSync(path.join(dir, 'jfk.f32'), Buffer.from(audio.buffer));
  const transcribe = (model, extra) => JSON.parse(run(['transcribe', '-m', model, wav, '--backend', 'cpu', '--threads', '1',
    '-l', 'en', '--no-fallback', ...extra, '-f', 'verbose_json'])).segments;
  const native = transcribe(bin, ['--max-tokens', '48']);
  const words = transcribe(bin, ['--max-tokens', '48', '--word-timestamps']);
  const gpu = transcribe(gguf, ['--max-tokens', '8']);
  const manifest = JSON.parse(readFileSync(path.join(WHISPER_DIR, 'reference/whisper-micro-random/manifest.json'), 'utf8'));
  const rules = manifest.cases.find((c) => c.name === 'jfk').windows[0].rules.tokens;
  return (whisperCache = { dir, bin, gguf, wav, audio, native, words, gpu, rules });
}
// A mono WAV of float32 samples (format 3).
function floatWav(samples, rate) {
  const n = samples.length;
  const b = Buffer.alloc(44 + 4 * n);
  b.write('RIFF', 0);
  b.writeUInt32LE(36 + 4 * n, 4);
  b.write('WAVEfmt ', 8);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(3, 20);
  b.writeUInt16LE(1, 22);
  b.writeUInt32LE(rate, 24);
  b.writeUInt32LE(4 * rate, 28);
  b.writeUInt16LE(4, 32);
  b.writeUInt16LE(32, 34);
  b.write('data', 36);
  b.writeUInt32LE(4 * n, 40);
  Buffer.from(samples.buffer, samples.byteOffset, 4 * n).copy(b, 44);
  return b;
}
// The segments equal the native CLI's (text, times, tokens), and their tokens
// are the start of the reference kit's greedy list (rules; null: not that model).
function checkTranscript(segs, want, rules, what) {
  const brief = (list) => JSON.stringify(list.map((s) => [s.start, s.end, s.text, s.tokens.join(' ')]));
  check(segs.length === want.length && segs.every((s, i) => s.index === i && s.text === want[i].text &&
    Math.abs(s.start - want[i].start) < 1e-9 && Math.abs(s.end - want[i].end) < 1e-9 &&
    s.tokens.join(' ') === want[i].tokens.join(' ')),
  `${what}: segments ${brief(segs)} differ from \`wgml transcribe\`'s ${brief(want)}`);
  const tokens = segs.flatMap((s) => s.tokens);
  if (rules)
    check(tokens.length > 0 && tokens.join(' ') === rules.slice(0, tokens.length).join(' '),
      `${what}: tokens ${tokens} are not the start of the reference list ${rules}`);
}
const transcribeStats = {};

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
  check(r.gemm_mismatches === 0, `the SIMD128 GEMM differs from the scalar one in ${r.gemm_mismatches} cases`);
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

await test('node: Kokoro on the CPU wasm, stream-loaded with its voices: phonemes speak as `wgml speak --backend cpu`; errors', async () => {
  const k = kokoroFiles();
  const e = await Engine.create({ wasm: readFileSync(wasmPath), mode: 'sync', log: () => {} });
  const b = readFileSync(k.model);
  let reads = 0;
  const m = await e.load({ size: b.length, read: (o, n) => (reads++, b.subarray(o, o + n)) }, { backend: 'cpu' });
  const info = await e.info(m);
  check(info.family === 'kokoro' && JSON.stringify(info.tasks) === '["speech"]' && info.sample_rate === 24000 &&
    JSON.stringify(info.voices) === '["af_heart","am_adam","bf_emma"]', `info ${JSON.stringify(info)}`);
  check(reads > 3, `the model was read in ${reads} pieces, not streamed`);
  const chunks = [];
  const r = await e.speak(m, KOKORO_PHONEMES, { voice: KOKORO_VOICE, seed: KOKORO_SEED, phonemes: true }, null, (c) => { chunks.push(c); });
  check(chunks.length === 2 && r.n_chunks === 2 && chunks.map((c) => c.phonemes).join(' ') === KOKORO_PHONEMES,
    `chunks: ${JSON.stringify(chunks.map((c) => c.phonemes))}`);
  check(chunks[1].start === chunks[0].audio.length / 24000, `chunk 1 starts at ${chunks[1].start}`);
  const d = checkCpuSpeech(concat(chunks.map((c) => c.audio)), chunks.flatMap((c) => c.words), k, 'node CPU');
  speechStats.node_cpu = { snr_db: d.snr, max_rel: d.max, median_rel: d.median };
  const fail = (p) => p.then(() => 'no error', (err) => `${err.name} ${err.code}: ${err.message}`);
  // split 'none': the two sentences in one pass (one chunk, the official pipeline's audio)
  const one = [];
  await e.speak(m, KOKORO_PHONEMES, { voice: KOKORO_VOICE, seed: KOKORO_SEED, phonemes: true, split: 'none' }, null, (c) => { one.push(c); });
  check(one.length === 1 && one[0].phonemes === KOKORO_PHONEMES && one[0].audio.length !== concat(chunks.map((c) => c.audio)).length,
    `split none: ${one.length} chunks, ${one[0] && one[0].audio.length} samples`);
  const badSplit = await fail(e.speak(m, 'hˈaɪ', { phonemes: true, split: 'words' }, null, () => {}));
  check(/^WgmlError 1: speak: split 'words'/.test(badSplit), `split words: ${badSplit}`);
  const nobody = await fail(e.speak(m, 'hˈaɪ', { voice: 'nobody', phonemes: true }, null, () => {}));
  check(/^WgmlError 1: voice 'nobody' is neither in the model \(voices: af_heart, am_adam, bf_emma\)/.test(nobody), `unknown voice: ${nobody}`);
  const text = await fail(e.speak(m, 'Hello.', {}, null, () => {}));
  check(/^WgmlError 4: text input needs a G2P \(espeak-ng\); phoneme input works without it/.test(text), `text without a G2P: ${text}`);
  const speed = await fail(e.speak(m, 'hˈaɪ', { speed: 9, phonemes: true }, null, () => {}));
  check(/^WgmlError 1: speed 9 is outside/.test(speed), `speed 9: ${speed}`);
  const llama = await e.load({ size: modelBytes.length, read: (o, n) => modelBytes.subarray(o, o + n) }, { backend: 'cpu' });
  const notTts = await fail(e.speak(llama, 'Hello.', {}, null, () => {})); // text: no G2P is asked for
  check(/^WgmlError 4: a llama model does not speak/.test(notTts), `speak on llama: ${notTts}`);
  await e.freeModel(llama);
  await e.freeModel(m);
});

await test('node: Whisper on the CPU wasm, from whisper.cpp\'s .bin: jfk transcribes as `wgml transcribe` and the reference tokens; errors', async () => {
  const w = whisperFiles();
  const e = await Engine.create({ wasm: readFileSync(wasmPath), mode: 'sync', log: () => {} });
  const m = await e.loadMemory(readFileSync(w.bin), { backend: 'cpu' });
  const info = await e.info(m);
  check(info.family === 'whisper' && JSON.stringify(info.tasks) === '["transcribe"]' && info.sample_rate === 16000,
    `info ${JSON.stringify(info)}`);
  const segs = [];
  const r = await e.transcribe(m, w.audio, 16000, WHISPER_OPTIONS, (s) => { segs.push(s); });
  checkTranscript(segs, w.native, w.rules, 'node CPU');
  check(r.language === 'en' && r.duration === 11 && r.n_windows === 1 && r.n_segments === segs.length && r.n_tokens === 48,
    `result ${JSON.stringify(r)}`);
  transcribeStats.node_cpu = { total_ms: r.total_ms, encode_ms: r.encode_ms, decode_ms: r.decode_ms };
  // word times (cross-attention alignment), as the native CLI's
  const withWords = [];
  await e.transcribe(m, w.audio, 16000, { ...WHISPER_OPTIONS, wordTimestamps: true }, (s) => { withWords.push(s); });
  checkTranscript(withWords, w.words, null, 'node CPU, word times');
  const words = withWords.flatMap((s) => s.words || []);
  const wantWords = w.words.flatMap((s) => s.words || []);
  check(words.length === wantWords.length && words.length > 0 && words.every((x, i) => x.word === wantWords[i].word &&
    Math.abs(x.start - wantWords[i].start) < 1e-6 && Math.abs(x.end - wantWords[i].end) < 1e-6 &&
    Math.abs(x.probability - wantWords[i].probability) < 1e-3),
  `node CPU: words ${JSON.stringify(words)} differ from the native CLI's ${JSON.stringify(wantWords)}`);
  const fail = (p) => p.then(() => 'no error', (err) => `${err.name} ${err.code}: ${err.message}`);
  const empty = await fail(e.transcribe(m, new Float32Array(0), 16000, {}, () => {}));
  check(/^WgmlError 1: there is no audio to transcribe \(0 samples\)/.test(empty), `empty audio: ${empty}`);
  const rate = await fail(e.transcribe(m, w.audio, 0, {}, () => {}));
  check(/^WgmlError 1: sample rate 0 Hz is outside/.test(rate), `rate 0: ${rate}`);
  const lang = await fail(e.transcribe(m, w.audio, 16000, { language: 'xx' }, () => {}));
  check(/^WgmlError 1: .*xx/.test(lang), `language xx: ${lang}`);
  const llama = await e.load({ size: modelBytes.length, read: (o, n) => modelBytes.subarray(o, o + n) }, { backend: 'cpu' });
  const notStt = await fail(e.transcribe(llama, w.audio, 16000, {}, () => {}));
  check(/^WgmlError 4: a llama model does not transcribe/.test(notStt), `transcribe on llama: ${notStt}`);
  await e.freeModel(llama);
  // stopped from the callback after the first segment
  let n = 0;
  const stopped = await e.transcribe(m, w.audio, 16000, WHISPER_OPTIONS, () => ++n >= 1);
  check(n === 1 && stopped.n_segments === 1, `stop after one segment: ${n} segments, ${JSON.stringify(stopped)}`);
  await e.freeModel(m);
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

await test('API (WebGPU, SwiftShader): Kokoro speaks phonemes as native SwiftShader, chunk by chunk; Asyncify CPU as the native CPU', async () => {
  const k = kokoroFiles();
  const page = await openDemo(gpuCtx, demoUrl);
  await page.route('**/wgml-kokoro/*.gguf', (route) => route.fulfill({ path: k.model, headers: { 'content-type': 'application/octet-stream' } }));
  const r = await page.evaluate(async ({ url, gpu, cpu }) => {
    const wgml = (await import('./wgml.js')).default;
    const out = {};
    const tts = await wgml.load(url, { backend: 'webgpu', cache: false });
    out.voices = tts.voices;
    out.info = tts.info();
    const t0 = performance.now();
    out.chunks = [];
    for await (const c of tts.speak(gpu.phonemes, { voice: 'af_heart', seed: gpu.seed, phonemes: true }))
      out.chunks.push({ at: performance.now() - t0, audio: Array.from(c.audio), start: c.start, sampleRate: c.sampleRate,
        phonemes: c.phonemes, words: c.words, isFloat32: c.audio instanceof Float32Array });
    out.total = performance.now() - t0;
    out.last = tts.info();
    out.live = await tts.dispose();
    // the Asyncify build (browsers without JSPI) unwinds through the audio callback
    const a = await wgml.load(url, { backend: 'cpu', mode: 'asyncify', cache: false });
    out.asyncify = { info: a.info(), chunks: [] };
    for await (const c of a.speak(cpu.phonemes, { voice: cpu.voice, seed: cpu.seed, phonemes: true }))
      out.asyncify.chunks.push({ audio: Array.from(c.audio), words: c.words });
    await a.dispose();
    return out;
  }, { url: `${base}wgml-kokoro/kokoro-tiny.gguf`, gpu: { phonemes: KOKORO_GPU_PHONEMES, seed: KOKORO_GPU_SEED },
    cpu: { phonemes: KOKORO_PHONEMES, voice: KOKORO_VOICE, seed: KOKORO_SEED } });
  check(r.info.backend === 'webgpu' && /swiftshader/i.test(r.info.adapter) && r.info.family === 'kokoro', `info ${JSON.stringify(r.info)}`);
  check(JSON.stringify(r.voices) === '["af_heart","am_adam","bf_emma"]', `voices ${r.voices}`);
  check(r.chunks.length === 2 && r.chunks.every((c) => c.isFloat32 && c.sampleRate === 24000 && c.words.length === 1),
    `chunks: ${JSON.stringify(r.chunks.map((c) => ({ n: c.audio.length, phonemes: c.phonemes, words: c.words })))}`);
  // streamed: the first sentence is heard while the second is being made
  check(r.chunks[0].at < r.chunks[1].at - 300 && r.chunks[0].at < r.total * 0.8,
    `not streamed: chunks at ${r.chunks.map((c) => c.at.toFixed(0))} ms of ${r.total.toFixed(0)} ms`);
  // the same kernels on the same adapter as `wgml speak --adapter swiftshader`
  const d = audioDistance(concat(r.chunks.map((c) => Float32Array.from(c.audio))), await k.swiftshader);
  check(d.max <= 1e-4, `WebGPU audio differs from native SwiftShader's: ${JSON.stringify(d)}`);
  speechStats.webgpu = { max_rel: d.max, snr_db: d.snr, rtf: r.last.realTimeFactor, first_audio_ms: r.last.firstAudioMs };
  check(r.last.realTimeFactor > 0 && r.last.firstAudioMs > 0 && r.last.last.n_chunks === 2, `info after: ${JSON.stringify(r.last.last)}`);
  check(r.live.buffers === 0 && r.live.devices === 0, `after dispose the GPU layer holds ${JSON.stringify(r.live)}`);
  check(r.asyncify.info.mode === 'asyncify' && r.asyncify.chunks.length === 2, `Asyncify: ${r.asyncify.info.mode}, ${r.asyncify.chunks.length} chunks`);
  const da = checkCpuSpeech(concat(r.asyncify.chunks.map((c) => Float32Array.from(c.audio))), r.asyncify.chunks.flatMap((c) => c.words), k, 'Asyncify CPU');
  speechStats.asyncify_cpu = { snr_db: da.snr, median_rel: da.median };
  await page.close();
});

await test('API (WebGPU, SwiftShader): Whisper (GGUF, streamed in) transcribes samples as `wgml transcribe`, segment by segment', async () => {
  const w = whisperFiles();
  const page = await openDemo(gpuCtx, demoUrl);
  await page.route('**/wgml-whisper/*', (route) => route.fulfill({ path: path.join(w.dir, path.basename(new URL(route.request().url()).pathname)),
    headers: { 'content-type': 'application/octet-stream' } }));
  const r = await page.evaluate(async ({ base, options }) => {
    const wgml = (await import('./wgml.js')).default;
    const stt = await wgml.load(`${base}whisper-micro-l1.gguf`, { backend: 'webgpu', cache: false });
    const out = { info: stt.info() };
    const samples = new Float32Array(await (await fetch(`${base}jfk.f32`)).arrayBuffer());
    const t0 = performance.now();
    out.segments = [];
    for await (const s of stt.transcribe(samples, { ...options, sampleRate: 16000 })) out.segments.push({ ...s, at: performance.now() - t0 });
    out.total = performance.now() - t0;
    out.last = stt.info();
    out.live = await stt.dispose();
    return out;
  }, { base: `${base}wgml-whisper/`, options: WHISPER_GPU_OPTIONS });
  check(r.info.backend === 'webgpu' && /swiftshader/i.test(r.info.adapter) && r.info.family === 'whisper' &&
    JSON.stringify(r.info.tasks) === '["transcribe"]' && r.info.sample_rate === 16000, `info ${JSON.stringify(r.info)}`);
  checkTranscript(r.segments, w.gpu, null, 'WebGPU, Float32Array');
  check(r.segments.every((s) => typeof s.avgLogprob === 'number' && typeof s.noSpeechProb === 'number' && s.temperature === 0 &&
    s.at <= r.total), `segments: ${JSON.stringify(r.segments)}`);
  check(r.last.language === 'en' && r.last.realTimeFactor > 0 && r.last.last.n_tokens === 8 && r.last.last.duration === 11,
    `info after: ${JSON.stringify(r.last.last)}`);
  transcribeStats.webgpu = { rtf: r.last.realTimeFactor, encode_ms: r.last.last.encode_ms, decode_ms: r.last.last.decode_ms, total_ms: r.total };
  check(r.live.buffers === 0 && r.live.devices === 0, `after dispose the GPU layer holds ${JSON.stringify(r.live)}`);
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
  const threads = await page.evaluate(() => navigator.hardwareConcurrency);
  const shown = await page.evaluate(() => document.getElementById('info-backend').textContent);
  check(l.info.n_threads === Math.min(8, threads) && shown.endsWith(`, ${l.info.n_threads} thread${l.info.n_threads === 1 ? '' : 's'}`),
    `threads: n_threads ${l.info.n_threads} of ${threads} cores, shown "${shown}"`);
  const g = await demoGenerate(page, 60);
  check(g.status === 'ready', `generation failed: ${g.error}`);
  checkText(g.output, REFERENCE, 'CPU output');
  speeds.cpu = g.info.last.tokens_per_s;
  await screenshotCheck(page, 'demo-cpu');
  check(page.errors.length === 0, `page errors: ${page.errors}`);
  await page.close();
});

await test('API (CPU wasm, threads): 2 worker threads on a cross-origin isolated page give 1 thread\'s text and audio; a page that is not isolated runs one thread and says why', async () => {
  check(existsSync(path.join(repo, 'web/dist/wgml-threads.wasm')), 'web/dist/wgml-threads.wasm was not built');
  const rel = 'build/web-models/stories15m-Q8_0.gguf'; // made by the test before
  check(existsSync(path.join(repo, rel)), `${rel} is missing`);
  const k = kokoroFiles();
  const run = async (page) => page.evaluate(async ({ urls, prompt, cpu }) => {
    const wgml = (await import('./wgml.js')).default;
    const out = { isolated: crossOriginIsolated };
    for (const threads of [2, 1]) {
      const r = (out[threads] = { text: {}, info: {} });
      for (const [name, url, n] of [['s15', urls.s15, 24], ['s260k', urls.s260k, 60]]) {
        const notes = [];
        const m = await wgml.load(url, { backend: 'cpu', threads, cache: false, onNote: (t) => notes.push(t) });
        let text = '';
        // a long prompt: prefill goes through the threaded GEMMs
        for await (const piece of m.generate(name === 's15' ? `${prompt} ${prompt} ${prompt}` : prompt, { maxTokens: n, temperature: 0 })) text += piece;
        r.text[name] = text;
        r.info[name] = { ...m.info(), notes };
        await m.dispose();
      }
      const tts = await wgml.load(urls.kokoro, { backend: 'cpu', threads, cache: false });
      r.audio = [];
      for await (const c of tts.speak(cpu.phonemes, { voice: cpu.voice, seed: cpu.seed, phonemes: true })) r.audio.push(...c.audio);
      r.kokoroThreads = tts.info().n_threads;
      await tts.dispose();
    }
    return out;
  }, { urls: { s15: `${base}${rel}`, s260k: modelUrl, kokoro: `${base}wgml-kokoro/kokoro-tiny.gguf` }, prompt: PROMPT,
    cpu: { phonemes: KOKORO_PHONEMES, voice: KOKORO_VOICE, seed: KOKORO_SEED } });
  const kokoroRoute = (page) => page.route('**/wgml-kokoro/*.gguf', (route) => route.fulfill({ path: k.model, headers: { 'content-type': 'application/octet-stream' } }));

  const page = await openDemo(cpuCtx, demoUrl);
  await kokoroRoute(page);
  const r = await run(page);
  check(r.isolated, 'the demo page is not cross-origin isolated (scripts/serve-web.mjs sends COOP/COEP)');
  for (const name of ['s15', 's260k']) {
    const i2 = r[2].info[name];
    check(i2.threads === 2 && i2.n_threads === 2 && i2.mode === 'jspi', `${name}: asked for 2 threads, got ${i2.threads} / n_threads ${i2.n_threads} (${i2.mode}; ${i2.notes})`);
    check(r[1].info[name].n_threads === 1, `${name}: asked for 1 thread, got ${r[1].info[name].n_threads}`);
    checkText(r[2].text[name], r[1].text[name], `${name}: 2 threads vs 1`);
  }
  checkText(PROMPT + r[2].text.s260k, REFERENCE, 'stories260K with 2 threads vs llama2.c');
  check(r[2].kokoroThreads === 2, `Kokoro: n_threads ${r[2].kokoroThreads}`);
  const d = audioDistance(Float32Array.from(r[2].audio), Float32Array.from(r[1].audio));
  check(r[2].audio.length === r[1].audio.length && d.max <= 1e-5, `Kokoro audio with 2 threads vs 1: ${r[2].audio.length} vs ${r[1].audio.length} samples, ${JSON.stringify(d)}`);
  await page.close();

  // the same page served without COOP/COEP: no shared memory, so one thread, and a note saying why
  const plain = await cpuCtx.newPage();
  await plain.route(`${demoUrl}?not-isolated`, (route) => route.fulfill({ path: path.join(repo, 'web/index.html'), headers: { 'content-type': 'text/html' } }));
  await plain.goto(`${demoUrl}?not-isolated`);
  const p = await plain.evaluate(async (url) => {
    const wgml = (await import('./wgml.js')).default;
    const notes = [];
    const m = await wgml.load(url, { backend: 'cpu', threads: 2, cache: false, onNote: (t) => notes.push(t) });
    let text = '';
    for await (const piece of m.generate('Once upon a time', { maxTokens: 60, temperature: 0 })) text += piece;
    const info = m.info();
    await m.dispose();
    return { isolated: crossOriginIsolated, text, threads: info.threads, n: info.n_threads, notes };
  }, modelUrl);
  check(!p.isolated && p.threads === 1 && p.n === 1, `not isolated: ${JSON.stringify(p)}`);
  check(p.notes.some((n) => /one thread: the page is not cross-origin isolated/.test(n)), `no note on the single thread: ${JSON.stringify(p.notes)}`);
  checkText(PROMPT + p.text, REFERENCE, 'single-thread text');
  await plain.close();
});

await test('API (CPU wasm): chat.completions.create through the model\'s chat template, streamed and not, equals `wgml serve`\'s chat completion', async () => {
  const messages = [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Tell me about a cat.' }];
  // the native server's answer for the same messages (greedy)
  const srv = execFile(path.join(repo, 'build/wgml'), ['serve', '-m', path.join(opt.models, MODEL), '--backend', 'cpu', '--port', '0']);
  const port = await new Promise((resolve, reject) => {
    srv.stdout.on('data', (d) => {
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(String(d));
      if (m) resolve(Number(m[1]));
    });
    srv.on('exit', () => reject(new Error('wgml serve exited')));
  });
  let want;
  try {
    const r = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: 'POST',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ messages, max_tokens: 16, temperature: 0 }) });
    want = await r.json();
  } finally {
    srv.kill('SIGTERM');
  }
  const page = await openDemo(cpuCtx, demoUrl);
  const r = await page.evaluate(async ({ url, messages }) => {
    const wgml = (await import('./wgml.js')).default;
    const m = await wgml.load(url, { backend: 'cpu', cache: false });
    const whole = await m.chat.completions.create({ messages, max_tokens: 16, temperature: 0 });
    const chunks = [];
    for await (const c of m.chat.completions.create({ messages, max_tokens: 16, temperature: 0, stream: true,
      stream_options: { include_usage: true } })) chunks.push(c);
    let err = '';
    try {
      await m.chat.completions.create({ messages: [] });
    } catch (e) {
      err = e.message;
    }
    await m.dispose();
    return { whole, chunks, err };
  }, { url: modelUrl, messages });
  const w = r.whole;
  check(w.object === 'chat.completion' && w.choices[0].message.role === 'assistant' && w.choices[0].message.content.length > 0,
    `chat: ${JSON.stringify(w)}`);
  checkText(w.choices[0].message.content, want.choices[0].message.content, 'chat content vs wgml serve');
  check(w.choices[0].finish_reason === want.choices[0].finish_reason, `finish_reason ${w.choices[0].finish_reason} vs ${want.choices[0].finish_reason}`);
  check(w.usage.prompt_tokens === want.usage.prompt_tokens && w.usage.completion_tokens === want.usage.completion_tokens,
    `usage ${JSON.stringify(w.usage)} vs wgml serve ${JSON.stringify(want.usage)}`);
  const c = r.chunks;
  check(c[0].choices[0].delta.role === 'assistant' && c.every((x) => x.object === 'chat.completion.chunk'), `first chunk ${JSON.stringify(c[0])}`);
  const streamed = c.flatMap((x) => x.choices.map((ch) => ch.delta.content || '')).join('');
  checkText(streamed, w.choices[0].message.content, 'streamed chat');
  const fin = c.filter((x) => x.choices.length && x.choices[0].finish_reason);
  check(fin.length === 1 && fin[0].choices[0].finish_reason === w.choices[0].finish_reason, `finish chunks ${JSON.stringify(fin)}`);
  const last = c[c.length - 1];
  check(last.choices.length === 0 && last.usage && last.usage.total_tokens === w.usage.total_tokens, `usage chunk ${JSON.stringify(last)}`);
  check(/messages/.test(r.err), `empty messages: "${r.err}"`);
  await page.close();
});

await test('API (CPU wasm): response_format json_schema, grammar and tool calls in chat.completions.create equal `wgml serve`\'s, and a bad schema is refused', async () => {
  const messages = [{ role: 'user', content: 'A cat as JSON.' }];
  const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 6 }, age: { type: 'integer', minimum: 0, maximum: 20 },
    tags: { type: 'array', items: { enum: ['soft', 'small'] }, maxItems: 2 } }, required: ['name', 'age'] };
  const tools = [{ type: 'function', function: { name: 'add', parameters: { type: 'object', properties: {
    a: { type: 'integer', minimum: 0, maximum: 99 }, b: { type: 'integer', minimum: 0, maximum: 99 } }, required: ['a', 'b'] } } },
  { type: 'function', function: { name: 'greet', parameters: { type: 'object', properties: { who: { type: 'string', maxLength: 8 } },
    required: ['who'] } } }];
  const bodies = [{ response_format: { type: 'json_schema', json_schema: { name: 'cat', schema, strict: true } } },
    { grammar: 'root ::= ("yes" | "no") " " [a-z]{2,5} "."' },
    { tools, tool_choice: 'required', parallel_tool_calls: false },
    { tools, tool_choice: { type: 'function', function: { name: 'greet' } } }];
  const srv = execFile(path.join(repo, 'build/wgml'), ['serve', '-m', path.join(opt.models, MODEL), '--backend', 'cpu', '--port', '0']);
  const port = await new Promise((resolve, reject) => {
    srv.stdout.on('data', (d) => {
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(String(d));
      if (m) resolve(Number(m[1]));
    });
    srv.on('exit', () => reject(new Error('wgml serve exited')));
  });
  const want = [];
  try {
    for (const b of bodies) {
      const r = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: 'POST',
        headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ messages, max_tokens: 120, temperature: 0, ...b }) });
      want.push(await r.json());
    }
  } finally {
    srv.kill('SIGTERM');
  }
  const page = await openDemo(cpuCtx, demoUrl);
  const r = await page.evaluate(async ({ url, messages, bodies }) => {
    const wgml = (await import('./wgml.js')).default;
    const m = await wgml.load(url, { backend: 'cpu', cache: false });
    const got = [];
    for (const b of bodies) got.push(await m.chat.completions.create({ messages, max_tokens: 120, temperature: 0, ...b }));
    let streamed = '';
    for await (const c of m.chat.completions.create({ messages, max_tokens: 120, temperature: 0, stream: true, ...bodies[0] }))
      streamed += c.choices.map((ch) => ch.delta.content || '').join('');
    const sampled = [];
    for (const seed of [1, 2, 3])
      sampled.push((await m.chat.completions.create({ messages, max_tokens: 120, seed, ...bodies[0] })).choices[0]);
    const gen = [];
    for await (const piece of m.generate('JSON:', { maxTokens: 60, temperature: 0, jsonSchema: { enum: ['red', 'green'] } })) gen.push(piece);
    const toolStream = { calls: [], finish: null };
    for await (const c of m.chat.completions.create({ messages, max_tokens: 120, temperature: 0, stream: true, ...bodies[2] }))
      for (const ch of c.choices) {
        toolStream.calls.push(...(ch.delta.tool_calls || []));
        if (ch.finish_reason) toolStream.finish = ch.finish_reason;
      }
    const auto = (await m.chat.completions.create({ messages, max_tokens: 12, seed: 9, tools: bodies[2].tools })).choices[0];
    // a second turn with the call and its result; a call whose arguments are not JSON is refused
    const call = got[2].choices[0].message.tool_calls[0];
    const turn2 = (await m.chat.completions.create({ max_tokens: 4, temperature: 0, tools: bodies[2].tools, messages: [...messages,
      { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: '5' }] })).usage;
    let argErr = '';
    try {
      await m.chat.completions.create({ max_tokens: 4, tools: bodies[2].tools, messages: [...messages, { role: 'assistant',
        content: null, tool_calls: [{ ...call, function: { ...call.function, arguments: '{"a":' } }] }] });
    } catch (e) {
      argErr = e.message;
    }
    let err = '';
    try {
      await m.chat.completions.create({ messages, response_format: { type: 'json_schema', json_schema: { name: 'x',
        schema: { type: 'array', uniqueItems: true } } } });
    } catch (e) {
      err = e.message;
    }
    await m.dispose();
    return { got, streamed, sampled, gen: gen.join(''), err, toolStream, auto, turn2, argErr };
  }, { url: modelUrl, messages, bodies });
  for (let i = 0; i < 2; i++) {
    checkText(r.got[i].choices[0].message.content, want[i].choices[0].message.content, `constrained chat ${i} vs wgml serve`);
    check(r.got[i].choices[0].finish_reason === 'stop', `constrained chat ${i}: ${JSON.stringify(r.got[i].choices[0])}`);
  }
  for (let i = 2; i < 4; i++) { // tool calls: the same functions and arguments as the server's (the ids are random)
    const g = r.got[i].choices[0], w = want[i].choices[0];
    const strip = (tc) => (tc || []).map((c) => [c.type, c.function.name, c.function.arguments]);
    check(g.finish_reason === 'tool_calls' && g.message.content === null && g.message.tool_calls.length === 1 &&
      JSON.stringify(strip(g.message.tool_calls)) === JSON.stringify(strip(w.message.tool_calls)),
    `tool calls ${i}: ${JSON.stringify(g)} vs wgml serve ${JSON.stringify(w)}`);
    const args = JSON.parse(g.message.tool_calls[0].function.arguments);
    const fname = g.message.tool_calls[0].function.name;
    check((i === 2 || fname === 'greet') && (fname === 'greet' ? typeof args.who === 'string' && args.who.length <= 8
      : Number.isInteger(args.a) && Number.isInteger(args.b) && args.a >= 0 && args.b <= 99), `tool call ${i}: ${fname} ${JSON.stringify(args)}`);
  }
  const st = r.toolStream;
  check(st.finish === 'tool_calls' && st.calls.length === 1 && st.calls[0].index === 0 &&
    st.calls[0].function.arguments === r.got[2].choices[0].message.tool_calls[0].function.arguments, `streamed tool call: ${JSON.stringify(st)}`);
  check(['stop', 'length', 'tool_calls'].includes(r.auto.finish_reason), `auto: ${JSON.stringify(r.auto)}`);
  check(r.turn2.prompt_tokens > 20, `second turn: ${JSON.stringify(r.turn2)}`);
  check(/arguments/.test(r.argErr), `unparsable arguments: "${r.argErr}"`);
  checkText(r.streamed, r.got[0].choices[0].message.content, 'streamed constrained chat');
  for (const c of [r.got[0].choices[0], ...r.sampled]) {
    const doc = JSON.parse(c.message.content);
    check(typeof doc.name === 'string' && doc.name.length <= 6 && Number.isInteger(doc.age) && doc.age >= 0 && doc.age <= 20 &&
      (doc.tags === undefined || (doc.tags.length <= 2 && doc.tags.every((t) => t === 'soft' || t === 'small'))) &&
      Object.keys(doc).every((k) => ['name', 'age', 'tags'].includes(k)) && c.finish_reason === 'stop', `not valid: ${c.message.content}`);
  }
  check(/^(yes|no) [a-z]{2,5}\.$/.test(r.got[1].choices[0].message.content), `grammar: ${r.got[1].choices[0].message.content}`);
  check(r.gen === '"red"' || r.gen === '"green"', `generate with jsonSchema: ${JSON.stringify(r.gen)}`);
  check(/uniqueItems/.test(r.err), `a bad schema: "${r.err}"`);
  await page.close();
});

await test('page, chat tab: two turns stream through the chat template, stop, new chat; screenshot', async () => {
  const page = await openDemo(cpuCtx, demoUrl);
  const l = await demoLoad(page, { backend: 'cpu', url: modelUrl });
  check(l.status === 'ready', `load failed: ${l.error}`);
  await page.click('#tab-chat');
  const turn = async (text, maxTokens) => {
    const before = await page.evaluate(() => window.wgmlDemo.chats);
    await page.fill('#chat-max-tokens', String(maxTokens));
    await page.fill('#chat-input', text);
    await page.press('#chat-input', 'Enter');
    await page.waitForFunction((n) => window.wgmlDemo.chats > n, before, { timeout: 60000, polling: 50 });
    return page.evaluate(() => ({ chat: window.wgmlDemo.chat, status: window.wgmlDemo.status, error: window.wgmlDemo.error,
      turns: [...document.querySelectorAll('#chat-turns .turn span')].map((e) => e.textContent),
      stats: document.getElementById('chat-stats').textContent }));
  };
  const a = await turn('Tell me about a cat.', 16);
  check(a.status === 'ready' && a.chat.length === 2 && a.turns.length === 2 && a.turns[1].length > 0 && a.turns[1] === a.chat[1].content,
    `turn 1: ${JSON.stringify(a)}`);
  check(/prompt \+ \d+ reply tokens, finish: (stop|length)/.test(a.stats), `stats: ${a.stats}`);
  // the same reply as the API gives for that conversation
  const want = await page.evaluate(async () => (await window.wgmlDemo.model.chat.completions.create({
    messages: [{ role: 'user', content: 'Tell me about a cat.' }], max_tokens: 16, temperature: 0 })).choices[0].message.content);
  checkText(a.turns[1], want, 'chat tab reply vs the API');
  const b = await turn('And then?', 16);
  check(b.chat.length === 4 && b.turns.length === 4 && b.chat[2].content === 'And then?' && b.turns[3].length > 0, `turn 2: ${JSON.stringify(b)}`);
  const usage = /(\d+) prompt \+/.exec(b.stats);
  check(usage && Number(usage[1]) > Number(/(\d+) prompt \+/.exec(a.stats)[1]), `turn 2's prompt holds turn 1: ${a.stats} / ${b.stats}`);
  // Stop during a long reply, then New chat
  await page.fill('#chat-max-tokens', '4000');
  await page.fill('#chat-input', 'Tell me a very long story.');
  const before = await page.evaluate(() => window.wgmlDemo.chats);
  await page.click('#chat-send');
  await page.waitForFunction(() => window.wgmlDemo.status === 'chatting' &&
    document.querySelector('#chat-turns .turn:last-child span').textContent.length > 20, null, { timeout: 60000, polling: 20 });
  await page.click('#chat-stop');
  await page.waitForFunction((n) => window.wgmlDemo.chats > n, before, { timeout: 60000, polling: 50 });
  const c = await page.evaluate(() => ({ status: window.wgmlDemo.status, n: window.wgmlDemo.chat.length }));
  check(c.status === 'ready' && c.n === 6, `after Stop: ${JSON.stringify(c)}`);
  await page.screenshot({ path: path.join(artifacts, 'demo-chat.png'), fullPage: true });
  const shot = imageStats(decodePng(readFileSync(path.join(artifacts, 'demo-chat.png'))));
  check(shot.distinctColors > 50 && shot.lumaStdDev > 20, `demo-chat.png looks blank: ${JSON.stringify(shot)}`);
  await page.click('#chat-new');
  const d = await page.evaluate(() => ({ n: window.wgmlDemo.chat.length, turns: document.querySelectorAll('#chat-turns .turn').length }));
  check(d.n === 0 && d.turns === 0, `after New chat: ${JSON.stringify(d)}`);
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

await test('page, speech tab (CPU wasm): text through espeak-ng in the page, chunks played as they come, words, RTF, WAV download; screenshot', async () => {
  const k = kokoroFiles();
  const page = await openDemo(cpuCtx, demoUrl);
  const l = await demoLoad(page, { backend: 'auto', file: k.model });
  check(l.status === 'ready' && l.info.backend === 'cpu', `load: ${l.status} ${l.error} ${l.info && l.info.backend}`);
  const tab = await page.evaluate(() => ({ speech: !document.getElementById('speech-section').hidden,
    voices: [...document.getElementById('voice').options].map((o) => o.value), generate: document.getElementById('generate').disabled }));
  check(tab.speech && tab.generate && JSON.stringify(tab.voices) === '["af_heart","am_adam","bf_emma"]', `speech tab: ${JSON.stringify(tab)}`);
  await page.fill('#speech-text', SPEECH_TEXT);
  await page.selectOption('#voice', 'am_adam');
  await page.fill('#speed', '1.1');
  await page.click('#speak');
  await page.waitForFunction(() => window.wgmlDemo.speeches > 0, null, { timeout: 120000, polling: 100 });
  const r = await page.evaluate(() => ({ error: window.wgmlDemo.error, speech: window.wgmlDemo.speech,
    stats: document.getElementById('speech-stats').textContent, words: document.querySelectorAll('#speech-chunks .word').length,
    items: document.querySelectorAll('#speech-chunks li').length, download: !document.getElementById('download').hidden }));
  check(!r.error && r.speech.done, `speak failed: ${r.error}`);
  const ch = r.speech.chunks;
  check(ch.length === 3 && r.items === 3, `${ch.length} chunks, ${r.items} shown, for three sentences`);
  check(ch.every((c, i) => i === 0 || (c.atMs >= ch[i - 1].atMs && c.start > ch[i - 1].start)), `chunk order/times: ${JSON.stringify(ch.map((c) => [c.atMs, c.start]))}`);
  const phonemes = ch.map((c) => c.phonemes).join(' ');
  const want = k.native ? k.native[0] : null;
  if (want) checkText(phonemes, want, 'phonemes spoken vs `wgml phonemize`');
  // the text's own words (espeak-ng runs some together; "$5.50" is said in five), each at its place in the text
  const said = ch.flatMap((c) => c.words);
  check(r.words === said.length && said.map((w) => w.word).join(' ') === 'Hello there Mr Smith paid $5.50 for 12 apples How are you today' &&
    said.every((w) => SPEECH_TEXT.slice(w.offset, w.offset + w.length) === w.word &&
      w.phonemes.length > 0 && w.end > w.start),
  `${r.words} words shown: ${JSON.stringify(said)}`);
  check(/real-time factor \d/.test(r.stats) && /first audio after \d+ ms/.test(r.stats) && /espeak-ng \d+ ms/.test(r.stats), `stats: ${r.stats}`);
  speechStats.page_cpu = { rtf: r.speech.result.rtf, first_audio_ms: r.speech.firstAudioMs, g2p_ms: r.speech.result.g2p_ms, stats: r.stats };
  check(r.download, 'no WAV download link');
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
  const wav = readFileSync(await dl.path());
  const samples = ch.reduce((n, c) => n + c.samples, 0);
  check(wav.toString('ascii', 0, 4) === 'RIFF' && wav.toString('ascii', 8, 16) === 'WAVEfmt ' && wav.readUInt16LE(20) === 1 &&
    wav.readUInt16LE(22) === 1 && wav.readUInt32LE(24) === 24000 && wav.readUInt16LE(34) === 16 && wav.readUInt32LE(40) === 2 * samples &&
    wav.length === 44 + 2 * samples, `WAV header ${wav.subarray(0, 44).toString('hex')} for ${samples} samples`);
  let peak = 0;
  for (let i = 44; i < wav.length; i += 2) peak = Math.max(peak, Math.abs(wav.readInt16LE(i)));
  check(peak > 1000, `the WAV is silent (peak ${peak})`);
  const file = path.join(artifacts, 'demo-speech.png');
  await page.screenshot({ path: file, fullPage: true });
  const st = imageStats(decodePng(readFileSync(file)));
  check(st.distinctColors > 50 && st.lumaStdDev > 20, `demo-speech.png looks blank: ${JSON.stringify(st)}`);
  check(page.errors.length === 0, `page errors: ${page.errors}`);
  await page.close();
});

await test('API (CPU wasm): G2P in the page equals `wgml phonemize` and the shared vectors (en-us, en-gb), loaded only for text; without it text fails clearly', async () => {
  const k = kokoroFiles();
  const page = await openDemo(cpuCtx, demoUrl);
  await page.route('**/wgml-kokoro/*.gguf', (route) => route.fulfill({ path: k.model, headers: { 'content-type': 'application/octet-stream' } }));
  let phonemizerLoads = 0;
  await page.route('**/phonemizer/dist/phonemizer.js', (route) => {
    phonemizerLoads++;
    route.continue();
  });
  await page.exposeFunction('phonemizerLoads', () => phonemizerLoads);
  const r = await page.evaluate(async ({ url, vectors, sentences, cpu }) => {
    const wgml = (await import('./wgml.js')).default;
    const fail = (p) => p.then(() => 'no error', (e) => `${e.name} ${e.code}: ${e.message}`);
    const tts = await wgml.load(url, { backend: 'cpu', cache: false });
    const out = { chunks: [] };
    for await (const c of tts.speak(cpu.phonemes, { voice: cpu.voice, seed: cpu.seed, phonemes: true }))
      out.chunks.push({ audio: Array.from(c.audio), words: c.words });
    out.loadsBeforeText = await window.phonemizerLoads(); // phonemes only so far
    out.missing = await fail((async () => {
      for await (const c of tts.speak('Hello.', { phonemizer: './no-such-dir/phonemizer.js' })) void c;
    })());
    out.after = 0;
    for await (const c of tts.speak('hˈaɪ.', { phonemes: true })) out.after += c.audio.length;
    // stop: after the first of six sentences, the rest is not made
    const it = tts.speak(Array(6).fill('hˈaɪ.').join(' '), { phonemes: true });
    out.stopped = 0;
    for await (const c of it) {
      if (!out.stopped++) it.stop();
      void c;
    }
    out.stoppedInfo = tts.info().last;
    out.g2p = {};
    for (const [lang, rows] of Object.entries(vectors)) out.g2p[lang] = await Promise.all(rows.map((row) => tts.phonemize(row.text, { lang })));
    out.sentences = await Promise.all(sentences.map((t) => tts.phonemize(t)));
    out.badLang = await fail(tts.phonemize('Hello.', { lang: 'fr' }));
    await tts.dispose();
    return out;
  }, { url: `${base}wgml-kokoro/kokoro-tiny.gguf`, vectors: k.g2p, sentences: G2P_SENTENCES,
    cpu: { phonemes: KOKORO_PHONEMES, voice: KOKORO_VOICE, seed: KOKORO_SEED } });
  const d = checkCpuSpeech(concat(r.chunks.map((c) => Float32Array.from(c.audio))), r.chunks.flatMap((c) => c.words), k, 'page CPU');
  speechStats.page_cpu_phonemes = { snr_db: d.snr, max_rel: d.max, median_rel: d.median };
  check(/^WgmlError 4: text input needs espeak-ng.*no-such-dir\/phonemizer\.js.*npm ci --prefix web.*phoneme input works without it/.test(r.missing),
    `text without the phonemizer module: ${r.missing}`);
  check(r.after > 0, `phonemes after the failure: ${r.after} samples`);
  speechStats.stopped_after_chunks = r.stopped;
  check(r.stopped >= 1 && r.stopped < 6 && r.stoppedInfo.n_chunks === r.stopped, `stop after the first chunk: ${r.stopped} chunks, ${JSON.stringify(r.stoppedInfo)}`);
  for (const [lang, rows] of Object.entries(k.g2p)) {
    const bad = rows.map((row, i) => ({ ...row, got: r.g2p[lang][i] })).filter((x) => x.got !== x.phonemes);
    check(!bad.length, `${lang}: ${bad.length} of ${rows.length} differ from the shared vectors, e.g. ${JSON.stringify(bad[0])}`);
  }
  if (k.native) G2P_SENTENCES.forEach((t, i) => checkText(r.sentences[i], k.native[i], `phonemize '${t}' vs \`wgml phonemize\``));
  check(/^WgmlError 1: unknown language 'fr'/.test(r.badLang), `lang fr: ${r.badLang}`);
  check(r.loadsBeforeText === 0 && phonemizerLoads === 1,
    `the phonemizer module was fetched ${r.loadsBeforeText} times for phonemes and ${phonemizerLoads} in all (want 0, then once for text)`);
  await page.close();
});

await test('page, transcribe tab (CPU wasm): a whisper.cpp .bin from the file picker, a WAV file, segments with their times, a recording; API: WAV Blob, AudioBuffer, errors, Asyncify; screenshot', async () => {
  const w = whisperFiles();
  const page = await openDemo(cpuCtx, demoUrl);
  const l = await demoLoad(page, { backend: 'auto', file: w.bin });
  check(l.status === 'ready' && l.info.backend === 'cpu' && l.info.family === 'whisper', `load: ${l.status} ${l.error} ${l.info && l.info.backend}`);
  const tab = await page.evaluate(() => ({ shown: !document.getElementById('transcribe-section').hidden,
    button: document.getElementById('transcribe').disabled }));
  check(tab.shown && tab.button, `transcribe tab: ${JSON.stringify(tab)} (shown, and disabled until there is audio)`);
  await page.setInputFiles('#audio-file', w.wav);
  await page.selectOption('#stt-language', 'en');
  // the demo's own options are the defaults (fallback on, 224 tokens): the test's are added
  const shownSegments = async () => page.evaluate(() => [...document.querySelectorAll('#stt-segments li')].map((li) => li.textContent));
  await page.evaluate((o) => (window.wgmlDemo.transcribeOptions = o), { noFallback: true, maxTokens: 48 });
  await page.click('#transcribe');
  await page.waitForFunction(() => window.wgmlDemo.transcripts > 0, null, { timeout: 120000, polling: 100 });
  const r = await page.evaluate(() => ({ error: window.wgmlDemo.error, t: window.wgmlDemo.transcript,
    stats: document.getElementById('stt-stats').textContent }));
  check(!r.error && r.t.done, `transcribe failed: ${r.error}`);
  checkTranscript(r.t.segments, w.native, w.rules, 'demo tab, WAV file');
  const lines = await shownSegments();
  const clock = (t) => `${String(Math.floor(t / 60)).padStart(2, '0')}:${(t % 60).toFixed(3).padStart(6, '0')}`;
  check(lines.length === w.native.length && lines.every((x, i) => x === `[${clock(w.native[i].start)} --> ${clock(w.native[i].end)}] ${w.native[i].text}`),
    `shown: ${JSON.stringify(lines)}`);
  check(/real-time factor \d/.test(r.stats) && /language en/.test(r.stats), `stats: ${r.stats}`);
  transcribeStats.page_cpu = { rtf: r.t.result.rtf, total_ms: r.t.result.total_ms };
  const file = path.join(artifacts, 'demo-transcribe.png');
  await page.screenshot({ path: file, fullPage: true });
  const st = imageStats(decodePng(readFileSync(file)));
  check(st.distinctColors > 50 && st.lumaStdDev > 20, `demo-transcribe.png looks blank: ${JSON.stringify(st)}`);
  // Record: the (fake) microphone's PCM for about a second, then transcribed
  await page.click('#record');
  await page.waitForFunction(() => window.wgmlDemo.status === 'recording', null, { timeout: 10000, polling: 50 });
  await page.waitForTimeout(1500);
  await page.click('#record-stop');
  await page.waitForFunction(() => window.wgmlDemo.status === 'ready' && window.wgmlDemo.audio && window.wgmlDemo.audio.samples,
    null, { timeout: 10000, polling: 50 });
  await page.evaluate(() => (window.wgmlDemo.transcribeOptions = { noFallback: true, maxTokens: 4 }));
  await page.click('#transcribe');
  await page.waitForFunction(() => window.wgmlDemo.transcripts > 1, null, { timeout: 120000, polling: 100 });
  const rec = await page.evaluate(() => {
    const { samples, sampleRate } = window.wgmlDemo.audio;
    let peak = 0;
    for (const x of samples) peak = Math.max(peak, Math.abs(x));
    return { n: samples.length, sampleRate, peak, error: window.wgmlDemo.error, t: window.wgmlDemo.transcript,
      info: document.getElementById('audio-info').textContent, player: !document.getElementById('stt-audio').hidden };
  });
  check(rec.sampleRate >= 8000 && rec.n > 0.5 * rec.sampleRate && rec.n < 10 * rec.sampleRate && rec.peak > 0.01 && rec.player &&
    /^recording: \d/.test(rec.info), `recording: ${JSON.stringify({ ...rec, t: undefined })}`);
  check(!rec.error && rec.t.done && Math.abs(rec.t.result.duration - rec.n / rec.sampleRate) < 1e-6,
    `transcribing the recording: ${rec.error} ${JSON.stringify(rec.t.result)}`);
  // the API on the same model: a WAV Blob the browser decodes, an AudioBuffer (two channels, averaged) at 8 kHz,
  // errors; then the .bin from a URL on the Asyncify build
  await page.route('**/wgml-whisper/*', (route) => {
    const name = path.basename(new URL(route.request().url()).pathname);
    route.fulfill({ path: name === path.basename(w.bin) ? w.bin : path.join(w.dir, name), headers: { 'content-type': 'application/octet-stream' } });
  });
  const a = await page.evaluate(async ({ url, binUrl, options }) => {
    const m = window.wgmlDemo.model;
    const fail = async (it) => {
      try {
        for await (const s of it) void s;
        return 'no error';
      } catch (e) {
        return `${e.name} ${e.code}: ${e.message}`;
      }
    };
    const buf = new AudioBuffer({ numberOfChannels: 2, length: 8000, sampleRate: 8000 });
    for (let i = 0; i < 8000; i++) {
      buf.getChannelData(0)[i] = 0.5 * Math.sin(i * 0.3);
      buf.getChannelData(1)[i] = 0.1 * Math.sin(i * 0.7);
    }
    const out = { buffer: [], blob: [] };
    const blob = new Blob([await (await fetch(url)).arrayBuffer()], { type: 'audio/wav' });
    for await (const s of m.transcribe(blob, options)) out.blob.push(s);
    for await (const s of m.transcribe(buf, { language: 'en', noFallback: true, maxTokens: 8 })) out.buffer.push(s);
    out.bufferInfo = m.info().last;
    out.empty = await fail(m.transcribe(new Float32Array(0)));
    out.notAudio = await fail(m.transcribe(new Blob(['not audio at all'])));
    out.badInput = await fail(m.transcribe('hello'));
    // the Asyncify build (browsers without JSPI) unwinds through the segment callback; the .bin from a URL
    const wgml = (await import('./wgml.js')).default;
    const { samples, sampleRate } = await wgml.decodeAudio(blob);
    const am = await wgml.load(binUrl, { backend: 'cpu', mode: 'asyncify', cache: false });
    out.asyncify = { mode: am.info().mode, segments: [] };
    for await (const s of am.transcribe(samples, { ...options, sampleRate })) out.asyncify.segments.push(s);
    await am.dispose();
    return out;
  }, { url: `${base}wgml-whisper/jfk.wav`, binUrl: `${base}wgml-whisper/whisper-micro-random.bin`, options: WHISPER_OPTIONS });
  checkTranscript(a.blob, w.native, w.rules, 'WAV Blob decoded by the browser');
  check(a.asyncify.mode === 'asyncify', `Asyncify: mode ${a.asyncify.mode}`);
  checkTranscript(a.asyncify.segments, w.native, w.rules, 'Asyncify CPU, .bin from a URL');
  check(Math.abs(a.bufferInfo.duration - 1) < 1e-9 && a.bufferInfo.n_windows === 1, `AudioBuffer: ${JSON.stringify(a.bufferInfo)}`);
  check(/^WgmlError 1: there is no audio to transcribe \(0 samples\)/.test(a.empty), `empty samples: ${a.empty}`);
  check(/^WgmlError 3: transcribe: the browser could not decode the audio file/.test(a.notAudio), `not audio: ${a.notAudio}`);
  check(/^WgmlError 1: transcribe: the input must be a Float32Array/.test(a.badInput), `a string: ${a.badInput}`);
  // in a worker there is no Web Audio: a Blob gets an error that says what to pass instead
  const inWorker = await page.evaluate(async () => {
    const src = `import('${new URL('./wgml.js', location.href)}').then(async (w) => {
      try {
        await w.decodeAudio(new Blob(['x']));
        postMessage('no error');
      } catch (e) { postMessage(e.name + ' ' + e.code + ': ' + e.message); }
    });`;
    const wk = new Worker(URL.createObjectURL(new Blob([src], { type: 'text/javascript' })), { type: 'module' });
    return new Promise((resolve) => (wk.onmessage = (ev) => resolve(ev.data)));
  });
  check(/^WgmlError 4: transcribe: decoding an audio file needs the Web Audio API.*Float32Array.*sampleRate/.test(inWorker), `in a worker: ${inWorker}`);
  check(page.errors.length === 0, `page errors: ${page.errors}`);
  await page.close();
});

// ---- images (the clip family): tests/web/vision.mjs ----
await visionTests({ test, check, Engine, wasmPath, repo, profiles, openDemo, launch, base, demoUrl, modelUrl, artifacts });

await cpuCtx.close();
server.close();
for (const d of profiles) rmSync(d, { recursive: true, force: true });

const fmt = (v) => (v ? `${v.toFixed(1)} tokens/s` : 'n/a');
console.log(`speeds (stories260K, 60 greedy tokens): WebGPU SwiftShader ${fmt(speeds.webgpu)}, CPU wasm in Chromium ${fmt(speeds.cpu)}, CPU wasm in Node ${fmt(speeds.node_cpu)}`);
const rtf = (s) => (s && s.rtf ? `RTF ${s.rtf.toFixed(2)}, first audio ${s.first_audio_ms.toFixed(0)} ms` : 'n/a');
if (Object.keys(speechStats).length)
  console.log(`speech (kokoro-tiny): WebGPU SwiftShader ${rtf(speechStats.webgpu)}, CPU wasm in Chromium ${rtf(speechStats.page_cpu)}`);
if (Object.keys(transcribeStats).length)
  console.log(`transcription (whisper-micro, jfk 11 s; WebGPU 1 layer, 8 tokens): ${Object.entries(transcribeStats).map(([k, v]) =>
    `${k} ${(v.total_ms / 1e3).toFixed(2)} s${v.rtf ? ` (RTF ${v.rtf.toFixed(2)})` : ''}`).join(', ')}`);
speeds.speech = speechStats;
speeds.transcribe = transcribeStats;
writeFileSync(path.join(artifacts, 'speeds.json'), JSON.stringify(speeds, null, 2));
const passed = results.filter(Boolean).length;
const failed = results.length - passed;
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
