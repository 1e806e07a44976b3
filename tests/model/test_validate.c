/* A model file is untrusted input: values used as indices (the hash-routing tables) and metadata
 * that sizes allocations or bounds loops are checked when the model is opened, and a bad one is
 * refused with an error naming the tensor (row, value) or key. Each case edits one value of the
 * embedded model (models/kjv-tiny.gguf: 6 layers, 2 hash layers, 8 experts, 2 used per token,
 * vocabulary 4096) in place and opens the result; before this check, out-of-range and negative
 * ids crashed `halo run` with a segmentation fault. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "gguf/gguf_test_util.h"
#include "halo/halo.h"
#include "model_image.h"

#define MODEL "models/kjv-tiny.gguf"
#define TABLE0 "blk.0.ffn_gate_tid2eid.weight"
#define TABLE1 "blk.1.ffn_gate_tid2eid.weight"
#define N_USED 2

static model_image base;
static char *dir;

/* Writes m and opens it as a model; returns the status, with the message in err. On success,
 * evaluates two tokens (the model must also run). */
static halo_status open_image(const model_image *m, halo_error *err) {
    char path[600];
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    CHECK_INT(model_image_write(m, path), 0);
    halo_engine_params p = {.model_path = path, .threads = 1, .n_ctx = 64};
    halo_engine *e = NULL;
    halo_status st = halo_engine_open(&p, &e, err);
    if (st) return st;
    halo_session *s = NULL;
    int32_t toks[2] = {0, 5};
    st = halo_session_create(e, 64, &s, err);
    if (!st) st = halo_session_eval(s, toks, 2, false, err);
    halo_session_free(s);
    halo_engine_close(e);
    return st;
}

/* Opens the base model with one edit applied by fn; checks the status and message. */
typedef void (*edit_fn)(model_image *m);

static void expect(edit_fn edit, halo_status want, const char *fragment) {
    model_image m;
    CHECK_INT(model_image_copy(&m, &base), 0);
    edit(&m);
    halo_error err = {0};
    halo_status st = open_image(&m, &err);
    CHECK_INT(st, want);
    if (fragment) CHECK_CONTAINS(err.message, fragment);
    if (st != want) fprintf(stderr, "  got: %s\n", err.message);
    model_image_free(&m);
}

static int32_t *table(model_image *m, const char *name) {
    int32_t *t = model_image_tensor_data(m, name);
    CHECK(t != NULL);
    return t;
}

static void no_edit(model_image *m) {
    (void)m;
}

static void unedited_model_opens_and_runs(void) {
    expect(no_edit, HALO_OK, NULL);
}

/* ---- routing tables ----------------------------------------------------------------------- */

static void id_8(model_image *m) {
    table(m, TABLE1)[5 * N_USED + 1] = 8;
}
static void id_huge(model_image *m) {
    table(m, TABLE0)[4095 * N_USED] = 1 << 30;
}
static void id_negative(model_image *m) {
    table(m, TABLE0)[17 * N_USED] = -1;
}
static void id_twice(model_image *m) {
    int32_t *t = table(m, TABLE1);
    t[7 * N_USED + 1] = t[7 * N_USED];
}

static void routing_ids_out_of_range_are_refused(void) {
    expect(id_8, HALO_E_BAD_VALUE,
           "tensor '" TABLE1 "' row 5 (token 5) entry 1: expert id 8 is outside 0..7 "
           "(expert_count 8)");
    expect(id_huge, HALO_E_BAD_VALUE,
           "'" TABLE0 "' row 4095 (token 4095) entry 0: expert id "
           "1073741824 is outside 0..7");
}

static void negative_routing_ids_are_refused(void) {
    expect(id_negative, HALO_E_BAD_VALUE,
           "'" TABLE0 "' row 17 (token 17) entry 0: expert id -1 is outside 0..7");
}

static void duplicate_experts_in_a_row_are_refused(void) {
    expect(id_twice, HALO_E_BAD_VALUE, "'" TABLE1 "' row 7 (token 7) entry 1: expert id");
    expect(id_twice, HALO_E_BAD_VALUE, "is already in this row");
}

/* The tensor info's dims and type, edited in place: ne[d] at info + 4 + 8d, type after them. */
static void set_dim(model_image *m, const char *name, int d, int64_t v) {
    const image_tensor *t = model_image_tensor(m, name);
    memcpy(m->data + t->info_off + 4 + 8 * d, &v, 8);
}
static void table_of_one_column(model_image *m) {
    set_dim(m, TABLE0, 0, 1);
}
static void table_of_half_the_vocab(model_image *m) {
    set_dim(m, TABLE1, 1, 2048);
}
static void table_as_f32(model_image *m) {
    const image_tensor *t = model_image_tensor(m, TABLE0);
    uint32_t f32 = HALO_TYPE_F32;
    memcpy(m->data + t->info_off + 4 + 8 * t->n_dims, &f32, 4);
}

static void set_type(model_image *m, const char *name, uint32_t type) {
    const image_tensor *t = model_image_tensor(m, name);
    memcpy(m->data + t->info_off + 4 + 8 * t->n_dims, &type, 4);
}
static void norm_as_f16(model_image *m) {
    set_type(m, "blk.3.ffn_norm.weight", HALO_TYPE_F16);
}

