/* The synthetic DeepSeek V4 Flash (src/model/synthetic.c): its table is the real one (checked
 * against the independent table in tests/common/dsv4_flash.c: names, shapes, types, bytes), its
 * blocks decode to finite values through the quant module's dequantizers, its hash rows hold
 * distinct experts in range, any range of a tensor is the same bytes whether made alone or with
 * the rest, it opens in place as an engine's model, and it round-trips through a GGUF file.
 *
 * Opt-in (slow at full width on a 2-core machine, ~9 GiB of memory): HALO_TEST_FULL_WIDTH=1
 * evaluates a 4-layer model on the CPU backend and checks the logits are finite. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "common/dsv4_flash.h"
#include "gguf/gguf_test_util.h"
#include "halo/halo.h"
#include "halo/quant.h"
#include "model/synthetic.h"

/* ---- the table equals the independent one ------------------------------------------------- */

typedef struct table {
    dsv4_tensor *t;
    size_t n, cap;
} table;

static int collect_ref(const dsv4_tensor *t, void *user) {
    table *tb = user;
    if (tb->n == tb->cap) {
        tb->cap = tb->cap ? 2 * tb->cap : 256;
        tb->t = realloc(tb->t, tb->cap * sizeof *tb->t);
    }
    tb->t[tb->n++] = *t;
    return 0;
}

static int collect_synth(const halo_synth_tensor *t, void *user) {
    dsv4_tensor d;
    memset(&d, 0, sizeof d);
    memcpy(d.name, t->name, sizeof d.name);
    d.type = t->type;
    d.n_dims = t->n_dims;
    memcpy(d.ne, t->ne, sizeof d.ne);
    d.n_bytes = t->n_bytes;
    return collect_ref(&d, user);
}

/* Same tensors as the reference (keeping only blocks below n_layer), in any order. */
static void check_same_table(const table *ref, const table *got, uint32_t n_layer) {
    size_t kept = 0;
    for (size_t i = 0; i < ref->n; i++) {
        const dsv4_tensor *r = &ref->t[i];
        if (!strncmp(r->name, "blk.", 4) && (uint32_t)atoi(r->name + 4) >= n_layer) continue;
        kept++;
        const dsv4_tensor *g = NULL;
        for (size_t j = 0; j < got->n && !g; j++)
            if (!strcmp(got->t[j].name, r->name)) g = &got->t[j];
        CHECK(g != NULL);
        if (!g) {
            fprintf(stderr, "  missing %s\n", r->name);
            continue;
        }
        CHECK_INT(g->type, r->type);
        CHECK_INT(g->n_dims, r->n_dims);
        for (int d = 0; d < 4; d++)
            CHECK_INT(g->ne[d], r->ne[d]);
        CHECK_INT(g->n_bytes, r->n_bytes);
    }
    CHECK_INT(got->n, kept);
}

static void q2_table_is_the_real_one(void) {
    table ref = {0}, got = {0};
    dsv4_flash_for_each_tensor(DSV4_MIX_DS4_Q2, collect_ref, &ref);
    halo_synth_spec s = {.mix = HALO_SYNTH_Q2, .n_layer = 43, .seed = 1};
    CHECK_INT(halo_synth_for_each_tensor(&s, collect_synth, &got), 1328);
    check_same_table(&ref, &got, 43);
    /* docs/dsv4-flash-table.md: 86,714,775,900 bytes = 80.76 GiB */
    CHECK_INT(halo_synth_tensor_bytes(&s), 86714775900ll);
    for (uint32_t layers = 1; layers <= 6; layers++) {
        got.n = 0;
        s.n_layer = layers;
        halo_synth_for_each_tensor(&s, collect_synth, &got);
        check_same_table(&ref, &got, layers);
    }
    free(ref.t);
    free(got.t);
}

