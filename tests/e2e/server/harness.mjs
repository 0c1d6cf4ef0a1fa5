// Test harness for the server e2e suites: starts a server command on an ephemeral loopback port
// (it must print "listening on http://HOST:PORT"), waits for /health, runs named async cases with
// a timeout each, and always stops the server (SIGTERM, then SIGKILL). Exit codes: 0 all passed,
// 1 a case failed, 77 the server reported it cannot run here (ctest SKIP_RETURN_CODE).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export async function startServer(command, env = {}) {
  const child = spawn(command[0], command.slice(1), {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d;
    if (stderr.length > 200000) stderr = stderr.slice(-100000);
  });
  const killAtExit = () => child.kill('SIGKILL');
  process.on('exit', killAtExit);
  let stdout = '';
  const port = await withTimeout(
    new Promise((resolve, reject) => {
      child.stdout.on('data', (d) => {
        stdout += d;
        const m = /listening on http:\/\/[^:\s]+:(\d+)/.exec(stdout);
        if (m) resolve(Number(m[1]));
      });
      child.on('exit', (code) => reject(Object.assign(new Error(`server exited with ${code}: ${stderr}`), { code })));
    }),
    180000,
    'server start',
  );
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; ++i) {
    try {
      if ((await fetch(`${base}/health`)).ok) break;
    } catch {}
    if (i > 300) throw new Error('server never became healthy');
    await sleep(100);
  }
  return {
    child,
    port,
    base,
    pid: child.pid,
    stderr: () => stderr,
    async stop() {
      process.off('exit', killAtExit);
      if (child.exitCode !== null) return child.exitCode;
      const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)));
      child.kill('SIGTERM');
      try {
        return await withTimeout(exited, 40000, 'server shutdown');
      } catch (e) {
        child.kill('SIGKILL');
        throw e;
      }
    },
  };
}

// Threads and resident memory of a process (Linux /proc), in kB.
export function procStatus(pid) {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const num = (key) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(text)[1]);
  // RssAnon: the process's own memory (heap, stacks, anonymous mappings), where a leak shows;
  // VmRSS adds the pages of mapped files (checkpoint weights) that the process read so far.
  return { threads: num('Threads'), rssKb: num('VmRSS'), anonKb: num('RssAnon') };
}

// One sample of a Prometheus metric (first match of name{labels}).
export function metricValue(text, name) {
  const escaped = name.replace(/[{}"=,.\\/]/g, (c) => `\\${c}`);
  const m = new RegExp(`^${escaped} ([^\\s]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

export async function runCases(cases, { timeoutMs = 60000 } = {}) {
  let failed = 0;
  for (const [name, fn] of cases) {
    const t0 = Date.now();
    try {
      await withTimeout(fn(), timeoutMs, name);
      console.log(`ok    ${name} (${Date.now() - t0} ms)`);
    } catch (e) {
      failed++;
      console.log(`FAIL  ${name}: ${e.stack || e}`);
    }
  }
  console.log(`${cases.length - failed}/${cases.length} passed`);
  return failed;
}
