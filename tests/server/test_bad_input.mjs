// Bad requests get a 4xx in the shape of the API they were sent to, never a crash: malformed
// JSON, wrong types, a body over the limit, invalid UTF-8, unknown roles, tool results for
// unknown ids, a prompt longer than the context. The API key is required when set (Bearer or
// x-api-key) and a wrong one is refused, as both SDKs see it. The server still answers after
// all of it.
import { startServer, openai, anthropic, assert, eq, run } from './lib.mjs';

const KEY = 'sekrit-key';
const srv = await startServer(['--ctx', '256', '--max-body', '65536', '--api-key', KEY]);
const H = { 'content-type': 'application/json', authorization: `Bearer ${KEY}` };

async function post(path, body, headers = H) {
  const r = await fetch(`${srv.base}${path}`, { method: 'POST', headers, body });
  const text = await r.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON: the check below fails with the text
  }
  return { status: r.status, json, text, headers: r.headers };
}

function openaiShape(r, status) {
  eq(r.status, status, `status (${r.text})`);
  assert(r.json && r.json.error && typeof r.json.error.message === 'string' &&
    typeof r.json.error.type === 'string', `not an OpenAI error body: ${r.text}`);
}

function anthropicShape(r, status) {
  eq(r.status, status, `status (${r.text})`);
  assert(r.json && r.json.type === 'error' && r.json.error && typeof r.json.error.type === 'string' &&
    typeof r.json.error.message === 'string', `not an Anthropic error body: ${r.text}`);
}

const chat = (o) => JSON.stringify({ model: 'm', max_tokens: 4, ...o });
const user = [{ role: 'user', content: 'Hi' }];