static void q2q4_table_is_the_seeds_variant(void) {
    table ref = {0}, got = {0};
    dsv4_flash_variant_for_each_tensor(DSV4_VARIANT_Q2_Q4K_L37_42, collect_ref, &ref);
    halo_synth_spec s = {.mix = HALO_SYNTH_Q2Q4, .n_layer = 43, .seed = 1};
    halo_synth_for_each_tensor(&s, collect_synth, &got);
    check_same_table(&ref, &got, 43);
    CHECK_INT(halo_synth_tensor_bytes(&s), 97586411868ll); /* the seeds' 90.88 GiB */
    free(ref.t);
    free(got.t);
}

/* mxfp4: routed experts MXFP4 (17 bytes per 32 weights), the rest as q2; the total follows from
 * the q2 total by replacing each layer's IQ2_XXS gate/up (66 bytes per 256) and Q2_K down (84 per
 * 256) with three MXFP4 tensors of 4096 x 2048 x 256 weights. */
static void mxfp4_table_retypes_only_the_routed_experts(void) {
    table ref = {0}, got = {0};
    dsv4_flash_for_each_tensor(DSV4_MIX_DS4_Q2, collect_ref, &ref);
    for (size_t i = 0; i < ref.n; i++)
        if (strstr(ref.t[i].name, "_exps.")) {
            ref.t[i].type = HALO_TYPE_MXFP4;
            ref.t[i].n_bytes =
                (uint64_t)(ref.t[i].ne[0] * ref.t[i].ne[1] * ref.t[i].ne[2]) / 32 * 17;
        }
    halo_synth_spec s = {.mix = HALO_SYNTH_MXFP4, .n_layer = 43, .seed = 1};
    halo_synth_for_each_tensor(&s, collect_synth, &got);
    check_same_table(&ref, &got, 43);
    /* q2 total - 43 x (IQ2_XXS gate+up + Q2_K down) + 43 x 3 MXFP4 experts tensors */
    uint64_t n = 4096ull * 2048 * 256;
    uint64_t q2_exp = 2 * (n / 256 * 66) + n / 256 * 84, mx_exp = 3 * (n / 32 * 17);
    CHECK_INT(halo_synth_tensor_bytes(&s),
              86714775900ll - 43 * (long long)q2_exp + 43 * (long long)mx_exp);
    free(ref.t);
    free(got.t);
}

/* /e8/v1024: the real table with 8 experts per routed tensor, router and bias, and 1,024 rows
 * in the embedding, output head and hash tables; nothing else changes. */
static void reduced_table_changes_only_experts_and_vocab(void) {
    table ref = {0}, got = {0};
    dsv4_flash_for_each_tensor(DSV4_MIX_DS4_Q2, collect_ref, &ref);
    for (size_t i = 0; i < ref.n; i++) {
        dsv4_tensor *t = &ref.t[i];
        uint64_t old = (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2]), now = old;
        if (strstr(t->name, "_exps.")) t->ne[2] = 8;
        if (strstr(t->name, "ffn_gate_inp")) t->ne[1] = 8;
        if (strstr(t->name, "exp_probs_b")) t->ne[0] = 8;
        if (!strcmp(t->name, "token_embd.weight") || !strcmp(t->name, "output.weight") ||
            strstr(t->name, "tid2eid"))
            t->ne[1] = 1024;
        now = (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2]);
        t->n_bytes = t->n_bytes * now / old; /* whole blocks in every case */
    }
    halo_synth_spec s = {
        .mix = HALO_SYNTH_Q2, .n_layer = 4, .seed = 1, .n_expert = 8, .n_vocab = 1024};
    halo_synth_for_each_tensor(&s, collect_synth, &got);
    check_same_table(&ref, &got, 4);
    free(ref.t);
    free(got.t);
}

