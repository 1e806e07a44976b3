/* Hyperparameters from metadata: DeepSeek V4 Flash's real metadata (values from its config.json,
 * written by tests/common/dsv4_flash.c) must load to those values; dropping or breaking any one
 * key must give an error that names it. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "common/dsv4_flash.h"
#include "model/hparams.h"

/* Metadata image of the real model (no tensors: the hyperparameters need none). */
static void *real_metadata(size_t *size) {
    halo_gguf_writer *w = halo_gguf_writer_create();
    halo_error err = {0};
    void *img = NULL;
    CHECK_INT(dsv4_flash_add_metadata(w, DSV4_MIX_DS4_Q2, &err), HALO_OK);
    CHECK_INT(halo_gguf_writer_write_memory(w, &img, size, &err), HALO_OK);
    halo_gguf_writer_free(w);
    return img;
}

/* Copies every key of g into w except `skip`; `edit` (if set) may replace one key's write. */
typedef bool (*edit_fn)(halo_gguf_writer *w, const halo_gguf_kv *kv);

static void copy_kv(halo_gguf_writer *w, const halo_gguf_kv *kv) {
    const char *k = kv->key.data;
    switch (kv->type) {
    case HALO_GGUF_U8: halo_gguf_writer_set_u8(w, k, kv->v.u8); break;
    case HALO_GGUF_I8: halo_gguf_writer_set_i8(w, k, kv->v.i8); break;
    case HALO_GGUF_U16: halo_gguf_writer_set_u16(w, k, kv->v.u16); break;
    case HALO_GGUF_I16: halo_gguf_writer_set_i16(w, k, kv->v.i16); break;
    case HALO_GGUF_U32: halo_gguf_writer_set_u32(w, k, kv->v.u32); break;
    case HALO_GGUF_I32: halo_gguf_writer_set_i32(w, k, kv->v.i32); break;
    case HALO_GGUF_F32: halo_gguf_writer_set_f32(w, k, kv->v.f32); break;
    case HALO_GGUF_BOOL: halo_gguf_writer_set_bool(w, k, kv->v.b); break;
    case HALO_GGUF_U64: halo_gguf_writer_set_u64(w, k, kv->v.u64); break;
    case HALO_GGUF_I64: halo_gguf_writer_set_i64(w, k, kv->v.i64); break;
    case HALO_GGUF_F64: halo_gguf_writer_set_f64(w, k, kv->v.f64); break;
    case HALO_GGUF_STRING: halo_gguf_writer_set_str(w, k, kv->v.str.data); break;
    case HALO_GGUF_ARRAY:
        if (kv->elem_type == HALO_GGUF_STRING) {
            const halo_gguf_str *s = kv->v.array;
            const char **list = malloc((kv->count + 1) * sizeof *list);
            for (uint64_t i = 0; i < kv->count; i++) list[i] = s[i].data;
            halo_gguf_writer_set_str_array(w, k, list, kv->count);
            free(list);
        } else {
            halo_gguf_writer_set_array(w, k, kv->elem_type, kv->v.array, kv->count);
        }
        break;
    default: break;
    }
}

/* Loads the real metadata with one key dropped or edited; returns the status. */
static halo_status load_variant(const char *skip, edit_fn edit, halo_hparams *hp,
                                halo_error *err) {
    size_t size;
    void *img = real_metadata(&size);
    halo_gguf *src = NULL;
    CHECK_INT(halo_gguf_open_memory(img, size, &src, err), HALO_OK);
    halo_gguf_writer *w = halo_gguf_writer_create();
    for (uint64_t i = 0; i < halo_gguf_kv_count(src); i++) {
        const halo_gguf_kv *kv = halo_gguf_kv_at(src, i);
        if (skip && !strcmp(kv->key.data, skip)) continue;
        if (edit && edit(w, kv)) continue;
        copy_kv(w, kv);
    }
    void *img2 = NULL;
    size_t size2;
    CHECK_INT(halo_gguf_writer_write_memory(w, &img2, &size2, err), HALO_OK);
    halo_gguf *g = NULL;
    CHECK_INT(halo_gguf_open_memory(img2, size2, &g, err), HALO_OK);
    halo_status st = halo_hparams_load(g, hp, err);
    halo_gguf_close(g);
    halo_gguf_close(src);
    halo_gguf_writer_free(w);
    free(img2);
    free(img);
    return st;
}

