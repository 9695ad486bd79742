// demo.js - the demo page's logic (index.html) over the wgml.js API: load a
// model from a URL or a file with a progress bar, show the backend and adapter,
// stream generated text with tokens/s, stop, and explain failures in words
// (no WebGPU, a corrupt file, a model that does not fit). The speech tab
// (Kokoro models): text or phonemes, voice, speed; each sentence is played
// (Web Audio, back to back) as soon as it arrives, its words shown with their
// times (highlighted while spoken); then the real-time factor and a WAV file.
// The chat tab: turns through the model's chat template
// (model.chat.completions.create, streamed), stop, new chat. The transcribe
// tab (Whisper models, .bin or .gguf): record from the microphone (PCM from
// an AudioWorklet, or a ScriptProcessor where there is none) or choose/drop
// an audio file; segments appear with [start --> end] as each 30 s window is
// decoded (model.transcribe); language, translate, word times. The images
// tab (vision models: CLIP, SigLIP, ViT): choose or drop images; a classifier
// shows each image's top 5 labels (model.classify), an image embedder the
// cosine similarity matrix of the images (model.embedImages, unit vectors).
//
// For tests and the curious, window.wgmlDemo holds the state: the model, its
// info(), the status ('idle', 'loading', 'ready', 'generating', 'speaking',
// 'error', 'recording', 'transcribing', 'seeing'), how many loads, generations, speeches,
// transcriptions and image runs have finished (successfully or not), the last speech (its
// chunks as they arrived), the last transcript (its segments) and the last
// images' labels (imageLabels) and similarity matrix (imageMatrix).
import wgml, { STATUS, imagePixels } from './wgml.js';

const $ = (id) => document.getElementById(id);
const demo = { model: null, info: null, status: 'idle', webgpu: null, error: '', loads: 0, generations: 0, speeches: 0, speech: null,
  chat: [], chats: 0, transcripts: 0, transcript: null, audio: null, transcribeOptions: {},
  images: [], imageRuns: 0, imageLabels: null, imageMatrix: null };
window.wgmlDemo = demo;

const hasTask = (task) => !!(demo.model && demo.info && (demo.info.tasks || []).includes(task));

function setStatus(s) {
  demo.status = s;
  document.body.dataset.status = s;
  const busy = s === 'loading' || s === 'generating' || s === 'speaking' || s === 'chatting' || s === 'recording' ||
    s === 'transcribing' || s === 'seeing';
  $('load').disabled = busy;
  $('unload').disabled = busy || !demo.model;
  $('generate').disabled = busy || !demo.model || (demo.info && !hasTask('generate'));
  $('stop').disabled = s !== 'generating';
  $('chat-send').disabled = busy || !hasTask('generate');
  $('chat-stop').disabled = s !== 'chatting';
  $('speak').disabled = busy || !hasTask('speech');
  $('speak-stop').disabled = s !== 'speaking';
  $('record').disabled = busy;
  $('record-stop').disabled = s !== 'recording';
  $('transcribe').disabled = busy || !hasTask('transcribe') || !demo.audio;
  $('transcribe-stop').disabled = s !== 'transcribing';
  $('image-run').disabled = busy || !(hasTask('classify') || hasTask('embed-image')) || !demo.images.length;
  $('image-labels').disabled = busy || !zeroShot();
}

function showTab(name) {
  for (const t of ['generate', 'chat', 'speech', 'transcribe', 'images']) {
    $(`tab-${t}`).setAttribute('aria-selected', String(t === name));
    $(`${t}-section`).hidden = t !== name;
  }
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
      if (/espeak|does not (speak|generate|embed|transcribe|see)|no classifier|Web Audio|createImageBitmap/.test(msg)) return msg;
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
  $('info-backend').textContent = gpu ? `WebGPU (${i.mode === 'jspi' ? 'JSPI' : i.mode})`
    : `CPU, WebAssembly ${i.adapter === 'wasm-simd128' ? 'SIMD128' : i.adapter}, ${i.n_threads} thread${i.n_threads === 1 ? '' : 's'}`;
  $('info-adapter').textContent = gpu ? i.adapter : 'none (CPU)';
  const what = (i.tasks || []).includes('speech')
    ? `${(i.voices || []).length} voices, ${i.sample_rate} Hz`
    : i.image_size ? `images of ${i.image_size} x ${i.image_size} pixels${i.n_labels ? `, ${i.n_labels} labels` : ''}`
      : `${i.n_layer} layers, vocabulary ${i.n_vocab}`;
  $('info-model').textContent = `${i.name || i.architecture}: ${(i.n_params / 1e6).toFixed(2)}M parameters, ` +
    `${mib(i.weights_bytes)} of weights, ${what}` + (gpu ? `, ${mib(i.device_memory_bytes)} on the GPU` : '');
}

