/* Text in, text out: the byte-level BPE tokenizer read from GGUF metadata, streaming UTF-8
 * helpers, and DeepSeek V4's chat encoding (the official prompt format, with thinking modes and
 * DSML tool calls). */
#ifndef HALO_TEXT_H
#define HALO_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "halo/gguf.h"
#include "halo/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- token lists ------------------------------------------------------------------------ */

/* A growable list of token ids; zero-initialise, free with halo_tokens_free. */
typedef struct halo_tokens {
    int32_t *ids;
    size_t n, cap;
} halo_tokens;

halo_status halo_tokens_push(halo_tokens *t, int32_t id, halo_error *err);
void halo_tokens_free(halo_tokens *t);

/* ---- tokenizer -------------------------------------------------------------------------- */

typedef struct halo_tokenizer halo_tokenizer;

/* Token types as GGUF stores them in tokenizer.ggml.token_type. */
enum {
    HALO_TOKEN_NORMAL = 1,
    HALO_TOKEN_UNKNOWN = 2,
    HALO_TOKEN_CONTROL = 3,
    HALO_TOKEN_USER_DEFINED = 4,
    HALO_TOKEN_UNUSED = 5,
    HALO_TOKEN_BYTE = 6,
};

/* Builds the tokenizer from a model's metadata: tokenizer.ggml.model "gpt2" (byte-level BPE),
 * tokens, merges, token_type and tokenizer.ggml.pre (the pre-tokenizer; "deepseek-v3" and
 * "deepseek4"-era names are recognised, anything else is HALO_E_UNSUPPORTED). The tokenizer keeps
 * no reference to g. */
halo_status halo_tokenizer_load(const halo_gguf *g, halo_tokenizer **out, halo_error *err);
/* Opens a GGUF file (header only) and loads its tokenizer. */
halo_status halo_tokenizer_open(const char *path, halo_tokenizer **out, halo_error *err);
void halo_tokenizer_free(halo_tokenizer *t);

uint32_t halo_tokenizer_n_vocab(const halo_tokenizer *t);
int32_t halo_tokenizer_bos(const halo_tokenizer *t); /* -1 when the model has none */
int32_t halo_tokenizer_eos(const halo_tokenizer *t);
/* Whether generation should stop at id: EOS, EOT or another end-of-generation token. */
bool halo_tokenizer_is_eog(const halo_tokenizer *t, int32_t id);
int halo_tokenizer_type(const halo_tokenizer *t, int32_t id); /* HALO_TOKEN_*; 0 out of range */
/* Id of a token given by its text (as stored: special tokens are plain UTF-8), or -1. */
int32_t halo_tokenizer_find(const halo_tokenizer *t, const char *text);

enum {
    /* Match control and user-defined tokens written in the text ("<｜User｜>") as single
     * tokens before BPE, as HF tokenizers does for added tokens. Without it they are text. */
    HALO_TOKENIZE_SPECIAL = 1u << 0,
    HALO_TOKENIZE_BOS = 1u << 1, /* prepend BOS */
};

/* Appends the ids of len bytes of text to out. Any bytes are accepted: invalid UTF-8 is not
 * matched by the pre-tokenizer's character classes and is encoded byte by byte, so decode gives
 * the same bytes back. Thread-safe on a shared tokenizer. */
halo_status halo_tokenizer_encode(const halo_tokenizer *t, const char *text, size_t len,
                                  unsigned flags, halo_tokens *out, halo_error *err);

/* The bytes a token stands for (raw bytes, not byte-level characters); NULL when id is out of
 * range. Control tokens give their text ("<｜end▁of▁sentence｜>"). Not NUL-terminated. */
const char *halo_tokenizer_piece(const halo_tokenizer *t, int32_t id, size_t *len);

/* Decodes n ids to a malloc'd NUL-terminated string (caller frees *out); control tokens are
 * written only with HALO_TOKENIZE_SPECIAL. */
halo_status halo_tokenizer_decode(const halo_tokenizer *t, const int32_t *ids, size_t n,
                                  unsigned flags, char **out, size_t *out_len, halo_error *err);

/* ---- UTF-8 ------------------------------------------------------------------------------ */

/* Holds back the bytes of a UTF-8 sequence until it is complete, so text streamed token by
 * token never shows half a character. Zero-initialise. */
typedef struct halo_utf8_stream {
    unsigned char pending[4];
    unsigned n;
} halo_utf8_stream;

/* Appends n bytes; writes the bytes that are ready to out (room for n + 4 bytes) and returns
 * their count. Bytes that cannot start or continue a valid sequence pass through unchanged. */
size_t halo_utf8_stream_push(halo_utf8_stream *s, const char *in, size_t n, char *out);
/* Returns the held bytes (an incomplete sequence at the end of the stream), clearing them. */
size_t halo_utf8_stream_flush(halo_utf8_stream *s, char *out);

/* Length of the valid UTF-8 sequence at s[0..n) (1-4), or 0 when it is invalid or cut short. */
unsigned halo_utf8_seq_len(const unsigned char *s, size_t n);

/* Copies text to a malloc'd NUL-terminated string with every invalid UTF-8 sequence replaced by
 * U+FFFD (one per maximal invalid subpart, as Unicode recommends); *replaced counts them. */
halo_status halo_utf8_sanitize(const char *in, size_t n, char **out, size_t *out_len,
                               size_t *replaced, halo_error *err);

/* ---- DeepSeek V4 chat encoding ------------------------------------------------------------ */

typedef enum halo_chat_role {
    HALO_CHAT_SYSTEM,
    HALO_CHAT_USER,
    HALO_CHAT_DEVELOPER,
    HALO_CHAT_ASSISTANT,
    HALO_CHAT_TOOL,
} halo_chat_role;

