// wgml.js - the JavaScript API of wgml in the browser (an ES module, no build step).
//
//   import wgml from './wgml.js';
//   const model = await wgml.load('models/stories260K.gguf', {
//     onProgress: (p) => bar.value = p,          // 0..1 while downloading + uploading
//     backend: 'auto',                            // 'auto' | 'webgpu' | 'cpu'
//   });
//   for await (const piece of model.generate('Once upon a time', { maxTokens: 60, temperature: 0 }))
//     out.textContent += piece;                  // only the new text, piece by piece
//   model.info();                                 // backend, adapter, family, tasks, sizes, tokens/s
//   await model.embed(['a text', 'another']);     // embedding models: [Float32Array, ...]
//   await model.rerank('query', ['doc 1', 'doc 2']);  // rerankers: Float32Array of scores
//   await model.embedImages([file, img, canvas]); // CLIP/SigLIP/ViT: [Float32Array, ...]
//   await model.classify([file], { top: 5 });     // ViT classifiers: [[{ label, index, score }, ...]]
//   await model.classify([file], { labels: ['a photo of a cat', 'a photo of a dog'] }); // CLIP/SigLIP zero-shot
//   for await (const chunk of tts.speak('Hello there. How are you?', { voice: 'af_heart' }))
//     play(chunk.audio, chunk.sampleRate);       // Kokoro: one chunk per sentence, as it is made
//   for await (const s of stt.transcribe(file, { language: 'auto' }))
//     log(`[${s.start} --> ${s.end}] ${s.text}`); // Whisper: segments as each 30 s window is decoded
//   await model.dispose();                        // frees the GPU buffers, ends the worker
//
// The source is a URL (string or URL; downloaded models are kept in the Cache
// API), a File/Blob or an ArrayBuffer. Each model runs in its own module
// Worker (web/worker.js), which runs the C engine (web/dist/wgml.wasm); the page
// never waits on it. 'auto' uses WebGPU when the browser has a usable adapter
// and the CPU (WebAssembly SIMD) otherwise, saying why in info().notes.
// Errors are WgmlError objects with a code (wgml_status) and a message.

export class WgmlError extends Error {
  constructor(code, message) {
    super(message);
    this.name = 'WgmlError';
    this.code = code;
  }
}

export const STATUS = { OK: 0, INVALID_ARGUMENT: 1, IO: 2, FORMAT: 3, UNSUPPORTED: 4, OUT_OF_MEMORY: 5,
  CONTEXT_FULL: 6, GPU: 7, DEVICE_LOST: 8, NO_ADAPTER: 9, TOKENIZER: 10 };

// Whether this browser can run the WebGPU path: navigator.gpu and an adapter.
export async function webgpuAvailable() {
  if (!globalThis.navigator || !navigator.gpu) return { ok: false, reason: 'this browser has no WebGPU (navigator.gpu is missing)' };
  try {
    const a = await navigator.gpu.requestAdapter();
    return a ? { ok: true } : { ok: false, reason: 'WebGPU is present but offers no adapter (disabled or blocklisted)' };
  } catch (e) {
    return { ok: false, reason: `WebGPU adapter request failed: ${e.message || e}` };
  }
}

// The mono samples and their rate of what transcribe() takes: a Float32Array
// (at rate), an AudioBuffer, or an encoded file (Blob, File, ArrayBuffer or a
// typed array's bytes other than Float32Array) decoded by the browser.
const WHISPER_RATE = 16000;

// What model.transcribe() does with its input, for a page that wants the
// samples itself: resolves to { samples: Float32Array (mono), sampleRate }.
export async function decodeAudio(input, { sampleRate = WHISPER_RATE } = {}) {
  const { samples, rate } = await audioSamples(input, Number(sampleRate));
  return { samples, sampleRate: rate };
}