function showVoices(voices) {
  const sel = $('voice');
  sel.textContent = '';
  for (const v of voices) sel.append(new Option(v, v));
  if (!voices.length) sel.append(new Option('(the model has no voices)', ''));
}

async function unload() {
  if (!demo.model) return;
  const m = demo.model;
  stopPlayback();
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
    showError('Choose a model: a URL or a .gguf (or Whisper .bin) file.');
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
    if (hasTask('speech')) {
      showVoices(demo.model.voices);
      showTab('speech');
    } else if (hasTask('transcribe')) showTab('transcribe');
    else if (hasTask('classify') || hasTask('embed-image')) showTab('images');
    else if (hasTask('generate')) showTab('generate');
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

// One chat turn: the user's message joins the conversation (demo.chat, OpenAI
// messages), the reply streams into a new turn, and joins it too when done.
function chatTurn(role, text) {
  const li = document.createElement('li');
  li.className = `turn ${role}`;
  const who = document.createElement('b');
  who.textContent = role === 'user' ? 'You' : 'Model';
  const body = document.createElement('span');
  body.textContent = text;
  li.append(who, body);
  $('chat-turns').append(li);
  return body;
}

async function chatSend() {
  const text = $('chat-input').value.trim();
  if (!demo.model || !text) return;
  showError('');
  setStatus('chatting');
  $('chat-input').value = '';
  demo.chat.push({ role: 'user', content: text });
  chatTurn('user', text);
  const body = chatTurn('assistant', '');
  const system = $('chat-system').value.trim();
  const messages = system ? [{ role: 'system', content: system }, ...demo.chat] : [...demo.chat];
  const it = demo.model.chat.completions.create({ messages, stream: true, stream_options: { include_usage: true },
    max_tokens: Number($('chat-max-tokens').value) || 128, temperature: Number($('chat-temperature').value) || 0 });
  demo.currentChat = it;
  let reply = '';
  let finish = '';
  let usage = null;
  try {
    for await (const c of it) {
      if (c.usage) usage = c.usage;
      for (const ch of c.choices) {
        if (ch.delta.content) body.append(ch.delta.content), (reply += ch.delta.content);
        if (ch.finish_reason) finish = ch.finish_reason;
      }
    }
    demo.chat.push({ role: 'assistant', content: reply });
    const r = demo.model.info().last;
    $('chat-stats').textContent = usage
      ? `${usage.prompt_tokens} prompt + ${usage.completion_tokens} reply tokens, finish: ${finish || 'stopped'}; ${r.tokens_per_s.toFixed(1)} tokens/s`
      : 'stopped';
    setStatus('ready');
  } catch (e) {
    demo.chat.pop(); // the message that failed leaves the conversation
    showError(explain(e));
    setStatus(demo.model ? 'ready' : 'error');
  } finally {
    demo.currentChat = null;
    demo.chats++;
  }
}

function chatNew() {
  demo.chat = [];
  $('chat-turns').textContent = '';
  $('chat-stats').textContent = '';
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

// ---- speech ----

let audioCtx = null;
let playing = []; // scheduled AudioBufferSourceNodes
let playhead = 0; // where the next chunk starts, in audioCtx time
let wavUrl = '';
let highlight = 0; // requestAnimationFrame id

function stopPlayback() {
  for (const src of playing) {
    try {
      src.stop();
    } catch {
      // not started yet or already ended
    }
  }
  playing = [];
  playhead = 0;
  if (highlight) cancelAnimationFrame(highlight);
  highlight = 0;
}

// Schedules a chunk right after the previous one; returns its start in audioCtx time.
function schedule(c) {
  if (!audioCtx) return null;
  const buf = audioCtx.createBuffer(1, c.audio.length, c.sampleRate);
  buf.copyToChannel(c.audio, 0);
  const src = audioCtx.createBufferSource();
  src.buffer = buf;
  src.connect(audioCtx.destination);
  const when = Math.max(audioCtx.currentTime + 0.05, playhead);
  src.start(when);
  playhead = when + buf.duration;
  playing.push(src);
  src.onended = () => (playing = playing.filter((s) => s !== src));
  return when;
}

// Marks the word being spoken (words carry their audioCtx times).
function followWords() {
  const now = audioCtx ? audioCtx.currentTime : 0;
  for (const el of document.querySelectorAll('#speech-chunks .word[data-t0]'))
    el.classList.toggle('now', now >= Number(el.dataset.t0) && now < Number(el.dataset.t1));
  highlight = playing.length ? requestAnimationFrame(followWords) : 0;
}

function showChunk(c, when) {
  const li = document.createElement('li');
  li.className = 'chunk';
  const head = document.createElement('div');
  head.className = 'chunk-head';
  head.textContent = `${c.start.toFixed(2)} s: ${c.phonemes}`;
  const words = document.createElement('div');
  words.className = 'words';
  for (const w of c.words) {
    const span = document.createElement('span');
    span.className = 'word';
    span.textContent = w.word;
    span.title = `${w.start.toFixed(3)}-${w.end.toFixed(3)} s`;
    const t = document.createElement('small');
    t.textContent = ` ${w.start.toFixed(2)}-${w.end.toFixed(2)}`;
    span.append(t);
    if (when !== null) {
      span.dataset.t0 = String(when + w.start - c.start);
      span.dataset.t1 = String(when + w.end - c.start);
    }
    words.append(span, ' ');
  }
  li.append(head, words);
  $('speech-chunks').append(li);
}

// A 16-bit PCM mono WAV of the chunks.
function wavBlob(parts, rate) {
  const n = parts.reduce((k, a) => k + a.length, 0);
  const buf = new ArrayBuffer(44 + 2 * n);
  const v = new DataView(buf);
  const str = (at, s) => [...s].forEach((ch, i) => v.setUint8(at + i, ch.charCodeAt(0)));
  str(0, 'RIFF');
  v.setUint32(4, 36 + 2 * n, true);
  str(8, 'WAVE');
  str(12, 'fmt ');
  v.setUint32(16, 16, true);
  v.setUint16(20, 1, true); // PCM
  v.setUint16(22, 1, true); // mono
  v.setUint32(24, rate, true);
  v.setUint32(28, rate * 2, true);
  v.setUint16(32, 2, true);
  v.setUint16(34, 16, true);
  str(36, 'data');
  v.setUint32(40, 2 * n, true);
  let at = 44;
  for (const a of parts)
    for (let i = 0; i < a.length; i++, at += 2) v.setInt16(at, Math.round(Math.max(-1, Math.min(1, a[i])) * 32767), true);
  return new Blob([buf], { type: 'audio/wav' });
}

async function speak() {
  if (!hasTask('speech')) return;
  showError('');
  stopPlayback();
  setStatus('speaking');
  $('speech-chunks').textContent = '';
  $('download').hidden = true;
  if (wavUrl) URL.revokeObjectURL(wavUrl);
  wavUrl = '';
  $('speech-rtf').textContent = '';
  $('speech-status').textContent = 'speaking...';
  try {
    // created on the click (a user gesture), so that it may play
    if (!audioCtx && globalThis.AudioContext) audioCtx = new AudioContext();
    if (audioCtx && audioCtx.state === 'suspended') audioCtx.resume().catch(() => {});
  } catch {
    audioCtx = null; // no audio output: the WAV still comes
  }
  const record = { chunks: [], firstAudioMs: 0, done: false };
  demo.speech = record;
  const parts = [];
  let rate = 24000;
  const t0 = performance.now();
  const it = demo.model.speak($('speech-text').value, {
    voice: $('voice').value,
    speed: Number($('speed').value) || 1,
    seed: Math.max(0, Math.floor(Number($('speech-seed').value) || 0)),
    phonemes: $('speech-phonemes').checked,
    lang: $('speech-lang').value,
  });
  demo.currentSpeech = it;
  try {
    for await (const c of it) {
      const at = performance.now() - t0;
      if (!record.chunks.length) {
        record.firstAudioMs = at;
        $('speech-status').textContent = `first audio after ${at.toFixed(0)} ms; speaking...`;
      }
      record.chunks.push({ index: c.index, samples: c.audio.length, start: c.start, phonemes: c.phonemes, words: c.words, atMs: at });
      parts.push(c.audio);
      rate = c.sampleRate;
      showChunk(c, schedule(c));
      if (!highlight && audioCtx) highlight = requestAnimationFrame(followWords);
    }
    const r = demo.model.info().last;
    record.done = true;
    record.result = r;
    const seconds = parts.reduce((k, a) => k + a.length, 0) / rate;
    $('speech-rtf').textContent = `${seconds.toFixed(2)} s of audio in ${(r.total_ms / 1e3).toFixed(2)} s: ` +
      `real-time factor ${r.rtf.toFixed(2)};`;
    $('speech-status').textContent = `first audio after ${record.firstAudioMs.toFixed(0)} ms` +
      (r.g2p_ms ? ` (espeak-ng ${r.g2p_ms.toFixed(0)} ms)` : '') + `, ${r.n_chunks} chunk${r.n_chunks === 1 ? '' : 's'}`;
    if (parts.length) {
      wavUrl = URL.createObjectURL(wavBlob(parts, rate));
      $('download').href = wavUrl;
      $('download').hidden = false;
    }
    setStatus('ready');
  } catch (e) {
    showError(explain(e));
    $('speech-status').textContent = '';
    if (e.code === STATUS.DEVICE_LOST) await unload().catch(() => {});
    setStatus(demo.model ? 'ready' : 'error');
  } finally {
    demo.currentSpeech = null;
    demo.speeches++;
  }
}

// ---- transcription (Whisper) ----

// Seconds as 00:01.234 (and 1:02:03.456 past an hour), as Whisper's files show them.
function clock(t) {
  const ms = Math.max(0, Math.round(t * 1000));
  const h = Math.floor(ms / 3600000);
  const m = Math.floor(ms / 60000) % 60;
  const s = ((ms % 60000) / 1000).toFixed(3).padStart(6, '0');
  return `${h ? `${h}:` : ''}${String(m).padStart(2, '0')}:${s}`;
}

// The audio to transcribe: a File/Blob (decoded by model.transcribe) or the
// recording ({ samples, sampleRate }); shown with a player.
let audioUrl = '';
function setAudio(audio, label, blob) {
  demo.audio = audio;
  $('audio-info').textContent = label;
  if (audioUrl) URL.revokeObjectURL(audioUrl);
  audioUrl = blob ? URL.createObjectURL(blob) : '';
  $('stt-audio').hidden = !audioUrl;
  if (audioUrl) $('stt-audio').src = audioUrl;
  setStatus(demo.status);
}

function chooseAudio(file) {
  if (!file) return;
  setAudio(file, `${file.name} (${(file.size / 1024).toFixed(0)} KiB)`, file);
}

// Recording: the microphone's PCM, collected by an AudioWorklet (or a
// ScriptProcessor where there is none) at the AudioContext's rate.
let recorder = null;
const WORKLET = `registerProcessor('wgml-pcm', class extends AudioWorkletProcessor {
  process(inputs) { const ch = inputs[0][0]; if (ch) this.port.postMessage(ch.slice(0)); return true; }
});`;

async function startRecording() {
  showError('');
  if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
    showError('This browser gives no microphone here (getUserMedia needs a secure context: https:// or http://127.0.0.1).');
    return;
  }
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false } });
  } catch (e) {
    showError(`The microphone could not be opened: ${e.message || e}`);
    return;
  }
  const ctx = new AudioContext();
  if (ctx.state === 'suspended') await ctx.resume().catch(() => {});
  const source = ctx.createMediaStreamSource(stream);
  const parts = [];
  let node;
  if (ctx.audioWorklet) {
    const url = URL.createObjectURL(new Blob([WORKLET], { type: 'text/javascript' }));
    await ctx.audioWorklet.addModule(url);
    URL.revokeObjectURL(url);
    node = new AudioWorkletNode(ctx, 'wgml-pcm');
    node.port.onmessage = (ev) => parts.push(ev.data);
  } else {
    node = ctx.createScriptProcessor(4096, 1, 1);
    node.onaudioprocess = (ev) => parts.push(ev.inputBuffer.getChannelData(0).slice(0));
  }
  source.connect(node);
  node.connect(ctx.destination); // a processor runs only when connected (it outputs silence)
  const t0 = performance.now();
  const tick = setInterval(() => ($('audio-info').textContent = `recording... ${((performance.now() - t0) / 1e3).toFixed(1)} s`), 200);
  recorder = { stream, ctx, node, source, parts, tick };
  setStatus('recording');
}

