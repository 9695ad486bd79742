// worker.js - the Web Worker that owns one wgml model: web/wgml.js starts one
// per loaded model, so that loading and generating never block the page, and
// terminates it on dispose.
//
// Messages in (from wgml.js):            messages out:
//   {op:'load', source, options}           {type:'progress', value}  0..1
//                                          {type:'note', text}       e.g. the CPU fallback
//                                          {type:'loaded', info} | {type:'error', ...}
//   {op:'generate', id, prompt, options}   {type:'piece', id, text, token} ...
//                                          {type:'done', id, result, info} | {type:'error', id, ...}
//   {op:'chat', id, messages, options}     the same, the messages through the chat template first
//   {op:'embed', id, texts, options}       {type:'done', id, result: [Float32Array], info}
//   {op:'rerank', id, query, docs}         {type:'done', id, result: Float32Array, info}
//   {op:'embedImages', id, images, options} {type:'done', id, result: [Float32Array], info}
//                                           (images: [{ width, height, data: RGBA8 }])
//   {op:'classify', id, images, options}   {type:'done', id, result: [[{ label, index, score }]], info}
//   {op:'speak', id, input, options}       {type:'chunk', id, chunk: {audio, sample_rate, start, phonemes, words, index}} ...
//                                          {type:'done', id, result, info}
//   {op:'phonemize', id, text, options}    {type:'done', id, result: 'phonemes', info}
//   {op:'transcribe', id, audio, sampleRate, options}
//                                          {type:'chunk', id, chunk: {index, start, end, text, tokens, ...}} ...
//                                          {type:'done', id, result, info}
//   {op:'stop', id}
//   {op:'info', id}                        {type:'info', id, info}
//   {op:'dispose', id}                     {type:'disposed', id, live}
//
// Sources: a URL (fetched and streamed straight into the loader, chunk by
// chunk, while a copy goes into the Cache API so that the next load starts at
// once), a File/Blob (read in slices) or an ArrayBuffer. The loader pulls the
// file in order: the header first, then each tensor straight into GPU buffers
// (wgml_model_load_stream), so the model is never whole in wasm memory.
// Except whisper.cpp's ggml .bin (Whisper), which the stream loader does not
// read: it is read whole into wasm memory and converted there (wgmlw_load_memory).
//
// Speech: text goes through espeak-ng (web/g2p.js: the npm package phonemizer,
// GPL-3.0 inside), imported here only when text (not phonemes) is spoken.
import { Engine, WgmlError, jspiSupported } from './engine.js';

const CACHE_NAME = 'wgml-models-v1';
const YIELD_MS = 20; // CPU generation lets stop messages in this often
const GGML_MAGIC = 0x67676d6c; // whisper.cpp's ggml .bin

let engine = null;
let model = 0;
let session = 0;
let nCtx = 0;
let mode = '';
const stops = new Set();
let lastYield = 0;

const post = (m, transfer) => self.postMessage(m, transfer || []);
const note = (text) => post({ type: 'note', text });

function errorMessage(e) {
  return { code: e && e.code ? e.code : 0, message: (e && e.message) || String(e), name: (e && e.name) || 'Error' };
}

// ---- readers: { size, read(offset, len) -> Uint8Array | Promise<Uint8Array> } ----

function bufferReader(buf) {
  const u8 = buf instanceof Uint8Array ? buf : new Uint8Array(buf);
  return { size: u8.length, read: (off, len) => u8.subarray(off, off + len) };
}

function blobReader(blob) {
  return {
    size: blob.size,
    read: async (off, len) => new Uint8Array(await blob.slice(off, off + len).arrayBuffer()),
  };
}

