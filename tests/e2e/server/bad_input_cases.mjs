// Bad input over real HTTP (fetch): every case must get a 4xx JSON error in its API's format, and
// /health must still answer afterwards.
import assert from 'node:assert/strict';

export function badInputCases({ base, apiKey, maxBodyBytes }) {
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${apiKey}`, 'x-api-key': apiKey };
  const post = (path, body) => fetch(`${base}${path}`, { method: 'POST', headers, body });
  async function expectError(response, status, format = 'openai') {
    const text = await response.text();
    assert.equal(response.status, status, text);
    assert.match(response.headers.get('content-type'), /application\/json/);
    const j = JSON.parse(text);
    if (format === 'openai') {
      assert.equal(typeof j.error.message, 'string');
      assert.equal(typeof j.error.type, 'string');
    } else {
      assert.equal(j.type, 'error');
      assert.equal(typeof j.error.type, 'string');
    }
    assert.equal((await fetch(`${base}/health`)).status, 200);
  }
  const chat = '/v1/chat/completions';
  return [
    ['malformed JSON', async () => {
      await expectError(await post(chat, '{"messages": [}'), 400);
      await expectError(await post('/v1/messages', '{"max_tokens": '), 400, 'anthropic');
      await expectError(await post('/v1/responses', 'nope'), 400);
      await expectError(await post('/v1/completions', ''), 400);
    }],
    ['wrong types', async () => {
      await expectError(await post(chat, JSON.stringify({ messages: 'hello' })), 400);
      await expectError(await post(chat, JSON.stringify({ messages: [{ role: 'user', content: 'x' }], max_tokens: 'ten' })), 400);
      await expectError(await post(chat, JSON.stringify({ messages: [{ role: 7 }] })), 400);
      await expectError(await post('/v1/messages', JSON.stringify({ max_tokens: 5, messages: [{ role: 'user', content: 9 }] })), 400, 'anthropic');
      await expectError(await post('/v1/completions', JSON.stringify({ prompt: { a: 1 } })), 400);
    }],
    ['unknown model', async () => {
      const r = await post(chat, JSON.stringify({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }));
      const text = await r.text();
      assert.equal(r.status, 404, text);
      assert.equal(JSON.parse(text).error.code, 'model_not_found');
      await expectError(await post('/v1/messages', JSON.stringify({ model: 'nope', max_tokens: 5, messages: [] })), 404, 'anthropic');
    }],
    ['huge body', async () => {
      const big = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(maxBodyBytes + 1000) }] });
      await expectError(await post(chat, big), 413);
    }],
    ['invalid UTF-8', async () => {
      const bytes = Buffer.concat([Buffer.from('{"messages": [{"role": "user", "content": "'), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from('"}]}')]);
      await expectError(await post(chat, bytes), 400);
      const anthropic = Buffer.concat([Buffer.from('{"max_tokens": 5, "messages": [{"role": "user", "content": "'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}]}')]);
      await expectError(await post('/v1/messages', anthropic), 400, 'anthropic');
    }],
    ['unknown path and method', async () => {
      await expectError(await post('/v1/engines', '{}'), 404);
      await expectError(await fetch(`${base}${chat}`, { headers }), 405);
    }],
  ];
}
