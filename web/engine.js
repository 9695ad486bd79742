// engine.js - runs web/dist/wgml.wasm: instantiates it with its imports (the
// GPU layer of gpu.js, model reads, token callbacks, a few WASI functions) and
// makes the asynchronous imports look synchronous to C. Models of every task:
// generate, embed, rerank, embedImages and classify (images), speak (Kokoro; text through a G2P function the
// caller gives, see web/g2p.js), transcribe (Whisper).
//
// Three ways to wait, picked once (Engine.create({ mode })):
//  - 'jspi': JavaScript Promise Integration (Chromium 137+). Async imports are
//    wrapped in WebAssembly.Suspending and the exports in
//    WebAssembly.promising: when an import returns a promise the wasm stack is
//    suspended until it settles. Imports that return a plain value do not suspend.
//  - 'asyncify': web/dist/wgml-asyncify.wasm, rewritten by binaryen's Asyncify
//    pass. When an async import returns a promise, we ask the module to unwind
//    its stack into a buffer, await the promise, and call the export again to
//    rewind to the same import, which then returns the promise's value.
//  - 'sync': no waiting at all; an async import that returns a promise is an
//    error. Enough for the CPU backend with an in-memory source (Node tests).
// Only one export runs at a time (calls queue up): wasm has one stack.
//
// Threads (Engine.create({ threads: N, threadsWasm, spawnThread })): with
// JSPI, where shared memory is allowed (a cross-origin isolated page, or a
// worker of one), web/dist/wgml-threads.wasm runs on a shared memory created
// here, and N - 1 Web Workers (web/thread.js, started by spawnThread) run the
// same module on it as the CPU backend's worker threads
// (src/web/web_threads.c). Otherwise one thread, with the plain module.
// On a shared memory TextDecoder and crypto.getRandomValues want copies.
//
// Engine itself knows nothing of workers, pages or caches; web/worker.js
// drives it, and Node can too (tests/web/cpu.mjs).
import { createGpuImports, ASYNC_IMPORTS as GPU_ASYNC } from './gpu.js';

const ASYNC_IMPORTS = [...GPU_ASYNC, 'read', 'token', 'audio', 'segment'];
const ASYNCIFY_DATA_SIZE = 256 * 1024;

export const jspiSupported = () =>
  typeof WebAssembly.Suspending === 'function' && typeof WebAssembly.promising === 'function';
// Whether this context may share wasm memory with workers.
export const threadsSupported = () =>
  typeof SharedArrayBuffer === 'function' && globalThis.crossOriginIsolated !== false;

// UTF-8 bytes of wasm memory as a string (a copy first: TextDecoder refuses
// views of a SharedArrayBuffer).
export const utf8 = (buf, p, len) => new TextDecoder().decode(new Uint8Array(buf, p, len).slice());

// The memory size both modules declare (cmake/web.cmake): 16 MiB, up to 4 GiB.
const MEMORY_PAGES = 256;
const MEMORY_MAX_PAGES = 65536;
const THREAD_START_MS = 20000;

// For each UTF-8 byte offset of s where a code point starts (and its end),
// the index of that code point in the JS string.
function utf16Indices(s) {
  const at = [];
  let i = 0;
  for (const ch of s) {
    const cp = ch.codePointAt(0);
    const bytes = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    for (let k = 0; k < bytes; k++) at.push(i);
    i += ch.length;
  }
  at.push(i);
  return at;
}

export class WgmlError extends Error {
  constructor(code, message) {
    super(message);
    this.name = 'WgmlError';
    this.code = code; // wgml_status
  }
}
const POOLING = { model: 0, mean: 1, cls: 2, last: 3 }; // wgml_pooling
const NORMALIZE = { l2: 0, none: 1 }; // wgml_normalize
export const STATUS_NAMES = ['ok', 'invalid argument', 'io', 'format', 'unsupported', 'out of memory',
  'context full', 'gpu', 'device lost', 'no adapter', 'tokenizer'];

// The WASI functions wasi-libc may import; stdout/stderr go to console.
function wasiImports(mem, log) {
  const ENOSYS = 52;
  const EBADF = 8;
  const lines = { 1: '', 2: '' };
  const t0 = performance.now();
  const impl = {
    fd_write(fd, iovs, n, nwritten) {
      const v = new DataView(mem());
      let text = '';
      let total = 0;
      for (let i = 0; i < n; i++) {
        const p = v.getUint32(iovs + 8 * i, true);
        const len = v.getUint32(iovs + 8 * i + 4, true);
        text += utf8(mem(), p, len);
        total += len;
      }
      v.setUint32(nwritten, total, true);
      if (fd !== 1 && fd !== 2) return EBADF;
      const parts = (lines[fd] + text).split('\n');
      lines[fd] = parts.pop();
      for (const line of parts) log(line, fd);
      return 0;
    },
    clock_time_get(id, precision, out) {
      const ns = id === 0 ? BigInt(Date.now()) * 1000000n : BigInt(Math.round((performance.now() - t0) * 1e6));
      new DataView(mem()).setBigUint64(out, ns, true);
      return 0;
    },
    random_get(buf, len) {
      const r = new Uint8Array(len);
      for (let i = 0; i < len; i += 65536) crypto.getRandomValues(r.subarray(i, Math.min(len, i + 65536)));
      new Uint8Array(mem(), buf, len).set(r);
      return 0;
    },
    environ_sizes_get(count, size) {
      const v = new DataView(mem());
      v.setUint32(count, 0, true);
      v.setUint32(size, 0, true);
      return 0;
    },
    environ_get() {
      return 0;
    },
    proc_exit(code) {
      throw new Error(`wgml.wasm called exit(${code})`);
    },
    // no preopened directories: wasi-libc's start-up asks (files used by the
    // library, e.g. a voice file by name, then simply do not exist)
    fd_prestat_get: () => EBADF,
    fd_close: () => EBADF,
    fd_seek: () => EBADF,
    fd_fdstat_get: () => EBADF,
  };
  return new Proxy(impl, { get: (o, k) => o[k] || (() => ENOSYS) });
}