static void specs_parse_and_bad_ones_are_named(void) {
    halo_synth_spec s;
    halo_error err = {0};
    CHECK_INT(halo_synth_parse("synthetic:dsv4-flash-q2q4:7@42", &s, &err), HALO_OK);
    CHECK_INT(s.mix, HALO_SYNTH_Q2Q4);
    CHECK_INT(s.n_layer, 7);
    CHECK_INT(s.seed, 42);
    CHECK_INT(halo_synth_parse("dsv4-flash-mxfp4", &s, &err), HALO_OK);
    CHECK_INT(s.n_layer, 43);
    CHECK(halo_synth_parse("dsv4-flash-q3", &s, &err) != HALO_OK);
    CHECK_CONTAINS(err.message, "unknown kind");
    CHECK(halo_synth_parse("dsv4-flash-q2:44", &s, &err) != HALO_OK);
    CHECK_CONTAINS(err.message, "1..43");
    CHECK(halo_synth_parse("dsv4-flash-q2:0", &s, &err) != HALO_OK);
    CHECK(halo_synth_parse("dsv4-flash-q2:4x", &s, &err) != HALO_OK);
    CHECK_INT(halo_synth_parse("dsv4-flash-q2:2/e8/v1024@3", &s, &err), HALO_OK);
    CHECK_INT(s.n_layer, 2);
    CHECK_INT(s.n_expert, 8);
    CHECK_INT(s.n_vocab, 1024);
    CHECK_INT(s.seed, 3);
    CHECK(halo_synth_parse("dsv4-flash-q2:2/e5", &s, &err) != HALO_OK); /* < 6 used */
    CHECK_CONTAINS(err.message, "/eN");
    CHECK(halo_synth_parse("dsv4-flash-q2:2/x5", &s, &err) != HALO_OK);
    CHECK(halo_synth_is_path("synthetic:dsv4-flash-q2"));
    CHECK(!halo_synth_is_path("models/x.gguf"));
}

/* ---- the bytes ---------------------------------------------------------------------------- */

/* Generates up to `limit` bytes at the start and one unit-aligned piece at the end of every
 * tensor (small tensors whole), dequantizes them and checks every value is finite and the
 * quant module's scale validation accepts them. */
static void every_block_decodes_finite(halo_synth_mix mix, uint32_t layers, uint64_t limit) {
    halo_synth_spec s = {.mix = mix, .n_layer = layers, .seed = 7};
    halo_gguf *g = NULL;
    halo_mem_arena *a = NULL;
    halo_error err = {0};
    char path[64];
    snprintf(path, sizeof path, "synthetic:%s:%u@7", halo_synth_mix_name(mix), layers);
    CHECK_INT(halo_synth_open(path, &g, &a, &err), HALO_OK);
    if (!g) return;
    uint64_t types_seen = 0, bad = 0;
    for (uint64_t i = 0; i < halo_gguf_tensor_count(g); i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, i);
        if (t->type == HALO_TYPE_I32) continue; /* ids, checked below */
        uint64_t unit = halo_synth_fill_unit(t);
        const halo_type_info *info = halo_type_info_get(t->type);
        uint64_t row = (uint64_t)t->ne[0] / info->block_size * info->block_bytes;
        uint64_t head = t->n_bytes <= limit ? t->n_bytes : limit / row * row;
        uint64_t tail_off = t->n_bytes - row;
        uint8_t *buf = malloc(head > row ? head : row);
        float *f = malloc((head > row ? head : row) / info->block_bytes * info->block_size * 4);
        for (int part = 0; part < 2; part++) {
            uint64_t off = part ? tail_off : 0, n = part ? row : head;
            if (part && head == t->n_bytes) break;
            CHECK(off % unit == 0);
            CHECK_INT(halo_synth_fill(&s, t, i, buf, off, n, &err), HALO_OK);
            CHECK_INT(halo_quant_validate(t->type, buf, n, &err), HALO_OK);
            int64_t ne = (int64_t)(n / info->block_bytes * info->block_size);
            halo_quant_dequantize_row(t->type, buf, f, ne);
            for (int64_t k = 0; k < ne; k++)
                bad += !isfinite(f[k]) || fabsf(f[k]) > 1.0f;
        }
        types_seen |= 1ull << t->type;
        free(buf);
        free(f);
    }
    CHECK_INT(bad, 0);
    CHECK(types_seen & (1ull << HALO_TYPE_Q8_0));
    CHECK(types_seen & (1ull << HALO_TYPE_F16));
    if (mix == HALO_SYNTH_MXFP4) CHECK(types_seen & (1ull << HALO_TYPE_MXFP4));
    halo_mem_arena_free(a);
    halo_gguf_close(g);
}