static void loads_deepseek_v4_flash_config_values(void) {
    halo_hparams hp;
    halo_error err = {0};
    halo_status st = load_variant(NULL, NULL, &hp, &err);
    if (st) fprintf(stderr, "  %s\n", err.message);
    CHECK_INT(st, HALO_OK);
    /* Expected values: DeepSeek-V4-Flash config.json (docs/dsv4-flash-table.md). */
    CHECK_INT(hp.n_layer, 43);
    CHECK_INT(hp.n_embd, 4096);
    CHECK_INT(hp.n_vocab, 129280);
    CHECK_INT(hp.n_ctx_train, 1048576);
    CHECK_INT(hp.n_head, 64);
    CHECK_INT(hp.n_head_kv, 1);
    CHECK_INT(hp.head_dim, 512);
    CHECK_INT(hp.rope_dim, 64);
    CHECK_INT(hp.q_lora_rank, 1024);
    CHECK_INT(hp.o_groups, 8);
    CHECK_INT(hp.o_lora_rank, 1024);
    CHECK_INT(hp.sliding_window, 128);
    CHECK(hp.norm_eps == 1e-6f);
    CHECK_INT(hp.compress_ratio[0], 0);
    CHECK_INT(hp.compress_ratio[1], 0);
    CHECK_INT(hp.compress_ratio[2], 4);
    CHECK_INT(hp.compress_ratio[3], 128);
    CHECK_INT(hp.compress_ratio[41], 128);
    CHECK_INT(hp.compress_ratio[42], 4);
    CHECK(hp.compress_rope_base == 160000.0f);
    CHECK_INT(hp.indexer_n_head, 64);
    CHECK_INT(hp.indexer_head_dim, 128);
    CHECK_INT(hp.indexer_top_k, 512);
    CHECK(hp.rope_base == 10000.0f);
    CHECK(hp.rope_yarn);
    CHECK(hp.yarn_factor == 16.0f);
    CHECK_INT(hp.yarn_orig_ctx, 65536);
    CHECK(hp.yarn_beta_fast == 32.0f && hp.yarn_beta_slow == 1.0f);
    CHECK_INT(hp.n_expert, 256);
    CHECK_INT(hp.n_expert_used, 6);
    CHECK_INT(hp.n_expert_shared, 1);
    CHECK_INT(hp.n_ff_exp, 2048);
    CHECK_INT(hp.gating_func, HALO_GATING_SQRTSOFTPLUS);
    CHECK(hp.expert_weights_scale == 1.5f);
    CHECK(hp.expert_weights_norm);
    CHECK_INT(hp.n_hash_layer, 3);
    CHECK(hp.swiglu_clamp_exp[0] == 10.0f && hp.swiglu_clamp_exp[42] == 10.0f);
    CHECK_INT(hp.hc, 4);
    CHECK_INT(hp.hc_sinkhorn_iters, 20);
    CHECK(hp.hc_eps == 1e-6f);
}

/* Every required key, dropped, is named in the error. */
static void each_missing_required_key_is_named(void) {
    static const char *required[] = {
        "general.architecture", "deepseek4.block_count", "deepseek4.embedding_length",
        "deepseek4.context_length", "deepseek4.attention.head_count",
        "deepseek4.attention.head_count_kv", "deepseek4.attention.key_length",
        "deepseek4.attention.value_length", "deepseek4.rope.dimension_count",
        "deepseek4.attention.q_lora_rank", "deepseek4.attention.output_group_count",
        "deepseek4.attention.output_lora_rank", "deepseek4.attention.sliding_window",
        "deepseek4.attention.layer_norm_rms_epsilon", "deepseek4.attention.compress_ratios",
        "deepseek4.attention.compress_rope_freq_base", "deepseek4.attention.indexer.head_count",
        "deepseek4.attention.indexer.key_length", "deepseek4.attention.indexer.top_k",
        "deepseek4.rope.freq_base", "deepseek4.rope.scaling.factor",
        "deepseek4.rope.scaling.original_context_length", "deepseek4.expert_count",
        "deepseek4.expert_used_count", "deepseek4.expert_shared_count",
        "deepseek4.expert_feed_forward_length", "deepseek4.expert_gating_func",
        "deepseek4.hyper_connection.count", "deepseek4.hyper_connection.sinkhorn_iterations",
        "deepseek4.hyper_connection.epsilon"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        halo_hparams hp;
        halo_error err = {0};
        halo_status st = load_variant(required[i], NULL, &hp, &err);
        CHECK_INT(st, HALO_E_NOT_FOUND);
        CHECK_CONTAINS(err.message, required[i]);
    }
    /* The vocabulary size may come from the token list instead; with neither it is an error. */
    halo_hparams hp;
    halo_error err = {0};
    CHECK_INT(load_variant("deepseek4.vocab_size", NULL, &hp, &err), HALO_E_NOT_FOUND);
    CHECK_CONTAINS(err.message, "vocabulary size unknown");
}

