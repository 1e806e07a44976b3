/* A backend whose ops do nothing: running the forward over it only carves the step's
 * temporaries, which measures the scratch a step needs (halo_forward_scratch_bytes). */
#include "model/forward.h"

static void nop_destroy(halo_backend *be) {
    (void)be;
}
static halo_status nop_alloc(halo_backend *be, uint64_t bytes, halo_buf **out, halo_error *err) {
    (void)be, (void)bytes, (void)err;
    static char dummy;
    *out = (halo_buf *)&dummy;
    return HALO_OK;
}
static void nop_free(halo_backend *be, halo_buf *buf) {
    (void)be, (void)buf;
}
static halo_status nop_rw(halo_backend *be, const halo_buf *buf, uint64_t off, void *p, uint64_t n,
                          halo_error *err) {
    (void)be, (void)buf, (void)off, (void)p, (void)n, (void)err;
    return HALO_OK;
}
static halo_status nop_write(halo_backend *be, halo_buf *buf, uint64_t off, const void *p,
                             uint64_t n, halo_error *err) {
    (void)be, (void)buf, (void)off, (void)p, (void)n, (void)err;
    return HALO_OK;
}
static void nop_embed(halo_backend *be, const halo_tensor *a, const int32_t *b, halo_tensor *c) {
    (void)be, (void)a, (void)b, (void)c;
}
static void nop_matmul(halo_backend *be, const halo_tensor *a, const halo_tensor *b, uint32_t g,
                       halo_tensor *c) {
    (void)be, (void)a, (void)b, (void)g, (void)c;
}
static void nop_norm(halo_backend *be, halo_tensor *x, uint32_t n, const halo_tensor *w, float e) {
    (void)be, (void)x, (void)n, (void)w, (void)e;
}
static void nop_rope(halo_backend *be, halo_tensor *x, const int32_t *p, const halo_rope *r,
                     bool inv) {
    (void)be, (void)x, (void)p, (void)r, (void)inv;
}
static void nop_hc_pre(halo_backend *be, const halo_hc_args *a) {
    (void)be, (void)a;
}
static void nop_hc_post(halo_backend *be, halo_tensor *s, const halo_tensor *y,
                        const halo_tensor *p, const halo_tensor *c) {
    (void)be, (void)s, (void)y, (void)p, (void)c;
}
static void nop_attn(halo_backend *be, const halo_attn_args *a) {
    (void)be, (void)a;
}
static void nop_pool(halo_backend *be, const halo_pool_args *a) {
    (void)be, (void)a;
}
static void nop_topk(halo_backend *be, const halo_topk_args *a) {
    (void)be, (void)a;
}
static void nop_moe(halo_backend *be, const halo_moe_args *a) {
    (void)be, (void)a;
}
static void nop_copy(halo_backend *be, halo_tensor *d, const halo_tensor *s) {
    (void)be, (void)d, (void)s;
}
static halo_status nop_sync(halo_backend *be, halo_error *err) {
    (void)be, (void)err;
    return HALO_OK;
}

const halo_backend_ops halo_measure_ops = {.name = "measure",
                                           .destroy = nop_destroy,
                                           .buf_alloc = nop_alloc,
                                           .buf_free = nop_free,
                                           .buf_wrap_host = NULL,
                                           .buf_write = nop_write,
                                           .buf_read = nop_rw,
                                           .embed = nop_embed,
                                           .matmul = nop_matmul,
                                           .rms_norm = nop_norm,
                                           .rope = nop_rope,
                                           .hc_pre = nop_hc_pre,
                                           .hc_post = nop_hc_post,
                                           .attention = nop_attn,
                                           .pool = nop_pool,
                                           .topk = nop_topk,
                                           .moe = nop_moe,
                                           .copy = nop_copy,
                                           .sync = nop_sync,
                                           .check = nop_sync};
