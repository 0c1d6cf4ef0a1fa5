// Entry point of the server e2e tests (registered in ctest by CMakeLists.txt):
//   node run_server_tests.mjs [--scripted] [--suites sdk,bad,load] [--streams N] [--load-tokens N] [--max-body N]
//                             [--api-key K] [--model NAME] -- SERVER_COMMAND...
// SERVER_COMMAND must listen on an ephemeral port and print "listening on http://HOST:PORT".
import { badInputCases } from './bad_input_cases.mjs';
import { runCases, startServer } from './harness.mjs';
import { loadCases } from './load_cases.mjs';
import { sdkCases } from './sdk_cases.mjs';

const argv = process.argv.slice(2);
const dash = argv.indexOf('--');
if (dash < 0) {
  console.error('usage: run_server_tests.mjs [options] -- SERVER_COMMAND...');
  process.exit(2);
}
const opts = { scripted: false, suites: 'sdk,bad,load', streams: 200, loadTokens: 24, maxBody: 1 << 20, apiKey: 'test-key',
  model: 'deepseek-v4-flash' };
for (let i = 0; i < dash; ++i) {
  const key = argv[i];
  if (key === '--scripted') opts.scripted = true;
  else if (key === '--suites') opts.suites = argv[++i];
  else if (key === '--streams') opts.streams = Number(argv[++i]);
  else if (key === '--load-tokens') opts.loadTokens = Number(argv[++i]);
  else if (key === '--max-body') opts.maxBody = Number(argv[++i]);
  else if (key === '--api-key') opts.apiKey = argv[++i];
  else if (key === '--model') opts.model = argv[++i];
  else { console.error(`unknown option ${key}`); process.exit(2); }
}

let server;
try {
  server = await startServer(argv.slice(dash + 1), { FAKE_SERVE_API_KEY: opts.apiKey, FAKE_SERVE_QUIET: '1' });
} catch (e) {
  if (e.code === 77) {
    console.log(`skipped: ${e.message}`);
    process.exit(77);
  }
  console.error(String(e));
  process.exit(1);
}
const ctx = { base: server.base, pid: server.pid, apiKey: opts.apiKey, model: opts.model, scripted: opts.scripted,
  maxBodyBytes: opts.maxBody, streams: opts.streams,
  // Token-id prompts work with every model, including micro ones whose vocabulary has no chat tokens.
  body: { model: opts.model, prompt: [1, 20, 30, 40], max_tokens: opts.loadTokens, temperature: 0 },
  // Clients that cancel ask for a long answer (the fake engine's "[[long]]" script).
  cancelBody: opts.scripted ? { model: opts.model, prompt: 'Sing [[long]]', max_tokens: 4000 }
    : { model: opts.model, prompt: [1, 20, 30, 40], max_tokens: 1000 } };
const cases = [];
const suites = opts.suites.split(',');
if (suites.includes('sdk')) cases.push(...sdkCases(ctx));
if (suites.includes('bad')) cases.push(...badInputCases(ctx));
if (suites.includes('load')) cases.push(...loadCases(ctx));
let failed = await runCases(cases, { timeoutMs: 120000 });
const code = await server.stop().catch((e) => e.message);
if (code !== 0) {
  console.log(`FAIL  server exit: ${code}\n${server.stderr().slice(-4000)}`);
  failed++;
} else {
  console.log('ok    server drained and exited 0');
}
process.exit(failed === 0 ? 0 : 1);