static void q2_blocks_decode_finite(void) {
    every_block_decodes_finite(HALO_SYNTH_Q2, 4, 8 << 20);
}
static void mxfp4_blocks_decode_finite(void) {
    every_block_decodes_finite(HALO_SYNTH_MXFP4, 4, 4 << 20);
}

/* Q4_K appears only in layers 37-42 of q2q4: check the type's blocks directly. */
static void q2q4_late_layer_blocks_decode_finite(void) {
    halo_synth_spec s = {.mix = HALO_SYNTH_Q2Q4, .n_layer = 43, .seed = 3};
    halo_gguf_tensor t = {.name = "blk.40.ffn_down_exps.weight",
                          .type = HALO_TYPE_Q4_K,
                          .n_dims = 3,
                          .ne = {2048, 4096, 256, 1}};
    t.n_elements = 2048ull * 4096 * 256;
    t.n_bytes = t.n_elements / 256 * 144;
    uint64_t n = 144 * 4096;
    uint8_t *buf = malloc(n);
    float *f = malloc(4096 * 256 * sizeof *f);
    halo_error err = {0};
    CHECK_INT(halo_synth_fill(&s, &t, 900, buf, t.n_bytes - n, n, &err), HALO_OK);
    CHECK_INT(halo_quant_validate(t.type, buf, n, &err), HALO_OK);
    halo_quant_dequantize_row(t.type, buf, f, 4096 * 256);
    uint64_t bad = 0, nonzero = 0;
    for (int k = 0; k < 4096 * 256; k++) {
        bad += !isfinite(f[k]);
        nonzero += f[k] != 0.0f;
    }
    CHECK_INT(bad, 0);
    CHECK(nonzero > 4096 * 128);
    free(buf);
    free(f);
}

static void hash_rows_are_distinct_and_in_range(void) {
    halo_synth_spec s = {.mix = HALO_SYNTH_Q2, .n_layer = 4, .seed = 11};
    halo_gguf_tensor t = {.name = "blk.0.ffn_gate_tid2eid.weight",
                          .type = HALO_TYPE_I32,
                          .n_dims = 2,
                          .ne = {6, 129280, 1, 1}};
    t.n_elements = 6 * 129280;
    t.n_bytes = t.n_elements * 4;
    int32_t *ids = malloc(t.n_bytes);
    halo_error err = {0};
    CHECK_INT(halo_synth_fill(&s, &t, 5, ids, 0, t.n_bytes, &err), HALO_OK);
    uint64_t bad = 0, hist[256] = {0};
    for (int r = 0; r < 129280; r++)
        for (int j = 0; j < 6; j++) {
            int32_t e = ids[r * 6 + j];
            bad += e < 0 || e >= 256;
            for (int k = 0; k < j; k++)
                bad += ids[r * 6 + k] == e;
            if (e >= 0 && e < 256) hist[e]++;
        }
    CHECK_INT(bad, 0);
    /* every expert is used: 775,680 draws over 256 experts, about 3,030 each */
    for (int e = 0; e < 256; e++)
        CHECK(hist[e] > 2500 && hist[e] < 3600);
    /* a range made alone equals the same rows made with the rest */
    int32_t part[60];
    CHECK_INT(halo_synth_fill(&s, &t, 5, part, 24 * 1000, sizeof part, &err), HALO_OK);
    CHECK(memcmp(part, ids + 6 * 1000, sizeof part) == 0);
    CHECK(halo_synth_fill(&s, &t, 5, part, 20, 24, &err) != HALO_OK); /* not a row start */
    free(ids);
}

