/* Time-bounded submissions (src/backend/vulkan/vk_submit.c): with the splitting forced to its
 * smallest (HALO_VK_SUBMIT_MS=0: a submission per dispatch; HALO_VK_SPLIT_WORK=1: attention,
 * indexer scores and projections one token or one column tile per dispatch) every op's output
 * is bit-identical to the unsplit run, each op really went out in many submissions, and the
 * tiny model's logits over a 64-token prefill are identical too. Skips (exit 77) when no
 * Vulkan device works. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/vulkan/vulkan.h"
#include "check.h"
#include "halo/halo.h"
#include "halo/quant.h"
#include "halo/types.h"

static halo_backend *whole, *split;
static uint32_t seed = 777;

static float frand(void) {
    seed = seed * 1664525u + 1013904223u;
    return (float)(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
}

static void set_split(bool on) {
    if (on) {
        setenv("HALO_VK_SUBMIT_MS", "0", 1);
        setenv("HALO_VK_SPLIT_WORK", "1", 1);
    } else {
        unsetenv("HALO_VK_SUBMIT_MS");
        unsetenv("HALO_VK_SPLIT_WORK");
    }
}

static halo_backend *open_vk(bool split_on) {
    set_split(split_on);
    halo_backend *be = NULL;
    halo_error err = {0};
    if (halo_backend_vulkan_create(-1, &be, &err)) fprintf(stderr, "vulkan: %s\n", err.message);
    set_split(false);
    return be;
}

/* A tensor with the same bytes on both backends. */
typedef struct pair {
    halo_tensor w, s;
} pair;

static pair make(uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, const void *data) {
    pair p = {{.type = type, .ne = {ne0, ne1, ne2, 1}}, {0}};
    halo_error err = {0};
    uint64_t n = halo_tensor_nbytes(&p.w);
    p.s = p.w;
    CHECK_INT(whole->ops->buf_alloc(whole, n, &p.w.buf, &err), HALO_OK);
    CHECK_INT(split->ops->buf_alloc(split, n, &p.s.buf, &err), HALO_OK);
    if (data) {
        CHECK_INT(whole->ops->buf_write(whole, p.w.buf, 0, data, n, &err), HALO_OK);
        CHECK_INT(split->ops->buf_write(split, p.s.buf, 0, data, n, &err), HALO_OK);
    }
    return p;
}

static pair make_f32(int64_t ne0, int64_t ne1, int64_t ne2, float scale) {
    int64_t n = ne0 * ne1 * ne2;
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = frand() * scale;
    pair p = make(HALO_TYPE_F32, ne0, ne1, ne2, x);
    free(x);
    return p;
}

static void drop(pair *p) {
    whole->ops->buf_free(whole, p->w.buf);
    split->ops->buf_free(split, p->s.buf);
}

/* Both outputs read back: identical bytes, and the split run took at least min_submits. */
static void same(pair *out, uint64_t submits_before, uint64_t min_submits) {
    halo_error err = {0};
    CHECK_INT(whole->ops->sync(whole, &err), HALO_OK);
    CHECK_INT(split->ops->sync(split, &err), HALO_OK);
    uint64_t n = halo_tensor_nbytes(&out->w);
    unsigned char *a = malloc(n), *b = malloc(n);
    CHECK_INT(whole->ops->buf_read(whole, out->w.buf, 0, a, n, &err), HALO_OK);
    CHECK_INT(split->ops->buf_read(split, out->s.buf, 0, b, n, &err), HALO_OK);
    CHECK(!memcmp(a, b, n));
    float mx = 0;
    for (uint64_t i = 0; i + 4 <= n; i += 4) {
        float v;
        memcpy(&v, a + i, 4);
        mx = v > mx ? v : mx;
    }
    CHECK(mx != 0); /* the op wrote something */
    uint64_t took = halo_backend_vulkan_submissions(split) - submits_before;
    if (took < min_submits)
        fprintf(stderr, "  %llu submissions, expected at least %llu\n", (unsigned long long)took,
                (unsigned long long)min_submits);
    CHECK(took >= min_submits);
    free(a);
    free(b);
}

enum { T = 40, HD = 512, NH = 8 };

static void attention_split_by_token_is_identical(void) {
    int32_t pos[T], sel[T * 8];
    for (int t = 0; t < T; t++) {
        pos[t] = 100 + t;
        for (int k = 0; k < 8; k++)
            sel[t * 8 + k] = (t + 3 * k) % 24 <= (100 + t) / 4 ? (t + 3 * k) % 24 : -1;
    }
    pair q = make_f32(HD, NH, T, 1), win = make_f32(HD, 64, 1, 1), comp = make_f32(HD, 24, 1, 1);
    pair sinks = make_f32(NH, 1, 1, 1), out = make(HALO_TYPE_F32, HD, NH, T, NULL);
    pair sl = make(HALO_TYPE_I32, 8, T, 1, sel);
    for (int with_sel = 0; with_sel < 2; with_sel++) {
        uint64_t before = halo_backend_vulkan_submissions(split);
        halo_attn_args a = {
            .pos = pos, .win_pos0 = 80, .sliding_window = 64, .ratio = 4, .scale = 0.04f};
        a.q = &q.w, a.window = &win.w, a.comp = &comp.w, a.sinks = &sinks.w, a.out = &out.w;
        a.select = with_sel ? &sl.w : NULL;
        whole->ops->attention(whole, &a);
        a.q = &q.s, a.window = &win.s, a.comp = &comp.s, a.sinks = &sinks.s, a.out = &out.s;
        a.select = with_sel ? &sl.s : NULL;
        split->ops->attention(split, &a);
        same(&out, before, T);
    }
    drop(&q), drop(&win), drop(&comp), drop(&sinks), drop(&out), drop(&sl);
}

