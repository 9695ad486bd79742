// ONNX Runtime (onnxruntime-node, CPU) images/s of an exported vision tower.
//
//   node bench/vision-peer/ort_bench.mjs MODEL.onnx [--batch 16] [--count 32] [--repeat 3]
//        [--warmup 2] [--threads 2]
//
// onnxruntime-node is resolved from NODE_PATH or the current directory's node_modules
// (install it outside the repository: cd /tmp/vision-peer && npm install onnxruntime-node).
// Input: random normal pixel_values [N, 3, S, S] (already preprocessed: no resize, crop or
// normalization is timed). Batch 1: min(count, 16) images, one run each; batch B: count
// images, B per run. Each figure is the median of --repeat runs (after --warmup runs).
// Prints one JSON object on stdout.
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.cwd(), 'noop.js'));
let ort;
try {
  ort = require('onnxruntime-node');
} catch {
  ort = createRequire(import.meta.url)('onnxruntime-node');
}

const args = process.argv.slice(2);
const opt = { batch: 16, count: 32, repeat: 3, warmup: 2, threads: 2 };
let model = null;
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a.startsWith('--')) {
    const k = a.slice(2);
    if (!(k in opt)) throw new Error(`unknown option ${a}`);
    opt[k] = Number(args[++i]);
  } else model = a;
}
if (!model) {
  console.error('usage: node ort_bench.mjs MODEL.onnx [--batch B] [--count N] [--repeat R] [--warmup W] [--threads T]');
  process.exit(2);
}

const session = await ort.InferenceSession.create(model, {
  executionProviders: ['cpu'],
  intraOpNumThreads: opt.threads,
  interOpNumThreads: 1,
  graphOptimizationLevel: 'all',
  executionMode: 'sequential',
});
const inName = session.inputNames[0];
const outName = session.outputNames[0];

// image size: from the input's metadata when the binding exposes it, else probe 224
let S = 224;
try {
  const md = session.inputMetadata?.[0] ?? session.inputMetadata?.[inName];
  const dims = md?.shape ?? md?.dimensions;
  if (dims && Number.isInteger(dims[2])) S = dims[2];
} catch { /* older binding */ }
if (process.env.IMAGE_SIZE) S = Number(process.env.IMAGE_SIZE);

function randn(n, seed) {
  const a = new Float32Array(n);
  let s = seed >>> 0 || 1;
  const u = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) + 0.5) / 4294967296;
  for (let i = 0; i < n; i += 2) {
    const r = Math.sqrt(-2 * Math.log(u())), t = 2 * Math.PI * u();
    a[i] = r * Math.cos(t);
    if (i + 1 < n) a[i + 1] = r * Math.sin(t);
  }
  return a;
}

const per = 3 * S * S;
const pixels = randn(opt.count * per, 1234);
const batchTensor = (start, n) =>
  new ort.Tensor('float32', pixels.subarray(start * per, (start + n) * per), [n, 3, S, S]);

async function runBatches(b, n) {
  const t0 = process.hrtime.bigint();
  let dim = 0;
  for (let i = 0; i < n; i += b) {
    const m = Math.min(b, n - i);
    const out = await session.run({ [inName]: batchTensor(i, m) });
    dim = out[outName].dims[1];
  }
  return { sec: Number(process.hrtime.bigint() - t0) / 1e9, dim };
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]; };

async function measure(b, n) {
  for (let w = 0; w < opt.warmup; w++) await runBatches(b, Math.min(n, b));
  const rates = [];
  let dim = 0;
  for (let r = 0; r < opt.repeat; r++) {
    const { sec, dim: d } = await runBatches(b, n);
    rates.push(n / sec);
    dim = d;
  }
  return { images: n, images_per_s: median(rates), min: Math.min(...rates), max: Math.max(...rates), dim };
}

const b1 = await measure(1, Math.min(opt.count, 16));
const bB = await measure(opt.batch, opt.count);
console.log(JSON.stringify({
  engine: 'onnxruntime-node',
  version: ort.env?.versions?.common ?? ort.env?.versions?.node ?? null,
  model: path.basename(model),
  image_size: S,
  threads: opt.threads,
  input: 'preprocessed pixel_values (no resize/crop/normalize timed)',
  batch1: b1,
  batch: opt.batch,
  batchN: bB,
}));
