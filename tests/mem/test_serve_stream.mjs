// `halo serve` with routed experts streamed from disk (--weights stream, an expert cache of about
// a third of kjv-tiny's experts, two slots): greedy replies equal `halo run --temp 0` with every
// weight resident, for one request alone and for two at once (the server steps both sessions
// together: one batch, one prefetch of the hash-routed layers for both). The server says it
// streams, and its /health stays up. Driven by the real openai SDK (tests/server/lib.mjs).
import { startServer, haloRun, openai, assert, eq, run } from '../server/lib.mjs';

const N = 24;
const PROMPTS = ['In the beginning', 'And the LORD spake unto Moses'];
const reference = PROMPTS.map((p) => haloRun(p, N, ['--weights', 'auto']));
const srv = await startServer(['-np', '2', '--weights', 'stream', '--expert-cache', '2M']);
const client = openai(srv);

async function chat(prompt) {
  const r = await client.chat.completions.create({
    model: 'kjv-tiny',
    messages: [{ role: 'user', content: prompt }],
    max_tokens: N,
    temperature: 0,
  });
  return r.choices[0].message.content;
}

await run(
  [
    ['serve_says_experts_stream', async () => {
      assert(/stream from disk through a .* expert cache/.test(srv.log()),
        `no streaming line in the log:\n${srv.log()}`);
    }],
    ['streamed_reply_equals_resident_halo_run', async () => {
      assert(reference[0].length > 20, `halo run gave too little text: ${reference[0]}`);
      eq(await chat(PROMPTS[0]), reference[0], 'content');
    }],
    ['two_streamed_replies_at_once_equal_resident_ones', async () => {
      const got = await Promise.all(PROMPTS.map(chat));
      eq(got, reference, 'contents');
    }],
    ['health_after_streaming', async () => {
      const r = await fetch(`${srv.base}/health`);
      eq(r.status, 200, 'status');
    }],
  ],
  () => srv.stop(),
);
