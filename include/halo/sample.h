/* Token sampling from logits: greedy, temperature, top-k, top-p, min-p, repetition / frequency /
 * presence penalties. Seeded and reproducible: the same seed, parameters and logits give the
 * same tokens on every machine (the generator is xoshiro256** seeded by splitmix64).
 *
 * Order, as transformers' generate and vLLM apply it: penalties on the raw logits, then
 * temperature, then top-k, top-p (on the distribution left by top-k) and min-p (relative to the
 * most likely token), then a draw. Temperature <= 0 is greedy (argmax after penalties). */
#ifndef HALO_SAMPLE_H
#define HALO_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "halo/halo.h"
#include "halo/status.h"
#include "halo/text.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct halo_sampler_params {
    float temperature;       /* default 1; <= 0: greedy */
    uint32_t top_k;          /* default 0: off */
    float top_p;             /* default 1: off */
    float min_p;             /* default 0.05; 0: off */
    float repeat_penalty;    /* default 1: off; > 1 discourages tokens seen in the window */
    float frequency_penalty; /* default 0: logit -= count in the window * this */
    float presence_penalty;  /* default 0: logit -= this when seen in the window */
    uint32_t penalty_last_n; /* window of past tokens the penalties look at; default 64 */
    uint64_t seed;
} halo_sampler_params;

/* The defaults of DeepSeek's API as ds4 serves it: temperature 1, top-p 1, min-p 0.05. */
halo_sampler_params halo_sampler_defaults(void);

typedef struct halo_sampler halo_sampler;

halo_status halo_sampler_create(const halo_sampler_params *p, uint32_t n_vocab, halo_sampler **out,
                                halo_error *err);
void halo_sampler_free(halo_sampler *s);

/* Records a token in the penalty window (prompt tokens and sampled ones alike). */
void halo_sampler_accept(halo_sampler *s, int32_t token);
/* Forgets the window and restarts the generator from the seed. */
void halo_sampler_reset(halo_sampler *s);

/* Picks a token from n_vocab logits (not modified). Does not accept it. */
int32_t halo_sampler_sample(halo_sampler *s, const float *logits);

/* The distribution halo_sampler_sample draws from, written to probs[n_vocab] (zeros for
 * filtered tokens; a one-hot for greedy). For tests and diagnostics. */
void halo_sampler_probs(halo_sampler *s, const float *logits, float *probs);

/* ---- generation ------------------------------------------------------------------------- */

/* The loop `halo run`, `halo chat` and servers share: evaluate a prompt on a session, then sample,
 * stream and evaluate one token at a time. */
typedef enum halo_gen_stop {
    HALO_GEN_EOG,          /* the model ended its turn (EOS / EOT, not printed or evaluated) */
    HALO_GEN_LIMIT,        /* max_new tokens generated (the last one is not evaluated) */
    HALO_GEN_CONTEXT_FULL, /* the session has no room for another token */
    HALO_GEN_STOPPED,      /* the callback asked to stop (e.g. Ctrl-C) */
} halo_gen_stop;

typedef struct halo_gen_stats {
    uint32_t n_prompt, n_generated;
    double prefill_s, decode_s; /* wall time of prompt evaluation and of the token loop */
} halo_gen_stats;

/* Receives text as it is generated, in whole UTF-8 characters (control tokens are not shown).
 * Called at least once per sampled token (len may be 0); return false to stop. */
typedef bool (*halo_gen_text_fn)(void *user, const char *text, size_t len);

typedef struct halo_gen_params {
    uint32_t n_ctx;   /* the session's context size */
    uint32_t max_new; /* 0: until the model stops or the context is full */
    bool ignore_eos;  /* keep going past end-of-generation tokens */
    halo_gen_text_fn on_text;
    void *user;
} halo_gen_params;

/* Evaluates n_prompt (>= 1) tokens after what the session holds, then generates. Sampled
 * tokens are appended to *generated (when not NULL), an end token included; the session has
 * evaluated every generated token but the last. The sampler sees the prompt and every sampled
 * token. */
halo_status halo_generate(halo_session *s, halo_sampler *smp, const halo_tokenizer *tok,
                          const int32_t *prompt, size_t n_prompt, const halo_gen_params *gp,
                          halo_tokens *generated, halo_gen_stop *why, halo_gen_stats *stats,
                          halo_error *err);

#ifdef __cplusplus
}
#endif
#endif
