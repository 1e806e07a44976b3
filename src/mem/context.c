/* The model's own memory estimates for a context size, and tensor roles by name. The state
 * layout follows DeepSeek V4's attention (DeepSeek-V4 report, "hybrid attention": a sliding
 * window of raw rows, compressed rows every `ratio` tokens, and for ratio-4 layers a lightning
 * indexer that picks top-k compressed rows), as llama.cpp's deepseek4 and ds4 keep it. */
#include <string.h>
#include <stdlib.h>

#include "kv/kv.h"
#include "mem/mem.h"

static uint64_t ceil_div(uint64_t a, uint64_t b) {
    return (a + b - 1) / b;
}

/* What a session allocates for n_ctx positions (src/kv lays it out in f32); other element
 * sizes scale it. One layout, so the plan budgets exactly what the session will take. */
uint64_t halo_mem_context_bytes(const halo_hparams *hp, uint64_t n_ctx, uint32_t elem_size) {
    uint32_t ctx = n_ctx > UINT32_MAX ? UINT32_MAX : (uint32_t)n_ctx;
    return halo_kv_bytes(hp, ctx) / 4 * elem_size;
}

uint64_t halo_mem_scratch_bytes(const halo_hparams *hp, uint64_t n_ctx, uint32_t n_batch) {
    const uint64_t b = n_batch, f32 = 4;
    const uint64_t hc = hp->hc ? hp->hc : 1;
    /* visible rows for one query: window + top-k of the ratio-4 rows + every ratio-128 row */
    uint64_t rows4 = ceil_div(n_ctx, 4), rows128 = ceil_div(n_ctx, 128);
    uint64_t topk = hp->indexer_top_k < rows4 ? hp->indexer_top_k : rows4;
    uint64_t visible = hp->sliding_window + topk + rows128;
    uint64_t streams = 4 * b * hc * hp->n_embd;           /* residual streams, pre/post */
    uint64_t q = b * (uint64_t)hp->n_head * hp->head_dim; /* queries */
    uint64_t attn = b * (uint64_t)hp->n_head * visible;   /* scores */
    /* Indexer scores are summed over its heads as they are computed (chunked by head), so the
     * live buffers are the summed scores and one chunk's: not heads x rows x tokens. */
    uint64_t idx = 2 * b * rows4;
    uint64_t moe = 3 * b * (uint64_t)hp->n_expert_used * hp->n_ff_exp;
    uint64_t misc = 4 * b * (uint64_t)hp->n_embd + (uint64_t)hp->n_vocab;
    return (streams + 2 * q + attn + idx + moe + misc) * f32;
}

/* Layer number of `blk.N.`, else -1. */
static int32_t layer_of(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    char *end;
    long n = strtol(name + 4, &end, 10);
    return (end != name + 4 && *end == '.' && n >= 0 && n < HALO_MAX_LAYERS) ? (int32_t)n : -1;
}

static bool has(const char *name, const char *part) {
    return strstr(name, part) != NULL;
}

halo_group_role halo_mem_tensor_role(const char *name, int32_t *layer) {
    *layer = layer_of(name);
    if (*layer < 0) return HALO_ROLE_EMBED_OUTPUT;
    if (has(name, "_exps.")) return HALO_ROLE_ROUTED_EXPERTS;
    if (has(name, "_shexp.")) return HALO_ROLE_SHARED_EXPERTS;
    return HALO_ROLE_DENSE;
}
