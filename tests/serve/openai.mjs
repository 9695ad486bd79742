// openai.mjs - `wgml serve` driven by the official OpenAI client (npm `openai`, pinned in
// tests/serve/package-lock.json), as the programs people point at a local server drive it.
//
//   node tests/serve/openai.mjs WGML_CLI MODEL     (ctest runs it with the build's CLI and stories260K)
//
// Checks, through client.models / chat.completions / completions: the model list; chat and
// completions, streamed and not, with the same greedy text both ways; usage figures (and
// the usage chunk of stream_options.include_usage); a stop string (never in the text, not
// even across chunks); the errors as the client raises them (AuthenticationError for a
// wrong key, BadRequestError with code context_length_exceeded and with the bad param's
// name); 4 concurrent streams whose greedy texts equal their solo runs; a stream the
// client aborts frees its slot and is counted as cancelled. client.embeddings with an
// embedding model (a one-layer `wgml synth` all-minilm-l6): the client's default base64
// decoded to the floats of encoding_format "float", dimensions. client.audio.speech with
// Kokoro (../shared's kokoro-tiny converted): the streamed WAV equals `wgml speak -o -`'s, byte for
// byte. client.audio.transcriptions (json, verbose_json, srt, a stream of text events) and
// client.audio.translations with a `wgml synth` whisper-micro, against `wgml transcribe`. Exits 77 (skipped) when the
// client is not installed and CI is not set (scripts/test.sh installs it).
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { createRequire } from 'node:module';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const [CLI, MODEL] = process.argv.slice(2);
const KEY = 'sekret-key';
let OpenAI;
try {
  OpenAI = createRequire(path.join(here, 'package.json'))('openai').default;
} catch {
  console.log('test_serve_openai: the openai client is not installed (npm ci --prefix tests/serve)');
  process.exit(process.env.CI ? 1 : 77);
}

const failures = [];
const check = (cond, what) => {
  if (!cond) {
    failures.push(what);
    console.log(`FAIL: ${what}`);
  }
};

