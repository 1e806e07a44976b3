/* Token sampling from logits: greedy, temperature, top-k, top-p, min-p, repetition / frequency /
 * presence penalties. Seeded and reproducible: the same seed, parameters and logits give the
 * same tokens on every machine (the generator is xoshiro256** seeded by splitmix64).
 *
 * Order, as transformers' generate and vLLM apply it: penalties on the raw logits, then
 * temperature, then top-k, top-p (on the distribution left by top-k) and min-p (relative to the
 * most likely token), then a draw. Temperature <= 0 is greedy (argmax after penalties). */
#ifndef HALO_SAMPLE_H
#define HALO_SAMPLE_H

#include <stdint.h>

#include "halo/status.h"

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

#ifdef __cplusplus
}
#endif
#endif
