// Tool calls and thinking through both SDKs. The embedded model never writes DSML on its own
// and logit_bias cannot force a multi-token sequence, so these tests use the server's test hook
// (--test-hooks): "halo_test_reply" makes the slot emit the given text's tokens instead of
// sampled ones. Everything after the choice of token is the production path: the tokens are
// evaluated, read by the same reply parser (reasoning, DSML tool-call blocks via
// halo_dsml_parse) and mapped by the same formatters; the SDKs then parse what the server sent.
// The DSML text is the format src/text/chat.c renders, so the next turn re-renders the same
// tokens and hits the slot's cache. logit_bias itself is checked on sampled tokens.
import { startServer, openai, anthropic, assert, eq, run } from './lib.mjs';

const srv = await startServer(['--test-hooks', '-np', '2']);
const oa = openai(srv);
const an = anthropic(srv);

const D = '｜DSML｜';
const CALL = `\n\n<${D}tool_calls>\n<${D}invoke name="get_weather">\n` +
  `<${D}parameter name="city" string="true">Paris</${D}parameter>\n` +
  `<${D}parameter name="days" string="false">3</${D}parameter>\n</${D}invoke>\n</${D}tool_calls>`;
const REPLY = `Let me look.${CALL}`;
const ARGS = { city: 'Paris', days: 3 };
const oaTools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather',
  parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } } } }];
const anTools = [{ name: 'get_weather', description: 'Weather',
  input_schema: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } } }];
const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];

