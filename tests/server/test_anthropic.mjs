// The @anthropic-ai/sdk npm package against `halo serve`: messages streaming and not, the
// event order, count_tokens, greedy output equal to `halo run --temp 0`, what real clients
// send beyond the minimum (query strings, unknown fields, adaptive thinking, any
// anthropic-version), and usage with cache reads.
import { startServer, haloRun, anthropic, assert, eq, run } from './lib.mjs';

// A small context keeps the clamped 32k-token requests short (the embedded model rarely stops).
const srv = await startServer(['-np', '2', '--ctx', '256']);
const client = anthropic(srv);
const PROMPT = 'In the beginning';
const N = 24;
const reference = haloRun(PROMPT, N);
const SYSTEM = 'Thou art a scribe.';
const withSystem = haloRun(PROMPT, N, ['--system', SYSTEM]);

await run(
  [
    ['messages_greedy_equals_halo_run', async () => {
      const m = await client.messages.create({
        model: 'kjv-tiny',
        max_tokens: N,
        temperature: 0,
        messages: [{ role: 'user', content: PROMPT }],
      });
      eq(m.type, 'message', 'type');
      eq(m.content.length, 1, 'one block');
      eq(m.content[0].type, 'text', 'block type');
      eq(m.content[0].text, reference, 'text');
      eq(m.stop_reason, 'max_tokens', 'stop_reason');
      eq(m.usage.output_tokens, N, 'output_tokens');
    }],
    ['system_prompt_is_rendered_as_halo_run_renders_it', async () => {
      const m = await client.messages.create({
        model: 'kjv-tiny', max_tokens: N, temperature: 0,
        system: [{ type: 'text', text: SYSTEM, cache_control: { type: 'ephemeral' } }],
        messages: [{ role: 'user', content: [{ type: 'text', text: PROMPT }] }],
      });
      eq(m.content[0].text, withSystem, 'text');
    }],
    ['stream_events_come_in_the_documented_order', async () => {
      const stream = await client.messages.create({
        model: 'kjv-tiny', max_tokens: N, temperature: 0, stream: true,
        messages: [{ role: 'user', content: PROMPT }],
      });
      const types = [];
      let text = '';
      let usage = null;
      for await (const e of stream) {
        types.push(e.type);
        if (e.type === 'content_block_delta') text += e.delta.text;
        if (e.type === 'message_delta') usage = e.usage;
      }
      eq(text, reference, 'streamed text');
      const order = types.join(' ');
      assert(/^message_start content_block_start( content_block_delta)+ content_block_stop message_delta message_stop$/.test(order),
        `event order: ${order}`);
      eq(usage.output_tokens, N, 'message_delta usage.output_tokens');
    }],
    ['stream_helper_gives_the_final_message', async () => {
      const s = client.messages.stream({
        model: 'kjv-tiny', max_tokens: N, temperature: 0,
        messages: [{ role: 'user', content: PROMPT }],
      });
      const m = await s.finalMessage();
      eq(m.content[0].text, reference, 'final text');
      eq(m.stop_reason, 'max_tokens', 'stop_reason');
    }],
    ['count_tokens_counts_the_rendered_prompt', async () => {
      const body = { model: 'kjv-tiny', messages: [{ role: 'user', content: PROMPT }] };
      const c = await client.messages.countTokens(body);
      const m = await client.messages.create({ ...body, max_tokens: 1, temperature: 0 });
      const total = m.usage.input_tokens + m.usage.cache_read_input_tokens;
      eq(c.input_tokens, total, 'input_tokens vs the prompt the reply was made from');
      assert(c.input_tokens > 3, 'counted more than the markers');
    }],
    ['a_tool_list_of_tens_of_kilobytes_is_counted', async () => {
      const tools = Array.from({ length: 100 }, (_, i) => ({
        name: `tool_${i}`,
        description: `Does thing ${i}. `.repeat(20),
        input_schema: { type: 'object', properties: { path: { type: 'string', description: 'A path. '.repeat(20) } } },
      }));
      assert(JSON.stringify(tools).length > 40000, 'tens of kilobytes');
      const small = await client.messages.countTokens({ model: 'm', messages: [{ role: 'user', content: PROMPT }] });
      const big = await client.messages.countTokens({ model: 'm', tools, messages: [{ role: 'user', content: PROMPT }] });
      assert(big.input_tokens > small.input_tokens + 5000, `${big.input_tokens} vs ${small.input_tokens}`);
    }],
    ['what_claude_code_sends_is_accepted', async () => {
      // The beta path, unknown top-level fields, cache marks, adaptive thinking, metadata.
      // Streamed, as Claude Code does (the SDK refuses 32k non-streaming).
      const m = await client.beta.messages.stream({
        model: 'some-claude-model', max_tokens: 32000, temperature: 0,
        betas: ['context-management-2025-06-27', 'interleaved-thinking-2025-05-14'],
        metadata: { user_id: 'someone' },
        context_management: { edits: [] },
        output_config: { effort: 'high' },
        thinking: { type: 'adaptive' },
        system: [{ type: 'text', text: 'You are Claude Code.', cache_control: { type: 'ephemeral' } }],
        messages: [{ role: 'user', content: [{ type: 'text', text: PROMPT,
          cache_control: { type: 'ephemeral' } }] }],
      }).finalMessage();
      assert(['end_turn', 'max_tokens'].includes(m.stop_reason), `stop_reason ${m.stop_reason}`);
      eq(m.model, 'some-claude-model', 'model echoed');
    }],
    ['an_unknown_anthropic_version_is_accepted', async () => {
      const r = await fetch(`${srv.base}/v1/messages?beta=true`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'anthropic-version': '2099-01-01' },
        body: JSON.stringify({ model: 'x', max_tokens: 2, messages: [{ role: 'user', content: 'Hi' }] }),
      });
      eq(r.status, 200, 'status');
    }],
    ['max_tokens_beyond_the_context_is_clamped', async () => {
      const m = await client.messages.stream({
        model: 'kjv-tiny', max_tokens: 1000000, temperature: 0,
        messages: [{ role: 'user', content: PROMPT }],
      }).finalMessage();
      const used = m.usage.input_tokens + m.usage.cache_read_input_tokens + m.usage.output_tokens;
      assert(used <= 256, `${used} tokens used in a context of 256`);
    }],
    ['models_list_in_anthropic_shape', async () => {
      const page = await client.models.list();
      eq(page.data.map((m) => [m.id, m.type]), [['kjv-tiny', 'model']], 'models');
    }],
    ['repeated_prompt_reads_from_the_cache', async () => {
      const body = { model: 'kjv-tiny', max_tokens: 4, temperature: 0,
        messages: [{ role: 'user', content: 'Blessed is the man' }] };
      await client.messages.create(body);
      const m = await client.messages.create(body);
      assert(m.usage.cache_read_input_tokens > 0, `cache_read ${m.usage.cache_read_input_tokens}`);
      eq(m.usage.input_tokens, 1, 'only the last prompt token evaluated');
    }],
  ],
  async () => {
    const rc = await srv.stop();
    if (rc) console.log(srv.log());
    return rc;
  },
);
