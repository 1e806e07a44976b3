// Slots: 8 simultaneous streaming requests each get the tokens they get alone, stepped together
// (far fewer scheduler steps than tokens); a full queue answers 429 with retry-after; a client
// that leaves mid-prefill or mid-decode, streaming or not, frees its slot within a step (seen in
// /metrics); a long prefill sends SSE keep-alive comments before the first token.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, openai, metrics, sleep, assert, eq, run, HALO, MODEL } from './lib.mjs';

const wide = await startServer(['-np', '8']);
const narrow = await startServer(['-np', '1', '--queue', '1', '--keepalive', '0.2']);
const client = openai(wide);

const PROMPTS = ['In the beginning', 'And God said', 'The LORD is my shepherd', 'Blessed is the man',
  'Vanity of vanities', 'And Jesus answered', 'Now the serpent', 'Hear, O Israel'];
const N = 16;

async function streamText(c, prompt) {
  const s = await c.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: prompt }],
    max_tokens: N, temperature: 0, stream: true });
  let t = '';
  for await (const ch of s) t += ch.choices[0]?.delta?.content || '';
  return t;
}

// Starts a streaming request with raw fetch; returns the controller and a reader.
async function openStream(srv, body) {
  const ctl = new AbortController();
  const r = await fetch(`${srv.base}/v1/chat/completions`, {
    method: 'POST', signal: ctl.signal, headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', stream: true, ...body }),
  });
  return { ctl, r, reader: r.status === 200 && r.body ? r.body.getReader() : null };
}

async function waitIdle(srv, ms) {
  const t0 = Date.now();
  for (;;) {
    const m = await metrics(srv);
    if (m.halo_slots_busy === 0 && m.halo_queue_depth === 0) return Date.now() - t0;
    if (Date.now() - t0 > ms) throw new Error(`slots still busy after ${ms} ms: ${JSON.stringify(m)}`);
    await sleep(50);
  }
}

const longMsg = (n) => [{ role: 'user', content: 'And it came to pass that the people went up. '.repeat(n) }];

