/* The generation loop shared by the front ends: prefill, then sample -> stream -> evaluate. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "halo/sample.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Streams a token's bytes through the UTF-8 hold-back; control tokens print nothing. */
static bool emit(const halo_tokenizer *tok, halo_utf8_stream *u, int32_t id,
                 const halo_gen_params *gp) {
    size_t len = 0;
    const char *piece = halo_tokenizer_piece(tok, id, &len);
    int type = halo_tokenizer_type(tok, id);
    if (!piece || type == HALO_TOKEN_CONTROL || type == HALO_TOKEN_UNUSED) len = 0;
    char buf[512], *out = len + 4 <= sizeof buf ? buf : malloc(len + 4);
    if (!out) return gp->on_text ? gp->on_text(gp->user, "", 0) : true;
    size_t n = halo_utf8_stream_push(u, piece, len, out);
    bool go = gp->on_text ? gp->on_text(gp->user, out, n) : true;
    if (out != buf) free(out);
    return go;
}

halo_status halo_generate(halo_session *s, halo_sampler *smp, const halo_tokenizer *tok,
                          const int32_t *prompt, size_t n_prompt, const halo_gen_params *gp,
                          halo_tokens *generated, halo_gen_stop *why, halo_gen_stats *stats,
                          halo_error *err) {
    halo_gen_stats st0 = {0};
    halo_gen_stats *stt = stats ? stats : &st0;
    memset(stt, 0, sizeof *stt);
    *why = HALO_GEN_CONTEXT_FULL;
    if (!n_prompt) return halo_fail(err, HALO_E_INVALID_ARG, "generate: no prompt tokens");
    if (halo_session_n_past(s) + n_prompt > gp->n_ctx)
        return halo_fail(err, HALO_E_INVALID_ARG,
                         "the prompt (%zu tokens after %u) does not fit "
                         "the context of %u",
                         n_prompt, halo_session_n_past(s), gp->n_ctx);
    double t0 = now_s();
    halo_status st = halo_session_eval(s, prompt, (uint32_t)n_prompt, false, err);
    if (st) return st;
    stt->n_prompt = (uint32_t)n_prompt;
    stt->prefill_s = now_s() - t0;
    for (size_t i = 0; i < n_prompt; i++)
        halo_sampler_accept(smp, prompt[i]);

    halo_utf8_stream u = {0};
    double t1 = now_s();
    for (;;) {
        uint32_t rows; /* one: the last evaluated token's */
        int32_t id = halo_sampler_sample(smp, halo_session_logits(s, &rows));
        halo_sampler_accept(smp, id);
        stt->n_generated++;
        if (generated && (st = halo_tokens_push(generated, id, err))) break;
        if (!gp->ignore_eos && halo_tokenizer_is_eog(tok, id)) {
            *why = HALO_GEN_EOG;
            break;
        }
        if (!emit(tok, &u, id, gp)) {
            *why = HALO_GEN_STOPPED;
            break;
        }
        if (gp->max_new && stt->n_generated >= gp->max_new) {
            *why = HALO_GEN_LIMIT;
            break;
        }
        if (halo_session_n_past(s) >= gp->n_ctx) {
            *why = HALO_GEN_CONTEXT_FULL;
            break;
        }
        if ((st = halo_session_eval(s, &id, 1, false, err))) break;
    }
    char tail[4];
    size_t n = halo_utf8_stream_flush(&u, tail);
    if (n && gp->on_text) gp->on_text(gp->user, tail, n);
    stt->decode_s = now_s() - t1;
    return st;
}