// the server on a free port, its URL once it listens
async function start(...extra) {
  return startModel(MODEL, ...extra);
}
async function startModel(model, ...extra) {
  const p = spawn(CLI, ['serve', '-m', model, '--backend', 'cpu', '--port', '0', '--parallel', '4', '--ctx-size', '256',
    '--api-key', KEY, '--queue', '6', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  p.stderr.on('data', (d) => (stderr += d));
  const line = await new Promise((resolve) => {
    const rl = readline.createInterface({ input: p.stdout });
    rl.once('line', resolve);
    p.once('exit', () => resolve(''));
  });
  const m = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/.exec(line);
  if (!m) {
    p.kill();
    throw new Error(`the server did not start: ${line} ${stderr}`);
  }
  return { p, url: m[1], stderr: () => stderr };
}

// a long context, so that the stream aborted below runs for seconds if it is not cancelled
const server = await start('--ctx-size', '4096');
const client = new OpenAI({ apiKey: KEY, baseURL: `${server.url}/v1`, maxRetries: 0, timeout: 120000 });
const health = async () => (await fetch(`${server.url}/health`)).json();
const metrics = async () => (await fetch(`${server.url}/metrics`)).text();
const PROMPTS = ['Once upon a time', 'The little dog ran to the park', 'Lily and Ben were friends',
  'One day, a boy named Tom wanted to play'];
const greedy = { temperature: 0 };

try {
  // ---- models
  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === path.basename(MODEL), `models: ${JSON.stringify(models.data)}`);
  const model = models.data[0].id;

  // ---- chat, not streamed and streamed: the same greedy text; usage
  const messages = [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Tell me about a cat.' }];
  const chat = await client.chat.completions.create({ model, messages, max_tokens: 24, ...greedy });
  const text = chat.choices[0].message.content;
  check(chat.object === 'chat.completion' && chat.choices[0].message.role === 'assistant' && text.length > 0,
    `chat: ${JSON.stringify(chat)}`);
  check(['stop', 'length'].includes(chat.choices[0].finish_reason), `chat finish_reason ${chat.choices[0].finish_reason}`);
  const u = chat.usage;
  check(u.prompt_tokens > 10 && u.completion_tokens > 0 && u.completion_tokens <= 24 &&
    u.total_tokens === u.prompt_tokens + u.completion_tokens, `chat usage ${JSON.stringify(u)}`);
  const stream = await client.chat.completions.create({ model, messages, max_tokens: 24, ...greedy, stream: true,
    stream_options: { include_usage: true } });
  let streamed = '';
  let finish = null;
  let usage = null;
  let role = null;
  for await (const c of stream) {
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      if (ch.delta.role) role = ch.delta.role;
      streamed += ch.delta.content || '';
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  check(role === 'assistant' && streamed === text, `streamed chat ${JSON.stringify(streamed)} vs ${JSON.stringify(text)}`);
  check(finish === chat.choices[0].finish_reason, `streamed finish_reason ${finish}`);
  check(usage && usage.prompt_tokens === u.prompt_tokens && usage.completion_tokens === u.completion_tokens,
    `streamed usage ${JSON.stringify(usage)} vs ${JSON.stringify(u)}`);

  // ---- completions; a stop string taken from the greedy text itself
  const full = await client.completions.create({ model, prompt: PROMPTS[0], max_tokens: 40, ...greedy });
  const t = full.choices[0].text;
  check(full.object === 'text_completion' && t.length > 20 && full.usage.completion_tokens <= 40, `completion ${JSON.stringify(full)}`);
  const words = t.trim().split(/\s+/);
  const stopWord = words.find((w, i) => i >= 3 && w.length >= 3) || words[words.length - 1];
  const cut = await client.completions.create({ model, prompt: PROMPTS[0], max_tokens: 40, ...greedy, stop: [stopWord] });
  const want = t.slice(0, t.indexOf(stopWord));
  check(cut.choices[0].text === want && cut.choices[0].finish_reason === 'stop',
    `stop ${JSON.stringify(stopWord)}: ${JSON.stringify(cut.choices[0])}, want ${JSON.stringify(want)}`);
  let cutStreamed = '';
  for await (const c of await client.completions.create({ model, prompt: PROMPTS[0], max_tokens: 40, ...greedy,
    stop: stopWord, stream: true })) cutStreamed += c.choices.map((ch) => ch.text).join('');
  check(cutStreamed === want, `streamed with a stop string: ${JSON.stringify(cutStreamed)}, want ${JSON.stringify(want)}`);

  // ---- errors as the client raises them
  const fails = async (f) => {
    try {
      await f();
      return null;
    } catch (e) {
      return e;
    }
  };
  const wrongKey = new OpenAI({ apiKey: 'wrong', baseURL: `${server.url}/v1`, maxRetries: 0 });
  let e = await fails(() => wrongKey.completions.create({ model, prompt: 'x', max_tokens: 1 }));
  check(e instanceof OpenAI.AuthenticationError && e.status === 401 && e.code === 'invalid_api_key', `wrong key: ${e}`);
  e = await fails(() => client.completions.create({ model, prompt: 'Once upon a time '.repeat(1200), max_tokens: 4 }));
  check(e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded', `too long: ${e}`);
  e = await fails(() => client.chat.completions.create({ model, messages, temperature: 7 }));
  check(e instanceof OpenAI.BadRequestError && e.param === 'temperature', `temperature 7: ${e} (param ${e && e.param})`);
  e = await fails(() => client.chat.completions.create({ model, messages, n: 2 }));
  check(e instanceof OpenAI.BadRequestError && e.param === 'n', `n 2: ${e}`);

  // ---- 4 concurrent streams: each greedy text equals its solo run
  const solo = [];
  for (const p of PROMPTS) solo.push((await client.completions.create({ model, prompt: p, max_tokens: 24, ...greedy })).choices[0].text);
  const together = await Promise.all(PROMPTS.map(async (p) => {
    let s = '';
    for await (const c of await client.completions.create({ model, prompt: p, max_tokens: 24, ...greedy, stream: true }))
      s += c.choices.map((ch) => ch.text).join('');
    return s;
  }));
  for (let i = 0; i < 4; i++) check(together[i] === solo[i], `concurrent stream ${i}: ${JSON.stringify(together[i])} != solo ${JSON.stringify(solo[i])}`);

  // ---- a stream the client aborts frees its slot
  const before = Number(/^wgml_requests_cancelled_total (\d+)$/m.exec(await metrics())[1]);
  const long = await client.completions.create({ model, prompt: PROMPTS[3], max_tokens: 4000, ...greedy, stream: true });
  let n = 0;
  for await (const c of long) {
    void c;
    if (++n === 2) break; // leaving the loop aborts the request
  }
  let h;
  for (let i = 0; i < 200; i++) {
    h = await health();
    if (h.slots_busy === 0) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  check(h.slots_busy === 0 && h.queue_length === 0, `an aborted stream's slot is freed: ${JSON.stringify(h)}`);
  const after = Number(/^wgml_requests_cancelled_total (\d+)$/m.exec(await metrics())[1]);
  check(after === before + 1, `the abort is counted: ${before} -> ${after}`);
} catch (err) {
  check(false, `unexpected: ${err && err.stack ? err.stack : err}`);
} finally {
  server.p.kill('SIGTERM');
  await new Promise((r) => server.p.once('exit', r));
}
// ---- embeddings: an embedding model's server
const dir = mkdtempSync(path.join(os.tmpdir(), 'wgml-openai-'));
try {
  const file = path.join(dir, 'minilm.gguf');
  execFileSync(CLI, ['synth', '--arch', 'all-minilm-l6', '--type', 'F16', '--layers', '1', '-o', file], { stdio: 'pipe' });
  const es = await startModel(file);
  try {
    const ec = new OpenAI({ apiKey: KEY, baseURL: `${es.url}/v1`, maxRetries: 0 });
    const input = ['The cat sat on the mat.', 'A quick brown fox'];
    const viaClient = await ec.embeddings.create({ model: 'minilm.gguf', input }); // the client asks for base64
    const asFloats = await ec.embeddings.create({ model: 'minilm.gguf', input, encoding_format: 'float' });
    check(viaClient.data.length === 2 && viaClient.usage.prompt_tokens > 6, `embeddings: ${JSON.stringify(viaClient).slice(0, 200)}`);
    for (let i = 0; i < 2; i++) {
      const a = viaClient.data[i].embedding, b = asFloats.data[i].embedding;
      check(a.length === 384 && a.every((x, j) => x === Math.fround(b[j])), `embedding ${i}: base64 and float differ`);
    }
    const short = await ec.embeddings.create({ model: 'minilm.gguf', input: input[0], dimensions: 32 });
    const v = short.data[0].embedding;
    check(v.length === 32 && Math.abs(Math.hypot(...v) - 1) < 1e-5, `dimensions 32: ${v.length} values`);
    const e = await ec.chat.completions.create({ model: 'minilm.gguf', messages: [{ role: 'user', content: 'hi' }] })
      .then(() => null, (err) => err);
    check(e instanceof OpenAI.BadRequestError && e.code === 'model_not_supported', `chat on an embedding model: ${e}`);
  } finally {
    es.p.kill('SIGTERM');
    await new Promise((r) => es.p.once('exit', r));
  }
  // ---- transcriptions: a Whisper model's server (`wgml synth --arch whisper-micro`: random weights), the audio
  // a 16-bit stereo WAV at 44.1 kHz made here; max_tokens and no_fallback (wgml's extensions) keep it quick
  const wfile = path.join(dir, 'whisper.gguf');
  execFileSync(CLI, ['synth', '--arch', 'whisper-micro', '--type', 'F16', '-o', wfile], { stdio: 'pipe' });
  const rate = 44100, frames = rate;
  const wav = Buffer.alloc(44 + frames * 4);
  wav.write('RIFF', 0);
  wav.writeUInt32LE(36 + frames * 4, 4);
  wav.write('WAVEfmt ', 8);
  wav.writeUInt32LE(16, 16);
  wav.writeUInt16LE(1, 20); // PCM
  wav.writeUInt16LE(2, 22); // stereo
  wav.writeUInt32LE(rate, 24);
  wav.writeUInt32LE(rate * 4, 28);
  wav.writeUInt16LE(4, 32);
  wav.writeUInt16LE(16, 34);
  wav.write('data', 36);
  wav.writeUInt32LE(frames * 4, 40);
  for (let i = 0; i < frames; i++) wav.writeInt16LE(Math.round(12000 * Math.sin(2 * Math.PI * 440 * i / rate)), 44 + i * 4);
  const wavPath = path.join(dir, 'a.wav');
  writeFileSync(wavPath, wav);
  const want = JSON.parse(execFileSync(CLI, ['transcribe', '-m', wfile, '--backend', 'cpu', '--max-tokens', '8',
    '--no-fallback', '-f', 'verbose_json', wavPath], { stdio: ['ignore', 'pipe', 'pipe'] }).toString());
  const ws = await startModel(wfile);
  try {
    const wc = new OpenAI({ apiKey: KEY, baseURL: `${ws.url}/v1`, maxRetries: 0 });
    const { toFile } = createRequire(path.join(here, 'package.json'))('openai');
    const quick = { max_tokens: 8, no_fallback: true };
    const tr = await wc.audio.transcriptions.create({ file: await toFile(wav, 'a.wav'), model: 'whisper-1', ...quick });
    check(tr.text === want.text && tr.usage.type === 'duration' && tr.usage.seconds === 1,
      `transcription: ${JSON.stringify(tr)}, \`wgml transcribe\`: ${JSON.stringify(want.text)}`);
    const verbose = await wc.audio.transcriptions.create({ file: await toFile(wav, 'a.wav'), model: 'whisper-1',
      response_format: 'verbose_json', timestamp_granularities: ['segment'], ...quick });
    check(verbose.duration === 1 && verbose.language === want.language &&
      JSON.stringify(verbose.segments) === JSON.stringify(want.segments), `verbose_json: ${JSON.stringify(verbose)}`);
    const srt = await wc.audio.transcriptions.create({ file: await toFile(wav, 'a.wav'), model: 'whisper-1',
      response_format: 'srt', ...quick });
    check(typeof srt === 'string' && srt.startsWith('1\n00:00:'), `srt: ${JSON.stringify(srt)}`);
    let deltas = '', done = null;
    for await (const ev of await wc.audio.transcriptions.create({ file: await toFile(wav, 'a.wav'), model: 'whisper-1',
      stream: true, ...quick })) {
      if (ev.type === 'transcript.text.delta') deltas += ev.delta;
      else if (ev.type === 'transcript.text.done') done = ev.text;
    }
    check(done === want.text && deltas.trim() === done, `a stream: deltas ${JSON.stringify(deltas)}, done ${JSON.stringify(done)}`);
    const tl = await wc.audio.translations.create({ file: await toFile(wav, 'a.wav'), model: 'whisper-1', ...quick });
    check(typeof tl.text === 'string', `translation: ${JSON.stringify(tl)}`);
    const e = await wc.audio.transcriptions.create({ file: await toFile(Buffer.from('not audio at all'), 'a.txt'),
      model: 'whisper-1' }).then(() => null, (err) => err);
    check(e instanceof OpenAI.BadRequestError && e.param === 'file', `a text file as audio: ${e}`);
  } finally {
    ws.p.kill('SIGTERM');
    await new Promise((r) => ws.p.once('exit', r));
  }
  // ---- speech: a Kokoro model's server (the shared tiny checkpoint, converted)
  const kdir = path.join(process.env.WGML_SHARED || path.join(here, '../../../shared'), 'kokoro');
  if (!existsSync(path.join(kdir, 'kokoro-tiny.pth'))) {
    check(!process.env.WGML_REQUIRE_SHARED, 'the shared Kokoro checkpoint is missing');
  } else {
    const kfile = path.join(dir, 'kokoro.gguf');
    const phonemes = 'həlˈoʊ wˈɜːld. hˌaʊ ɑːɹ juː?';
    execFileSync(CLI, ['convert', 'kokoro', path.join(kdir, 'kokoro-tiny.pth'), '--config', path.join(kdir, 'config-kokoro-tiny.json'),
      '--voices', path.join(kdir, 'voices'), '-o', kfile], { stdio: 'pipe' });
    // the server streams its WAV as `wgml speak -o -` writes one: sizes 0xFFFFFFFF, as OpenAI's
    const ref = execFileSync(CLI, ['speak', '-m', kfile, '--backend', 'cpu', '--threads', '1', '--phonemes', phonemes,
      '-v', 'af_heart', '--seed', '5', '-o', '-'], { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
    const ks = await startModel(kfile, '--threads', '1');
    try {
      const kc = new OpenAI({ apiKey: KEY, baseURL: `${ks.url}/v1`, maxRetries: 0 });
      // phonemes and seed are wgml's extensions of the request
      const res = await kc.audio.speech.create({ model: 'kokoro', voice: 'af_heart', input: phonemes, response_format: 'wav',
        phonemes: true, seed: 5 });
      const got = Buffer.from(await res.arrayBuffer());
      check(got.equals(ref) && got.readUInt32LE(4) === 0xffffffff,
        `speech: the WAV differs from \`wgml speak -o -\`'s (${got.length} bytes)`);
      const e = await kc.audio.speech.create({ model: 'kokoro', voice: 'alloy', input: 'Hi.' }).then(() => null, (err) => err);
      check(e instanceof OpenAI.BadRequestError && e.param === 'voice', `an unknown voice: ${e}`);
    } finally {
      ks.p.kill('SIGTERM');
      await new Promise((r) => ks.p.once('exit', r));
    }
  }
} catch (err) {
  check(false, `embeddings / transcriptions / speech: unexpected: ${err && err.stack ? err.stack : err}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

if (failures.length) {
  console.log(`${failures.length} failure(s)`);
  process.exit(1);
}
console.log('test_serve_openai: all passed');