await run(
  [
    ['openai_tool_call_round_trip', async () => {
      const r = await oa.chat.completions.create({ model: 'm', messages: ask, tools: oaTools,
        max_tokens: 200, halo_test_reply: REPLY });
      const m = r.choices[0].message;
      eq(r.choices[0].finish_reason, 'tool_calls', 'finish_reason');
      eq(m.content, 'Let me look.', 'content before the block');
      eq(m.tool_calls.length, 1, 'one call');
      eq(m.tool_calls[0].function.name, 'get_weather', 'name');
      eq(JSON.parse(m.tool_calls[0].function.arguments), ARGS, 'arguments');
      const next = await oa.chat.completions.create({ model: 'm', tools: oaTools, max_tokens: 2,
        messages: [...ask, m, { role: 'tool', tool_call_id: m.tool_calls[0].id, content: 'Sunny, 21C' }] });
      const cached = next.usage.prompt_tokens_details.cached_tokens;
      assert(cached > r.usage.prompt_tokens + 10,
        `the replayed tool call missed the cache: ${cached} cached of ${next.usage.prompt_tokens}` +
        ` (first prompt ${r.usage.prompt_tokens})`);
    }],
    ['openai_streamed_tool_call_accumulates', async () => {
      const s = await oa.chat.completions.create({ model: 'm', messages: ask, tools: oaTools,
        max_tokens: 200, stream: true, halo_test_reply: REPLY });
      let content = '';
      let args = '';
      let name = '';
      let finish = null;
      for await (const c of s) {
        const d = c.choices[0]?.delta || {};
        content += d.content || '';
        for (const t of d.tool_calls || []) {
          if (t.function?.name) name = t.function.name;
          args += t.function?.arguments || '';
        }
        finish = c.choices[0]?.finish_reason || finish;
      }
      eq([content, name, JSON.parse(args), finish], ['Let me look.', 'get_weather', ARGS, 'tool_calls'],
        'streamed call');
      const f = await oa.chat.completions.stream({ model: 'm', messages: ask, tools: oaTools,
        max_tokens: 200, halo_test_reply: REPLY }).finalChatCompletion();
      eq(JSON.parse(f.choices[0].message.tool_calls[0].function.arguments), ARGS, 'helper');
    }],
    ['anthropic_tool_use_round_trip', async () => {
      const m = await an.messages.create({ model: 'm', max_tokens: 200, tools: anTools,
        messages: ask, halo_test_reply: REPLY });
      eq(m.stop_reason, 'tool_use', 'stop_reason');
      eq(m.content.map((b) => b.type), ['text', 'tool_use'], 'blocks');
      eq(m.content[1].name, 'get_weather', 'name');
      eq(m.content[1].input, ARGS, 'input');
      const next = await an.messages.create({ model: 'm', max_tokens: 2, tools: anTools,
        messages: [...ask, { role: 'assistant', content: m.content },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: m.content[1].id, content: 'Sunny' }] }] });
      assert(next.usage.cache_read_input_tokens > 0, 'the next turn read the cache');
    }],
    ['anthropic_streamed_tool_use_has_input_json_deltas', async () => {
      const s = an.messages.stream({ model: 'm', max_tokens: 200, tools: anTools, messages: ask,
        halo_test_reply: REPLY });
      const kinds = [];
      s.on('streamEvent', (e) => {
        if (e.type === 'content_block_delta') kinds.push(e.delta.type);
      });
      const m = await s.finalMessage();
      eq(m.content[1].input, ARGS, 'input from the deltas');
      assert(kinds.includes('input_json_delta'), `delta types ${kinds}`);
    }],
    ['a_truncated_dsml_block_becomes_text', async () => {
      // Cut before the first call's name is complete: nothing of a call went out, so it is text.
      const cut = `Let me look.\n\n<${D}tool_calls>\n<${D}invoke name="get_wea`;
      const r = await oa.chat.completions.create({ model: 'm', messages: ask, tools: oaTools,
        max_tokens: 200, halo_test_reply: cut });
      eq(r.choices[0].finish_reason, 'stop', 'finish_reason');
      assert(!r.choices[0].message.tool_calls, 'no tool calls');
      assert(r.choices[0].message.content.includes('invoke name="get_wea'), 'kept as text');
      const m = await an.messages.stream({ model: 'm', max_tokens: 200, tools: anTools,
        messages: ask, halo_test_reply: cut }).finalMessage();
      eq(m.content.map((b) => b.type), ['text'], 'blocks');
    }],
    ['a_call_the_model_breaks_after_its_head_is_a_clean_error', async () => {
      // The call's head (and part of its arguments) already streamed: it cannot become text, so
      // the end of turn inside it is an error in each API's shape, which both SDKs raise.
      const cut = `Let me look.\n\n<${D}tool_calls>\n<${D}invoke name="get_weather">\n` +
        `<${D}parameter name="city" string="true">Par`;
      const s = await oa.chat.completions.create({ model: 'm', messages: ask, tools: oaTools,
        max_tokens: 200, stream: true, halo_test_reply: cut });
      let args = '';
      const err = await (async () => {
        try {
          for await (const c of s) args += c.choices[0]?.delta?.tool_calls?.[0]?.function?.arguments || '';
        } catch (e) {
          return e;
        }
        return null;
      })();
      assert(err && /inside tool call 0/.test(err.message), `openai stream: ${err}`);
      eq(args, '{"city": "Par', 'arguments streamed before the cut');
      const e2 = await an.messages.stream({ model: 'm', max_tokens: 200, tools: anTools,
        messages: ask, halo_test_reply: cut }).finalMessage().catch((e) => e);
      assert(e2 instanceof Error && /inside tool call 0/.test(e2.message), `anthropic: ${e2}`);
      const e3 = await oa.chat.completions.create({ model: 'm', messages: ask, tools: oaTools,
        max_tokens: 200, halo_test_reply: cut }).catch((e) => e);
      eq([e3.status, e3.headers?.get?.('x-should-retry')], [500, 'false'], 'not streamed: a 500');
    }],
    ['long_tool_arguments_stream_in_many_pieces_in_every_api', async () => {
      // A long argument streams as the model writes it: many deltas, which the SDKs' own stream
      // accumulators add up to exactly the arguments of the same reply not streamed.
      const text = 'Chapter 1.\nIn the beginning "God" created the heaven and the earth. '.repeat(5);
      const reply = `I will write it.\n\n<${D}tool_calls>\n<${D}invoke name="write_file">\n` +
        `<${D}parameter name="path" string="true">notes/gen.txt</${D}parameter>\n` +
        `<${D}parameter name="content" string="true">${text}</${D}parameter>\n` +
        `<${D}parameter name="mode" string="false">{"append": false, "lines": [1, 2]}</${D}parameter>\n` +
        `</${D}invoke>\n</${D}tool_calls>`;
      const want = { path: 'notes/gen.txt', content: text, mode: { append: false, lines: [1, 2] } };
      const tools = [{ type: 'function', function: { name: 'write_file', parameters: { type: 'object',
        properties: { path: { type: 'string' }, content: { type: 'string' }, mode: { type: 'object' } } } } }];
      const body = { model: 'm', messages: ask, tools, max_tokens: 2000, halo_test_reply: reply };
      const whole = (await oa.chat.completions.create(body)).choices[0].message.tool_calls[0];
      eq(JSON.parse(whole.function.arguments), want, 'openai: not streamed');
      let pieces = 0;
      const stream = oa.chat.completions.stream(body);
      stream.on('chunk', (c) => {
        for (const t of c.choices[0]?.delta?.tool_calls || []) pieces += t.function?.arguments ? 1 : 0;
      });
      const acc = (await stream.finalChatCompletion()).choices[0].message.tool_calls[0];
      eq([acc.function.name, acc.function.arguments], ['write_file', whole.function.arguments],
        'openai: accumulated = not streamed');
      assert(pieces > 20, `openai: the arguments came in ${pieces} deltas`);

      const anBody = { model: 'm', messages: ask, max_tokens: 2000, halo_test_reply: reply,
        tools: [{ name: 'write_file', input_schema: tools[0].function.parameters }] };
      const anWhole = (await an.messages.create(anBody)).content.find((b) => b.type === 'tool_use');
      eq(anWhole.input, want, 'anthropic: not streamed');
      let jsonDeltas = 0;
      let raw = '';
      const as = an.messages.stream(anBody);
      as.on('streamEvent', (e) => {
        if (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta') {
          jsonDeltas++;
          raw += e.delta.partial_json;
        }
      });
      const anAcc = (await as.finalMessage()).content.find((b) => b.type === 'tool_use');
      eq(anAcc.input, anWhole.input, 'anthropic: accumulated = not streamed');
      eq(raw, whole.function.arguments, 'anthropic: partial_json pieces = the OpenAI arguments');
      assert(jsonDeltas > 20, `anthropic: ${jsonDeltas} input_json_delta events`);

      const rTools = [{ type: 'function', name: 'write_file', parameters: tools[0].function.parameters }];
      const rBody = { model: 'm', input: 'Write it.', tools: rTools, max_output_tokens: 2000,
        halo_test_reply: reply };
      const rWhole = (await oa.responses.create(rBody)).output.find((o) => o.type === 'function_call');
      let rDeltas = 0;
      const rs = oa.responses.stream(rBody);
      rs.on('response.function_call_arguments.delta', () => rDeltas++);
      const rAcc = (await rs.finalResponse()).output.find((o) => o.type === 'function_call');
      eq([rAcc.name, rAcc.arguments], ['write_file', rWhole.arguments], 'responses: accumulated = whole');
      eq(JSON.parse(rWhole.arguments), want, 'responses: arguments');
      assert(rDeltas > 20, `responses: ${rDeltas} function_call_arguments.delta events`);
    }],
    ['max_tokens_inside_a_call_leaves_it_cut_with_the_length_finish', async () => {
      // As OpenAI and Anthropic do: the call stays, cut, and the finish says why.
      const reply = `<${D}tool_calls>\n<${D}invoke name="get_weather">\n` +
        `<${D}parameter name="days" string="false">3</${D}parameter>\n` +
        `<${D}parameter name="city" string="true">${'Paris and beyond, '.repeat(10)}</${D}parameter>\n` +
        `</${D}invoke>\n</${D}tool_calls>`;
      // Cut in the middle of the value: halfway between where it starts and where it ends.
      // (Counted without tools: the same tokens, read as text.)
      const count = async (text) => (await oa.chat.completions.create({ model: 'm', messages: ask,
        max_tokens: 500, halo_test_reply: text })).usage.completion_tokens;
      const head = await count(reply.slice(0, reply.indexOf('Paris')));
      const full = await count(reply.slice(0, reply.lastIndexOf(`</${D}parameter>`)));
      const cutAt = Math.floor((head + full) / 2);
      const body = { model: 'm', messages: ask, tools: oaTools, max_tokens: cutAt, halo_test_reply: reply };
      const r = await oa.chat.completions.create(body);
      eq(r.choices[0].finish_reason, 'length', 'openai finish');
      const args = r.choices[0].message.tool_calls[0].function.arguments;
      assert(args.startsWith('{"days": 3, "city": "Paris and') && !args.endsWith('}'),
        `cut arguments ${args}`);
      const acc = await oa.chat.completions.stream(body).finalChatCompletion();
      eq(acc.choices[0].message.tool_calls[0].function.arguments, args, 'openai streamed');
      const anBody = { model: 'm', messages: ask, tools: anTools, max_tokens: cutAt, halo_test_reply: reply };
      const m = await an.messages.create(anBody);
      eq(m.stop_reason, 'max_tokens', 'anthropic stop_reason');
      const sm = await an.messages.stream(anBody).finalMessage();
      // The SDK's partial-JSON reader drops the member cut short; the body does the same.
      eq(sm.content[0].input, m.content[0].input, 'anthropic: the SDK\'s partial JSON = not streamed');
      eq(m.content[0].input, { days: 3 }, 'anthropic input');
    }],
    ['thinking_on_splits_reasoning_from_the_answer', async () => {
      const reply = 'I ponder the matter.</think>The answer.';
      const r = await oa.chat.completions.create({ model: 'm', messages: ask, max_tokens: 50,
        reasoning_effort: 'high', halo_test_reply: reply });
      eq([r.choices[0].message.reasoning_content, r.choices[0].message.content],
        ['I ponder the matter.', 'The answer.'], 'openai');
      const m = await an.messages.stream({ model: 'm', max_tokens: 50, messages: ask,
        thinking: { type: 'enabled', budget_tokens: 1024 }, halo_test_reply: reply }).finalMessage();
      eq(m.content.map((b) => [b.type, b.thinking || b.text]),
        [['thinking', 'I ponder the matter.'], ['text', 'The answer.']], 'anthropic');
      const off = await oa.chat.completions.create({ model: 'm', messages: ask, max_tokens: 50,
        halo_test_reply: 'The answer.' });
      eq(off.choices[0].message.reasoning_content, undefined, 'no reasoning when off');
    }],
    ['responses_function_call_round_trip', async () => {
      const tools = [{ type: 'function', name: 'get_weather', parameters: oaTools[0].function.parameters }];
      const r = await oa.responses.create({ model: 'm', input: 'Weather in Paris?', tools,
        max_output_tokens: 200, halo_test_reply: REPLY });
      const call = r.output.find((o) => o.type === 'function_call');
      assert(call, `no function_call in ${JSON.stringify(r.output)}`);
      eq([call.name, JSON.parse(call.arguments)], ['get_weather', ARGS], 'call');
      const next = await oa.responses.create({ model: 'm', tools, max_output_tokens: 2,
        input: [{ role: 'user', content: 'Weather in Paris?' }, call,
          { type: 'function_call_output', call_id: call.call_id, output: 'Sunny' }] });
      eq(next.status === 'completed' || next.status === 'incomplete', true, 'second turn');
    }],
    ['logit_bias_steers_sampling', async () => {
      const r = await oa.chat.completions.create({ model: 'm', messages: ask, max_tokens: 8,
        temperature: 0, logit_bias: { 300: 100 } });
      const t = r.choices[0].message.content;
      const one = t.slice(0, t.length / 8);
      assert(t.length > 0 && t === one.repeat(8), `not one token repeated: ${JSON.stringify(t)}`);
      const banned = await oa.chat.completions.create({ model: 'm', messages: ask, max_tokens: 8,
        temperature: 0, logit_bias: { 300: -100 } });
      assert(!banned.choices[0].message.content.includes(one), 'banned token appeared');
    }],
  ],
  async () => {
    const rc = await srv.stop();
    if (rc) console.log(srv.log());
    return rc;
  },
);
