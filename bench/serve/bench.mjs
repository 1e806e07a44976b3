// halo serve under concurrent streams, and a load run. Not a test: figures go to RESULTS.md.
//
//   node bench/serve/bench.mjs BASE_URL streams [TOKENS]      aggregate decode tok/s
//   node bench/serve/bench.mjs BASE_URL load CONNS SECONDS PID  load run, memory of PID
//
// streams: for 1, 4 and 8 concurrent chat requests (distinct prompts, greedy, ignore_eos), the
// aggregate decode rate from the difference between requests of 8 and 8 + TOKENS tokens (see
// streams() below), and the ratio to one stream. Token counts come from the API's usage, so
// models without a vocabulary (served with --tokenizer) are measured the same way. load: CONNS clients loop on short non-streaming requests for
// SECONDS; counts statuses (429 is backpressure, anything else non-200 an error) and samples
// the server's resident memory every 5 s.
import { readFileSync } from 'node:fs';

const [base, mode, a1, a2, a3] = process.argv.slice(2);
const PROMPTS = ['In the beginning', 'And God said', 'The LORD is my shepherd', 'Blessed is the man',
  'Vanity of vanities', 'And Jesus answered', 'Now the serpent', 'Hear, O Israel'];

async function complete(prompt, tokens) {
  const r = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', temperature: 0, ignore_eos: true,
      max_tokens: tokens, messages: [{ role: 'user', content: prompt }] }),
  });
  const j = await r.json();
  if (j.usage?.completion_tokens !== tokens) throw new Error(`got ${JSON.stringify(j).slice(0, 200)}`);
}

// Wall time of c concurrent requests of `tokens` tokens each (prompts already in the slots).
// The median of three runs: the machine this was written on was shared and loaded.
async function wall(c, tokens) {
  const runs = [];
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    await Promise.all(PROMPTS.slice(0, c).map((p) => complete(p, tokens)));
    runs.push((performance.now() - t0) / 1000);
  }
  return runs.sort((a, b) => a - b)[1];
}

// Aggregate decode rate: c streams of T2 tokens against c streams of T1, so the prefill, the
// first token and HTTP costs cancel: c * (T2 - T1) / (wall(T2) - wall(T1)).
async function streams(tokens) {
  const t1 = 8;
  const t2 = t1 + tokens;
  const rows = [];
  let one = 0;
  for (const c of [1, 4, 8]) {
    await wall(c, 1); // puts each prompt in a slot: later requests evaluate one prompt token
    const w1 = await wall(c, t1);
    const w2 = await wall(c, t2);
    const rate = (c * (t2 - t1)) / (w2 - w1);
    if (c === 1) one = rate;
    rows.push(`| ${c} | ${w1.toFixed(2)} | ${w2.toFixed(2)} | ${rate.toFixed(1)} | ` +
      `${(rate / one).toFixed(2)} |`);
  }
  console.log(`| streams | wall ${t1} tokens s | wall ${t2} tokens s | aggregate decode tok/s | vs 1 stream |`);
  console.log('|---:|---:|---:|---:|---:|');
  for (const r of rows) console.log(r);
}

function rssKiB(pid) {
  const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/);
  return m ? Number(m[1]) : NaN;
}

async function load(conns, seconds, pid) {
  const statuses = {};
  let errors = 0;
  const stopAt = Date.now() + seconds * 1000;
  const rss = [rssKiB(pid)];
  const sampler = setInterval(() => rss.push(rssKiB(pid)), 5000);
  let i = 0;
  await Promise.all(Array.from({ length: conns }, async () => {
    while (Date.now() < stopAt) {
      try {
        const r = await fetch(`${base}/v1/chat/completions`, {
          method: 'POST', headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', max_tokens: 8, temperature: 0.7,
            messages: [{ role: 'user', content: PROMPTS[i++ % PROMPTS.length] }] }),
        });
        await r.arrayBuffer();
        statuses[r.status] = (statuses[r.status] || 0) + 1;
        if (r.status === 429) await new Promise((res) => setTimeout(res, 200));
      } catch {
        errors++;
      }
    }
  }));
  clearInterval(sampler);
  rss.push(rssKiB(pid));
  console.log(`${conns} connections, ${seconds} s: statuses ${JSON.stringify(statuses)}, ` +
    `transport errors ${errors}`);
  console.log(`server RSS MiB every 5 s: ${rss.map((k) => (k / 1024).toFixed(0)).join(' ')}`);
}

if (mode === 'streams') await streams(Number(a1 || 32));
else if (mode === 'load') await load(Number(a1 || 64), Number(a2 || 60), Number(a3));
else console.error('usage: bench.mjs BASE_URL streams [TOKENS] | load CONNS SECONDS PID');
