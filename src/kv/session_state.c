/* Session files and the glue between sessions and images. */
#include "kv/session_state.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/engine_internal.h"

void halo_engine_identify(const halo_engine *e, halo_kv_file_id *id) {
    halo_kv_file_identify(e->gguf, &e->hp, id);
}

const halo_kv *halo_session_kv(const halo_session *s) {
    return s->kv;
}

int64_t halo_session_resume_point(const halo_session *s, uint32_t p) {
    if (p == s->kv->n_past && !s->broken) return p;
    const halo_kv_ckpt *c = halo_kv_ckset_best(s->ckpts, p);
    return c ? c->pos : 0;
}

halo_status halo_session_capture(halo_session *s, halo_kv_image **out, halo_error *err) {
    *out = NULL;
    if (s->broken) {
        halo_status st = halo_session_rewind(s, (uint32_t)s->kv->n_past, err);
        if (st) return halo_error_prefix(err, "session state could not be rebuilt: ");
    }
    return halo_kv_image_capture(s->kv, s->tokens, s->ckpts, out, err);
}

halo_status halo_session_apply(halo_session *s, const halo_kv_image *img, uint32_t at,
                               halo_error *err) {
    halo_status st = halo_kv_image_apply(s->kv, img, at, s->ckpts, err);
    if (st) {
        halo_kv_ckset_clear(s->ckpts);
        halo_kv_reset(s->kv);
        s->n_rows = 0;
        return st;
    }
    memcpy(s->tokens, img->tokens, (size_t)img->ckpt[at]->pos * sizeof *s->tokens);
    s->n_rows = 0; /* no logits until the next eval */
    s->broken = false;
    return HALO_OK;
}

halo_status halo_session_save_file(halo_session *s, const char *path, halo_error *err) {
    return halo_session_save_file_user(s, path, NULL, 0, err);
}

halo_status halo_session_load_file(halo_session *s, const char *path, halo_error *err) {
    return halo_session_load_file_user(s, path, NULL, NULL, err);
}

halo_status halo_session_save_file_user(halo_session *s, const char *path, const void *user,
                                        size_t user_len, halo_error *err) {
    halo_kv_image *img = NULL;
    halo_status st = halo_session_capture(s, &img, err);
    if (st) return halo_error_prefix(err, "%s: ", path);
    halo_kv_file_id id;
    halo_engine_identify(s->e, &id);
    unsigned char *buf = NULL;
    uint64_t n = 0;
    st = halo_kv_file_encode(&id, img, user, user_len, &buf, &n, err);
    halo_kv_image_free(img);
    if (!st) st = halo_kv_file_write_atomic(path, buf, n, err);
    free(buf);
    return st;
}

halo_status halo_session_load_file_user(halo_session *s, const char *path, char **user,
                                        size_t *user_len, halo_error *err) {
    halo_kv_file_id id;
    halo_engine_identify(s->e, &id);
    halo_kv_image *img = NULL;
    void *blob = NULL;
    uint64_t blob_len = 0;
    halo_status st =
        halo_kv_file_read(path, &id, s->kv, &img, user ? &blob : NULL, &blob_len, err);
    if (st) return st;
    st = halo_session_apply(s, img, img->n_ckpt - 1, err);
    halo_kv_image_free(img);
    if (st) {
        free(blob);
        return halo_error_prefix(err, "%s: ", path);
    }
    if (user) *user = blob;
    if (user_len) *user_len = (size_t)blob_len;
    return HALO_OK;
}