static bool ratio_8(halo_gguf_writer *w, const halo_gguf_kv *kv) {
    if (strcmp(kv->key.data, "deepseek4.attention.compress_ratios")) return false;
    int32_t r[44] = {0, 0, 4, 128, 8};
    halo_gguf_writer_set_array(w, kv->key.data, HALO_GGUF_I32, r, 44);
    return true;
}

static bool short_ratios(halo_gguf_writer *w, const halo_gguf_kv *kv) {
    if (strcmp(kv->key.data, "deepseek4.attention.compress_ratios")) return false;
    int32_t r[10] = {0};
    halo_gguf_writer_set_array(w, kv->key.data, HALO_GGUF_I32, r, 10);
    return true;
}

static bool two_kv_heads(halo_gguf_writer *w, const halo_gguf_kv *kv) {
    if (strcmp(kv->key.data, "deepseek4.attention.head_count_kv")) return false;
    halo_gguf_writer_set_u32(w, kv->key.data, 2);
    return true;
}

static bool groups_7(halo_gguf_writer *w, const halo_gguf_kv *kv) {
    if (strcmp(kv->key.data, "deepseek4.attention.output_group_count")) return false;
    halo_gguf_writer_set_u32(w, kv->key.data, 7);
    return true;
}

static bool block_count_as_string(halo_gguf_writer *w, const halo_gguf_kv *kv) {
    if (strcmp(kv->key.data, "deepseek4.block_count")) return false;
    halo_gguf_writer_set_str(w, kv->key.data, "43");
    return true;
}

static bool rope_linear(halo_gguf_writer *w, const halo_gguf_kv *kv) {
    if (strcmp(kv->key.data, "deepseek4.rope.scaling.type")) return false;
    halo_gguf_writer_set_str(w, kv->key.data, "linear");
    return true;
}

static bool other_arch(halo_gguf_writer *w, const halo_gguf_kv *kv) {
    if (strcmp(kv->key.data, "general.architecture")) return false;
    halo_gguf_writer_set_str(w, kv->key.data, "llama");
    return true;
}

static void inconsistent_values_are_named(void) {
    struct {
        edit_fn edit;
        halo_status want;
        const char *fragment;
    } cases[] = {
        {ratio_8, HALO_E_BAD_VALUE, "compress_ratios' entry 4 is 8"},
        {short_ratios, HALO_E_BAD_VALUE, "compress_ratios' has 10 entries"},
        {two_kv_heads, HALO_E_BAD_VALUE, "head_count_kv' = 2: DeepSeek V4 has one shared KV head"},
        {groups_7, HALO_E_BAD_VALUE, "output_group_count' = 7: must divide the head count"},
        {block_count_as_string, HALO_E_TYPE_MISMATCH, "'deepseek4.block_count' has type string"},
        {rope_linear, HALO_E_UNSUPPORTED, "rope.scaling.type' is 'linear'"},
        {other_arch, HALO_E_UNSUPPORTED, "general.architecture is 'llama'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        halo_hparams hp;
        halo_error err = {0};
        CHECK_INT(load_variant(NULL, cases[i].edit, &hp, &err), cases[i].want);
        CHECK_CONTAINS(err.message, cases[i].fragment);
    }
}

/* Keys that may be absent, with the meaning absence has. */
static void optional_keys_take_their_defaults(void) {
    halo_hparams hp;
    halo_error err = {0};
    CHECK_INT(load_variant("deepseek4.swiglu_clamp_exp", NULL, &hp, &err), HALO_OK);
    CHECK(hp.swiglu_clamp_exp[5] == 0.0f); /* no clamp */
    CHECK_INT(load_variant("deepseek4.rope.scaling.type", NULL, &hp, &err), HALO_OK);
    CHECK(!hp.rope_yarn);
    CHECK_INT(load_variant("deepseek4.expert_weights_scale", NULL, &hp, &err), HALO_OK);
    CHECK(hp.expert_weights_scale == 1.0f);
}

int main(void) {
    RUN(loads_deepseek_v4_flash_config_values);
    RUN(each_missing_required_key_is_named);
    RUN(inconsistent_values_are_named);
    RUN(optional_keys_take_their_defaults);
    return check_report();
}
