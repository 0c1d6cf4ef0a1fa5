// Conformance cases with the official SDKs (openai, @anthropic-ai/sdk): chat (plain and
// streamed, with reasoning_content and usage), a tools round trip (plain and through the SDK's
// streaming accumulator), Responses (plain, event stream, function-call round trip), Anthropic
// Messages (plain, stream accumulator, tool_use round trip), SDK error classes, and a client
// that cancels mid-stream. `scripted` = the fake engine (exact texts are known); otherwise only
// shapes are checked (a random-weight model says anything).
import assert from 'node:assert/strict';

import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

import { metricValue, sleep } from './harness.mjs';

const weatherParams = {
  type: 'object',
  properties: { city: { type: 'string' } },
  required: ['city'],
};

export function sdkCases({ base, model, apiKey, scripted }) {
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 60000 });
  const anthropic = new Anthropic({ baseURL: base, apiKey, maxRetries: 0, timeout: 60000 });
  // A random-weight model says anything: greedy and seeded, so a run is reproducible.
  const sampling = scripted ? {} : { temperature: 0, seed: 7 };
  const chatTools = [{ type: 'function', function: { name: 'get_weather', description: 'Current weather', parameters: weatherParams } }];
  const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];

  const cases = [
    ['models.list', async () => {
      const ids = [];
      for await (const m of openai.models.list()) ids.push(m.id);
      assert.ok(ids.includes(model), `models: ${ids}`);
    }],
    ['chat.completions.create', async () => {
      const r = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'Say hello' }], max_tokens: 48, ...sampling });
      assert.equal(r.object, 'chat.completion');
      assert.equal(r.choices.length, 1);
      assert.equal(r.choices[0].message.role, 'assistant');
      assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
      assert.ok(r.usage.prompt_tokens > 0);
      assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
      if (scripted) {
        assert.equal(r.choices[0].message.content, 'Hello from DeepInfer!');
        assert.equal(r.choices[0].message.reasoning_content, 'I should answer briefly.');
        assert.equal(r.choices[0].finish_reason, 'stop');
      }
    }],
    ['chat.completions stream with include_usage', async () => {
      const stream = await openai.chat.completions.create({
        model, messages: [{ role: 'user', content: 'Say hello' }], max_tokens: 48, stream: true,
        stream_options: { include_usage: true }, ...sampling,
      });
      let content = '', reasoning = '', finish = null, usage = null, n = 0;
      for await (const chunk of stream) {
        n++;
        assert.equal(chunk.object, 'chat.completion.chunk');
        if (chunk.usage) usage = chunk.usage;
        for (const c of chunk.choices) {
          content += c.delta.content ?? '';
          reasoning += c.delta.reasoning_content ?? '';
          if (c.finish_reason) finish = c.finish_reason;
        }
      }
      assert.ok(n >= 3);
      assert.ok(usage && usage.completion_tokens > 0, 'usage chunk');
      assert.ok(['stop', 'length'].includes(finish));
      if (scripted) {
        assert.equal(content, 'Hello from DeepInfer!');
        assert.equal(reasoning, 'I should answer briefly.');
      }
    }],
    ['chat.completions n=2 and logprobs', async () => {
      const r = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'Say hello' }], max_tokens: 16, n: 2, logprobs: true, top_logprobs: 2, seed: 7 });
      assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
      for (const c of r.choices) {
        assert.ok(c.logprobs.content.length > 0);
        assert.equal(typeof c.logprobs.content[0].logprob, 'number');
        assert.ok(c.logprobs.content[0].top_logprobs.length <= 2);
      }
    }],
  ];
  if (scripted) {
    cases.push(
      ['chat tools round trip', async () => {
        const first = await openai.chat.completions.create({ model, messages: ask, tools: chatTools });
        assert.equal(first.choices[0].finish_reason, 'tool_calls');
        const call = first.choices[0].message.tool_calls[0];
        assert.equal(call.type, 'function');
        assert.equal(call.function.name, 'get_weather');
        assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris' });
        const second = await openai.chat.completions.create({
          model, tools: chatTools,
          messages: [...ask, first.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '{"temp": 21}' }],
        });
        assert.equal(second.choices[0].message.content, 'The weather in Paris is 21 degrees and sunny.');
      }],
      ['chat tools through the stream accumulator', async () => {
        const runner = openai.chat.completions.stream({ model, messages: ask, tools: chatTools });
        const final = await runner.finalChatCompletion();
        const message = final.choices[0].message;
        assert.equal(final.choices[0].finish_reason, 'tool_calls');
        assert.equal(message.tool_calls.length, 1);
        assert.equal(message.tool_calls[0].function.name, 'get_weather');
        assert.deepEqual(JSON.parse(message.tool_calls[0].function.arguments), { city: 'Paris' });
        assert.ok(!message.content, `no markup as content: ${message.content}`);
      }],
      ['responses function-call round trip', async () => {
        const tools = [{ type: 'function', name: 'get_weather', parameters: weatherParams, strict: false }];
        const first = await openai.responses.create({ model, input: 'What is the weather in Paris?', tools });
        const fc = first.output.find((o) => o.type === 'function_call');
        assert.ok(fc, JSON.stringify(first.output));
        assert.deepEqual(JSON.parse(fc.arguments), { city: 'Paris' });
        const second = await openai.responses.create({
          model, tools,
          input: [{ role: 'user', content: 'What is the weather in Paris?' }, ...first.output,
            { type: 'function_call_output', call_id: fc.call_id, output: '{"temp": 21}' }],
        });
        assert.equal(second.output_text, 'The weather in Paris is 21 degrees and sunny.');
      }],
      ['messages tool_use round trip (stream accumulator)', async () => {
        const tools = [{ name: 'get_weather', description: 'Current weather', input_schema: weatherParams }];
        const first = await anthropic.messages.stream({ model, max_tokens: 256, tools, messages: ask }).finalMessage();
        assert.equal(first.stop_reason, 'tool_use');
        const use = first.content.find((b) => b.type === 'tool_use');
        assert.deepEqual(use.input, { city: 'Paris' });
        const second = await anthropic.messages.create({
          model, max_tokens: 256, tools,
          messages: [...ask, { role: 'assistant', content: first.content },
            { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '21 degrees' }] }],
        });
        assert.equal(second.content.find((b) => b.type === 'text').text, 'The weather in Paris is 21 degrees and sunny.');
      }],
    );
  }
  cases.push(
    ['responses.create and responses.stream', async () => {
      const r = await openai.responses.create({ model, input: 'Say hello', max_output_tokens: 48, ...sampling });
      assert.equal(r.object, 'response');
      assert.ok(['completed', 'incomplete'].includes(r.status));
      assert.ok(r.usage.input_tokens > 0);
      if (scripted) assert.equal(r.output_text, 'Hello from DeepInfer!');
      const stream = openai.responses.stream({ model, input: 'Say hello', max_output_tokens: 48, ...sampling });
      const types = [];
      for await (const event of stream) types.push(event.type);
      const final = await stream.finalResponse();
      assert.equal(types[0], 'response.created');
      assert.ok(['response.completed', 'response.incomplete'].includes(types.at(-1)), types.at(-1));
      if (scripted) assert.equal(final.output_text, 'Hello from DeepInfer!');
    }],
    ['messages.create and messages.stream', async () => {
      const m = await anthropic.messages.create({ model, max_tokens: 48, messages: [{ role: 'user', content: 'Say hello' }], ...sampling });
      assert.equal(m.type, 'message');
      assert.equal(m.role, 'assistant');
      assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason));
      assert.ok(m.usage.input_tokens > 0);
      const stream = anthropic.messages.stream({ model, max_tokens: 48, messages: [{ role: 'user', content: 'Say hello' }], ...sampling });
      const types = [];
      stream.on('streamEvent', (e) => types.push(e.type));
      const final = await stream.finalMessage();
      assert.equal(types[0], 'message_start');
      assert.equal(types.at(-1), 'message_stop');
      if (scripted) {
        assert.deepEqual(m.content.map((b) => b.type), ['thinking', 'text']);
        assert.equal(m.content[1].text, 'Hello from DeepInfer!');
        assert.equal(final.content.find((b) => b.type === 'text').text, 'Hello from DeepInfer!');
      }
    }],
    ['SDK error classes', async () => {
      await assert.rejects(
        openai.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }),
        (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && /no-such-model/.test(e.message));
      await assert.rejects(
        anthropic.messages.create({ model, max_tokens: 5, messages: [{ role: 'system', content: 'x' }] }),
        (e) => e instanceof Anthropic.BadRequestError && e.status === 400);
      const badKey = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'wrong', maxRetries: 0 });
      if (apiKey) {
        await assert.rejects(badKey.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
      }
    }],
    ['cancel mid-stream frees the request', async () => {
      const before = await (await fetch(`${base}/metrics`)).text();
      const disconnectsBefore = metricValue(before, 'deepinfer_client_disconnects_total');
      const info = await openai.models.retrieve(model);
      const ac = new AbortController();
      const stream = await openai.chat.completions.create(
        { model, messages: [{ role: 'user', content: 'Sing [[long]]' }], max_tokens: Math.min(2000, info.max_model_len - 64),
          stream: true, ...sampling },
        { signal: ac.signal });
      let n = 0;
      try {
        for await (const _ of stream) {
          if (++n === 5) {
            ac.abort();
            break;
          }
        }
      } catch (e) {
        assert.ok(e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError', String(e));
      }
      assert.equal(n, 5);
      for (let i = 0; ; ++i) {
        const m = await (await fetch(`${base}/metrics`)).text();
        const done = metricValue(m, 'deepinfer_client_disconnects_total') === disconnectsBefore + 1 &&
          metricValue(m, 'deepinfer_num_requests_running') === 0 && metricValue(m, 'deepinfer_requests_in_flight') === 0 &&
          metricValue(m, 'deepinfer_kv_cache_usage_ratio') === 0;
        if (done) break;
        assert.ok(i < 200, `not freed after cancel:\n${m}`);
        await sleep(50);
      }
    }],
  );
  return cases;
}