async function audioSamples(input, rate) {
  const bad = (what) => new WgmlError(STATUS.INVALID_ARGUMENT, `transcribe: ${what}`);
  if (input instanceof Float32Array) {
    if (!Number.isInteger(rate) || rate < 1) throw bad(`sampleRate ${rate} is not a positive integer (Hz)`);
    return { samples: input, rate };
  }
  if (Array.isArray(input)) return audioSamples(Float32Array.from(input, Number), rate);
  // an AudioBuffer (or anything shaped like one): the channels averaged
  if (input && typeof input.getChannelData === 'function' && typeof input.numberOfChannels === 'number') {
    const n = input.length;
    const out = new Float32Array(n);
    for (let c = 0; c < input.numberOfChannels; c++) {
      const ch = input.getChannelData(c);
      for (let i = 0; i < n; i++) out[i] += ch[i];
    }
    if (input.numberOfChannels > 1) for (let i = 0; i < n; i++) out[i] /= input.numberOfChannels;
    return { samples: out, rate: Math.round(input.sampleRate) };
  }
  let bytes;
  if (typeof Blob !== 'undefined' && input instanceof Blob) bytes = await input.arrayBuffer();
  else if (input instanceof ArrayBuffer) bytes = input.slice(0);
  else if (ArrayBuffer.isView(input)) bytes = input.buffer.slice(input.byteOffset, input.byteOffset + input.byteLength);
  else throw bad('the input must be a Float32Array of mono samples (with { sampleRate }), an AudioBuffer, or a Blob/File/ArrayBuffer of an audio file');
  const Offline = globalThis.OfflineAudioContext || globalThis.webkitOfflineAudioContext;
  if (!Offline)
    throw new WgmlError(STATUS.UNSUPPORTED, 'transcribe: decoding an audio file needs the Web Audio API (OfflineAudioContext.decodeAudioData), ' +
      'which this context (a worker?) does not have: decode it on the page and pass a Float32Array of mono samples with { sampleRate }, or an AudioBuffer');
  let decoded;
  try {
    // decoded at Whisper's rate: the browser resamples (a 16 kHz file's samples stay as they are)
    decoded = await new Offline(1, 1, WHISPER_RATE).decodeAudioData(bytes);
  } catch (e) {
    throw new WgmlError(STATUS.FORMAT, `transcribe: the browser could not decode the audio file: ${(e && e.message) || e}`);
  }
  return audioSamples(decoded, rate);
}

// The RGBA8 pixels of an image, { width, height, data: Uint8ClampedArray }:
// what model.embedImages() and model.classify() read of each image. input: an
// ImageData or { width, height, data } (RGBA, 4 bytes a pixel, used as they
// are), a Blob/File (decoded by the browser's createImageBitmap, EXIF
// orientation applied as the CLI does), an ImageBitmap, HTMLImageElement,
// SVGImageElement, HTMLCanvasElement, OffscreenCanvas, HTMLVideoElement or
// VideoFrame. Pixels are read through an OffscreenCanvas's getImageData with
// no color space conversion and no premultiplied alpha where
// createImageBitmap allows it, so they are the file's own; the browser's JPEG
// decoder may still differ from libjpeg's by a level or two.
export async function imagePixels(input) {
  const bad = (what) => new WgmlError(STATUS.INVALID_ARGUMENT, `image: ${what}`);
  if (input && typeof input === 'object' && Number.isInteger(input.width) && Number.isInteger(input.height) &&
      input.data !== undefined && !(typeof Blob !== 'undefined' && input instanceof Blob)) {
    const { width, height, data } = input;
    if (!(width > 0 && height > 0)) throw bad(`${width} x ${height} pixels`);
    if (!ArrayBuffer.isView(data) && !Array.isArray(data)) throw bad('data must be a Uint8ClampedArray or Uint8Array of RGBA bytes');
    const bytes = ArrayBuffer.isView(data) ? new Uint8ClampedArray(data.buffer, data.byteOffset, data.byteLength) : Uint8ClampedArray.from(data);
    if (bytes.length !== 4 * width * height)
      throw bad(`data has ${bytes.length} bytes, RGBA of ${width} x ${height} pixels is ${4 * width * height}`);
    return { width, height, data: bytes };
  }
  if (typeof createImageBitmap !== 'function')
    throw new WgmlError(STATUS.UNSUPPORTED, 'image: this context has no createImageBitmap: pass { width, height, data } (RGBA)');
  const options = { colorSpaceConversion: 'none', premultiplyAlpha: 'none' };
  let bitmap;
  const owned = !(typeof ImageBitmap !== 'undefined' && input instanceof ImageBitmap);
  try {
    if (typeof Blob !== 'undefined' && input instanceof Blob)
      bitmap = await createImageBitmap(input, { ...options, imageOrientation: 'from-image' });
    else if (!owned) bitmap = input;
    else {
      if (typeof HTMLImageElement !== 'undefined' && input instanceof HTMLImageElement && !input.complete) await input.decode();
      bitmap = await createImageBitmap(input, options);
    }
  } catch (e) {
    if (e instanceof WgmlError) throw e;
    const blob = typeof Blob !== 'undefined' && input instanceof Blob;
    throw new WgmlError(blob ? STATUS.FORMAT : STATUS.INVALID_ARGUMENT, blob
      ? `image: the browser could not decode the image file${input.name ? ` '${input.name}'` : ''}: ${(e && e.message) || e}`
      : `image: not an image the browser can read (ImageData, { width, height, data }, Blob/File, ImageBitmap, <img>, canvas, video): ${(e && e.message) || e}`);
  }
  try {
    const { width, height } = bitmap;
    if (!(width > 0 && height > 0)) throw bad(`${width} x ${height} pixels (an image not loaded yet?)`);
    const canvas = typeof OffscreenCanvas !== 'undefined' ? new OffscreenCanvas(width, height)
      : Object.assign(document.createElement('canvas'), { width, height });
    const ctx = canvas.getContext('2d', { willReadFrequently: true });
    ctx.drawImage(bitmap, 0, 0);
    const d = ctx.getImageData(0, 0, width, height);
    return { width, height, data: d.data };
  } finally {
    if (owned && bitmap && bitmap.close) bitmap.close();
  }
}