// A fetch body read in order. Reads at offset 0 may repeat (the header is
// parsed from a growing prefix); once a read starts past 0, older bytes go.
function streamReader(body, size) {
  const rd = body.getReader();
  const chunks = [];
  let start = 0;
  let end = 0;
  return {
    size,
    cancel: () => rd.cancel().catch(() => {}),
    async read(off, len) {
      if (off < start) throw new Error(`read at ${off} after the stream moved past it`);
      while (end < off + len) {
        const { done, value } = await rd.read();
        if (done) throw new Error(`the download ended after ${end} of ${size} bytes`);
        chunks.push({ off: end, bytes: value });
        end += value.length;
      }
      if (off > 0)
        while (chunks.length && chunks[0].off + chunks[0].bytes.length <= off) {
          chunks.shift();
          start = chunks.length ? chunks[0].off : end;
        }
      const out = new Uint8Array(len);
      for (const c of chunks) {
        const a = Math.max(off, c.off);
        const b = Math.min(off + len, c.off + c.bytes.length);
        if (a < b) out.set(c.bytes.subarray(a - c.off, b - c.off), a - off);
        if (c.off >= off + len) break;
      }
      return out;
    },
  };
}

// Reports progress as the loader reads (it reads in file order).
function withProgress(reader) {
  let sent = -1;
  const report = (done) => {
    const v = Math.min(1, done / reader.size);
    if (v - sent >= 0.01 || v === 1) {
      sent = v;
      post({ type: 'progress', value: v });
    }
  };
  return {
    size: reader.size,
    read(off, len) {
      const r = reader.read(off, len);
      if (r instanceof Promise) return r.then((b) => (report(off + len), b));
      report(off + len);
      return r;
    },
  };
}

async function openCache() {
  try {
    return self.caches ? await caches.open(CACHE_NAME) : null;
  } catch {
    return null; // opaque origins, private modes
  }
}

// A URL: from the cache when there, else streamed from the network into both
// the loader and the cache. Returns { reader, after(ok) }.
async function openUrl(url, useCache) {
  const cache = useCache ? await openCache() : null;
  if (cache) {
    const hit = await cache.match(url);
    if (hit) {
      note('model from the browser cache');
      return { reader: blobReader(await hit.blob()), after: async () => {} };
    }
  }
  let res;
  try {
    res = await fetch(url);
  } catch (e) {
    throw new WgmlError(2, `cannot download ${url}: ${e.message || e}`);
  }
  if (!res.ok) throw new WgmlError(2, `cannot download ${url}: HTTP ${res.status} ${res.statusText}`);
  const size = Number(res.headers.get('content-length'));
  const encoded = res.headers.get('content-encoding');
  let body = res.body;
  if (!size || (encoded && encoded !== 'identity') || !body) {
    // No usable length (a compressed transfer): the size is known only at the end.
    const blob = await res.blob();
    if (cache) await cache.put(url, new Response(blob)).catch(() => {});
    return { reader: blobReader(blob), after: async () => {} };
  }
  let stored = null;
  if (cache) {
    const [a, b] = body.tee();
    body = a;
    const headers = { 'content-length': String(size), 'content-type': 'application/octet-stream' };
    stored = cache.put(url, new Response(b, { headers })).then(() => true, (e) => {
      note(`the model could not be cached: ${e.message || e}`);
      return false;
    });
  }
  const reader = streamReader(body, size);
  return {
    reader,
    after: async (ok) => {
      if (!stored) return;
      if (ok) {
        await stored;
        return;
      }
      reader.cancel();
      stored.then((put) => put && cache.delete(url));
    },
  };
}

// ---- operations ----