await run(
  [
    ['slots_that_do_not_fit_are_refused_before_listening', async () => {
      // On a machine profile with ~45 MiB to spare, 64 slots of 4096 tokens do not fit (one does),
      // nor does a 1 GiB prefix cache next to one slot: the server says so and exits before it
      // listens or loads (tests/serve/test_admit.c pins the numbers).
      const dir = mkdtempSync(path.join(os.tmpdir(), 'halo-admit-'));
      const profile = path.join(dir, 'small.json');
      writeFileSync(profile, JSON.stringify({ name: 'small-1100', description: 'test machine',
        sources: ['made up for tests/server/test_slots.mjs'],
        host: { total_mib: 1200, available_mib: 1100, bandwidth_gbs: 10 },
        disk: { kind: 'ssd', read_gbs: 1.0 } }));
      const serve = (...args) => spawnSync(HALO, ['serve', '-m', MODEL, '--port', '0', ...args],
        { env: { ...process.env, HALO_PROFILE: profile }, timeout: 30000 });
      const r = serve('-np', '64', '--ctx', '4096');
      const err = r.stderr.toString();
      eq(r.status, 1, `exit status (stderr: ${err})`);
      assert(/-np 64 --ctx 4096: refused before loading: context state for 64 sequences/.test(err) &&
        /fix: -np \d+/.test(err) && !/listening/.test(err), `stderr: ${err}`);
      // One slot fits, but a prefix cache of 1 GiB does not fit in what it leaves.
      const c = serve('-np', '1', '--ctx', '4096', '--cache-ram', '1G');
      rmSync(dir, { recursive: true });
      const cerr = c.stderr.toString();
      eq(c.status, 1, `exit status (stderr: ${cerr})`);
      assert(/--cache-ram 1.00 GiB does not fit: the weights and 1 slot leave 0.0\d GiB/.test(cerr) &&
        !/listening/.test(cerr), `stderr: ${cerr}`);
    }],
    ['eight_concurrent_streams_equal_each_alone', async () => {
      const alone = [];
      for (const p of PROMPTS) alone.push(await streamText(client, p));
      const before = await metrics(wide);
      const together = await Promise.all(PROMPTS.map((p) => streamText(client, p)));
      const after = await metrics(wide);
      eq(together, alone, 'texts');
      const steps = after.halo_steps_total - before.halo_steps_total;
      const tokens = after.halo_generated_tokens_total - before.halo_generated_tokens_total;
      assert(steps < tokens / 2, `${steps} steps for ${tokens} tokens: not stepped together`);
    }],
    ['a_full_queue_answers_429_with_retry_after', async () => {
      const body = { max_tokens: 400, ignore_eos: true, messages: [{ role: 'user', content: 'Hi' }] };
      const streams = [];
      for (let i = 0; i < 4; i++) streams.push(await openStream(narrow, body));
      const refused = streams.filter((s) => s.r.status === 429);
      assert(refused.length >= 1, `statuses ${streams.map((s) => s.r.status)}`);
      assert(Number(refused[0].r.headers.get('retry-after')) >= 1, 'retry-after');
      const err = await refused[0].r.json();
      eq(err.error.type, 'rate_limit_error', 'error type');
      for (const s of streams) s.ctl.abort();
      await waitIdle(narrow, 10000);
    }],
    ['a_client_leaving_mid_decode_frees_its_slot', async () => {
      const before = await metrics(narrow);
      const s = await openStream(narrow, { max_tokens: 3000, ignore_eos: true,
        messages: [{ role: 'user', content: 'Hi' }] });
      await s.reader.read();
      await s.reader.read();
      const busy = await metrics(narrow);
      eq(busy.halo_slots_busy, 1, 'busy while streaming');
      s.ctl.abort();
      const took = await waitIdle(narrow, 5000);
      const after = await metrics(narrow);
      eq(after.halo_requests_cancelled_total - before.halo_requests_cancelled_total, 1, 'cancelled');
      assert(after.halo_generated_tokens_total - before.halo_generated_tokens_total < 3000,
        'generation went on');
      console.log(`     slot free ${took} ms after the abort`);
    }],
    ['a_client_leaving_a_non_streaming_request_frees_its_slot', async () => {
      const before = await metrics(narrow);
      const ctl = new AbortController();
      const p = fetch(`${narrow.base}/v1/chat/completions`, {
        method: 'POST', signal: ctl.signal, headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', max_tokens: 3000, ignore_eos: true,
          messages: [{ role: 'user', content: 'Hi' }] }),
      }).catch(() => null);
      for (let i = 0; i < 100 && (await metrics(narrow)).halo_slots_busy === 0; i++) await sleep(20);
      ctl.abort();
      await p;
      await waitIdle(narrow, 5000);
      const after = await metrics(narrow);
      eq(after.halo_requests_cancelled_total - before.halo_requests_cancelled_total, 1, 'cancelled');
    }],
    ['a_long_prefill_sends_keepalives_and_stops_when_the_client_leaves', async () => {
      const before = await metrics(narrow);
      // ~2000 prompt tokens take seconds to prefill; the keep-alive comes after 0.2 s, so the
      // abort lands well inside the prefill even on a fast machine (at 90 and 1 s it raced).
      const s = await openStream(narrow, { max_tokens: 10, messages: longMsg(180) });
      eq(s.r.status, 200, 'headers at once');
      const dec = new TextDecoder();
      let text = '';
      const t0 = Date.now();
      while (!text.includes(': keep-alive') && Date.now() - t0 < 20000) {
        const { value, done } = await s.reader.read();
        if (done) break;
        text += dec.decode(value);
      }
      // The role chunk goes out when a slot takes the request; then comments until a token.
      assert(text.includes(': keep-alive') && !/"content":"[^"]/.test(text),
        `no keep-alive before the first token: ${JSON.stringify(text.slice(0, 300))}`);
      s.ctl.abort();
      await waitIdle(narrow, 15000);
      const after = await metrics(narrow);
      eq(after.halo_generated_tokens_total - before.halo_generated_tokens_total, 0,
        'no token generated: stopped in the prefill');
      eq(after.halo_requests_cancelled_total - before.halo_requests_cancelled_total, 1, 'cancelled');
    }],
  ],
  async () => {
    const a = await wide.stop();
    const b = await narrow.stop();
    if (a || b) console.log(wide.log(), narrow.log());
    return a || b;
  },
);