typedef struct halo_chat_tool_call {
    const char *name;
    const char *arguments; /* a JSON object, as text */
} halo_chat_tool_call;

typedef struct halo_chat_message {
    halo_chat_role role;
    const char *content;   /* NULL: none */
    const char *reasoning; /* assistant's reasoning_content; NULL: none */
    const halo_chat_tool_call *tool_calls;
    size_t n_tool_calls;
} halo_chat_message;

typedef enum halo_chat_thinking {
    HALO_THINK_NONE, /* non-think: the assistant turn opens with </think> */
    HALO_THINK_ON,   /* thinking (<think>), no reasoning effort named */
    HALO_THINK_HIGH, /* thinking, reasoning_effort "high" (a prefix in the 0731 format only) */
    HALO_THINK_MAX,  /* thinking with the "Reasoning Effort" prefix before the system prompt */
} halo_chat_thinking;

typedef enum halo_chat_format {
    /* llama.cpp models/templates/deepseek-ai-DeepSeek-V4.jinja: only max has a prefix */
    HALO_CHAT_V4,
    /* deepseek-ai-DeepSeek-V4-Flash-0731.jinja: high and max each have their own prefix */
    HALO_CHAT_V4_FLASH_0731,
} halo_chat_format;

typedef struct halo_chat_params {
    halo_chat_format format;
    halo_chat_thinking thinking;
    bool add_generation_prompt; /* end with the assistant turn's opening */
    /* Keep reasoning of assistant turns before the last user turn (the template's
     * drop_thinking=false). Off by default, as the template. */
    bool keep_thinking;
    const char *tools_json; /* JSON array of {"type":"function","function":{...}}, or NULL */
    const char *response_format_json; /* any JSON value, or NULL */
} halo_chat_params;

/* Renders a conversation as DeepSeek V4 prompt text (BOS and special tokens written as text).
 * Byte-identical to the jinja template rendered the way transformers renders chat templates.
 * *out is malloc'd and NUL-terminated; caller frees. To feed a model, use halo_chat_tokenize:
 * encoding this text with HALO_TOKENIZE_SPECIAL would turn token text inside messages into
 * control tokens. */
halo_status halo_chat_render(const halo_chat_message *msgs, size_t n, const halo_chat_params *p,
                             char **out, size_t *out_len, halo_error *err);

/* Same from a JSON request with the template's variables: {"messages": [{"role", "content",
 * "reasoning_content", "tool_calls": [{"function": {"name", "arguments"}}]}], "tools": [...],
 * "response_format": ..., "thinking" (or "enable_thinking"): bool, "reasoning_effort":
 * "high"|"max", "drop_thinking": bool, "add_generation_prompt": bool}. */
halo_status halo_chat_render_json(const char *request_json, halo_chat_format format, char **out,
                                  size_t *out_len, halo_error *err);

/* Renders a conversation straight to token ids (appended to out), the way every front end
 * should feed a model: the template's own text (BOS, <｜User｜>, <｜Assistant｜>, <think>,
 * </think>, the DSML framing, <tool_result>, EOS and the fixed prose around them) is tokenized
 * with special-token parsing, and every piece of content — system, user and developer messages,
 * assistant content and reasoning, tool results, tool definitions, tool-call names and
 * arguments, the response format — as plain text, so no message can forge a turn, close one or
 * fake a tool call. Decoding out with HALO_TOKENIZE_SPECIAL gives halo_chat_render's bytes; when
 * no content holds the text of an added token, the ids are those of encoding that text with
 * HALO_TOKENIZE_SPECIAL. */
halo_status halo_chat_tokenize(const halo_tokenizer *t, const halo_chat_message *msgs, size_t n,
                               const halo_chat_params *p, halo_tokens *out, halo_error *err);
/* Same from a JSON request (the form halo_chat_render_json reads). */
halo_status halo_chat_tokenize_json(const halo_tokenizer *t, const char *request_json,
                                    halo_chat_format format, halo_tokens *out, halo_error *err);

/* The chat format a model's tokenizer.chat_template names (V4 when absent or unknown). */
halo_chat_format halo_chat_format_of(const halo_gguf *g);

/* ---- DSML tool calls in model output ------------------------------------------------------ */

/* A reply as the model wrote it, split into its text and the tool calls of its
 * <｜DSML｜tool_calls> block (the format the chat encoding's tools header teaches). */
typedef struct halo_dsml_call {
    char *name;
    char *arguments; /* a JSON object (Python json.dumps spacing), e.g. {"city": "Paris"} */
} halo_dsml_call;

typedef struct halo_dsml_reply {
    char *content; /* the text before the block, without the blank line that separates them */
    halo_dsml_call *calls;
    size_t n_calls;
} halo_dsml_reply;

/* Parses len bytes of assistant output (after </think>). Without a tool-call block the whole
 * text is content. A block that is cut short or malformed is HALO_E_BAD_VALUE with what is
 * wrong; a parameter marked string="false" whose value is not JSON is kept as a string.
 * Rendering the result with halo_chat_render gives the same bytes back. */
halo_status halo_dsml_parse(const char *text, size_t len, halo_dsml_reply *out, halo_error *err);
void halo_dsml_reply_free(halo_dsml_reply *r);

/* Text that opens an assistant turn, and the reasoning delimiters. */
#define HALO_CHAT_BOS "<｜begin▁of▁sentence｜>"
#define HALO_CHAT_EOS "<｜end▁of▁sentence｜>"
#define HALO_CHAT_USER_TAG "<｜User｜>"
#define HALO_CHAT_ASSISTANT_TAG "<｜Assistant｜>"
#define HALO_CHAT_THINK_OPEN "<think>"
#define HALO_CHAT_THINK_CLOSE "</think>"

#ifdef __cplusplus
}
#endif
#endif