async function ensureEngine(options) {
  if (engine) return engine;
  const base = new URL('./dist/', import.meta.url);
  const gpu = options.backend === 'cpu' ? null : self.navigator.gpu || null;
  const want = options.mode || 'auto';
  mode = want === 'auto' ? (jspiSupported() ? 'jspi' : 'asyncify') : want;
  const wasm = new URL(mode === 'asyncify' ? 'wgml-asyncify.wasm' : 'wgml.wasm', base);
  // CPU threads: 'auto' is every core the browser reports, up to 8; none for
  // a model that must run on WebGPU.
  let threads = options.threads === undefined || options.threads === 'auto'
    ? Math.min(8, self.navigator.hardwareConcurrency || 1) : Math.max(1, Math.floor(Number(options.threads)) || 1);
  if (options.backend === 'webgpu') threads = 1;
  try {
    engine = await Engine.create({
      wasm, asyncifyWasm: wasm, threadsWasm: new URL('wgml-threads.wasm', base), threads, mode, gpu,
      spawnThread: () => new Worker(new URL('./thread.js', import.meta.url), { type: 'module', name: 'wgml-thread' }),
      log: (line) => note(line),
    });
    if (engine.threadsNote) note(engine.threadsNote);
  } catch (e) {
    if (mode !== 'asyncify') throw e;
    // No JSPI and no Asyncify build: the CPU only, from memory, without waiting.
    note(`no JSPI and no Asyncify build (${e.message}): CPU only, model read into memory first`);
    mode = 'sync';
    engine = await Engine.create({ wasm: new URL('wgml.wasm', base), mode, gpu: null, log: (line) => note(line) });
  }
  return engine;
}

async function load(source, options) {
  await ensureEngine(options);
  let opened;
  if (typeof source === 'string') opened = await openUrl(source, options.cache !== false);
  else if (source instanceof Blob) opened = { reader: blobReader(source), after: async () => {} };
  else if (source instanceof ArrayBuffer || ArrayBuffer.isView(source))
    opened = { reader: bufferReader(ArrayBuffer.isView(source) ? new Uint8Array(source.buffer, source.byteOffset, source.byteLength) : source), after: async () => {} };
  else throw new WgmlError(1, 'the model source must be a URL, a File/Blob or an ArrayBuffer');
  let reader = opened.reader;
  let backend = options.backend || 'auto';
  if (mode === 'sync') {
    // Nothing may wait: read the whole file first (progress is the download).
    const all = new Uint8Array(reader.size);
    for (let off = 0; off < reader.size; off += 4 << 20) {
      const n = Math.min(4 << 20, reader.size - off);
      all.set(await reader.read(off, n), off);
      post({ type: 'progress', value: (off + n) / reader.size });
    }
    reader = bufferReader(all);
    if (backend === 'webgpu') throw new WgmlError(4, 'WebGPU here needs JSPI or the Asyncify build (web/dist/wgml-asyncify.wasm)');
    backend = 'cpu';
  }
  let ok = false;
  try {
    const magic = reader.size >= 4 ? await reader.read(0, 4) : new Uint8Array(0);
    if (magic.length === 4 && new DataView(magic.buffer, magic.byteOffset, 4).getUint32(0, true) === GGML_MAGIC) {
      // whisper.cpp's ggml .bin: converted to a GGUF in memory, so read it whole first
      const all = new Uint8Array(reader.size);
      const progress = withProgress(reader);
      for (let off = 0; off < reader.size; off += 4 << 20) all.set(await progress.read(off, Math.min(4 << 20, reader.size - off)), off);
      model = await engine.loadMemory(all, { backend, webgpuFlags: options.webgpuFlags || 0 });
    } else model = await engine.load(withProgress(reader), { backend, webgpuFlags: options.webgpuFlags || 0 });
    nCtx = options.nCtx || 0;
    // a session (the KV cache) only for models that generate; embedding models have none
    if ((await engine.info(model)).tasks.includes('generate')) session = await engine.createSession(model, nCtx);
    ok = true;
  } finally {
    await opened.after(ok);
  }
  post({ type: 'progress', value: 1 });
  return info();
}

async function info() {
  const i = await engine.info(model);
  i.mode = mode;
  i.threads = engine.threads; // the engine's threads; n_threads: those the model's CPU backend uses
  return i;
}

// Lets queued messages (a stop) in during CPU generation, which never waits
// otherwise (always when forced: after each speech chunk).
function maybeYield(id, force = false) {
  const now = performance.now();
  if (mode === 'sync' || (!force && now - lastYield < YIELD_MS)) return stops.has(id);
  lastYield = now;
  return new Promise((resolve) => {
    const ch = new MessageChannel();
    ch.port1.onmessage = () => {
      ch.port1.close();
      lastYield = performance.now();
      resolve(stops.has(id));
    };
    ch.port2.postMessage(0);
  });
}

