// Prompt reuse through the real SDKs, as agents use a server: every turn resends the whole
// conversation. The second turn evaluates only its new tokens (the first turn's prompt and reply
// are reused: usage and /metrics say how many); a conversation that another one pushed out of
// the only slot comes back from the prefix cache in RAM (--cache-ram), and after a restart from
// the one on disk (--kv-dir); every reply equals the same request's reply on a server that never
// saw the conversation (a cold run), greedy, token for token.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, openai, anthropic, metrics, assert, eq, run } from './lib.mjs';

const kvdir = mkdtempSync(path.join(os.tmpdir(), 'halo-kv-'));
let warm = await startServer(['-np', '1', '--cache-ram', '64M', '--kv-dir', kvdir]);
const plain = await startServer(['-np', '1']);
const cold = await startServer(['-np', '1']);

const N = 12;
const user = (content) => ({ role: 'user', content });
const A1 = [user('In the beginning God created the heaven and the earth. What came next?')];
const B1 = [user('The LORD is my shepherd; I shall not want. Say more.')];

async function ask(srv, messages) {
  const r = await openai(srv).chat.completions.create({ model: 'm', messages, max_tokens: N,
    temperature: 0 });
  return { text: r.choices[0].message.content, prompt: r.usage.prompt_tokens,
    completion: r.usage.completion_tokens, cached: r.usage.prompt_tokens_details.cached_tokens };
}

// The slot holds the first turn's prompt and every reply token but the last one sampled (it
// was never evaluated: the request ended with it), so that is what the next turn reuses.
const held = (t) => t.prompt + t.completion - 1;
const turn2 = (m1, t1, q) => [...m1, { role: 'assistant', content: t1.text }, user(q)];
const evaluated = async (srv) => (await metrics(srv)).halo_prompt_tokens_evaluated_total;

const checks = [];
let a1;
let a2;
let a2msgs;
checks.push(['a_second_turn_evaluates_only_its_new_tokens', async () => {
  a1 = await ask(warm, A1);
  a2msgs = turn2(A1, a1, 'And then?');
  const before = await evaluated(warm);
  a2 = await ask(warm, a2msgs);
  const spent = (await evaluated(warm)) - before;
  console.log(`     turn 2: ${a2.prompt} prompt tokens, ${a2.cached} reused, ${spent} evaluated` +
    ` (turn 1 held ${held(a1)})`);
  eq(a2.cached, held(a1), 'reused = the first turn\'s prompt and reply');
  eq(spent, a2.prompt - held(a1), 'evaluated (metrics) = the new tokens only');
  const ref = await ask(cold, a2msgs);
  eq([a2.text, a2.prompt], [ref.text, ref.prompt], 'reply = a cold run\'s');
}]);

checks.push(['a_displaced_conversation_comes_back_from_the_ram_cache', async () => {
  // One slot: B's first turn replaces A's state in it. Without a cache A's next turn starts
  // over; with one it resumes where A left off.
  const a3msgs = turn2(A1, a1, 'Tell me of the light.');
  const b1 = await ask(warm, B1);
  const a3 = await ask(warm, a3msgs);
  eq(a3.cached, held(a1), 'reused from the RAM cache');
  await ask(plain, A1);
  await ask(plain, B1);
  const p3 = await ask(plain, a3msgs);
  assert(p3.cached < 10, `without a cache only the shared opening is reused: ${p3.cached}`);
  const ref = await ask(cold, a3msgs);
  eq([a3.text, p3.text], [ref.text, ref.text], 'replies = a cold run\'s');
  console.log(`     A's next turn after B: ${a3.cached} of ${a3.prompt} reused with the cache,` +
    ` ${p3.cached} without (B held ${held(b1)})`);
}]);

checks.push(['a_restarted_server_resumes_from_the_disk_cache', async () => {
  // The states went to disk in the background; stopping waits for them. The new process has no
  // RAM cache: the state comes from the file (verified). A's third turn, through the Anthropic
  // SDK, resumes from the end of its second.
  eq(await warm.stop(), 0, 'clean exit');
  warm = await startServer(['-np', '1', '--kv-dir', kvdir]);
  const body = { model: 'm', max_tokens: N, temperature: 0,
    messages: [...a2msgs, { role: 'assistant', content: a2.text }, user('Who said so?')] };
  const m = await anthropic(warm).messages.create(body);
  const u = m.usage;
  console.log(`     after a restart: ${u.cache_read_input_tokens} read from disk,` +
    ` ${u.input_tokens} evaluated`);
  eq(u.cache_read_input_tokens, held(a2), 'cache_read_input_tokens');
  const ref = await anthropic(cold).messages.create(body);
  eq([m.content[0].text, u.input_tokens + u.cache_read_input_tokens],
    [ref.content[0].text, ref.usage.input_tokens + ref.usage.cache_read_input_tokens],
    'reply = a cold run\'s');
}]);

await run(checks, async () => {
  let rc = 0;
  for (const s of [warm, plain, cold]) {
    const r = await s.stop();
    if (r) {
      console.log(s.log());
      rc = r;
    }
  }
  rmSync(kvdir, { recursive: true });
  return rc;
});
