// Bounded load: hundreds of concurrent SSE streams (fetch, each read to the end); every tenth
// client cancels after its first chunk. After each of two such loads the server must be idle with
// nothing leaked: no running or waiting request, KV usage 0, no request in flight, no open
// connection; across the second, the same number of threads and a small growth of anonymous RSS.
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

// The server's threads and anonymous resident memory once the idle engine has released what it
// freed: the smallest seen over 3 s (early if within 32 MB of `baseline`).
async function settledStatus(pid, baseline) {
  let best = procStatus(pid);
  for (let i = 0; i < 30; ++i) {
    if (baseline && best.anonKb - baseline.anonKb < 32 * 1024 && best.threads === baseline.threads) break;
    await sleep(100);
    const now = procStatus(pid);
    if (now.anonKb < best.anonKb) best = now;
  }
  return best;
}

export function loadCases({ base, apiKey, pid, model, streams, body, cancelBody }) {
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` };
  const load = async () => {
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
  };
  return [
    [`${streams} concurrent streams, then nothing left behind`, async () => {
      // Warm-up: the same load once, so that lazily created threads exist and what a full batch
      // grows and keeps for reuse (the engine's buffers at max_num_seqs rows) is there before the
      // baseline is taken. An idle engine gives freed heap memory back to the OS (after 200 ms;
      // before that, the demo model's loop thread kept ~130 MB of freed activations resident,
      // more or less of it by how the load was batched: +3 to +41 MB across one load, measured),
      // so resident size follows what the server holds: the second load then leaves a few MB
      // behind, and more than 32 MB is a leak. Anonymous memory (RssAnon) is what is compared:
      // the checkpoint's mapped pages a load reads for the first time are not the process's own
      // (+3 to +6 MB per load on the demo model, measured). Sampled for up to 3 s after idle,
      // since the release comes after the metrics show idle: a leak stays, the release's lag
      // does not.
      await load();
      const baseline = await settledStatus(pid, null);
      await load();
      const after = await settledStatus(pid, baseline);
      assert.equal(after.threads, baseline.threads, `threads ${baseline.threads} -> ${after.threads}`);
      assert.ok(after.anonKb - baseline.anonKb < 32 * 1024,
        `anonymous RSS grew ${baseline.anonKb} -> ${after.anonKb} kB (VmRSS ${baseline.rssKb} -> ${after.rssKb} kB)`);
    }],
  ];
}
