// structured.mjs - structured output through `wgml serve`, asked for with the official OpenAI
// client (npm `openai`) as an agent framework asks for it; tests/test_structured.py runs it and
// validates what it writes.
//
//   node tests/serve/structured.mjs WGML_CLI MODEL SCHEMAS|- OUT [TOOL_MODEL TEMPLATE...]
//
// Each schema of SCHEMAS (a JSON array of {name, schema}) through
// chat.completions.create({response_format: {type: 'json_schema', json_schema: {name, schema,
// strict: true}}}) at three seeds (one greedy, two sampled at temperature 1), one in three
// streamed; then response_format json_object, llama.cpp's `grammar` field (GBNF), and the
// errors (an unsupported keyword, a bad grammar, both at once) as the client raises them.
// Then tool calls, on TOOL_MODEL with each TEMPLATE (--chat-template-file: real templates, e.g.
// Qwen2.5's <tool_call> format and Llama 3.1's JSON): tool_choice required (streamed and not),
// a named function, parallel_tool_calls false, auto, a second turn with the tool's result, and the
// 400s. OUT receives {results: [{name, seed, content, finish_reason}], calls: [{template, choice,
// finish_reason, content, tool_calls}], checks: [{what, ok}]}; test_structured.py validates each
// call's arguments against its function's parameters.
// Exits 77 (skipped) when the client is not installed and CI is not set.
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const [CLI, MODEL, SCHEMAS, OUT, TOOL_MODEL, ...TEMPLATES] = process.argv.slice(2);
let OpenAI;
try {
  OpenAI = createRequire(path.join(here, 'package.json'))('openai').default;
} catch {
  console.log('structured: the openai client is not installed (npm ci --prefix tests/serve)');
  process.exit(process.env.CI ? 1 : 77);
}

