// demo.js - the demo page's logic (index.html) over the wgml.js API: load a
// model from a URL or a file with a progress bar, show the backend and adapter,
// stream generated text with tokens/s, stop, and explain failures in words
// (no WebGPU, a corrupt file, a model that does not fit).
//
// For tests and the curious, window.wgmlDemo holds the state: the model, its
// info(), the status ('idle', 'loading', 'ready', 'generating', 'error'), and
// how many loads and generations have finished (successfully or not).
import wgml, { STATUS } from './wgml.js';

const $ = (id) => document.getElementById(id);
const demo = { model: null, info: null, status: 'idle', webgpu: null, error: '', loads: 0, generations: 0 };
window.wgmlDemo = demo;

function setStatus(s) {
  demo.status = s;
  document.body.dataset.status = s;
  const busy = s === 'loading' || s === 'generating';
  $('load').disabled = busy;
  $('unload').disabled = busy || !demo.model;
  $('generate').disabled = busy || !demo.model;
  $('stop').disabled = s !== 'generating';
}

function showError(text) {
  demo.error = text;
  $('error').textContent = text;
  $('error').hidden = !text;
}

function showNotice(text) {
  $('webgpu-notice').textContent = text;
  $('webgpu-notice').hidden = !text;
}

function mib(bytes) {
  return `${(bytes / (1 << 20)).toFixed(bytes < 10 << 20 ? 2 : 0)} MiB`;
}

// A failure in words a user can act on.
function explain(e) {
  const msg = (e && e.message) || String(e);
  switch (e && e.code) {
    case STATUS.OUT_OF_MEMORY:
      return `The model does not fit in this tab's memory: ${msg}`;
    case STATUS.GPU:
      if (/out of memory|maxBufferSize|exceeds|larger than/i.test(msg)) return `The model does not fit on this GPU: ${msg}`;
      return `The GPU reported an error: ${msg}`;
    case STATUS.DEVICE_LOST:
      return `The GPU device was lost (driver reset or tab in the background too long); load the model again. ${msg}`;
    case STATUS.FORMAT:
      return `This is not a valid GGUF model file: ${msg}`;
    case STATUS.IO:
      return `The model could not be read: ${msg}`;
    case STATUS.UNSUPPORTED:
      return `This model is not supported: ${msg}`;
    case STATUS.NO_ADAPTER:
      return `No WebGPU adapter: ${msg}. Choose the CPU backend.`;
    default:
      return msg;
  }
}

function showInfo(i) {
  $('model-info').hidden = false;
  const gpu = i.backend === 'webgpu';
  $('info-backend').textContent = gpu ? `WebGPU (${i.mode === 'jspi' ? 'JSPI' : i.mode})` : `CPU, WebAssembly ${i.adapter === 'wasm-simd128' ? 'SIMD128' : i.adapter}`;
  $('info-adapter').textContent = gpu ? i.adapter : 'none (CPU)';
  $('info-model').textContent = `${i.name || i.architecture}: ${(i.n_params / 1e6).toFixed(2)}M parameters, ` +
    `${i.n_layer} layers, ${mib(i.weights_bytes)} of weights, vocabulary ${i.n_vocab}` +
    (gpu ? `, ${mib(i.device_memory_bytes)} on the GPU` : '');
}

async function unload() {
  if (!demo.model) return;
  const m = demo.model;
  demo.model = null;
  demo.info = null;
  $('model-info').hidden = true;
  await m.dispose();
}