/* rms_norm reads its weight as f32: an f16 one would be read past its end. */
static void norm_weights_of_another_type_are_refused(void) {
    expect(norm_as_f16, HALO_E_BAD_VALUE,
           "tensor 'blk.3.ffn_norm.weight' has type f16: norm weights are f32");
}

static void routing_tables_of_the_wrong_shape_or_type_are_refused(void) {
    expect(table_of_one_column, HALO_E_BAD_VALUE,
           "tensor '" TABLE0 "' has shape {1, 4096, 1, 1}, expected {2, 4096, 1}");
    expect(table_of_half_the_vocab, HALO_E_BAD_VALUE,
           "tensor '" TABLE1 "' has shape {2, 2048, 1, 1}, expected {2, 4096, 1}");
    expect(table_as_f32, HALO_E_BAD_VALUE,
           "tensor '" TABLE0 "' has type f32: a routing table holds expert ids as i32");
}

/* ---- metadata ----------------------------------------------------------------------------- */

#define SET(name, key, v)                                                                          \
    static void name(model_image *m) {                                                             \
        CHECK_INT(model_image_set_int(m, key, -1, v), 0);                                          \
    }
SET(used_9, "deepseek4.expert_used_count", 9)
SET(hash_7, "deepseek4.hash_layer_count", 7)
SET(indexer_dim_16, "deepseek4.attention.indexer.key_length", 16)
SET(rope_dim_odd, "deepseek4.rope.dimension_count", 31)
SET(window_2g, "deepseek4.attention.sliding_window", 1u << 31)
SET(ctx_4g, "deepseek4.context_length", 0xffffffffu)
SET(embd_4g, "deepseek4.embedding_length", 0xfffffff0u)
SET(heads_4g, "deepseek4.attention.head_count", 0xffffffffu)
SET(experts_4g, "deepseek4.expert_count", 0xffffffffu)
SET(ff_4g, "deepseek4.expert_feed_forward_length", 0xffffffffu)
SET(top_k_0, "deepseek4.attention.indexer.top_k", 0)
SET(hc_4g, "deepseek4.hyper_connection.count", 0xffffffffu)
SET(sinkhorn_4g, "deepseek4.hyper_connection.sinkhorn_iterations", 0xffffffffu)
SET(vocab_4g, "deepseek4.vocab_size", 0xffffffffu)
static void eps_nan(model_image *m) {
    CHECK_INT(model_image_set_f32(m, "deepseek4.attention.layer_norm_rms_epsilon", NAN), 0);
}

static void contradictory_metadata_is_refused_naming_the_key(void) {
    expect(used_9, HALO_E_BAD_VALUE,
           "'deepseek4.expert_used_count' = 9: must be 1 to expert_count");
    expect(hash_7, HALO_E_BAD_VALUE, "'deepseek4.hash_layer_count' = 7: exceeds block_count");
    expect(indexer_dim_16, HALO_E_BAD_VALUE,
           "'deepseek4.attention.indexer.key_length' = 16: must be at least "
           "rope.dimension_count");
    expect(rope_dim_odd, HALO_E_BAD_VALUE, "'deepseek4.rope.dimension_count' = 31");
    expect(top_k_0, HALO_E_BAD_VALUE, "'deepseek4.attention.indexer.top_k' = 0");
    expect(eps_nan, HALO_E_BAD_VALUE, "'deepseek4.attention.layer_norm_rms_epsilon' = nan");
}

/* Values that would size terabytes of state or billions of loop trips. */
static void metadata_asking_for_absurd_sizes_is_refused_naming_the_key(void) {
    expect(window_2g, HALO_E_BAD_VALUE, "'deepseek4.attention.sliding_window' = 2147483648");
    expect(ctx_4g, HALO_E_BAD_VALUE, "'deepseek4.context_length' = 4294967295");
    expect(embd_4g, HALO_E_BAD_VALUE, "'deepseek4.embedding_length' = 4294967280");
    expect(heads_4g, HALO_E_BAD_VALUE, "'deepseek4.attention.head_count' = 4294967295");
    expect(experts_4g, HALO_E_BAD_VALUE, "'deepseek4.expert_count' = 4294967295");
    expect(ff_4g, HALO_E_BAD_VALUE, "'deepseek4.expert_feed_forward_length' = 4294967295");
    expect(hc_4g, HALO_E_BAD_VALUE, "'deepseek4.hyper_connection.count' = 4294967295");
    expect(sinkhorn_4g, HALO_E_BAD_VALUE,
           "'deepseek4.hyper_connection.sinkhorn_iterations' = 4294967295");
    expect(vocab_4g, HALO_E_BAD_VALUE, "'deepseek4.vocab_size' = 4294967295");
}

int main(void) {
    if (model_image_load(&base, MODEL)) {
        fprintf(stderr, "cannot read %s\n", MODEL);
        return 1;
    }
    dir = tmpdir_make();
    RUN(unedited_model_opens_and_runs);
    RUN(routing_ids_out_of_range_are_refused);
    RUN(negative_routing_ids_are_refused);
    RUN(duplicate_experts_in_a_row_are_refused);
    RUN(routing_tables_of_the_wrong_shape_or_type_are_refused);
    RUN(norm_weights_of_another_type_are_refused);
    RUN(contradictory_metadata_is_refused_naming_the_key);
    RUN(metadata_asking_for_absurd_sizes_is_refused_naming_the_key);
    tmpdir_remove(dir);
    model_image_free(&base);
    return check_report();
}