static void projection_split_by_column_is_identical(void) {
    const int64_t K = 1024, N = 96;
    float *wf = malloc((size_t)(K * N) * sizeof *wf);
    for (int64_t i = 0; i < K * N; i++)
        wf[i] = frand();
    uint64_t rb = 0;
    halo_type_bytes(HALO_TYPE_Q4_K, (uint64_t)K, &rb);
    unsigned char *wq = malloc((size_t)(rb * (uint64_t)N));
    for (int64_t r = 0; r < N; r++)
        halo_quant_quantize_row(HALO_TYPE_Q4_K, wf + r * K, wq + r * rb, K, NULL);
    pair w = make(HALO_TYPE_Q4_K, K, N, 1, wq), x = make_f32(K, T, 1, 1);
    pair out = make(HALO_TYPE_F32, N, T, 1, NULL);
    uint64_t before = halo_backend_vulkan_submissions(split);
    whole->ops->matmul(whole, &w.w, &x.w, 1, &out.w);
    split->ops->matmul(split, &w.s, &x.s, 1, &out.s);
    same(&out, before, T / 8); /* tiles of 8 columns */
    drop(&w), drop(&x), drop(&out);
    free(wf);
    free(wq);
}

static void indexer_scores_split_by_token_are_identical(void) {
    int32_t pos[T];
    for (int t = 0; t < T; t++)
        pos[t] = 60 + 2 * t;
    pair q = make_f32(128, 16, T, 1), w = make_f32(16, T, 1, 1), keys = make_f32(128, 30, 1, 1);
    pair out = make(HALO_TYPE_I32, 8, T, 1, NULL);
    uint64_t before = halo_backend_vulkan_submissions(split);
    halo_topk_args a = {
        .q = &q.w, .w = &w.w, .keys = &keys.w, .pos = pos, .ratio = 4, .top_k = 8, .out = &out.w};
    whole->ops->topk(whole, &a);
    a.q = &q.s, a.w = &w.s, a.keys = &keys.s, a.out = &out.s;
    split->ops->topk(split, &a);
    same(&out, before, T);
    drop(&q), drop(&w), drop(&keys), drop(&out);
}

/* The tiny model through the engine, prefill of 64 tokens: every position's logits. */
static float *prefill(bool split_on, uint32_t *n_vocab) {
    set_split(split_on);
    halo_engine *e = NULL;
    halo_error err = {0};
    halo_engine_params p = {
        .model_path = "models/kjv-tiny.gguf", .backend = "vulkan", .precise = true};
    CHECK_INT(halo_engine_open(&p, &e, &err), HALO_OK);
    set_split(false);
    if (!e) {
        fprintf(stderr, "  %s\n", err.message);
        return NULL;
    }
    enum { N_TOK = 64 };
    int32_t tok[N_TOK];
    uint32_t V = halo_engine_n_vocab(e);
    for (int i = 0; i < N_TOK; i++)
        tok[i] = (int32_t)((i * 7919u + 13) % V);
    halo_session *s = NULL;
    float *all = NULL;
    CHECK_INT(halo_session_create(e, N_TOK, &s, &err), HALO_OK);
    if (s && !halo_session_eval(s, tok, N_TOK, true, &err)) {
        uint32_t rows;
        const float *l = halo_session_logits(s, &rows);
        CHECK_INT(rows, N_TOK);
        all = malloc((size_t)rows * V * sizeof *all);
        memcpy(all, l, (size_t)rows * V * sizeof *all);
    }
    halo_session_free(s);
    halo_engine_close(e);
    *n_vocab = V;
    return all;
}

static void model_prefill_split_is_identical(void) {
    uint32_t V = 0;
    float *a = prefill(false, &V), *b = prefill(true, &V);
    CHECK(a && b);
    if (a && b) CHECK(!memcmp(a, b, (size_t)64 * V * sizeof *a));
    free(a);
    free(b);
}

int main(void) {
    whole = open_vk(false);
    if (!whole) return 77;
    split = open_vk(true);
    if (!split) return 1;
    RUN(attention_split_by_token_is_identical);
    RUN(projection_split_by_column_is_identical);
    RUN(indexer_scores_split_by_token_are_identical);
    RUN(model_prefill_split_is_identical);
    whole->ops->destroy(whole);
    split->ops->destroy(split);
    return check_report();
}