// A failure of a task the model does not have (WGML_ERR_UNSUPPORTED from the C
// library, which says why) with the model's family and tasks added.
async function withTasks(e) {
  if (!e || e.code !== 4) return e;
  const i = await engine.info(model);
  return new WgmlError(e.code, `${e.message} (this model: '${i.architecture}', family ${i.family}, tasks: ${i.tasks.join(', ') || 'none'})`);
}

// hold: keep the text (result.text) instead of posting the pieces (a reply that may be tool calls)
async function generate(id, prompt, options, hold = false) {
  if (!model) throw new WgmlError(1, 'no model is loaded');
  if (!session) {
    // the C library says why (a bert model does not generate text)
    try {
      session = await engine.createSession(model, nCtx);
    } catch (e) {
      throw await withTasks(e);
    }
  }
  await engine.resetSession(session);
  lastYield = performance.now();
  let held = '';
  const result = await engine.generate(session, prompt, options, (text, token) => {
    if (hold) held += text;
    else if (text) post({ type: 'piece', id, text, token });
    return maybeYield(id);
  });
  if (hold) result.text = held;
  stops.delete(id);
  result.tokens_per_s = result.n_generated > 1 ? (result.n_generated - 1) / (result.generate_ms / 1e3) : 0;
  result.prompt_tokens_per_s = result.prompt_ms > 0 ? result.n_prompt / (result.prompt_ms / 1e3) : 0;
  return result;
}

async function embed(texts, options) {
  if (!model) throw new WgmlError(1, 'no model is loaded');
  return engine.embed(model, texts, options).catch(async (e) => { throw await withTasks(e); });
}

async function embedImages(images, options) {
  if (!model) throw new WgmlError(1, 'no model is loaded');
  return engine.embedImages(model, images, options).catch(async (e) => { throw await withTasks(e); });
}

async function classify(images, options) {
  if (!model) throw new WgmlError(1, 'no model is loaded');
  return engine.classify(model, images, options).catch(async (e) => { throw await withTasks(e); });
}

async function rerank(query, docs) {
  if (!model) throw new WgmlError(1, 'no model is loaded');
  return engine.rerank(model, query, docs).catch(async (e) => { throw await withTasks(e); });
}

// The G2P for text: espeak-ng from the phonemizer module, loaded on first use.
let g2pModule = null;
async function g2pFor(options) {
  if (!g2pModule) g2pModule = await import('./g2p.js');
  const url = options.phonemizer ? new URL(options.phonemizer, self.location.href).href : undefined;
  return (pieces, voice) => g2pModule.phonemizePieces(pieces, voice, url);
}

async function speak(id, input, options) {
  if (!model) throw new WgmlError(1, 'no model is loaded');
  const g2p = options.phonemes ? null : await g2pFor(options);
  lastYield = performance.now();
  let result;
  try {
    result = await engine.speak(model, input, options, g2p, (chunk) => {
      post({ type: 'chunk', id, chunk }, [chunk.audio.buffer]);
      return maybeYield(id, true);
    });
  } catch (e) {
    throw await withTasks(e);
  } finally {
    stops.delete(id);
  }
  const info = await engine.info(model);
  result.audio_s = result.n_samples / (info.sample_rate || 24000);
  result.rtf = result.audio_s > 0 ? result.total_ms / 1e3 / result.audio_s : 0;
  return result;
}

async function phonemize(text, options) {
  if (!engine) throw new WgmlError(1, 'no model is loaded');
  return engine.phonemize(text, options, await g2pFor(options));
}

