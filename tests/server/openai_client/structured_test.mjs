// Structured outputs and tool calls through the official `openai` npm client, the outputs
// checked by an independent JSON Schema validator (ajv):
//   node structured_test.mjs BASE_URL MODEL API_KEY
// json_schema outputs parse and validate on chat and completions (or end with "length"),
// streamed == non-streamed, vLLM's structured_outputs regex, forced tool calls whose
// arguments validate against the function's parameters, the client's own stream accumulator
// (beta.chat.completions.stream) giving the same tool calls as the non-streamed response, and
// an unsupported schema surfacing as a typed 400. Exits non-zero on failure.
import OpenAI from 'openai';
import Ajv from 'ajv';
import assert from 'node:assert/strict';

const [baseURL, model, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: apiKey || 'none', maxRetries: 0, timeout: 120000 });
const ajv = new Ajv({ strict: false, allErrors: true });
let passed = 0;
async function check(name, fn) {
  await fn();
  passed++;
  console.log(`ok ${name}`);
}

const person = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 12 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    side: { enum: ['french', 'russian'] },
    friends: { type: 'array', items: { type: 'string', maxLength: 8 }, maxItems: 3 },
    rank: { anyOf: [{ type: 'null' }, { type: 'string', enum: ['count', 'prince'] }] },
  },
  required: ['name', 'age', 'side'],
  additionalProperties: false,
};
const validPerson = ajv.compile(person);
const responseFormat = { type: 'json_schema', json_schema: { name: 'person', schema: person, strict: true } };

function validated(text, validate) {
  const value = JSON.parse(text);
  assert.ok(validate(value), `${text}: ${ajv.errorsText(validate.errors)}`);
  return value;
}

async function streamedText(params, chat) {
  const stream = chat
    ? await client.chat.completions.create({ ...params, stream: true })
    : await client.completions.create({ ...params, stream: true });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text += chat ? (c.delta?.content ?? '') : c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish };
}

await check('chat json_schema: parses, validates, stream == non-stream', async () => {
  let valid = 0;
  for (const seed of [1, 2, 3, 4]) {
    const params = {
      model, messages: [{ role: 'user', content: 'Describe Natasha as JSON.' }], response_format: responseFormat,
      max_tokens: 300, seed, temperature: seed % 2 ? 0.8 : 0,
    };
    const r = await client.chat.completions.create(params);
    const c = r.choices[0];
    const s = await streamedText(params, true);
    assert.equal(s.text, c.message.content);
    assert.equal(s.finish, c.finish_reason);
    if (c.finish_reason === 'length') continue;
    assert.equal(c.finish_reason, 'stop');
    validated(c.message.content, validPerson);
    valid++;
  }
  assert.ok(valid >= 2, `only ${valid} outputs ended before max_tokens`);
});

await check('completions json_schema and json_object', async () => {
  for (const [format, validate] of [[responseFormat, validPerson], [{ type: 'json_object' }, ajv.compile({ type: 'object' })]]) {
    const params = { model, prompt: 'Pierre, as JSON:', response_format: format, max_tokens: 300, seed: 5, temperature: 0.7 };
    const r = await client.completions.create(params);
    const s = await streamedText(params, false);
    assert.equal(s.text, r.choices[0].text);
    if (r.choices[0].finish_reason === 'stop') validated(r.choices[0].text, validate);
  }
});

await check('structured_outputs regex (vLLM extension)', async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'A date?' }], max_tokens: 40, temperature: 1.0, seed: 8,
    structured_outputs: { regex: '(18[0-9]{2})-(0[1-9]|1[0-2])-([0-2][0-9])' },
  });
  assert.match(r.choices[0].message.content, /^18[0-9]{2}-(0[1-9]|1[0-2])-[0-2][0-9]$/);
  assert.equal(r.choices[0].finish_reason, 'stop');
});

const tools = [
  {
    type: 'function',
    function: {
      name: 'book_carriage',
      description: 'Book a carriage',
      parameters: {
        type: 'object',
        properties: { to: { enum: ['Moscow', 'Petersburg'] }, seats: { type: 'integer', minimum: 1, maximum: 4 } },
        required: ['to', 'seats'],
        additionalProperties: false,
      },
    },
  },
  { type: 'function', function: { name: 'ring_bell', parameters: { type: 'object', properties: {} } } },
];
const validArgs = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

await check('forced tool calls: arguments validate, the client accumulator agrees', async () => {
  let checked = 0;
  for (const tool_choice of ['required', { type: 'function', function: { name: 'book_carriage' } }]) {
    // One call each (a weak model given the choice keeps calling until max_tokens).
    const params = {
      model, messages: [{ role: 'user', content: 'Get me to Moscow.' }], tools, tool_choice, parallel_tool_calls: false,
      max_tokens: 200, seed: 4, temperature: 0.6,
    };
    const r = await client.chat.completions.create(params);
    const c = r.choices[0];
    if (c.finish_reason === 'length') continue;
    checked++;
    assert.equal(c.finish_reason, typeof tool_choice === 'string' ? 'tool_calls' : 'stop');
    assert.ok(c.message.tool_calls.length >= 1);
    for (const call of c.message.tool_calls) {
      assert.equal(call.type, 'function');
      if (typeof tool_choice !== 'string') assert.equal(call.function.name, 'book_carriage');
      validated(call.function.arguments, validArgs[call.function.name]);
    }
    const stream = client.beta.chat.completions.stream(params);
    const final = await stream.finalChatCompletion();
    const calls = final.choices[0].message.tool_calls.map((t) => ({ id: t.id, type: t.type, function: t.function }));
    assert.deepEqual(calls.map((t) => t.function), c.message.tool_calls.map((t) => t.function));
    assert.ok(calls.every((t) => t.id.startsWith('call_') && t.type === 'function'));
  }
  assert.ok(checked >= 1, 'every forced call ran to max_tokens');
});

await check('an unsupported schema is a typed 400 naming the construct', async () => {
  const bad = { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { not: {} } } } } };
  await assert.rejects(client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], response_format: bad }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.param, 'response_format.json_schema.schema');
    assert.match(e.message, /'not' is not supported/);
    return true;
  });
});

console.log(`${passed} checks passed`);