async function stopRecording() {
  if (!recorder) return;
  const { stream, ctx, node, source, parts, tick } = recorder;
  recorder = null;
  clearInterval(tick);
  source.disconnect();
  node.disconnect();
  for (const t of stream.getTracks()) t.stop();
  const rate = ctx.sampleRate;
  await ctx.close();
  const n = parts.reduce((k, a) => k + a.length, 0);
  const samples = new Float32Array(n);
  let at = 0;
  for (const a of parts) samples.set(a, (at += a.length) - a.length);
  setStatus(demo.model ? 'ready' : 'idle');
  setAudio({ samples, sampleRate: rate }, `recording: ${(n / rate).toFixed(1)} s at ${rate} Hz`, wavBlob([samples], rate));
}

function showSegment(s) {
  const li = document.createElement('li');
  li.className = 'segment';
  const ts = document.createElement('span');
  ts.className = 'ts';
  ts.textContent = `[${clock(s.start)} --> ${clock(s.end)}]`;
  li.append(ts, ' ');
  if (s.words) {
    for (const w of s.words) {
      const span = document.createElement('span');
      span.className = 'word';
      span.title = `${w.start.toFixed(2)}-${w.end.toFixed(2)} s, p ${w.probability.toFixed(2)}`;
      span.textContent = w.word;
      const t = document.createElement('small');
      t.textContent = `(${w.start.toFixed(2)})`;
      span.append(t);
      li.append(span);
    }
  } else {
    const text = document.createElement('span');
    text.className = 'text';
    text.textContent = s.text;
    li.append(text);
  }
  $('stt-segments').append(li);
}

