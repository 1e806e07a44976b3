// halo serve under concurrent streams, and a load run. Not a test: figures go to RESULTS.md.
//
//   node bench/serve/bench.mjs BASE_URL streams [TOKENS]      aggregate decode tok/s
//   node bench/serve/bench.mjs BASE_URL load CONNS SECONDS PID  load run, memory of PID
//
// streams: for 1, 4 and 8 concurrent streaming chat requests (distinct prompts, greedy,
// ignore_eos, TOKENS each), the aggregate decode rate is the tokens all streams received while
// every one of them was decoding, over that window's length (prefills and stragglers excluded),
// and the ratio to one stream. load: CONNS clients loop on short non-streaming requests for
// SECONDS; counts statuses (429 is backpressure, anything else non-200 an error) and samples
// the server's resident memory every 5 s.
import { readFileSync } from 'node:fs';

const [base, mode, a1, a2, a3] = process.argv.slice(2);
const PROMPTS = ['In the beginning', 'And God said', 'The LORD is my shepherd', 'Blessed is the man',
  'Vanity of vanities', 'And Jesus answered', 'Now the serpent', 'Hear, O Israel'];

async function stream(prompt, tokens) {
  const r = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', stream: true, temperature: 0, ignore_eos: true,
      max_tokens: tokens, messages: [{ role: 'user', content: prompt }] }),
  });
  const times = [];
  const dec = new TextDecoder();
  let buf = '';
  for await (const chunk of r.body) {
    buf += dec.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (ev.startsWith('data: {') && /"content":"[^"]/.test(ev)) times.push(performance.now());
    }
  }
  return times;
}

async function streams(tokens) {
  const rows = [];
  let one = 0;
  for (const c of [1, 4, 8]) {
    const all = await Promise.all(PROMPTS.slice(0, c).map((p, i) => stream(`${p} ${i}`, tokens)));
    const start = Math.max(...all.map((t) => t[0]));
    const end = Math.min(...all.map((t) => t[t.length - 1]));
    let n = 0;
    for (const t of all) n += t.filter((x) => x > start && x <= end).length;
    const rate = (n / (end - start)) * 1000;
    if (c === 1) one = rate;
    rows.push(`| ${c} | ${n} | ${((end - start) / 1000).toFixed(2)} | ${rate.toFixed(1)} | ` +
      `${(rate / one).toFixed(2)} |`);
  }
  console.log('| streams | tokens in window | window s | aggregate decode tok/s | vs 1 stream |');
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