async function imageList(images, what) {
  // an array, or any iterable of images (a FileList from <input type=file multiple>), or one image
  const list = Array.isArray(images) ? images : images === undefined || images === null ? null
    : typeof images === 'object' && typeof images[Symbol.iterator] === 'function' ? [...images] : [images];
  if (!list || !list.length) throw new WgmlError(STATUS.INVALID_ARGUMENT, `${what}: no images`);
  return Promise.all(list.map((im, i) => imagePixels(im).catch((e) => {
    const code = e instanceof WgmlError ? e.code : STATUS.INVALID_ARGUMENT;
    throw new WgmlError(code, list.length > 1 ? `image ${i}: ${(e && e.message) || e}` : (e && e.message) || String(e));
  })));
}

class Model {
  #worker;
  #info;
  #pending = new Map(); // id -> handlers
  #nextId = 1;
  #busy = Promise.resolve();
  #notes;
  #lastResult = null;
  #disposed = false;

  constructor(worker, info, notes) {
    this.#worker = worker;
    this.#info = info;
    this.#notes = notes;
    worker.onmessage = (ev) => this.#onMessage(ev.data);
    worker.onerror = (ev) => this.#failAll(new WgmlError(0, `the wgml worker failed: ${ev.message || 'unknown error'}`));
  }

