/* The CPU indexer top-k against a brute-force reference: for random queries, keys and head
 * weights, the chosen rows are exactly the k best-scoring causally visible rows, and -1 pads
 * when fewer are visible. */
#include <math.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "check.h"
#include "halo/types.h"
#include "op_util.h"

static void topk_selects_the_best_visible_rows(void) {
    halo_backend *be = NULL;
    halo_error err;
    CHECK_INT(halo_backend_cpu_create(2, false, &be, &err), HALO_OK);
    enum { HD = 64, NH = 8, ROWS = 700, NT = 5, K = 16, RATIO = 4 };
    uint32_t seed = 7;
    float *q = malloc(sizeof(float) * HD * NH * NT), *w = malloc(sizeof(float) * NH * NT);
    float *keys = malloc(sizeof(float) * HD * ROWS);
    for (int i = 0; i < HD * NH * NT; i++) q[i] = frand(&seed);
    for (int i = 0; i < NH * NT; i++) w[i] = frand(&seed);
    for (int i = 0; i < HD * ROWS; i++) keys[i] = frand(&seed);
    int32_t pos[NT] = {2, 30, 1000, 2799, 2800};
    halo_tensor tq = make(be, HALO_TYPE_F32, HD, NH, NT, q), tw = make(be, HALO_TYPE_F32, NH, NT, 1, w);
    halo_tensor tk = make(be, HALO_TYPE_F32, HD, ROWS, 1, keys);
    halo_tensor out = make(be, HALO_TYPE_I32, K, NT, 1, NULL);
    halo_topk_args a = {.q = &tq, .w = &tw, .keys = &tk, .pos = pos, .ratio = RATIO, .top_k = K,
                        .out = &out};
    be->ops->topk(be, &a);
    int32_t got[K * NT];
    be->ops->buf_read(be, out.buf, 0, got, sizeof got, &err);
    for (int t = 0; t < NT; t++) {
        int visible = (pos[t] + 1) / RATIO;
        if (visible > ROWS) visible = ROWS;
        double *score = malloc(sizeof(double) * (visible ? visible : 1));
        for (int s = 0; s < visible; s++) {
            double acc = 0;
            for (int h = 0; h < NH; h++) {
                double d = 0;
                for (int i = 0; i < HD; i++) d += (double)q[(t * NH + h) * HD + i] * keys[s * HD + i];
                acc += (d > 0 ? d / sqrt(HD) : 0) * w[t * NH + h] / sqrt(NH);
            }
            score[s] = acc;
        }
        int k = visible < K ? visible : K;
        /* the k-th best score by brute force; every chosen row must reach it */
        double kth = INFINITY;
        char *used = calloc((size_t)visible + 1, 1);
        for (int i = 0; i < k; i++) {
            int best = -1;
            for (int s = 0; s < visible; s++)
                if (!used[s] && (best < 0 || score[s] > score[best])) best = s;
            used[best] = 1;
            kth = score[best];
        }
        for (int i = 0; i < K; i++) {
            int32_t r = got[t * K + i];
            if (i >= k) {
                CHECK_INT(r, -1);
                continue;
            }
            CHECK(r >= 0 && r < visible);
            if (r >= 0 && r < visible) {
                CHECK(used[r]);
                CHECK(score[r] >= kth - 1e-5);
            }
            for (int j = 0; j < i; j++) CHECK(got[t * K + j] != r);
        }
        free(used);
        free(score);
    }
    be->ops->buf_free(be, tq.buf);
    be->ops->buf_free(be, tw.buf);
    be->ops->buf_free(be, tk.buf);
    be->ops->buf_free(be, out.buf);
    be->ops->destroy(be);
    free(q);
    free(w);
    free(keys);
}

int main(void) {
    RUN(topk_selects_the_best_visible_rows);
    return check_report();
}