async function serve(model, ...extra) {
  const proc = spawn(CLI, ['serve', '-m', model, '--backend', 'cpu', '--port', '0', '--parallel', '2', '--ctx-size', '2048',
    ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => (stderr += d));
  const line = await new Promise((resolve) => {
    const rl = readline.createInterface({ input: proc.stdout });
    rl.once('line', resolve);
    proc.once('exit', () => resolve(''));
  });
  const mm = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/.exec(line);
  if (!mm) {
    console.log(`the server did not start: ${line} ${stderr}`);
    process.exit(1);
  }
  return { proc, client: new OpenAI({ apiKey: 'none', baseURL: `${mm[1]}/v1`, maxRetries: 0, timeout: 120000 }) };
}
const stop = async (proc) => {
  proc.kill('SIGTERM');
  await new Promise((r) => proc.once('exit', r));
};
// SCHEMAS '-': only the tool calls (tests/test_structured.py runs the two parts as two tests)
const { proc: p, client } = SCHEMAS === '-' ? { proc: null, client: null } : await serve(MODEL);
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

if (p) try {
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
  await stop(p);
}

// ---- tool calls
const calls = [];
const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'unit'] } } },
  { type: 'function', function: { name: 'add', description: 'Adds two integers',
    parameters: { type: 'object', properties: { a: { type: 'integer', minimum: -1000, maximum: 1000 },
      b: { type: 'integer', minimum: -1000, maximum: 1000 } }, required: ['a', 'b'] } } },
  { type: 'function', function: { name: 'now', description: 'The time (no parameters)' } },
];
const ask2 = { role: 'user', content: 'What is the weather in Paris, and what is 2 + 3?' };
async function toolCall(tc, template, choice, extra, stream) {
  const req = { model: 'm', messages: [ask2], tools: TOOLS, max_tokens: 300, ...extra };
  if (choice !== undefined) req.tool_choice = choice;
  let r;
  if (!stream) {
    const x = await tc.chat.completions.create(req);
    r = { finish_reason: x.choices[0].finish_reason, content: x.choices[0].message.content, tool_calls: x.choices[0].message.tool_calls || [] };
  } else {
    // the client's stream: tool_calls deltas keyed by index, accumulated as OpenAI's SDK users do
    const acc = [];
    let content = '';
    let finish = null;
    for await (const c of await tc.chat.completions.create({ ...req, stream: true })) {
      for (const ch of c.choices) {
        content += ch.delta.content || '';
        for (const d of ch.delta.tool_calls || []) {
          acc[d.index] = acc[d.index] || { id: '', type: 'function', function: { name: '', arguments: '' } };
          if (d.id) acc[d.index].id = d.id;
          if (d.function && d.function.name) acc[d.index].function.name += d.function.name;
          if (d.function && d.function.arguments) acc[d.index].function.arguments += d.function.arguments;
        }
        if (ch.finish_reason) finish = ch.finish_reason;
      }
    }
    r = { finish_reason: finish, content: content || null, tool_calls: acc };
  }
  calls.push({ template: path.basename(template), choice: typeof choice === 'object' ? choice.function.name : (choice || 'auto'),
    stream, ...r });
  return r;
}
for (const template of TOOL_MODEL ? TEMPLATES : []) {
  const { proc, client: tc } = await serve(TOOL_MODEL, '--chat-template-file', template);
  const t = path.basename(template);
  try {
    for (const seed of [1, 2]) {
      const r = await toolCall(tc, template, 'required', { seed }, seed === 2);
      check(r.finish_reason === 'tool_calls' && r.tool_calls.length >= 1 && r.content === null, `${t}: required: ${JSON.stringify(r)}`);
    }
    const named = await toolCall(tc, template, { type: 'function', function: { name: 'add' } }, { seed: 3 }, false);
    check(named.tool_calls.length === 1 && named.tool_calls[0].function.name === 'add', `${t}: named: ${JSON.stringify(named)}`);
    const one = await toolCall(tc, template, 'required', { seed: 4, parallel_tool_calls: false }, false);
    check(one.tool_calls.length === 1, `${t}: parallel_tool_calls false: ${JSON.stringify(one)}`);
    const none = await toolCall(tc, template, 'none', { seed: 5, max_tokens: 8 }, false);
    check(none.tool_calls.length === 0 && ['stop', 'length'].includes(none.finish_reason), `${t}: none: ${JSON.stringify(none)}`);
    const auto = await toolCall(tc, template, undefined, { seed: 6, max_tokens: 24 }, true);
    check(['stop', 'length', 'tool_calls'].includes(auto.finish_reason), `${t}: auto: ${JSON.stringify(auto)}`);
    // auto where the reply starts a call: logit_bias makes the first token the format's trigger ("{" for
    // Llama 3's JSON calls), and from there the lazy grammar makes it a valid call
    if (/Llama-3/.test(t)) {
      const brace = execFileSync(CLI, ['tokenize', '-m', TOOL_MODEL, '{'], { encoding: 'utf8' }).trim();
      for (const stream of [false, true]) {
        // (one function whose arguments are bounded: the bias goes on pushing "{" wherever the grammar allows it)
        const lazy = await toolCall(tc, template, 'auto', { seed: 7, logit_bias: { [brace]: 100 }, tools: [TOOLS[1]] }, stream);
        check(lazy.finish_reason === 'tool_calls' && lazy.tool_calls.length === 1, `${t}: auto, a call begun: ${JSON.stringify(lazy)}`);
      }
    }
    const e0 = await tc.chat.completions.create({ model: 'm', messages: [ask2], logit_bias: { 99999999: 5 } }).then(() => null, (e) => e);
    check(e0 instanceof OpenAI.BadRequestError && e0.param === 'logit_bias', `${t}: a logit_bias id out of the vocabulary: ${e0}`);
    // a second turn: the call and its result through the template
    const first = calls.find((c) => c.template === t && c.tool_calls.length);
    const x = await tc.chat.completions.create({ model: 'm', tools: TOOLS, max_tokens: 8, temperature: 0, messages: [ask2,
      { role: 'assistant', content: null, tool_calls: first.tool_calls },
      { role: 'tool', tool_call_id: first.tool_calls[0].id, content: '{"temperature": 21}' }] });
    check(x.choices[0].message.role === 'assistant' && x.usage.prompt_tokens > 50, `${t}: second turn: ${JSON.stringify(x)}`);
    const bad = async (extra) => tc.chat.completions.create({ model: 'm', messages: [ask2], max_tokens: 4, ...extra }).then(() => null, (e) => e);
    let e = await bad({ tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } });
    check(e instanceof OpenAI.BadRequestError && e.param === 'tool_choice' && /nope/.test(e.message), `${t}: unknown function: ${e}`);
    e = await bad({ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { not: {} } } } } }] });
    check(e instanceof OpenAI.BadRequestError && e.param === 'tools' && /'not'/.test(e.message), `${t}: bad parameters: ${e}`);
    e = await bad({ tools: [{ type: 'function', function: { name: 'bad name!' } }] });
    check(e instanceof OpenAI.BadRequestError && e.param === 'tools', `${t}: bad name: ${e}`);
    e = await bad({ tools: TOOLS, messages: [ask2, { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function',
      function: { name: 'add', arguments: '{"a": 1,' } }] }, { role: 'tool', tool_call_id: 'c1', content: '3' }] });
    check(e instanceof OpenAI.BadRequestError && e.param === 'messages' && /arguments/.test(e.message), `${t}: unparsable arguments: ${e}`);
    e = await bad({ tools: TOOLS, response_format: { type: 'json_object' } });
    check(e instanceof OpenAI.BadRequestError && e.param === 'tools', `${t}: tools with response_format: ${e}`);
  } catch (err) {
    check(false, `${t}: unexpected: ${err && err.stack ? err.stack : err}`);
  } finally {
    await stop(proc);
  }
}
writeFileSync(OUT, JSON.stringify({ results, checks, calls, tools: TOOLS }));