async function transcribe() {
  if (!hasTask('transcribe') || !demo.audio) return;
  showError('');
  setStatus('transcribing');
  $('stt-segments').textContent = '';
  $('stt-rtf').textContent = '';
  $('stt-status').textContent = 'decoding the audio...';
  const record = { segments: [], done: false };
  demo.transcript = record;
  const input = demo.audio.samples || demo.audio;
  const t0 = performance.now();
  const it = demo.model.transcribe(input, {
    sampleRate: demo.audio.sampleRate || 16000,
    language: $('stt-language').value,
    translate: $('stt-translate').checked,
    wordTimestamps: $('stt-words').checked,
    ...demo.transcribeOptions, // more options, for tests and the curious (noFallback, maxTokens, beamSize, ...)
  });
  demo.currentTranscript = it;
  $('stt-status').textContent = 'transcribing...';
  try {
    for await (const s of it) {
      const at = performance.now() - t0;
      record.segments.push({ ...s, atMs: at });
      showSegment(s);
      $('stt-status').textContent = `${record.segments.length} segment${record.segments.length === 1 ? '' : 's'}, ` +
        `first after ${record.segments[0].atMs.toFixed(0)} ms; transcribing...`;
    }
    const r = demo.model.info().last;
    record.done = true;
    record.result = r;
    $('stt-rtf').textContent = `${r.duration.toFixed(2)} s of audio in ${(r.total_ms / 1e3).toFixed(2)} s: real-time factor ${r.rtf.toFixed(2)};`;
    $('stt-status').textContent = `language ${r.language}, ${r.n_segments} segment${r.n_segments === 1 ? '' : 's'}, ` +
      `${r.n_windows} window${r.n_windows === 1 ? '' : 's'}, ${r.n_tokens} tokens`;
    setStatus('ready');
  } catch (e) {
    record.error = e.message;
    showError(explain(e));
    $('stt-status').textContent = '';
    if (e.code === STATUS.DEVICE_LOST) await unload().catch(() => {});
    setStatus(demo.model ? 'ready' : 'error');
  } finally {
    demo.currentTranscript = null;
    demo.transcripts++;
  }
}