export class Engine {
  // wasm: a URL, Response, ArrayBuffer or WebAssembly.Module for the plain
  // build; asyncifyWasm: the same for the Asyncify build; threadsWasm: the
  // same for the build with threads, used when threads > 1 with JSPI where
  // memory can be shared; spawnThread(): a new Worker running web/thread.js.
  // gpu: navigator.gpu. engine.threads: the threads it has (1 + the workers
  // that started), engine.threadsNote: why fewer than asked for, or ''.
  static async create({ wasm, asyncifyWasm, threadsWasm, threads = 1, spawnThread, mode = 'auto', gpu = null,
    log = console.log } = {}) {
    if (mode === 'auto') mode = jspiSupported() ? 'jspi' : asyncifyWasm ? 'asyncify' : 'sync';
    const e = new Engine();
    e.threads = 1;
    e.threadsNote = '';
    let shared = false;
    if (threads > 1) {
      if (mode !== 'jspi') e.threadsNote = `one thread: worker threads need JSPI (this is '${mode}')`;
      else if (!threadsSupported()) e.threadsNote = 'one thread: the page is not cross-origin isolated (COOP/COEP headers), so memory cannot be shared';
      else if (!threadsWasm || !spawnThread) e.threadsNote = 'one thread: no build with threads was given';
      else shared = true;
    }
    await e.#init(shared ? threadsWasm : mode === 'asyncify' ? asyncifyWasm : wasm, mode, gpu, log, shared);
    if (shared) await e.#startThreads(threads, spawnThread);
    return e;
  }

  #x = null; // raw exports
  #queue = Promise.resolve();
  #readers = new Map();
  #tokenSinks = new Map();
  #audioSinks = new Map();
  #segmentSinks = new Map();
  #nextId = 1;
  #async = null; // Asyncify state

  #memory = null; // the WebAssembly.Memory (exported by the plain builds, imported by the threads build)
  #workers = [];