  #onMessage(m) {
    if (m.type === 'note') {
      this.#notes.push(m.text);
      return;
    }
    const h = this.#pending.get(m.id);
    if (!h) return;
    if (m.type === 'piece') h.piece(m.text, m.token);
    else if (m.type === 'chunk') h.piece(m.chunk);
    else if (m.type === 'error') {
      this.#pending.delete(m.id);
      h.reject(new WgmlError(m.code, m.message));
    } else {
      this.#pending.delete(m.id);
      h.resolve(m);
    }
  }

  #failAll(err) {
    for (const h of this.#pending.values()) h.reject(err);
    this.#pending.clear();
  }

  #request(msg, piece = () => {}) {
    if (this.#disposed) throw new WgmlError(STATUS.INVALID_ARGUMENT, 'the model was disposed');
    const id = this.#nextId++;
    return {
      id,
      done: new Promise((resolve, reject) => {
        this.#pending.set(id, { resolve, reject, piece });
        this.#worker.postMessage({ ...msg, id });
      }),
    };
  }

  // Backend, adapter, sizes, counters, and the last generation's (or speech's) speed.
  info() {
    const i = { ...this.#info, notes: [...this.#notes] };
    if (this.#lastResult) {
      i.last = this.#lastResult;
      if ('n_windows' in this.#lastResult) {
        i.realTimeFactor = this.#lastResult.rtf;
        i.language = this.#lastResult.language;
      } else if ('rtf' in this.#lastResult) {
        i.realTimeFactor = this.#lastResult.rtf;
        i.firstAudioMs = this.#lastResult.first_audio_ms;
      } else {
        i.tokensPerSecond = this.#lastResult.tokens_per_s;
        i.promptTokensPerSecond = this.#lastResult.prompt_tokens_per_s;
      }
    }
    return i;
  }

  // Speech models (tasks has 'speech'): the names of the voices in the file.
  get voices() {
    return [...(this.#info.voices || [])];
  }

  // Async iterable of the new text. Options: maxTokens (128), temperature (0.8;
  // 0 = greedy), topK (40), topP (0.95), seed (0 = random), and at most one of
  // grammar (GBNF text), jsonSchema (a JSON Schema: the text is a document
  // valid under it) and jsonObject (true: any JSON object), docs/grammar.md.
  // Breaking out of the loop, or calling .stop() on the iterable, stops
  // generation. Calls run one after another; each starts from an empty context.
  generate(prompt, { maxTokens = 128, temperature = 0.8, topK = 40, topP = 0.95, seed = 0, grammar, jsonSchema,
    jsonObject } = {}) {
    // seed 0: a new random one each time (the C sampler takes 0 as a seed like any other)
    const options = { maxTokens, temperature, topK, topP, seed: seed || 1 + Math.floor(Math.random() * 2 ** 52),
      grammar, jsonSchema, jsonObject: !!jsonObject };
    return this.#stream({ op: 'generate', prompt: String(prompt), options }, (text) => text);
  }

  // OpenAI's chat API over the model's chat template (the GGUF's, or the
  // fallback for its architecture), rendered by the same C template engine as
  // natively: model.chat.completions.create({ messages, stream, max_tokens |
  // max_completion_tokens, temperature (1), top_p (1), seed, stream_options:
  // { include_usage }, response_format ({ type: 'text' | 'json_object' |
  // 'json_schema', json_schema: { name, schema, strict } }: the reply follows
  // it, as in `wgml serve`; a bad schema rejects with its reason), grammar
  // (llama.cpp's GBNF field), tools, tool_choice ('auto' | 'none' | 'required' | { type:
  // 'function', function: { name } }), parallel_tool_calls: the reply's message.tool_calls and
  // finish_reason 'tool_calls' in the template's format, as `wgml serve` (required and named are
  // grammar-constrained; auto is parsed after the whole reply, which is then not streamed
  // piece by piece) }). Not streamed: a promise of a 'chat.completion'
  // ({ choices: [{ message: { role, content }, finish_reason }], usage }).
  // Streamed: an async iterable of 'chat.completion.chunk's (the role first,
  // then the text as it comes, then the finish_reason, then with
  // include_usage a chunk with the usage and no choices); .stop() or leaving
  // the loop stops it. Each call starts from an empty context.
  get chat() {
    return { completions: { create: (params) => this.#chatCreate(params || {}) } };
  }

  #chatCreate({ messages, stream = false, max_tokens, max_completion_tokens, temperature = 1, top_p = 1, seed,
    stream_options, response_format, grammar, tools, tool_choice, parallel_tool_calls = true } = {}) {
    if (!Array.isArray(messages) || !messages.length)
      return Promise.reject(new WgmlError(STATUS.INVALID_ARGUMENT, "'messages' must be a non-empty array"));
    const limit = max_completion_tokens ?? max_tokens;
    const options = { maxTokens: limit === undefined || limit === null ? -1 : Number(limit), temperature: Number(temperature),
      topK: 0, topP: Number(top_p), seed: seed ? Number(seed) : 1 + Math.floor(Math.random() * 2 ** 52) };
    const rf = response_format && response_format.type;
    if (grammar !== undefined && grammar !== null && rf && rf !== 'text')
      return Promise.reject(new WgmlError(STATUS.INVALID_ARGUMENT, "'grammar' and 'response_format' cannot both be given"));
    if (grammar !== undefined && grammar !== null) options.grammar = String(grammar);
    else if (rf === 'json_object') options.jsonObject = true;
    else if (rf === 'json_schema') {
      const js = response_format.json_schema;
      if (!js || typeof js !== 'object')
        return Promise.reject(new WgmlError(STATUS.INVALID_ARGUMENT, "'response_format.json_schema' must be an object"));
      if (js.schema === undefined || js.schema === null) options.jsonObject = true;
      else options.jsonSchema = JSON.stringify(js.schema);
    } else if (rf && rf !== 'text')
      return Promise.reject(new WgmlError(STATUS.INVALID_ARGUMENT,
        `response_format type '${rf}' is not one of text, json_object, json_schema`));
    if (tools !== undefined && tools !== null && !Array.isArray(tools))
      return Promise.reject(new WgmlError(STATUS.INVALID_ARGUMENT, "'tools' must be an array"));
    const withTools = Array.isArray(tools) && tools.length > 0;
    const choice = tool_choice === undefined || tool_choice === null ? 'auto' : tool_choice;
    if (withTools && choice !== 'none' && (options.grammar !== undefined || options.jsonSchema !== undefined || options.jsonObject))
      return Promise.reject(new WgmlError(STATUS.INVALID_ARGUMENT, 'tools cannot be combined with response_format or grammar'));
    const calling = withTools && choice !== 'none';
    // an assistant message's calls carry their arguments as JSON text; templates read objects (as `wgml serve` gives them)
    let bad = null;
    const rendered = messages.map((m, i) => (!m || !Array.isArray(m.tool_calls) ? m : { ...m, tool_calls: m.tool_calls.map((c, k) => {
      if (!c || !c.function || typeof c.function.arguments !== 'string') return c;
      let a = null;
      try {
        a = JSON.parse(c.function.arguments);
      } catch {
        a = null;
      }
      if (!a || typeof a !== 'object' || Array.isArray(a)) bad = `messages[${i}].tool_calls[${k}].function.arguments is not the JSON text of an object`;
      return { ...c, function: { ...c.function, arguments: a } };
    }) }));
    if (bad) return Promise.reject(new WgmlError(STATUS.INVALID_ARGUMENT, bad));
    const msg = { op: 'chat', messages: rendered, options };
    if (withTools) msg.tools = { tools, choice, parallel: !!parallel_tool_calls };
    const pieces = this.#stream(msg, (text) => text);
    const id = `chatcmpl-${Math.random().toString(36).slice(2, 14)}`;
    const created = Math.floor(Date.now() / 1000);
    const model = this.#info.name || this.#info.architecture || 'wgml';
    const usage = () => {
      const r = this.#lastResult || {};
      return { prompt_tokens: r.n_prompt || 0, completion_tokens: r.n_generated || 0,
        total_tokens: (r.n_prompt || 0) + (r.n_generated || 0) };
    };
    const finish = () => (this.#lastResult && this.#lastResult.finish_reason) || 'stop';
    // with tools the reply is held in the worker: calls (tool_calls), or its text at the end
    const calls = () => (calling && this.#lastResult && this.#lastResult.tool_calls) || null;
    const heldText = () => (calling && this.#lastResult && this.#lastResult.text) || '';
    if (!stream)
      return (async () => {
        let content = '';
        for await (const piece of pieces) content += piece;
        const tc = calls();
        const message = tc ? { role: 'assistant', content: null, tool_calls: tc } : { role: 'assistant', content: content + heldText() };
        return { id, object: 'chat.completion', created, model,
          choices: [{ index: 0, message, logprobs: null, finish_reason: finish() }], usage: usage() };
      })();
    const chunk = (choices, extra) => ({ id, object: 'chat.completion.chunk', created, model, choices, ...extra });
    const chunks = (async function* gen() {
      yield chunk([{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]);
      for await (const piece of pieces) yield chunk([{ index: 0, delta: { content: piece }, logprobs: null, finish_reason: null }]);
      const tc = calls();
      if (tc) yield chunk([{ index: 0, delta: { tool_calls: tc.map((c, index) => ({ index, ...c })) }, logprobs: null, finish_reason: null }]);
      else if (heldText()) yield chunk([{ index: 0, delta: { content: heldText() }, logprobs: null, finish_reason: null }]);
      yield chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: finish() }]);
      if (stream_options && stream_options.include_usage) yield chunk([], { usage: usage() });
    })();
    chunks.stop = pieces.stop;
    const ret = chunks.return.bind(chunks);
    chunks.return = async (v) => {
      pieces.stop();
      return ret(v);
    };
    return chunks;
  }

  // Speech (Kokoro; info().tasks has 'speech'): an async iterable of chunks,
  // one per sentence (long ones cut at clauses), each as soon as it is made:
  //   { audio: Float32Array (mono), sampleRate, start (s, in the utterance),
  //     phonemes, words: [{ word (as the text has it; with phonemes: true a phoneme
  //     word), phonemes, start, end (s), offset, length (text.slice(offset, offset + length)
  //     is the word) }], index }
  // Options: voice (a name of tts.voices, default the first, or a blend
  // 'af_heart:0.6,am_adam:0.4' or { af_heart: 0.6, am_adam: 0.4 }), speed
  // (0.25 .. 4, default 1), seed (the vocoder's noise, default 0: the same
  // seed gives the same audio), phonemes (true: text is the model's phoneme
  // symbols, as `wgml phonemize` prints them; no espeak-ng needed), lang
  // ('en-us' | 'en-gb'), split ('sentences', the default: a chunk per sentence as
  // soon as it is made; 'none': one pass over up to 510 phonemes, the official
  // KPipeline's audio for several sentences), phonemizer (the URL of the phonemizer module; default
  // web/node_modules/phonemizer). Text goes through espeak-ng (web/g2p.js),
  // loaded on first use. Breaking out of the loop or .stop() stops after the
  // chunk being made; info().last then has the speed (rtf, first_audio_ms).
  speak(text, { voice = '', speed = 1, seed = 0, phonemes = false, lang = 'en-us', split = 'sentences', phonemizer } = {}) {
    if (voice && typeof voice === 'object')
      voice = Object.entries(voice).map(([name, w]) => `${name}:${Number(w)}`).join(',');
    const options = { voice: String(voice || ''), speed: Number(speed), seed: Number(seed), phonemes: !!phonemes,
      lang: String(lang), split: String(split), phonemizer: phonemizer ? String(new URL(phonemizer, globalThis.location ? location.href : undefined)) : undefined };
    return this.#stream({ op: 'speak', input: String(text), options },
      (c) => ({ audio: c.audio, sampleRate: c.sample_rate, start: c.start, phonemes: c.phonemes, words: c.words, index: c.index }));
  }

  // Text to phonemes as kokoro-js's phonemize() and `wgml phonemize` give them
  // (espeak-ng in the page; see speak). Options: lang, phonemizer.
  async phonemize(text, { lang = 'en-us', phonemizer } = {}) {
    return this.#task({ op: 'phonemize', text: String(text), options: { lang: String(lang),
      phonemizer: phonemizer ? String(new URL(phonemizer, globalThis.location ? location.href : undefined)) : undefined } });
  }

  // Speech recognition (Whisper; info().tasks has 'transcribe'): an async
  // iterable of segments, each as soon as its 30 s window is decoded:
  //   { index, start, end (s from the start of the audio), text, tokens (ids,
  //     timestamps included), temperature (of the try that gave it),
  //     avgLogprob, compressionRatio, noSpeechProb, words (wordTimestamps:
  //     [{ word, start, end, probability }]) }
  // input: a Float32Array of mono samples in [-1, 1] (at options.sampleRate,
  // default 16000; other rates are resampled in C), an AudioBuffer (channels
  // averaged, at its own rate), or a Blob/File/ArrayBuffer holding an audio
  // file (decoded by the browser, decodeAudioData at 16 kHz: needs the Web
  // Audio API, which workers do not have). Options: language ('auto' (default,
  // detected on the first 30 s) or a code: 'en', 'de', ...), translate
  // (into English), timestamps (true; false: a segment per window),
  // wordTimestamps, beamSize (0: greedy; 5: the official beam search),
  // patience (1), temperature (0), noFallback (keep the first try),
  // conditionOnPreviousText (true), prompt (text before the first window),
  // maxTokens (per window; 0 = 224), seed. Breaking out of the loop or
  // .stop() stops after the segment being decoded; info().last then has
  // language, duration, n_segments, n_windows, n_tokens, encode_ms,
  // decode_ms, total_ms and rtf (realTimeFactor).
  transcribe(input, { sampleRate = 16000, language = 'auto', translate = false, timestamps = true, wordTimestamps = false,
    beamSize = 0, patience = 1, temperature = 0, noFallback = false, conditionOnPreviousText = true, prompt = '',
    maxTokens = 0, seed = 0 } = {}) {
    const options = { language: String(language || 'auto'), translate: !!translate, timestamps: !!timestamps,
      wordTimestamps: !!wordTimestamps, beamSize: Number(beamSize), patience: Number(patience), temperature: Number(temperature),
      noFallback: !!noFallback, conditionOnPreviousText: !!conditionOnPreviousText, prompt: String(prompt || ''),
      maxTokens: Number(maxTokens), seed: Number(seed) };
    const msg = async () => {
      const { samples, rate } = await audioSamples(input, Number(sampleRate));
      return { op: 'transcribe', audio: samples, sampleRate: rate, options };
    };
    return this.#stream(msg, (s) => {
      const seg = { index: s.index, start: s.start, end: s.end, text: s.text, tokens: s.tokens, temperature: s.temperature,
        avgLogprob: s.avg_logprob, compressionRatio: s.compression_ratio, noSpeechProb: s.no_speech_prob };
      if (s.words) seg.words = s.words;
      return seg;
    });
  }

  // An async iterable of what the worker streams for msg (pieces of text,
  // speech chunks, transcript segments), each passed through shape; .stop()
  // or leaving the loop stops it. msg may be a function giving a promise of
  // it (the audio to transcribe, decoded first), called in turn.
  #stream(msg, shape) {
    const queue = [];
    let wake = null;
    let finished = false;
    let failure = null;
    let req = null;
    const notify = () => {
      if (wake) {
        wake();
        wake = null;
      }
    };
    const start = () => {
      const turn = this.#busy.then(async () => {
        const m = typeof msg === 'function' ? await msg() : msg;
        if (stopped) return { result: this.#lastResult, info: this.#info }; // stopped before it began
        req = this.#request(m, (item) => {
          queue.push(shape(item));
          notify();
        });
        return req.done;
      });
      this.#busy = turn.catch(() => {});
      turn.then(
        (m) => {
          this.#lastResult = m.result;
          this.#info = m.info;
        },
        (e) => {
          failure = e;
        },
      ).finally(() => {
        finished = true;
        notify();
      });
    };
    let stopped = false;
    const stop = () => {
      stopped = true;
      if (req && !finished) this.#worker.postMessage({ op: 'stop', id: req.id });
    };
    let started = false;
    const iterator = {
      next: async () => {
        if (!started) {
          started = true;
          start();
        }
        for (;;) {
          if (queue.length) return { value: queue.shift(), done: false };
          if (finished) {
            if (failure) {
              const e = failure;
              failure = null;
              throw e;
            }
            return { value: undefined, done: true };
          }
          await new Promise((r) => (wake = r));
        }
      },
      return: async () => {
        stop();
        return { value: undefined, done: true };
      },
      [Symbol.asyncIterator]() {
        return this;
      },
      stop,
    };
    return iterator;
  }

  // Runs one request after the calls before it; resolves to its result.
  #task(msg) {
    const turn = this.#busy.then(() => this.#request(msg).done);
    this.#busy = turn.catch(() => {});
    return turn.then((m) => {
      this.#info = m.info;
      return m.result;
    });
  }

  // Embedding models (info().tasks has 'embed'): resolves to an array of
  // Float32Array, one vector per text (texts: a string or an array of them).
  // Options: pooling ('mean' | 'cls' | 'last'; default the model's),
  // normalize ('l2' (default): unit vectors, cosine = dot | 'none'),
  // dimensions (keep the first N values, Matryoshka models; 0 = all),
  // truncate (false: a text longer than the model's context is an error;
  // true: cut, with a note in info().notes), batch (tokens per step, 0 = 512 on the CPU, 2048 on a GPU).
  async embed(texts, { pooling = 'model', normalize = 'l2', dimensions = 0, truncate = false, batch = 0 } = {}) {
    const list = typeof texts === 'string' ? [texts] : Array.isArray(texts) ? texts.map(String) : null;
    if (!list) throw new WgmlError(STATUS.INVALID_ARGUMENT, 'embed: texts must be a string or an array of strings');
    return this.#task({ op: 'embed', texts: list, options: { pooling, normalize, dimensions, truncate, batch } });
  }

  // Image embedding models (info().tasks has 'embed-image': CLIP, SigLIP and
  // ViT vision towers): resolves to an array of Float32Array, one vector per
  // image (images: one image or an array of them, each anything imagePixels
  // takes: ImageData, { width, height, data } RGBA, Blob/File, ImageBitmap,
  // <img>, canvas, OffscreenCanvas; a FileList too). Each is resized, cropped and normalized
  // in C as the model's Hugging Face image processor does (`wgml embed
  // --image`). Options: normalize ('l2' (default) | 'none'), batch (images
  // per step, 0 = 16 on the CPU, 64 on a GPU).
  async embedImages(images, { normalize = 'l2', batch = 0 } = {}) {
    const pixels = await imageList(images, 'embedImages');
    return this.#task({ op: 'embedImages', images: pixels, options: { normalize, batch } });
  }

  // Image classifiers (info().tasks has 'classify': a ViT with its head;
  // info().n_labels labels), or zero-shot with labels (texts, e.g. 'a photo
  // of a cat') a CLIP or SigLIP model with its text tower: per image its top
  // labels, best first, [[{ label, index, score }, ...], ...], as `wgml
  // classify --json` (score: the softmax probability; SigLIP's zero-shot: a
  // sigmoid each). images: as embedImages. Options: top (5; 0 = all), labels.
  async classify(images, { top = 5, labels = null } = {}) {
    const pixels = await imageList(images, 'classify');
    const options = { top: Number(top) };
    if (labels !== null) options.labels = Array.isArray(labels) ? labels.map(String) : labels;
    return this.#task({ op: 'classify', images: pixels, options });
  }

  // Rerankers (info().tasks has 'rerank', a cross-encoder): resolves to a
  // Float32Array of relevance logits, one per document (higher: more relevant).
  async rerank(query, docs) {
    const list = typeof docs === 'string' ? [docs] : Array.isArray(docs) ? docs.map(String) : null;
    if (!list) throw new WgmlError(STATUS.INVALID_ARGUMENT, 'rerank: docs must be a string or an array of strings');
    return this.#task({ op: 'rerank', query: String(query), docs: list });
  }

  // Frees the model's memory and GPU buffers and ends its worker. Resolves to
  // what the GPU layer still holds afterwards ({ buffers, bytes, devices }: zeros).
  async dispose() {
    if (this.#disposed) return { buffers: 0, bytes: 0, devices: 0 };
    await this.#busy;
    const r = this.#request({ op: 'dispose' });
    const m = await r.done;
    this.#disposed = true;
    this.#worker.terminate();
    return m.live;
  }
}