static void ranges_equal_whole_fills_and_seeds_differ(void) {
    halo_synth_spec s = {.mix = HALO_SYNTH_Q2, .n_layer = 4, .seed = 1};
    halo_gguf_tensor t = {.name = "blk.3.ffn_gate_exps.weight",
                          .type = HALO_TYPE_IQ2_XXS,
                          .n_dims = 3,
                          .ne = {4096, 2048, 256, 1}};
    t.n_elements = 4096ull * 2048 * 256;
    t.n_bytes = t.n_elements / 256 * 66;
    uint8_t a[66 * 64], b[66 * 64], c[66 * 64];
    halo_error err = {0};
    CHECK_INT(halo_synth_fill(&s, &t, 40, a, 66 * 1000, sizeof a, &err), HALO_OK);
    CHECK_INT(halo_synth_fill(&s, &t, 40, b, 66 * 1000, 66 * 10, &err), HALO_OK);
    CHECK_INT(halo_synth_fill(&s, &t, 40, b + 660, 66 * 1010, sizeof b - 660, &err), HALO_OK);
    CHECK(memcmp(a, b, sizeof a) == 0);
    s.seed = 2;
    CHECK_INT(halo_synth_fill(&s, &t, 40, c, 66 * 1000, sizeof c, &err), HALO_OK);
    CHECK(memcmp(a, c, sizeof a) != 0);
}

/* ---- the model in place, and as a file ---------------------------------------------------- */

/* An engine on a synthetic model too large for the machine profile is refused by admission
 * before a byte is generated. */
static void engine_refuses_full_model_on_a_small_profile(void) {
    setenv("HALO_PROFILE", "pc-64", 1);
    halo_engine_params p = {.model_path = "synthetic:dsv4-flash-q2"};
    halo_engine *e = NULL;
    halo_error err = {0};
    CHECK(halo_engine_open(&p, &e, &err) != HALO_OK);
    CHECK(e == NULL);
    CHECK_CONTAINS(err.message, "80.76 GiB of weights do not fit");
    p.model_path = "synthetic:dsv4-flash-q7";
    CHECK(halo_engine_open(&p, &e, &err) != HALO_OK);
    CHECK_CONTAINS(err.message, "unknown kind");
    unsetenv("HALO_PROFILE");
}

static void gguf_round_trips_through_the_reader(void) {
    /* One layer with 8 experts and 1,024 vocabulary rows (250 MB; full width otherwise),
     * written to a temporary directory, then removed. */
    char *dir = tmpdir_make(), path[600];
    snprintf(path, sizeof path, "%s/synth.gguf", dir);
    halo_synth_spec s = {
        .mix = HALO_SYNTH_Q2, .n_layer = 1, .seed = 5, .n_expert = 8, .n_vocab = 1024};
    halo_error err = {0};
    CHECK_INT(halo_synth_write_gguf(&s, path, 0, NULL, NULL, &err), HALO_OK);
    halo_gguf *g = NULL;
    CHECK_INT(halo_gguf_open(path, &g, &err), HALO_OK);
    if (g) {
        table got = {0};
        halo_synth_for_each_tensor(&s, collect_synth, &got);
        CHECK_INT(halo_gguf_tensor_count(g), got.n);
        uint32_t u = 0;
        CHECK_INT(halo_gguf_get_u32(g, "deepseek4.block_count", &u, &err), HALO_OK);
        CHECK_INT(u, 1);
        CHECK_INT(halo_gguf_get_u32(g, "deepseek4.expert_count", &u, &err), HALO_OK);
        CHECK_INT(u, 8);
        CHECK_INT(halo_gguf_get_u32(g, "deepseek4.vocab_size", &u, &err), HALO_OK);
        CHECK_INT(u, 1024);
        /* every tensor's bytes as the generator makes them: first and last few KiB */
        uint8_t *want = malloc(1 << 16), *have = malloc(1 << 20);
        for (uint64_t i = 0; i < got.n; i++) {
            const halo_gguf_tensor *t = halo_gguf_find_tensor(g, got.t[i].name);
            CHECK(t != NULL);
            if (!t) continue;
            CHECK_INT(t->type, got.t[i].type);
            CHECK_INT(t->n_bytes, got.t[i].n_bytes);
            uint64_t unit = halo_synth_fill_unit(t), n = (1 << 16) / unit * unit;
            if (n > t->n_bytes) n = t->n_bytes;
            CHECK_INT(halo_synth_fill(&s, t, i, want, 0, n, &err), HALO_OK);
            if (t->n_bytes <= (1 << 20)) {
                CHECK_INT(halo_gguf_read_tensor(g, t, have, 1 << 20, &err), HALO_OK);
                CHECK(memcmp(want, have, n) == 0);
            } else {
                FILE *f = fopen(path, "rb");
                CHECK(f && fseeko(f, (off_t)t->file_offset, SEEK_SET) == 0 &&
                      fread(have, 1, n, f) == n && memcmp(want, have, n) == 0);
                if (f) fclose(f);
            }
        }
        free(want);
        free(have);
        free(got.t);
        halo_gguf_close(g);
    }
    tmpdir_remove(dir);
}