// ---- the images tab ----

function chooseImages(files) {
  const list = [...(files || [])].filter((f) => !f.type || f.type.startsWith('image/'));
  if (!list.length) return;
  demo.images = list;
  $('image-info').textContent = `${list.length} image${list.length === 1 ? '' : 's'}: ${list.map((f) => f.name).join(', ')}`;
  setStatus(demo.status);
  if (demo.model && demo.status === 'ready') seeImages();
}

function showMatrix(names, m) {
  const table = $('image-matrix');
  const head = table.querySelector('thead');
  const body = table.querySelector('tbody');
  head.textContent = '';
  body.textContent = '';
  const hr = document.createElement('tr');
  hr.append(document.createElement('th'));
  for (const n of names) {
    const th = document.createElement('th');
    th.textContent = n;
    th.scope = 'col';
    hr.append(th);
  }
  head.append(hr);
  m.forEach((row, i) => {
    const tr = document.createElement('tr');
    const th = document.createElement('th');
    th.textContent = names[i];
    th.scope = 'row';
    tr.append(th);
    for (const v of row) {
      const td = document.createElement('td');
      td.textContent = v.toFixed(4);
      td.style.setProperty('--sim', String(Math.max(0, v)));
      tr.append(td);
    }
    body.append(tr);
  });
  table.hidden = false;
}