async function loadModel() {
  showError('');
  const file = $('model-file').files[0];
  const url = $('model-url').value.trim();
  const source = file || url;
  if (!source) {
    showError('Choose a model: a URL or a .gguf file.');
    return;
  }
  setStatus('loading');
  await unload();
  $('output').textContent = '';
  $('tokens-per-s').textContent = '';
  $('gen-status').textContent = '';
  $('progress').value = 0;
  const name = file ? file.name : url;
  $('progress-text').textContent = `loading ${name}...`;
  const t0 = performance.now();
  try {
    demo.model = await wgml.load(source, {
      backend: $('backend').value,
      onProgress: (p) => {
        $('progress').value = p;
        $('progress-text').textContent = `${file ? 'reading' : 'downloading'} and uploading ${name}: ${Math.round(p * 100)}%`;
      },
    });
    demo.info = demo.model.info();
    const cached = demo.info.notes.some((n) => /cache/.test(n));
    $('progress-text').textContent = `loaded ${name} in ${((performance.now() - t0) / 1e3).toFixed(1)} s${cached ? ' (from the browser cache)' : ''}`;
    showInfo(demo.info);
    const fallback = demo.info.notes.find((n) => /webgpu unavailable/i.test(n));
    if (demo.info.backend === 'cpu' && fallback)
      showNotice(`WebGPU could not be used, so wgml runs on the CPU (WebAssembly SIMD), which is slower. Why: ${fallback.replace(/^webgpu unavailable \((.*)\); using the CPU$/, '$1')}`);
    else if (demo.webgpu && demo.webgpu.ok) showNotice('');
    setStatus('ready');
  } catch (e) {
    demo.model = null;
    $('progress-text').textContent = `could not load ${name}`;
    showError(explain(e));
    setStatus('error');
  } finally {
    demo.loads++;
  }
}

async function generate() {
  if (!demo.model) return;
  showError('');
  setStatus('generating');
  const prompt = $('prompt').value;
  const out = $('output');
  out.textContent = '';
  const p = document.createElement('span');
  p.className = 'prompt';
  p.textContent = prompt;
  const gen = document.createElement('span');
  gen.id = 'generated';
  out.append(p, gen);
  $('gen-status').textContent = 'generating...';
  $('tokens-per-s').textContent = '';
  const it = demo.model.generate(prompt, {
    maxTokens: Number($('max-tokens').value) || 60,
    temperature: Number($('temperature').value) || 0,
    topP: Number($('top-p').value) || 0.95,
  });
  demo.current = it;
  let n = 0;
  const t0 = performance.now();
  try {
    for await (const piece of it) {
      gen.append(piece);
      n++;
      if (n % 4 === 0) $('tokens-per-s').textContent = `${(n / ((performance.now() - t0) / 1e3)).toFixed(1)} tokens/s`;
    }
    demo.info = demo.model.info();
    const r = demo.info.last;
    $('tokens-per-s').textContent = `${r.tokens_per_s.toFixed(1)} tokens/s (prompt ${r.prompt_tokens_per_s.toFixed(1)} tokens/s)`;
    $('gen-status').textContent = `${r.n_generated} tokens, stopped: ${r.stop}; first token after ${r.ttft_ms.toFixed(0)} ms`;
    setStatus('ready');
  } catch (e) {
    showError(explain(e));
    $('gen-status').textContent = '';
    setStatus('error');
    if (e.code === STATUS.DEVICE_LOST) await unload().catch(() => {});
    setStatus(demo.model ? 'ready' : 'error');
  } finally {
    demo.current = null;
    demo.generations++;
  }
}

$('load').addEventListener('click', loadModel);
$('unload').addEventListener('click', async () => {
  setStatus('loading');
  await unload();
  $('progress').value = 0;
  $('progress-text').textContent = 'unloaded';
  setStatus('idle');
});
$('model-file').addEventListener('change', () => {
  if ($('model-file').files[0]) $('model-url').value = '';
});
$('generate').addEventListener('click', generate);
$('stop').addEventListener('click', () => demo.current && demo.current.stop());

setStatus('idle');
wgml.webgpuAvailable().then((r) => {
  demo.webgpu = r;
  if (!r.ok) showNotice(`WebGPU is not available in this browser: ${r.reason}. wgml will run on the CPU (WebAssembly SIMD), which is slower.`);
});
