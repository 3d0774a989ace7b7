// The official `openai` npm client against a running tarmac server:
//   node client_test.mjs BASE_URL MODEL API_KEY
// Chat and completions, streaming and not, n > 1, stop, seed reproducibility, logprobs,
// usage, and an error surfacing as the client's typed APIError. Exits non-zero on failure.
import OpenAI from 'openai';
import assert from 'node:assert/strict';

const [baseURL, model, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: apiKey || 'none', maxRetries: 0, timeout: 60000 });
const messages = [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Who is Prince Andrew?' }];
let passed = 0;
async function check(name, fn) {
  await fn();
  passed++;
  console.log(`ok ${name}`);
}

await check('models.list', async () => {
  const list = await client.models.list();
  assert.ok(list.data.some((m) => m.id === model));
});

await check('chat non-stream', async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 16, seed: 3 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

await check('chat stream equals non-stream (seed)', async () => {
  const params = { model, messages, max_tokens: 20, seed: 11, temperature: 0.9 };
  const plain = await client.chat.completions.create(params);
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, plain.choices[0].message.content);
  assert.equal(finish, plain.choices[0].finish_reason);
  assert.equal(usage.completion_tokens, plain.usage.completion_tokens);
});

await check('seed reproducibility', async () => {
  const p = { model, prompt: 'Natasha', max_tokens: 16, seed: 42, temperature: 1.0 };
  const a = await client.completions.create(p);
  const b = await client.completions.create(p);
  assert.equal(a.choices[0].text, b.choices[0].text);
});

await check('completions n > 1, stream and not', async () => {
  const p = { model, prompt: 'Pierre said', max_tokens: 12, n: 3, seed: 5, temperature: 1.0 };
  const r = await client.completions.create(p);
  assert.equal(r.choices.length, 3);
  assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1, 2]);
  const texts = ['', '', ''];
  const stream = await client.completions.create({ ...p, stream: true });
  for await (const chunk of stream) for (const c of chunk.choices) texts[c.index] += c.text;
  for (const c of r.choices) assert.equal(texts[c.index], c.text);
});

await check('stop', async () => {
  const base = await client.completions.create({ model, prompt: 'The army', max_tokens: 30, temperature: 0 });
  const text = base.choices[0].text;
  const stop = text.slice(3, 5);
  const r = await client.completions.create({ model, prompt: 'The army', max_tokens: 30, temperature: 0, stop: [stop] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].text, text.slice(0, text.indexOf(stop)));
});

await check('logprobs (completions and chat)', async () => {
  const r = await client.completions.create({ model, prompt: 'Moscow', max_tokens: 5, logprobs: 2, temperature: 0 });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, lp.token_logprobs.length);
  assert.ok(lp.token_logprobs.every((x) => x <= 0));
  assert.equal(Object.keys(lp.top_logprobs[0]).length >= 1, true);
  const c = await client.chat.completions.create({ model, messages, max_tokens: 4, logprobs: true, top_logprobs: 3 });
  const content = c.choices[0].logprobs.content;
  assert.ok(content.length >= 1);
  assert.equal(content[0].top_logprobs.length, 3);
});

await check('errors are typed APIErrors', async () => {
  await assert.rejects(client.completions.create({ model, prompt: 'x', max_tokens: -3 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.status, 400);
    assert.equal(e.param, 'max_tokens');
    return true;
  });
  await assert.rejects(client.completions.create({ model: 'no-such-model', prompt: 'x' }), (e) => e.status === 404);
});

console.log(`${passed} checks passed`);