// Whether the model scores images against texts (a CLIP or SigLIP with its text tower).
function zeroShot() {
  return hasTask('embed-image') && hasTask('embed') && hasTask('classify');
}

// The zero-shot label texts typed in: one per line, or separated by commas on one line.
function labelTexts() {
  const t = $('image-labels').value.trim();
  if (!t) return [];
  return (t.includes('\n') ? t.split('\n') : t.split(',')).map((x) => x.trim()).filter((x) => x);
}

// The chosen images through the model: a classifier's top 5 per image (or,
// for CLIP / SigLIP with labels typed in, the labels' zero-shot scores), and
// with two images or more an embedder's cosine similarity matrix.
async function seeImages() {
  const texts = zeroShot() ? labelTexts() : [];
  const classify = texts.length > 0 || (hasTask('classify') && !zeroShot());
  const embed = hasTask('embed-image');
  if (!demo.images.length) return;
  if (!classify && !embed) {
    showError('This model does not see images: load a vision model (CLIP, SigLIP or a ViT classifier).');
    demo.imageRuns++;
    return;
  }
  showError('');
  setStatus('seeing');
  const files = demo.images;
  $('image-results').textContent = '';
  $('image-matrix').hidden = true;
  demo.imageLabels = null;
  demo.imageMatrix = null;
  const t0 = performance.now();
  try {
    $('image-status').textContent = `${classify ? 'classifying' : 'embedding'} ${files.length} image${files.length === 1 ? '' : 's'}...`;
    const pixels = await Promise.all(files.map((f) => imagePixels(f))); // decoded once for both calls
    const labels = !classify ? null
      : texts.length ? await demo.model.classify(pixels, { top: 5, labels: texts })
        : await demo.model.classify(pixels, { top: 5 });
    files.forEach((f, i) => {
      const li = document.createElement('li');
      li.className = 'image';
      const img = document.createElement('img');
      img.src = URL.createObjectURL(f);
      img.alt = f.name;
      img.onload = () => URL.revokeObjectURL(img.src);
      const cap = document.createElement('span');
      cap.className = 'name';
      cap.textContent = f.name;
      li.append(img, cap);
      if (labels) {
        const ol = document.createElement('ol');
        ol.className = 'labels';
        for (const l of labels[i]) {
          const item = document.createElement('li');
          item.dataset.index = String(l.index);
          item.textContent = `${l.label} `;
          const p = document.createElement('small');
          p.textContent = `${(100 * l.score).toFixed(2)}%`;
          item.append(p);
          ol.append(item);
        }
        li.append(ol);
      }
      $('image-results').append(li);
    });
    demo.imageLabels = labels;
    if (embed && files.length > 1) {
      const v = await demo.model.embedImages(pixels);
      const m = v.map((a) => v.map((b) => a.reduce((s, x, k) => s + x * b[k], 0)));
      demo.imageMatrix = m;
      showMatrix(files.map((f) => f.name), m);
    }
    $('image-status').textContent = `${files.length} image${files.length === 1 ? '' : 's'} in ${((performance.now() - t0) / 1e3).toFixed(2)} s` +
      (embed && !classify && files.length < 2 ? ' (choose two or more images to compare them)' : '');
    setStatus('ready');
  } catch (e) {
    showError(explain(e));
    $('image-status').textContent = '';
    if (e.code === STATUS.DEVICE_LOST) await unload().catch(() => {});
    setStatus(demo.model ? 'ready' : 'error');
  } finally {
    demo.imageRuns++;
  }
}