  async #init(source, mode, gpu, log, shared) {
    this.mode = mode;
    this.log = log;
    const mem = () => this.#memory.buffer;
    const g = createGpuImports({ mem, gpu });
    this.gpuLive = g.live;
    const wgml = {
      ...g.imports,
      read: (src, offset, buf, len) => this.#read(src, offset, buf, len),
      token: (user, token, text, len) => this.#token(user, token, text, len),
      audio: (user, samples, n, meta, len) => this.#audio(user, samples, n, meta, len),
      segment: (user, json, len) => this.#segment(user, json, len),
      log: (ptr, len) => log(utf8(mem(), ptr, len)),
    };
    const wrapped = {};
    for (const [name, fn] of Object.entries(wgml)) {
      if (!ASYNC_IMPORTS.includes(name)) wrapped[name] = fn;
      else if (mode === 'jspi') wrapped[name] = new WebAssembly.Suspending(fn);
      else if (mode === 'asyncify') wrapped[name] = (...a) => this.#asyncifyImport(fn, a);
      else
        wrapped[name] = (...a) => {
          const r = fn(...a);
          if (r instanceof Promise) throw new Error(`wgml: '${name}' needs to wait, which needs JSPI or the Asyncify build`);
          return r;
        };
    }
    const imports = { wgml: wrapped, wasi_snapshot_preview1: wasiImports(mem, (line) => log(line)) };
    if (shared)
      imports.env = { memory: new WebAssembly.Memory({ initial: MEMORY_PAGES, maximum: MEMORY_MAX_PAGES, shared: true }) };
    let module = source;
    if (typeof source === 'string' || source instanceof URL) source = await fetch(source);
    if (typeof Response !== 'undefined' && source instanceof Response) {
      if (!source.ok) throw new Error(`cannot load ${source.url}: HTTP ${source.status} (build it: see docs/web.md)`);
      // Streaming compilation needs the application/wasm type; some servers send another.
      const copy = source.clone();
      module = await WebAssembly.compileStreaming(source).catch(async () => WebAssembly.compile(await copy.arrayBuffer()));
    } else if (!(source instanceof WebAssembly.Module)) {
      module = await WebAssembly.compile(source);
    }
    const instance = await WebAssembly.instantiate(module, imports);
    this.#x = instance.exports;
    this.#memory = shared ? imports.env.memory : instance.exports.memory;
    this.#module = module;
    this.#x._initialize();
    if (mode === 'asyncify') {
      const p = this.#x.wgmlw_malloc(ASYNCIFY_DATA_SIZE);
      this.#async = { data: p, pending: null, value: 0 };
    }
    this.#promising = new Map();
  }

  #promising = null;
  #module = null;

  // Starts up to n - 1 worker threads on the shared memory and waits until
  // each serves (or fails, or THREAD_START_MS pass: then fewer threads).
  async #startThreads(n, spawnThread) {
    const x = this.#x;
    const made = x.wgmlw_threads_init(n);
    if (made < 0) throw new WgmlError(5, 'out of memory setting up threads');
    const failures = [];
    const started = [];
    for (let i = 0; i < made; i++) {
      let w;
      try {
        w = spawnThread();
      } catch (e) {
        failures.push(e.message || String(e));
        break;
      }
      this.#workers.push(w);
      started.push(new Promise((resolve) => {
        const timer = setTimeout(() => resolve(`thread ${i + 1} did not start in ${THREAD_START_MS / 1e3} s`), THREAD_START_MS);
        w.onmessage = ({ data }) => {
          if (data.type === 'ready') clearTimeout(timer), resolve('');
          else if (data.type === 'error') clearTimeout(timer), resolve(`thread ${i + 1}: ${data.message}`), this.log(`wgml thread ${i + 1}: ${data.message}`);
        };
        w.onerror = (e) => (clearTimeout(timer), resolve(`thread ${i + 1}: ${e.message || 'failed to start'}`));
      }));
      w.postMessage({ module: this.#module, memory: this.#memory, index: i, stackTop: x.wgmlw_thread_stack(i) });
    }
    for (const r of await Promise.all(started)) if (r) failures.push(r);
    // 'ready' comes just before the worker enters C, which then marks its slot idle
    const want = started.length - failures.filter((f) => f.startsWith('thread')).length;
    for (let t = 0; t < 1000 && x.wgmlw_threads_idle() < want; t++) await new Promise((r) => setTimeout(r, 1));
    this.threads = 1 + x.wgmlw_threads_idle();
    if (this.threads < n) this.threadsNote = `${this.threads} of ${n} threads started${failures.length ? `: ${failures[0]}` : ''}`;
  }

  // Ends the worker threads (the module must not be used afterwards).
  terminateThreads() {
    for (const w of this.#workers) w.terminate();
    this.#workers = [];
  }

  // ---- calling exports ----

  #call(name, args) {
    const x = this.#x;
    if (this.mode === 'jspi') {
      let f = this.#promising.get(name);
      if (!f) this.#promising.set(name, (f = WebAssembly.promising(x[name])));
      return f(...args);
    }
    if (this.mode === 'asyncify') return this.#asyncifyCall(name, args);
    return x[name](...args);
  }

  // Runs fn after the work already queued; resolves to its result. Every use
  // of the module goes through here: a second call while one is suspended
  // would share (and overwrite) the C stack.
  #exclusive(fn) {
    const run = this.#queue.then(fn);
    this.#queue = run.catch(() => {});
    return run;
  }

  // Runs an export after the ones already queued; resolves to its result.
  call(name, ...args) {
    return this.#exclusive(() => this.#call(name, args));
  }

  #asyncifyImport(fn, args) {
    const a = this.#async;
    const x = this.#x;
    if (x.asyncify_get_state() === 2) { // rewinding: the awaited value is the result
      x.asyncify_stop_rewind();
      return a.value;
    }
    const r = fn(...args);
    if (!(r instanceof Promise)) return r;
    a.pending = r;
    const v = new DataView(this.memory);
    v.setUint32(a.data, a.data + 8, true);
    v.setUint32(a.data + 4, a.data + ASYNCIFY_DATA_SIZE, true);
    x.asyncify_start_unwind(a.data);
    return 0;
  }

  async #asyncifyCall(name, args) {
    const a = this.#async;
    const x = this.#x;
    for (;;) {
      const ret = x[name](...args);
      if (x.asyncify_get_state() !== 1) return ret;
      x.asyncify_stop_unwind();
      a.value = await a.pending;
      a.pending = null;
      x.asyncify_start_rewind(a.data);
    }
  }

  // ---- memory helpers ----

  get memory() {
    return this.#memory.buffer;
  }
  cstring(p) {
    const m = new Uint8Array(this.memory);
    let e = p;
    while (m[e]) e++;
    return utf8(this.memory, p, e - p);
  }
  #alloc(text) {
    const bytes = new TextEncoder().encode(text);
    const p = this.#x.wgmlw_malloc(bytes.length + 1);
    const m = new Uint8Array(this.memory);
    m.set(bytes, p);
    m[p + bytes.length] = 0;
    return p;
  }
  // An array of C strings and the array of their pointers; free with #freeStrings.
  #allocStrings(texts) {
    const ptrs = texts.map((t) => this.#alloc(t));
    const arr = this.#x.wgmlw_malloc(4 * Math.max(1, ptrs.length));
    new Uint32Array(this.memory, arr, ptrs.length).set(ptrs);
    return { arr, ptrs };
  }
  #freeStrings({ arr, ptrs }) {
    for (const p of ptrs) this.#x.wgmlw_free(p);
    this.#x.wgmlw_free(arr);
  }
  lastError() {
    return new WgmlError(this.#x.wgmlw_error_code(), this.cstring(this.#x.wgmlw_error_message()));
  }

  // ---- imports that call back into JS objects ----

  #read(src, offset, buf, len) {
    const reader = this.#readers.get(src);
    const copy = (bytes) => {
      if (!bytes || bytes.length !== len) return -1;
      new Uint8Array(this.memory).set(bytes, buf);
      return len;
    };
    let r;
    try {
      r = reader.read(offset, len);
    } catch (e) {
      reader.error = e;
      return -1;
    }
    if (r instanceof Promise)
      return r.then(copy, (e) => {
        reader.error = e;
        return -1;
      });
    return copy(r);
  }

  #token(user, token, text, len) {
    const sink = this.#tokenSinks.get(user);
    const piece = utf8(this.memory, text, len);
    return sink(piece, token);
  }

  // A speech chunk: the samples copied out, the rest from C's JSON.
  #audio(user, samples, n, meta, len) {
    const sink = this.#audioSinks.get(user);
    const chunk = JSON.parse(utf8(this.memory, meta, len));
    chunk.audio = new Float32Array(this.memory, samples, n).slice();
    const r = sink(chunk);
    return r instanceof Promise ? r.then((stop) => (stop ? 1 : 0)) : r ? 1 : 0;
  }

  // A transcript segment (C's JSON).
  #segment(user, json, len) {
    const sink = this.#segmentSinks.get(user);
    const r = sink(JSON.parse(utf8(this.memory, json, len)));
    return r instanceof Promise ? r.then((stop) => (stop ? 1 : 0)) : r ? 1 : 0;
  }

  // ---- the API ----

  // reader: { size, read(offset, len) -> Uint8Array | Promise<Uint8Array> }.
  // backend: 'auto' | 'cpu' | 'webgpu'. Resolves to a model handle.
  async load(reader, { backend = 'auto', webgpuFlags = 0 } = {}) {
    const kind = { auto: 0, cpu: 1, webgpu: 2 }[backend];
    if (kind === undefined) throw new WgmlError(1, `unknown backend '${backend}' (auto, cpu or webgpu)`);
    const id = this.#nextId++;
    this.#readers.set(id, reader);
    try {
      return await this.#exclusive(async () => {
        const m = await this.#call('wgmlw_load', [reader.size, kind, webgpuFlags, id]);
        if (!m) {
          const err = this.lastError();
          if (reader.error) err.message += ` (${reader.error.message || reader.error})`;
          throw err;
        }
        return m;
      });
    } finally {
      this.#readers.delete(id);
    }
  }

  // A whole model file in memory: bytes (a Uint8Array), e.g. whisper.cpp's ggml
  // .bin, which load()'s stream cannot read. Resolves to a model handle.
  async loadMemory(bytes, { backend = 'auto', webgpuFlags = 0 } = {}) {
    const kind = { auto: 0, cpu: 1, webgpu: 2 }[backend];
    if (kind === undefined) throw new WgmlError(1, `unknown backend '${backend}' (auto, cpu or webgpu)`);
    return this.#exclusive(async () => {
      const p = this.#x.wgmlw_malloc(bytes.length);
      if (!p) throw new WgmlError(5, `out of memory: the model file (${bytes.length} bytes) does not fit in wasm memory`);
      new Uint8Array(this.memory, p, bytes.length).set(bytes);
      const m = await this.#call('wgmlw_load_memory', [p, bytes.length, kind, webgpuFlags]); // owns p
      if (!m) throw this.lastError();
      return m;
    });
  }

  info(model) {
    return this.#exclusive(async () => JSON.parse(this.cstring(await this.#call('wgmlw_info', [model]))));
  }

  async freeModel(model) {
    await this.call('wgmlw_model_free', model);
  }

  createSession(model, nCtx = 0) {
    return this.#exclusive(async () => {
      const s = await this.#call('wgmlw_session_create', [model, nCtx]);
      if (!s) throw this.lastError();
      return s;
    });
  }

  async freeSession(session) {
    await this.call('wgmlw_session_free', session);
  }

  async resetSession(session) {
    await this.call('wgmlw_session_reset', session);
  }

  // texts: an array of strings. Options: pooling ('model' | 'mean' | 'cls' |
  // 'last'), normalize ('l2' | 'none'), dimensions (0: all), truncate (cut
  // texts longer than the context instead of failing), batch (tokens per step,
  // 0: 512 on the CPU, 2048 on a GPU). Resolves to an array of Float32Array, one per text.
  embed(model, texts, { pooling = 'model', normalize = 'l2', dimensions = 0, truncate = false, batch = 0 } = {}) {
    const pool = POOLING[pooling];
    if (pool === undefined) return Promise.reject(new WgmlError(1, `unknown pooling '${pooling}' (mean, cls or last)`));
    const norm = normalize === true ? 0 : normalize === false ? 1 : NORMALIZE[normalize];
    if (norm === undefined) return Promise.reject(new WgmlError(1, `unknown normalize '${normalize}' (l2 or none)`));
    if (!Array.isArray(texts) || !texts.every((t) => typeof t === 'string'))
      return Promise.reject(new WgmlError(1, 'embed: texts must be a string or an array of strings'));
    return this.#exclusive(async () => {
      const x = this.#x;
      const dim = x.wgmlw_embed_dim(model, dimensions | 0);
      if (dim < 0) throw this.lastError();
      const strings = this.#allocStrings(texts);
      const out = x.wgmlw_malloc(4 * Math.max(1, texts.length * dim));
      try {
        const st = await this.#call('wgmlw_embed', [model, strings.arr, texts.length, pool, norm, dimensions | 0,
          truncate ? 1 : 0, batch | 0, out, dim]);
        if (st) throw this.lastError();
        // the memory may have grown during the call: a fresh view, copied out
        const all = new Float32Array(this.memory, out, texts.length * dim);
        return texts.map((_, i) => all.slice(i * dim, (i + 1) * dim));
      } finally {
        x.wgmlw_free(out);
        this.#freeStrings(strings);
      }
    });
  }

  // images: an array of { width, height, data } with data the RGBA8 pixels
  // (a Uint8Array or Uint8ClampedArray of 4 * width * height bytes: what
  // getImageData gives); the alpha is dropped. Copied into wasm memory as
  // they are, with their sizes and pointers; free with #freeImages.
  #allocImages(images, what) {
    if (!Array.isArray(images) || !images.length)
      throw new WgmlError(1, `${what}: images must be a non-empty array of { width, height, data } (RGBA8)`);
    images.forEach((im, i) => {
      const ok = im && Number.isInteger(im.width) && Number.isInteger(im.height) && im.width > 0 && im.height > 0 &&
        ArrayBuffer.isView(im.data) && im.data.byteLength === 4 * im.width * im.height;
      if (!ok) throw new WgmlError(1, `${what}: image ${i} is not { width, height, data } with 4 * width * height bytes of RGBA`);
    });
    const x = this.#x;
    const ptrs = images.map((im) => x.wgmlw_malloc(im.data.byteLength));
    const arr = x.wgmlw_malloc(12 * images.length);
    images.forEach((im, i) => {
      new Uint8Array(this.memory, ptrs[i], im.data.byteLength).set(new Uint8Array(im.data.buffer, im.data.byteOffset, im.data.byteLength));
      new Int32Array(this.memory, arr + 12 * i, 3).set([im.width, im.height, ptrs[i]]);
    });
    return { arr, ptrs };
  }

  // Image embeddings (the clip family: CLIP, SigLIP, ViT; info.tasks has
  // 'embed-image'). images: see #allocImages. Options: normalize ('l2' |
  // 'none'), batch (images per step, 0: 16 on the CPU, 64 on a GPU).
  // Resolves to an array of Float32Array, one per image.
  embedImages(model, images, { normalize = 'l2', batch = 0 } = {}) {
    const norm = normalize === true ? 0 : normalize === false ? 1 : NORMALIZE[normalize];
    if (norm === undefined) return Promise.reject(new WgmlError(1, `unknown normalize '${normalize}' (l2 or none)`));
    return this.#exclusive(async () => {
      const x = this.#x;
      const dim = x.wgmlw_embed_dim(model, 0);
      if (dim < 0) {
        // no images: the library only checks the model, and says what it lacks
        await this.#call('wgmlw_embed_images', [model, 0, 0, norm, 0, 0, -1]);
        throw this.lastError();
      }
      const imgs = this.#allocImages(images, 'embedImages');
      const out = x.wgmlw_malloc(4 * images.length * dim);
      try {
        const st = await this.#call('wgmlw_embed_images', [model, imgs.arr, images.length, norm, batch | 0, out, dim]);
        if (st) throw this.lastError();
        const all = new Float32Array(this.memory, out, images.length * dim);
        return images.map((_, i) => all.slice(i * dim, (i + 1) * dim));
      } finally {
        x.wgmlw_free(out);
        this.#freeStrings(imgs);
      }
    });
  }

  // Image classification (a ViT with its head, or with labels a CLIP or SigLIP
  // model zero-shot; info.tasks has 'classify'): per image its top labels,
  // best first: [[{ label, index, score }], ...] (score: the softmax
  // probability; SigLIP's zero-shot: a sigmoid each). top: how many (0: all).
  classify(model, images, { top = 5, labels = null } = {}) {
    if (labels !== null && (!Array.isArray(labels) || !labels.length || !labels.every((t) => typeof t === 'string' && t)))
      return Promise.reject(new WgmlError(1, 'classify: labels must be a non-empty array of non-empty strings'));
    return this.#exclusive(async () => {
      const imgs = this.#allocImages(images, 'classify');
      const strings = labels ? this.#allocStrings(labels) : null;
      try {
        const p = await this.#call('wgmlw_classify_images', [model, imgs.arr, images.length, top | 0,
          strings ? strings.arr : 0, labels ? labels.length : 0]);
        if (!p) throw this.lastError();
        return JSON.parse(this.cstring(p));
      } finally {
        this.#freeStrings(imgs);
        if (strings) this.#freeStrings(strings);
      }
    });
  }

  // A reranker's relevance logits of each document for the query: a Float32Array.
  rerank(model, query, docs) {
    if (typeof query !== 'string' || !Array.isArray(docs) || !docs.every((t) => typeof t === 'string'))
      return Promise.reject(new WgmlError(1, 'rerank: the query must be a string and the documents an array of strings'));
    return this.#exclusive(async () => {
      const x = this.#x;
      const q = this.#alloc(query);
      const strings = this.#allocStrings(docs);
      const out = x.wgmlw_malloc(4 * Math.max(1, docs.length));
      try {
        const st = await this.#call('wgmlw_rerank', [model, q, strings.arr, docs.length, out]);
        if (st) throw this.lastError();
        return new Float32Array(this.memory, out, docs.length).slice();
      } finally {
        x.wgmlw_free(out);
        x.wgmlw_free(q);
        this.#freeStrings(strings);
      }
    });
  }

  // onPiece(text, token) returns true to stop, or a promise of that.
  // Resolves to the generation's statistics.
  // The prompt an OpenAI-style messages array makes through the model's chat
  // template (the GGUF's, or the fallback for its architecture); it holds the
  // BOS text, so generate it with addBos false.
  // tools: OpenAI's tools array, given to the template as `tools`.
  chatPrompt(model, messages, { addGenerationPrompt = true, tools } = {}) {
    return this.#exclusive(async () => {
      const m = this.#alloc(JSON.stringify(messages));
      const e = this.#alloc(tools ? JSON.stringify({ tools }) : '');
      try {
        const p = await this.#call('wgmlw_chat_prompt', [model, m, addGenerationPrompt ? 1 : 0, e]);
        if (!p) throw this.lastError();
        const prompt = this.cstring(p);
        this.#x.wgmlw_free(p);
        return prompt;
      } finally {
        this.#x.wgmlw_free(m);
        this.#x.wgmlw_free(e);
      }
    });
  }

  // A request's tools in the model's template's format (choice 'auto' | 'none' | 'required' |
  // { type: 'function', function: { name } }); a handle for generate's tools option and
  // toolCalls, freed with freeTools. Rejects with the library's reason for bad tools.
  createTools(model, tools, choice = 'auto', parallel = true) {
    const c = choice === 'none' ? 1 : choice === 'required' ? 2 : choice && typeof choice === 'object' ? 3 : 0;
    const name = c === 3 ? String(choice.function && choice.function.name) : '';
    return this.#exclusive(async () => {
      const j = this.#alloc(JSON.stringify(tools));
      const n = this.#alloc(name);
      try {
        const t = this.#x.wgmlw_tools_create(model, j, c, n, parallel ? 1 : 0);
        if (!t) throw this.lastError();
        return t;
      } finally {
        this.#x.wgmlw_free(j);
        this.#x.wgmlw_free(n);
      }
    });
  }
  freeTools(t) {
    return this.#exclusive(async () => this.#x.wgmlw_tools_free(t));
  }
  // OpenAI's tool_calls in a reply's text, or null when it is not calls of the tools.
  toolCalls(t, text) {
    return this.#exclusive(async () => {
      const s = this.#alloc(text);
      try {
        const p = this.#x.wgmlw_tools_parse(t, s, 1 + Math.floor(Math.random() * 2 ** 31));
        if (!p) return null;
        const calls = JSON.parse(this.cstring(p));
        this.#x.wgmlw_free(p);
        return calls;
      } finally {
        this.#x.wgmlw_free(s);
      }
    });
  }

  // grammar: GBNF text; jsonSchema: a JSON Schema (an object or its JSON text); jsonObject: any
  // JSON object (OpenAI's response_format json_object). At most one.
  // toolsGrammar: a createTools handle whose calls the text follows (tool_choice required or named).
  async generate(session, prompt, { maxTokens = 128, temperature = 0.8, topK = 40, topP = 0.95, seed = 0, addBos = true,
    grammar, jsonSchema, jsonObject, toolsGrammar } = {}, onPiece) {
    const kind = toolsGrammar ? 4 : grammar !== undefined && grammar !== null ? 1 : jsonSchema !== undefined && jsonSchema !== null ? 2
      : jsonObject ? 3 : 0;
    const gtext = kind === 1 ? String(grammar) : kind === 2 ? (typeof jsonSchema === 'string' ? jsonSchema : JSON.stringify(jsonSchema)) : '';
    const id = this.#nextId++;
    this.#tokenSinks.set(id, (text, token) => {
      const r = onPiece(text, token);
      return r instanceof Promise ? r.then((stop) => (stop ? 1 : 0)) : r ? 1 : 0;
    });
    try {
      return await this.#exclusive(async () => {
        const p = this.#alloc(prompt);
        const g = this.#alloc(gtext);
        try {
          const st = await this.#call('wgmlw_generate', [session, p, maxTokens, temperature, topK, topP, seed, id, addBos ? 1 : 0,
            kind === 4 ? toolsGrammar : g, kind]);
          if (st) throw this.lastError();
          return JSON.parse(this.cstring(this.#x.wgmlw_result()));
        } finally {
          this.#x.wgmlw_free(p);
          this.#x.wgmlw_free(g);
        }
      });
    } finally {
      this.#tokenSinks.delete(id);
    }
  }

  // ---- speech (the kokoro family) ----

  // The pieces of text that espeak-ng phonemizes, after kokoro-js's
  // normalization and split (the C G2P's): { voice: 'en-us' | 'en', pieces }.
  g2pPieces(text, lang = 'en-us') {
    if (typeof text !== 'string') return Promise.reject(new WgmlError(1, 'the text must be a string'));
    return this.#exclusive(async () => {
      const x = this.#x;
      const t = this.#alloc(text);
      const l = this.#alloc(String(lang));
      try {
        const p = x.wgmlw_g2p_pieces(l, t);
        if (!p) throw this.lastError();
        return JSON.parse(this.cstring(p));
      } finally {
        x.wgmlw_free(t);
        x.wgmlw_free(l);
      }
    });
  }

  // The phonemes of each piece of text from g2p(pieces, voice) (a promise of
  // an array of strings: web/g2p.js's phonemizePieces), or none to phonemize.
  // With words, also each word said alone (g2p(words, voice)), which places
  // the text's words in the phonemes for their times.
  async #phonemizePieces(text, lang, g2p, withWords = false) {
    const { voice, pieces, words } = await this.g2pPieces(text, lang);
    if (!pieces.length) return { pieces, results: [], words: [], wordResults: [] };
    if (!g2p) throw new WgmlError(4, 'text input needs a G2P (espeak-ng); phoneme input works without it');
    const ask = async (list, what) => {
      const r = await g2p(list, voice);
      if (!Array.isArray(r) || r.length !== list.length || !r.every((x) => typeof x === 'string'))
        throw new WgmlError(1, `the G2P gave ${r && r.length} results for ${list.length} ${what}`);
      return r;
    };
    const results = await ask(pieces, 'pieces');
    const wordResults = withWords && words.length ? await ask(words, 'words') : [];
    return { pieces, results, words, wordResults };
  }

  // kokoro-js's phonemize(text, lang): resolves to the phoneme string.
  async phonemize(text, { lang = 'en-us' } = {}, g2p) {
    const { pieces, results } = await this.#phonemizePieces(text, lang, g2p);
    return this.#exclusive(async () => {
      const x = this.#x;
      const t = this.#alloc(text);
      const l = this.#alloc(String(lang));
      const ps = this.#allocStrings(pieces);
      const rs = this.#allocStrings(results);
      try {
        const p = x.wgmlw_phonemize(l, t, ps.arr, rs.arr, pieces.length);
        if (!p) throw this.lastError();
        const out = this.cstring(p);
        x.wgmlw_free(p);
        return out;
      } finally {
        x.wgmlw_free(t);
        x.wgmlw_free(l);
        this.#freeStrings(ps);
        this.#freeStrings(rs);
      }
    });
  }

  // Speaks input (text, or with phonemes: true the model's phoneme symbols).
  // onChunk({ audio: Float32Array, sample_rate, start, phonemes, words: [{ word,
  // phonemes, start, end, offset, length (input.slice(offset, offset + length) is
  // the word) }], index }) gets each piece (a sentence) as soon as it is made;
  // it returns true to stop, or a promise of that. Text goes through g2p
  // (see #phonemizePieces). Resolves to { n_samples, n_chunks, first_audio_ms,
  // total_ms, g2p_ms }.
  async speak(model, input, { voice = '', speed = 1, seed = 0, phonemes = false, lang = 'en-us', split = 'sentences' } = {}, g2p, onChunk) {
    if (typeof input !== 'string') throw new WgmlError(1, 'speak: the input must be a string');
    if (split !== 'sentences' && split !== 'none') throw new WgmlError(1, `speak: split '${split}' (sentences or none)`);
    if (!Number.isInteger(seed) || seed < 0 || seed > 2 ** 53) throw new WgmlError(1, `speak: seed ${seed} is not an integer in 0 .. 2^53`);
    if (typeof speed !== 'number' || !Number.isFinite(speed)) throw new WgmlError(1, `speak: speed ${speed} is not a number`);
    // a model that does not speak: the library's message (wgmlw_speak checks the task first), no G2P
    const direct = phonemes || !(await this.info(model)).tasks.includes('speech');
    const t0 = performance.now();
    const given = direct ? { pieces: [], results: [], words: [], wordResults: [] } : await this.#phonemizePieces(input, lang, g2p, true);
    const g2pMs = direct ? 0 : performance.now() - t0;
    const id = this.#nextId++;
    // word places come in UTF-8 bytes of the input: JS gets string indices (UTF-16 units)
    const at = utf16Indices(input);
    this.#audioSinks.set(id, (chunk) => {
      for (const w of chunk.words) {
        const a = at[w.offset], b = at[w.offset + w.length];
        w.offset = a;
        w.length = b - a;
      }
      return onChunk(chunk);
    });
    try {
      return await this.#exclusive(async () => {
        const x = this.#x;
        const t = this.#alloc(input);
        const v = this.#alloc(String(voice || ''));
        const l = this.#alloc(String(lang));
        const ps = this.#allocStrings(given.pieces);
        const rs = this.#allocStrings(given.results);
        const hasWords = given.wordResults.length === given.words.length && given.words.length > 0;
        const ws = this.#allocStrings(hasWords ? given.words : []);
        const wr = this.#allocStrings(hasWords ? given.wordResults : []);
        try {
          const st = await this.#call('wgmlw_speak', [model, t, v, speed, seed, direct ? 1 : 0, split === 'none' ? 1 : 0, l, ps.arr, rs.arr,
            given.pieces.length, hasWords ? ws.arr : 0, hasWords ? wr.arr : 0, given.words.length, id]);
          if (st) throw this.lastError();
          return { ...JSON.parse(this.cstring(x.wgmlw_speak_result())), g2p_ms: g2pMs };
        } finally {
          x.wgmlw_free(t);
          x.wgmlw_free(v);
          x.wgmlw_free(l);
          this.#freeStrings(ps);
          this.#freeStrings(rs);
          this.#freeStrings(ws);
          this.#freeStrings(wr);
        }
      });
    } finally {
      this.#audioSinks.delete(id);
    }
  }

  // ---- speech recognition (the whisper family) ----

  // Transcribes pcm (a Float32Array of mono samples in [-1, 1]) at sampleRate
  // Hz (resampled to 16 kHz in C). Options: language ('auto' or a code: 'en', ...),
  // translate, timestamps (false: no timestamp tokens), wordTimestamps,
  // beamSize, patience, temperature, noFallback, conditionOnPreviousText,
  // prompt, maxTokens (per window, 0: 224), seed. onSegment({ index, start,
  // end, text, tokens, temperature, avg_logprob, compression_ratio,
  // no_speech_prob, words? }) gets each segment as its window is decoded; it
  // returns true to stop, or a promise of that. Resolves to { language,
  // duration, n_segments, n_windows, n_tokens, encode_ms, decode_ms, total_ms }.
  async transcribe(model, pcm, sampleRate, { language = 'auto', translate = false, timestamps = true, wordTimestamps = false,
    beamSize = 0, patience = 1, temperature = 0, noFallback = false, conditionOnPreviousText = true, prompt = '',
    maxTokens = 0, seed = 0 } = {}, onSegment) {
    if (!(pcm instanceof Float32Array)) throw new WgmlError(1, 'transcribe: the samples must be a Float32Array');
    if (!Number.isInteger(sampleRate)) throw new WgmlError(1, `transcribe: sample rate ${sampleRate} is not an integer`);
    if (!Number.isInteger(seed) || seed < 0 || seed > 2 ** 53) throw new WgmlError(1, `transcribe: seed ${seed} is not an integer in 0 .. 2^53`);
    for (const [k, v] of Object.entries({ beamSize, maxTokens }))
      if (!Number.isInteger(v)) throw new WgmlError(1, `transcribe: ${k} ${v} is not an integer`);
    for (const [k, v] of Object.entries({ patience, temperature }))
      if (typeof v !== 'number' || !Number.isFinite(v)) throw new WgmlError(1, `transcribe: ${k} ${v} is not a number`);
    const id = this.#nextId++;
    this.#segmentSinks.set(id, onSegment);
    try {
      return await this.#exclusive(async () => {
        const x = this.#x;
        const a = x.wgmlw_malloc(4 * Math.max(1, pcm.length));
        if (!a) throw new WgmlError(5, `out of memory: ${pcm.length} samples do not fit in wasm memory`);
        new Float32Array(this.memory, a, pcm.length).set(pcm);
        const l = this.#alloc(String(language || 'auto'));
        const p = this.#alloc(String(prompt || ''));
        try {
          const st = await this.#call('wgmlw_transcribe', [model, a, pcm.length, sampleRate, l, translate ? 1 : 0,
            timestamps ? 1 : 0, wordTimestamps ? 1 : 0, beamSize, patience, temperature, noFallback ? 1 : 0,
            conditionOnPreviousText ? 1 : 0, p, maxTokens, seed, id]);
          if (st) throw this.lastError();
          return JSON.parse(this.cstring(x.wgmlw_transcribe_result()));
        } finally {
          x.wgmlw_free(a);
          x.wgmlw_free(l);
          x.wgmlw_free(p);
        }
      });
    } finally {
      this.#segmentSinks.delete(id);
    }
  }
}