static void evaluate_without_nan(const char *path) {
    halo_engine_params p = {.model_path = path, .n_ctx = 64};
    halo_engine *e = NULL;
    halo_session *sess = NULL;
    halo_error err = {0};
    CHECK_INT(halo_engine_open(&p, &e, &err), HALO_OK);
    if (e) CHECK_INT(halo_session_create(e, 64, &sess, &err), HALO_OK);
    if (!sess) {
        fprintf(stderr, "  %s\n", err.message);
        halo_engine_close(e);
        return;
    }
    int32_t toks[3] = {0, 1000, (int32_t)halo_engine_n_vocab(e) - 1};
    CHECK_INT(halo_session_eval(sess, toks, 2, true, &err), HALO_OK);
    CHECK_INT(halo_session_eval(sess, toks + 2, 1, false, &err), HALO_OK);
    uint32_t rows = 0;
    const float *l = halo_session_logits(sess, &rows);
    uint64_t bad = 0;
    float mx = 0;
    for (uint32_t k = 0; l && k < rows * halo_engine_n_vocab(e); k++) {
        bad += !isfinite(l[k]);
        if (fabsf(l[k]) > mx) mx = fabsf(l[k]);
    }
    CHECK_INT(bad, 0);
    CHECK(mx > 0);
    printf("  %s: logits finite, max |logit| %.3g\n", path, mx);
    halo_session_free(sess);
    halo_engine_close(e);
}

/* Every layer kind (window-only, ratio 4 with the indexer, ratio 128, hash-routed) at full
 * width, with 8 experts and 1,024 vocabulary rows: about 1 GB. */
static void reduced_four_layer_model_evaluates_without_nan(void) {
    evaluate_without_nan("synthetic:dsv4-flash-q2:4/e8/v1024");
}

static void four_layer_model_evaluates_without_nan(void) {
    if (!getenv("HALO_TEST_FULL_WIDTH")) {
        printf("  skipped: set HALO_TEST_FULL_WIDTH=1 (about 9 GiB of memory, a minute)\n");
        return;
    }
    evaluate_without_nan("synthetic:dsv4-flash-q2:4");
}

int main(void) {
    RUN(q2_table_is_the_real_one);
    RUN(q2q4_table_is_the_seeds_variant);
    RUN(mxfp4_table_retypes_only_the_routed_experts);
    RUN(reduced_table_changes_only_experts_and_vocab);
    RUN(specs_parse_and_bad_ones_are_named);
    RUN(q2_blocks_decode_finite);
    RUN(mxfp4_blocks_decode_finite);
    RUN(q2q4_late_layer_blocks_decode_finite);
    RUN(hash_rows_are_distinct_and_in_range);
    RUN(ranges_equal_whole_fills_and_seeds_differ);
    RUN(engine_refuses_full_model_on_a_small_profile);
    RUN(gguf_round_trips_through_the_reader);
    RUN(reduced_four_layer_model_evaluates_without_nan);
    RUN(four_layer_model_evaluates_without_nan);
    return check_report();
}
