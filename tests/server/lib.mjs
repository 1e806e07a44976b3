// Shared by the server tests: start the real `halo serve` process on the embedded model, load
// the real SDKs (scripts/fetch-sdks.sh installs them), run `halo run` for reference output, and
// a tiny runner that reports each named check.
import { spawn, execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import path from 'node:path';

export const HALO = process.argv[2];
export const ROOT = process.argv[3] || process.cwd();
export const MODEL = path.join(ROOT, 'models/kjv-tiny.gguf');

const sdkDir = path.join(ROOT, 'third_party/server-sdks');
if (!existsSync(path.join(sdkDir, 'node_modules/openai/package.json'))) {
  console.error(`SDKs missing in ${sdkDir}: run scripts/fetch-sdks.sh (scripts/deps.sh does)`);
  process.exit(1);
}
const require = createRequire(path.join(sdkDir, 'package.json'));
export const OpenAI = require('openai').OpenAI;
export const Anthropic = require('@anthropic-ai/sdk').Anthropic;

// Starts `halo serve` on a free port; resolves when it says it is ready.
export function startServer(args = []) {
  return new Promise((resolve, reject) => {
    const proc = spawn(HALO, ['serve', '-m', MODEL, '--port', '0', '--threads', '1', ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let log = '';
    let port = 0;
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 60000);
    proc.stderr.on('data', (d) => {
      log += d;
      const m = log.match(/listening on http:\/\/[^:]+:(\d+)/);
      if (m) port = Number(m[1]);
      if (port && /ready:/.test(log)) {
        clearTimeout(timer);
        const base = `http://127.0.0.1:${port}`;
        resolve({
          port,
          base,
          proc,
          log: () => log,
          stop: () =>
            new Promise((res) => {
              if (proc.exitCode !== null) return res(proc.exitCode);
              proc.on('exit', (code, sig) => res(code ?? sig));
              proc.kill('SIGTERM');
            }),
        });
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${log}`));
    });
  });
}

// `halo run` greedy on the same model: the reference the API must reproduce.
export function haloRun(prompt, n, extra = []) {
  const out = execFileSync(
    HALO,
    ['run', '-m', MODEL, '-p', prompt, '-n', String(n), '--temp', '0', '--threads', '1', ...extra],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  ).toString();
  return out.endsWith('\n') ? out.slice(0, -1) : out; // halo run ends the line itself
}

export function openai(srv, key = 'none', opts = {}) {
  return new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: key, maxRetries: 0, ...opts });
}

export function anthropic(srv, key = 'none', opts = {}) {
  return new Anthropic({ baseURL: srv.base, apiKey: key, maxRetries: 0, ...opts });
}

export async function metrics(srv) {
  const text = await (await fetch(`${srv.base}/metrics`)).text();
  const out = {};
  for (const line of text.split('\n')) {
    const m = line.match(/^(\w+) ([\d.]+)$/);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}

export function eq(got, want, what) {
  const g = JSON.stringify(got);
  const w = JSON.stringify(want);
  if (g !== w) throw new Error(`${what}: got ${g}, want ${w}`);
}

// Runs named checks in order; prints each; exits non-zero if any failed.
export async function run(checks, cleanup) {
  let failed = 0;
  for (const [name, fn] of checks) {
    const t0 = Date.now();
    try {
      await fn();
      console.log(`ok   ${name} (${Date.now() - t0} ms)`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
    }
  }
  // The servers must stop cleanly on SIGTERM: exit status 0 (under ASan: no leaks either).
  const rc = cleanup ? await cleanup() : 0;
  if (rc) {
    failed++;
    console.log(`FAIL server_exits_cleanly: exit status ${rc}`);
  }
  console.log(failed ? `${failed} of ${checks.length} failed` : `all ${checks.length} passed`);
  process.exit(failed ? 1 : 0);
}
