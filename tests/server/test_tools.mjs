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
      const cut = `Let me look.\n\n<${D}tool_calls>\n<${D}invoke name="get_weather">\n`;
      const r = await oa.chat.completions.create({ model: 'm', messages: ask, tools: oaTools,
        max_tokens: 200, halo_test_reply: cut });
      eq(r.choices[0].finish_reason, 'stop', 'finish_reason');
      assert(!r.choices[0].message.tool_calls, 'no tool calls');
      assert(r.choices[0].message.content.includes('invoke name="get_weather"'), 'kept as text');
      const m = await an.messages.stream({ model: 'm', max_tokens: 200, tools: anTools,
        messages: ask, halo_test_reply: cut }).finalMessage();
      eq(m.content.map((b) => b.type), ['text'], 'blocks');
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