$('tab-images').addEventListener('click', () => showTab('images'));
$('image-files').addEventListener('change', () => chooseImages($('image-files').files));
$('image-run').addEventListener('click', seeImages);
const imageDrop = $('image-drop');
imageDrop.addEventListener('dragover', (e) => {
  e.preventDefault();
  imageDrop.classList.add('over');
});
imageDrop.addEventListener('dragleave', () => imageDrop.classList.remove('over'));
imageDrop.addEventListener('drop', (e) => {
  e.preventDefault();
  imageDrop.classList.remove('over');
  chooseImages(e.dataTransfer.files);
});

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
$('tab-generate').addEventListener('click', () => showTab('generate'));
$('tab-speech').addEventListener('click', () => showTab('speech'));
$('tab-chat').addEventListener('click', () => showTab('chat'));
$('chat-send').addEventListener('click', chatSend);
$('chat-stop').addEventListener('click', () => demo.currentChat && demo.currentChat.stop());
$('chat-new').addEventListener('click', chatNew);
$('chat-input').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey) {
    e.preventDefault();
    if (!$('chat-send').disabled) chatSend();
  }
});
$('speak').addEventListener('click', speak);
$('speak-stop').addEventListener('click', () => {
  if (demo.currentSpeech) demo.currentSpeech.stop();
  stopPlayback();
});

$('tab-transcribe').addEventListener('click', () => showTab('transcribe'));
$('record').addEventListener('click', startRecording);
$('record-stop').addEventListener('click', stopRecording);
$('audio-file').addEventListener('change', () => chooseAudio($('audio-file').files[0]));
$('transcribe').addEventListener('click', transcribe);
$('transcribe-stop').addEventListener('click', () => demo.currentTranscript && demo.currentTranscript.stop());
const drop = $('audio-drop');
drop.addEventListener('dragover', (e) => {
  e.preventDefault();
  drop.classList.add('over');
});
drop.addEventListener('dragleave', () => drop.classList.remove('over'));
drop.addEventListener('drop', (e) => {
  e.preventDefault();
  drop.classList.remove('over');
  chooseAudio(e.dataTransfer.files[0]);
});

setStatus('idle');
wgml.webgpuAvailable().then((r) => {
  demo.webgpu = r;
  if (!r.ok) showNotice(`WebGPU is not available in this browser: ${r.reason}. wgml will run on the CPU (WebAssembly SIMD), which is slower.`);
});
