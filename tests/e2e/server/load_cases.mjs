// Bounded load: hundreds of concurrent SSE streams (fetch, each read to the end); every tenth
// client cancels after its first chunk. Afterwards the server must be idle with nothing leaked:
// no running or waiting request, KV usage 0, no request in flight, no open connection, the same
// number of threads as before the load, and a bounded RSS growth.
import assert from 'node:assert/strict';

import { metricValue, procStatus, sleep } from './harness.mjs';

async function readStream(response, cancelAfterFirstChunk) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    if (cancelAfterFirstChunk) {
      await reader.cancel();
      return 'cancelled';
    }
  }
  return text;
}

export function loadCases({ base, apiKey, pid, model, streams, body, cancelBody }) {
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` };
  return [
    [`${streams} concurrent streams, then nothing left behind`, async () => {
      // Warm-up so lazily created threads exist before the baseline is taken.
      await fetch(`${base}/v1/completions`, { method: 'POST', headers, body: JSON.stringify({ ...body, stream: false }) }).then((r) => r.text());
      const baseline = procStatus(pid);
      const runs = [];
      for (let i = 0; i < streams; ++i) {
        const cancel = i % 10 === 9;
        const payload = { ...(cancel ? cancelBody : body), stream: true, model };
        runs.push(fetch(`${base}/v1/completions`, { method: 'POST', headers, body: JSON.stringify(payload) })
          .then((r) => { assert.equal(r.status, 200); return readStream(r, cancel); }));
      }
      const results = await Promise.all(runs);
      const completed = results.filter((t) => t !== 'cancelled');
      assert.equal(completed.length, streams - Math.floor(streams / 10));
      for (const t of completed) assert.ok(t.endsWith('data: [DONE]\n\n'), t.slice(-200));
      for (let i = 0; ; ++i) {
        const m = await (await fetch(`${base}/metrics`)).text();
        const idle = metricValue(m, 'deepinfer_num_requests_running') === 0 &&
          metricValue(m, 'deepinfer_num_requests_waiting') === 0 &&
          metricValue(m, 'deepinfer_kv_cache_usage_ratio') === 0 &&
          metricValue(m, 'deepinfer_requests_in_flight') === 0 &&
          metricValue(m, 'deepinfer_http_connections') <= 1;
        if (idle) break;
        assert.ok(i < 400, `server not idle after the load:\n${m}`);
        await sleep(50);
      }
      const after = procStatus(pid);
      assert.equal(after.threads, baseline.threads, `threads ${baseline.threads} -> ${after.threads}`);
      assert.ok(after.rssKb - baseline.rssKb < 96 * 1024, `RSS grew ${baseline.rssKb} -> ${after.rssKb} kB`);
    }],
  ];
}
