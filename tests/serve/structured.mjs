// structured.mjs - structured output through `wgml serve`, asked for with the official OpenAI
// client (npm `openai`) as an agent framework asks for it; tests/test_structured.py runs it and
// validates what it writes.
//
//   node tests/serve/structured.mjs WGML_CLI MODEL SCHEMAS OUT
//
// Each schema of SCHEMAS (a JSON array of {name, schema}) through
// chat.completions.create({response_format: {type: 'json_schema', json_schema: {name, schema,
// strict: true}}}) at three seeds (one greedy, two sampled at temperature 1), one in three
// streamed; then response_format json_object, llama.cpp's `grammar` field (GBNF), and the
// errors (an unsupported keyword, a bad grammar, both at once) as the client raises them.
// OUT receives {results: [{name, seed, content, finish_reason}], checks: [{what, ok}]}.
// Exits 77 (skipped) when the client is not installed and CI is not set.
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const [CLI, MODEL, SCHEMAS, OUT] = process.argv.slice(2);
let OpenAI;
try {
  OpenAI = createRequire(path.join(here, 'package.json'))('openai').default;
} catch {
  console.log('structured: the openai client is not installed (npm ci --prefix tests/serve)');
  process.exit(process.env.CI ? 1 : 77);
}

const p = spawn(CLI, ['serve', '-m', MODEL, '--backend', 'cpu', '--port', '0', '--parallel', '2', '--ctx-size', '1024'],
  { stdio: ['ignore', 'pipe', 'pipe'] });
let stderr = '';
p.stderr.on('data', (d) => (stderr += d));
const line = await new Promise((resolve) => {
  const rl = readline.createInterface({ input: p.stdout });
  rl.once('line', resolve);
  p.once('exit', () => resolve(''));
});
const m = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/.exec(line);
if (!m) {
  console.log(`the server did not start: ${line} ${stderr}`);
  process.exit(1);
}
const client = new OpenAI({ apiKey: 'none', baseURL: `${m[1]}/v1`, maxRetries: 0, timeout: 120000 });
const messages = [{ role: 'user', content: 'Answer in JSON.' }];
const results = [];
const checks = [];
const check = (ok, what) => checks.push({ what, ok: !!ok });

async function ask(extra, stream) {
  const req = { model: 'm', messages, max_tokens: 700, ...extra };
  if (!stream) {
    const r = await client.chat.completions.create(req);
    return { content: r.choices[0].message.content, finish_reason: r.choices[0].finish_reason };
  }
  let content = '';
  let finish = null;
  for await (const c of await client.chat.completions.create({ ...req, stream: true })) {
    for (const ch of c.choices) {
      content += ch.delta.content || '';
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  return { content, finish_reason: finish };
}

try {
  const schemas = JSON.parse(readFileSync(SCHEMAS, 'utf8'));
  let k = 0;
  for (const { name, schema } of schemas) {
    for (const seed of [1, 2, 3]) {
      const rf = { type: 'json_schema', json_schema: { name: name.replace(/[^a-zA-Z0-9_-]/g, '_'), schema, strict: true } };
      const r = await ask({ response_format: rf, seed, temperature: seed === 1 ? 0 : 1 }, k++ % 3 === 2);
      results.push({ name, seed, ...r });
    }
  }
  // any JSON object; a raw GBNF grammar (llama.cpp's extension)
  for (const seed of [1, 2]) {
    const r = await ask({ response_format: { type: 'json_object' }, seed, max_tokens: 200 }, seed === 2);
    results.push({ name: 'json_object', seed, ...r, max_tokens: 200 });
  }
  const g = await ask({ grammar: 'root ::= ("yes" | "no") " " [0-9]{1,3}', seed: 4 }, false);
  check(/^(yes|no) [0-9]{1,3}$/.test(g.content) && g.finish_reason === 'stop', `grammar: ${JSON.stringify(g)}`);
  // errors, as the client raises them
  const bad = async (extra) => client.chat.completions.create({ model: 'm', messages, ...extra }).then(() => null, (e) => e);
  let e = await bad({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'array', uniqueItems: true } } } });
  check(e instanceof OpenAI.BadRequestError && e.param === 'response_format' && /uniqueItems/.test(e.message),
    `an unsupported keyword: ${e}`);
  e = await bad({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { if: {} } } } } } });
  check(e instanceof OpenAI.BadRequestError && /'if'/.test(e.message) && /properties\/a/.test(e.message),
    `an unsupported keyword, nested: ${e}`);
  e = await bad({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { $ref: 'http://x/y' } } } });
  check(e instanceof OpenAI.BadRequestError && /\$ref/.test(e.message), `a remote $ref: ${e}`);
  e = await bad({ response_format: { type: 'xml' } });
  check(e instanceof OpenAI.BadRequestError && e.param === 'response_format', `an unknown format type: ${e}`);
  e = await bad({ grammar: 'root ::= undefined-rule' });
  check(e instanceof OpenAI.BadRequestError && e.param === 'grammar' && /undefined/.test(e.message), `a bad grammar: ${e}`);
  e = await bad({ grammar: 'root ::= "a"', response_format: { type: 'json_object' } });
  check(e instanceof OpenAI.BadRequestError && e.param === 'grammar', `grammar and response_format: ${e}`);
  // the server still answers after all that
  const after = await ask({ max_tokens: 4, temperature: 0 }, false);
  check(typeof after.content === 'string', `a plain request afterwards: ${JSON.stringify(after)}`);
} catch (err) {
  check(false, `unexpected: ${err && err.stack ? err.stack : err}`);
} finally {
  p.kill('SIGTERM');
  await new Promise((r) => p.once('exit', r));
}
writeFileSync(OUT, JSON.stringify({ results, checks }));