await run(
  [
    ['malformed_json_is_400_in_each_shape', async () => {
      openaiShape(await post('/v1/chat/completions', '{"messages": [}'), 400);
      anthropicShape(await post('/v1/messages', '{"messages": [}'), 400);
      openaiShape(await post('/v1/responses', 'null'), 400);
      openaiShape(await post('/v1/completions', '[1,2]'), 400);
    }],
    ['wrong_types_are_400', async () => {
      openaiShape(await post('/v1/chat/completions', chat({ messages: 'Hi' })), 400);
      openaiShape(await post('/v1/chat/completions', chat({ messages: user, temperature: 'hot' })), 400);
      openaiShape(await post('/v1/chat/completions', chat({ messages: user, max_tokens: -3 })), 400);
      openaiShape(await post('/v1/chat/completions', chat({ messages: [{ role: 'user', content: 7 }] })), 400);
      anthropicShape(await post('/v1/messages', chat({ messages: user, max_tokens: 'ten' })), 400);
      anthropicShape(await post('/v1/messages', JSON.stringify({ messages: user })), 400);
      anthropicShape(await post('/v1/messages', chat({ messages: user, stop_sequences: [1] })), 400);
      const r = await post('/v1/chat/completions', chat({ messages: user, logit_bias: { 999999: 5 } }));
      openaiShape(r, 400);
      assert(/logit_bias/.test(r.json.error.message), 'names the field');
    }],
    ['a_body_over_the_limit_is_413', async () => {
      const big = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(70000) }] });
      openaiShape(await post('/v1/chat/completions', big), 413);
      anthropicShape(await post('/v1/messages', big), 413);
    }],
    ['oversized_headers_are_refused_with_a_4xx', async () => {
      const r = await fetch(`${srv.base}/v1/chat/completions`, {
        method: 'POST', headers: { ...H, 'x-junk': 'j'.repeat(100000) }, body: chat({ messages: user }),
      }).catch((e) => ({ status: `transport: ${e.cause && e.cause.code}` }));
      assert(r.status >= 400 && r.status < 500, `status ${r.status}`);
    }],
    ['invalid_utf8_is_400', async () => {
      const body = Buffer.concat([Buffer.from('{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"'),
        Buffer.from([0xc3, 0x28, 0xff]), Buffer.from('"}]}')]);
      openaiShape(await post('/v1/chat/completions', body), 400);
      anthropicShape(await post('/v1/messages', body), 400);
    }],
    ['unknown_roles_are_400', async () => {
      const msgs = [{ role: 'wizard', content: 'Hi' }];
      openaiShape(await post('/v1/chat/completions', chat({ messages: msgs })), 400);
      anthropicShape(await post('/v1/messages', chat({ messages: [{ role: 'system', content: 'Hi' }] })), 400);
    }],
    ['tool_results_for_unknown_ids_are_400', async () => {
      openaiShape(await post('/v1/chat/completions', chat({
        messages: [...user, { role: 'tool', tool_call_id: 'call_nope', content: '42' }],
      })), 400);
      anthropicShape(await post('/v1/messages', chat({
        messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_nope', content: '42' }] }],
      })), 400);
    }],
    ['a_prompt_longer_than_the_context_is_400', async () => {
      const long = 'And it came to pass that the people went up. '.repeat(60);
      const r = await post('/v1/chat/completions', chat({ messages: [{ role: 'user', content: long }] }));
      openaiShape(r, 400);
      assert(/context/.test(r.json.error.message), `message: ${r.json.error.message}`);
      anthropicShape(await post('/v1/messages', chat({ messages: [{ role: 'user', content: long }] })), 400);
    }],
    ['unknown_routes_and_methods_are_4xx', async () => {
      openaiShape(await post('/v1/nothing', '{}'), 404);
      const r = await fetch(`${srv.base}/v1/chat/completions`, { headers: H });
      eq(r.status, 405, 'GET on a POST route');
    }],
    ['the_key_is_required_and_checked_by_both_sdks', async () => {
      for (const key of ['wrong', undefined]) {
        const r = await post('/v1/chat/completions', chat({ messages: user }),
          key ? { 'content-type': 'application/json', authorization: `Bearer ${key}` } : {});
        openaiShape(r, 401);
      }
      anthropicShape(await post('/v1/messages', chat({ messages: user }),
        { 'content-type': 'application/json', 'x-api-key': 'wrong' }), 401);
      let status = 0;
      try {
        await openai(srv, 'wrong').chat.completions.create({ model: 'm', messages: user, max_tokens: 2 });
      } catch (e) {
        status = e.status;
      }
      eq(status, 401, 'openai SDK with a wrong key');
      status = 0;
      try {
        await anthropic(srv, 'wrong').messages.create({ model: 'm', messages: user, max_tokens: 2 });
      } catch (e) {
        status = e.status;
      }
      eq(status, 401, 'anthropic SDK with a wrong key');
      const ok1 = await openai(srv, KEY).chat.completions.create({ model: 'm', messages: user, max_tokens: 2 });
      eq(ok1.object, 'chat.completion', 'openai SDK with the key (Bearer)');
      const ok2 = await anthropic(srv, KEY).messages.create({ model: 'm', messages: user, max_tokens: 2 });
      eq(ok2.type, 'message', 'anthropic SDK with the key (x-api-key)');
    }],
    ['health_needs_no_key', async () => {
      const r = await fetch(`${srv.base}/health`);
      eq(r.status, 200, 'status');
      eq(await r.json(), { status: 'ok' }, 'body');
    }],
    ['unknown_fields_are_ignored', async () => {
      const r = await post('/v1/chat/completions', chat({ messages: user, frobnicate: { x: 1 },
        parallel_tool_calls: false, user: 'u', store: false, service_tier: 'auto' }));
      eq(r.status, 200, `status (${r.text})`);
    }],
    ['the_server_survives_all_of_it', async () => {
      const r = await openai(srv, KEY).chat.completions.create({ model: 'm', messages: user, max_tokens: 2 });
      eq(r.choices.length, 1, 'still answering');
    }],
  ],
  async () => {
    const rc = await srv.stop();
    if (rc) console.log(srv.log());
    return rc;
  },
);
