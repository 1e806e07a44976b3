/* Weight binding on DeepSeek V4 Flash's real tensor table (sparse full-size files, both type
 * mixes): every one of the 1,328 tensors is found with the shape the hyperparameters imply;
 * a wrong shape, a missing tensor or an unusable type is named. */
#include "check.h"
#include "common/dsv4_flash.h"
#include "gguf/gguf_test_util.h"
#include "model/weights.h"

typedef struct edit {
    const char *name;     /* tensor to change */
    bool drop;            /* leave it out */
    int64_t ne1;          /* new ne[1] when > 0 */
    int type;             /* new type when >= 0 */
    halo_gguf_writer *w;
} edit;

static int add_tensor(const dsv4_tensor *t, void *user) {
    edit *e = user;
    int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
    uint32_t type = t->type;
    if (e->name && !strcmp(t->name, e->name)) {
        if (e->drop) return 0;
        if (e->ne1 > 0) ne[1] = e->ne1;
        if (e->type >= 0) type = (uint32_t)e->type;
    }
    halo_gguf_writer_add_tensor(e->w, t->name, type, t->n_dims, ne, NULL);
    return 0;
}

static halo_status bind_variant(dsv4_mix mix, edit e, halo_weights *w, halo_error *err) {
    char *dir = tmpdir_make(), path[600];
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    e.w = halo_gguf_writer_create();
    CHECK_INT(dsv4_flash_add_metadata(e.w, mix, err), HALO_OK);
    dsv4_flash_for_each_tensor(mix, add_tensor, &e);
    CHECK_INT(halo_gguf_writer_write_file(e.w, path, err), HALO_OK);
    halo_gguf_writer_free(e.w);
    halo_gguf *g = NULL;
    CHECK_INT(halo_gguf_open(path, &g, err), HALO_OK);
    halo_hparams hp;
    CHECK_INT(halo_hparams_load(g, &hp, err), HALO_OK);
    halo_status st = halo_weights_bind(g, &hp, w, err);
    halo_gguf_close(g);
    tmpdir_remove(dir);
    return st;
}

static halo_status count_one(halo_weight *w, void *user, halo_error *err) {
    (void)w;
    (void)err;
    (*(int *)user)++;
    return HALO_OK;
}

static halo_weights weights; /* large: keep off the stack */

static void binds_every_tensor_of_both_mixes(void) {
    dsv4_mix mixes[2] = {DSV4_MIX_DS4_Q2, DSV4_MIX_LLAMA_CPP};
    for (int m = 0; m < 2; m++) {
        halo_error err = {0};
        halo_status st = bind_variant(mixes[m], (edit){.type = -1}, &weights, &err);
        if (st) fprintf(stderr, "  %s\n", err.message);
        CHECK_INT(st, HALO_OK);
        int n = 0;
        halo_weights_for_each(&weights, count_one, &n, &err);
        CHECK_INT(n, DSV4_FLASH_TENSOR_COUNT);
        CHECK(weights.layer[2].idx_q_b.src != NULL);  /* ratio-4 layer: indexer */
        CHECK(weights.layer[3].idx_q_b.src == NULL);  /* ratio-128 layer: none */
        CHECK(weights.layer[2].tid2eid.src != NULL);  /* hash-routed */
        CHECK(weights.layer[3].probs_b.src != NULL);
    }
    CHECK_INT(weights.layer[5].gate_exps.t.type, HALO_TYPE_MXFP4);
}

static void names_a_tensor_with_the_wrong_shape(void) {
    halo_error err = {0};
    edit e = {.name = "blk.7.attn_q_b.weight", .ne1 = 4096, .type = -1};
    CHECK_INT(bind_variant(DSV4_MIX_DS4_Q2, e, &weights, &err), HALO_E_BAD_VALUE);
    CHECK_CONTAINS(err.message, "tensor 'blk.7.attn_q_b.weight' has shape {1024, 4096, 1, 1}, "
                                "expected {1024, 32768, 1}");
}

static void names_a_missing_tensor(void) {
    halo_error err = {0};
    edit e = {.name = "blk.4.indexer_compressor_ape.weight", .drop = true, .type = -1};
    CHECK_INT(bind_variant(DSV4_MIX_DS4_Q2, e, &weights, &err), HALO_E_NOT_FOUND);
    CHECK_CONTAINS(err.message, "tensor 'blk.4.indexer_compressor_ape.weight' is missing");
}

static void names_a_type_halo_cannot_compute_with(void) {
    halo_error err = {0};
    edit e = {.name = "blk.0.attn_kv.weight", .type = HALO_TYPE_I16};
    CHECK_INT(bind_variant(DSV4_MIX_DS4_Q2, e, &weights, &err), HALO_E_UNSUPPORTED);
    CHECK_CONTAINS(err.message, "'blk.0.attn_kv.weight' has type i16");
}

int main(void) {
    RUN(binds_every_tensor_of_both_mixes);
    RUN(names_a_tensor_with_the_wrong_shape);
    RUN(names_a_missing_tensor);
    RUN(names_a_type_halo_cannot_compute_with);
    return check_report();
}