// Loads a model. Options: onProgress(0..1), backend ('auto'), nCtx (context
// length, 0 = the model's, at most 4096), cache (true: keep downloaded models in
// the Cache API), mode ('auto' | 'jspi' | 'asyncify'), threads (CPU threads:
// 'auto' = navigator.hardwareConcurrency up to 8, or a number; more than one
// needs JSPI and a cross-origin isolated page, else one with a note),
// onNote(text).
export async function load(source, { onProgress, backend = 'auto', nCtx = 0, cache = true, mode = 'auto', threads = 'auto',
  onNote } = {}) {
  if (!['auto', 'webgpu', 'cpu'].includes(backend))
    throw new WgmlError(STATUS.INVALID_ARGUMENT, `unknown backend '${backend}' (auto, webgpu or cpu)`);
  if (source instanceof URL) source = source.href;
  if (typeof source === 'string') source = new URL(source, globalThis.location ? location.href : undefined).href;
  const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module', name: 'wgml' });
  const notes = [];
  try {
    const info = await new Promise((resolve, reject) => {
      worker.onmessage = (ev) => {
        const m = ev.data;
        if (m.type === 'progress') {
          if (onProgress) onProgress(m.value);
        } else if (m.type === 'note') {
          notes.push(m.text);
          if (onNote) onNote(m.text);
        } else if (m.type === 'loaded') resolve(m.info);
        else if (m.type === 'error') reject(new WgmlError(m.code, m.message));
      };
      worker.onerror = (ev) => reject(new WgmlError(0, `the wgml worker failed to start: ${ev.message || 'see the console'}`));
      worker.postMessage({ op: 'load', source, options: { backend, nCtx, cache, mode, threads } });
    });
    return new Model(worker, info, notes);
  } catch (e) {
    worker.terminate();
    throw e;
  }
}

export default { load, webgpuAvailable, decodeAudio, imagePixels, WgmlError, STATUS };