// Whisper: each segment to the page as it comes; after each, a stop gets in.
async function transcribe(id, audio, sampleRate, options) {
  if (!model) throw new WgmlError(1, 'no model is loaded');
  let result;
  try {
    result = await engine.transcribe(model, audio, sampleRate, options, (segment) => {
      post({ type: 'chunk', id, chunk: segment });
      return maybeYield(id, true);
    });
  } catch (e) {
    throw await withTasks(e);
  } finally {
    stops.delete(id);
  }
  result.rtf = result.duration > 0 ? result.total_ms / 1e3 / result.duration : 0;
  return result;
}

async function dispose() {
  if (engine && session) await engine.freeSession(session);
  if (engine && model) await engine.freeModel(model);
  session = model = 0;
  return engine ? { ...engine.gpuLive } : { buffers: 0, bytes: 0, devices: 0 };
}

self.onmessage = async (ev) => {
  const m = ev.data;
  try {
    switch (m.op) {
      case 'load':
        post({ type: 'loaded', info: await load(m.source, m.options || {}) });
        break;
      case 'chat': {
        // the messages through the model's chat template, then a generation without a second BOS;
        // with tools (m.tools: { tools, choice, parallel }) the calls are parsed from the reply:
        // required or named, constrained from the first token; auto, the text held and parsed
        if (!model) throw new WgmlError(1, 'no model is loaded');
        const tools = m.tools && m.tools.tools;
        const prompt = await engine.chatPrompt(model, m.messages, { tools }).catch(async (e) => { throw await withTasks(e); });
        let handle = 0;
        if (tools) handle = await engine.createTools(model, tools, m.tools.choice, m.tools.parallel);
        try {
          const calling = handle && m.tools.choice !== 'none';
          const constrained = calling && m.tools.choice !== 'auto' && m.tools.choice !== undefined;
          const result = await generate(m.id, prompt, { ...(m.options || {}), addBos: false,
            toolsGrammar: constrained ? handle : undefined }, calling);
          if (calling) {
            result.tool_calls = await engine.toolCalls(handle, result.text);
            if (result.tool_calls) result.finish_reason = 'tool_calls';
          }
          post({ type: 'done', id: m.id, result, info: await info() });
        } finally {
          if (handle) await engine.freeTools(handle);
        }
        break;
      }
      case 'generate': {
        const result = await generate(m.id, m.prompt, m.options || {});
        post({ type: 'done', id: m.id, result, info: await info() });
        break;
      }
      case 'embed': {
        const result = await embed(m.texts, m.options || {});
        post({ type: 'done', id: m.id, result, info: await info() }, result.map((v) => v.buffer));
        break;
      }
      case 'embedImages': {
        const result = await embedImages(m.images, m.options || {});
        post({ type: 'done', id: m.id, result, info: await info() }, result.map((v) => v.buffer));
        break;
      }
      case 'classify': {
        const result = await classify(m.images, m.options || {});
        post({ type: 'done', id: m.id, result, info: await info() });
        break;
      }
      case 'rerank': {
        const result = await rerank(m.query, m.docs);
        post({ type: 'done', id: m.id, result, info: await info() }, [result.buffer]);
        break;
      }
      case 'speak': {
        const result = await speak(m.id, m.input, m.options || {});
        post({ type: 'done', id: m.id, result, info: await info() });
        break;
      }
      case 'phonemize': {
        const result = await phonemize(m.text, m.options || {});
        post({ type: 'done', id: m.id, result, info: await info() });
        break;
      }
      case 'transcribe': {
        const result = await transcribe(m.id, m.audio, m.sampleRate, m.options || {});
        post({ type: 'done', id: m.id, result, info: await info() });
        break;
      }
      case 'stop':
        stops.add(m.id);
        break;
      case 'info':
        post({ type: 'info', id: m.id, info: await info() });
        break;
      case 'dispose':
        post({ type: 'disposed', id: m.id, live: await dispose() });
        break;
      default:
        throw new Error(`unknown operation '${m.op}'`);
    }
  } catch (e) {
    post({ type: 'error', id: m.id, op: m.op, ...errorMessage(e) });
  }
};
