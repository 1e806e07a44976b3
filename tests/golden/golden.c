/* Golden fixtures: manifest loading and logits comparison (see golden.h). */
#include "golden/golden.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VARIANTS 16

typedef struct variant_slot {
    halo_golden_variant v;
    int loaded;
    char model[64], variant[32];
    float *logits, *margins, *greedy_logits, *llama_logits;
    int64_t *seq_row;
    const cJSON *json; /* the variant's manifest entry (owned by the manifest) */
    halo_golden_greedy *greedy;
    int32_t *greedy_ids; /* ref + llama tokens of every run */
    float *greedy_margins;
} variant_slot;

struct halo_golden {
    char dir[768];
    cJSON *manifest;
    int32_t n_vocab;
    int n_seqs;
    halo_golden_seq *seqs;
    int32_t *tokens;
    int64_t n_tokens;
    int n_slots;
    variant_slot slots[MAX_VARIANTS];
};

static halo_status fail(halo_error *err, halo_status st, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->status = st;
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
    }
    return st;
}

/* Reads a whole file that must hold exactly `bytes` bytes (bytes < 0: any size). */
static halo_status read_file(const char *path, long want, void **out, long *size, halo_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, HALO_E_IO, "%s: cannot open", path);
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return fail(err, HALO_E_IO, "%s: cannot size", path);
    }
    if (want >= 0 && n != want) {
        fclose(f);
        return fail(err, HALO_E_TRUNCATED, "%s: %ld bytes, manifest says %ld", path, n, want);
    }
    char *buf = malloc((size_t)n + 1);
    if (!buf) {
        fclose(f);
        return fail(err, HALO_E_NOMEM, "%s: out of memory", path);
    }
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) {
        free(buf);
        return fail(err, HALO_E_IO, "%s: short read", path);
    }
    buf[n] = 0;
    *out = buf;
    if (size) *size = n;
    return HALO_OK;
}

static const cJSON *item(const cJSON *o, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

static const char *str_item(const cJSON *o, const char *key) {
    const cJSON *s = item(o, key);
    return cJSON_IsString(s) ? s->valuestring : NULL;
}

static int num_item(const cJSON *o, const char *key, double *v) {
    const cJSON *n = item(o, key);
    if (!cJSON_IsNumber(n)) return 0;
    *v = n->valuedouble;
    return 1;
}

halo_status halo_golden_open(const char *dir, halo_golden **out, halo_error *err) {
    *out = NULL;
    halo_golden *g = calloc(1, sizeof(*g));
    if (!g) return fail(err, HALO_E_NOMEM, "out of memory");
    snprintf(g->dir, sizeof(g->dir), "%s", dir);
    char path[1024];
    snprintf(path, sizeof(path), "%s/manifest.json", dir);
    void *text = NULL;
    halo_status st = read_file(path, -1, &text, NULL, err);
    if (st != HALO_OK) goto fail_out;
    g->manifest = cJSON_Parse(text);
    free(text);
    if (!g->manifest) {
        st = fail(err, HALO_E_BAD_VALUE, "%s: not valid JSON", path);
        goto fail_out;
    }
    double v;
    if (!num_item(g->manifest, "vocab_size", &v) || v < 1) {
        st = fail(err, HALO_E_BAD_VALUE, "%s: vocab_size missing", path);
        goto fail_out;
    }
    g->n_vocab = (int32_t)v;

    const cJSON *tok = item(g->manifest, "tokens");
    const char *tok_file = str_item(tok, "file");
    double count;
    if (!tok_file || !num_item(tok, "count", &count)) {
        st = fail(err, HALO_E_BAD_VALUE, "%s: tokens.file/count missing", path);
        goto fail_out;
    }
    g->n_tokens = (int64_t)count;
    snprintf(path, sizeof(path), "%s/%s", dir, tok_file);
    void *tokens = NULL;
    st = read_file(path, (long)(g->n_tokens * 4), &tokens, NULL, err);
    if (st != HALO_OK) goto fail_out;
    g->tokens = tokens; /* little-endian int32: the hosts halo's tests run on */

    const cJSON *seqs = item(g->manifest, "sequences");
    g->n_seqs = cJSON_GetArraySize(seqs);
    g->seqs = calloc((size_t)(g->n_seqs ? g->n_seqs : 1), sizeof(*g->seqs));
    if (!g->seqs) {
        st = fail(err, HALO_E_NOMEM, "out of memory");
        goto fail_out;
    }
    for (int i = 0; i < g->n_seqs; i++) {
        const cJSON *s = cJSON_GetArrayItem(seqs, i);
        double len, off;
        const char *name = str_item(s, "name");
        if (!name || !num_item(s, "length", &len) || !num_item(s, "offset", &off) || off < 0 ||
            len < 1 || off + len > (double)g->n_tokens) {
            st = fail(err, HALO_E_BAD_VALUE, "%s/manifest.json: sequence %d malformed", dir, i);
            goto fail_out;
        }
        g->seqs[i] =
            (halo_golden_seq){name, (int32_t)len, (int64_t)off, g->tokens + (int64_t)off, i};
    }
    *out = g;
    return HALO_OK;
fail_out:
    halo_golden_close(g);
    return st;
}

static void free_slot(variant_slot *s) {
    free(s->logits);
    free(s->margins);
    free(s->greedy_logits);
    free(s->llama_logits);
    free(s->seq_row);
    free(s->greedy);
    free(s->greedy_ids);
    free(s->greedy_margins);
}

void halo_golden_close(halo_golden *g) {
    if (!g) return;
    for (int i = 0; i < g->n_slots; i++)
        free_slot(&g->slots[i]);
    cJSON_Delete(g->manifest);
    free(g->seqs);
    free(g->tokens);
    free(g);
}

int32_t halo_golden_n_vocab(const halo_golden *g) {
    return g->n_vocab;
}
int halo_golden_n_seqs(const halo_golden *g) {
    return g->n_seqs;
}

const halo_golden_seq *halo_golden_seq_at(const halo_golden *g, int i) {
    return i >= 0 && i < g->n_seqs ? &g->seqs[i] : NULL;
}

const halo_golden_seq *halo_golden_seq_find(const halo_golden *g, const char *name) {
    for (int i = 0; i < g->n_seqs; i++)
        if (!strcmp(g->seqs[i].name, name)) return &g->seqs[i];
    return NULL;
}

static halo_status load_f32(const halo_golden *g, const char *rel, int64_t n, float **out,
                            halo_error *err) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", g->dir, rel);
    void *data = NULL;
    halo_status st = read_file(path, (long)(n * 4), &data, NULL, err);
    if (st == HALO_OK) *out = data;
    return st;
}

static int int_array(const cJSON *a, int32_t *dst, int n) {
    if (cJSON_GetArraySize(a) != n) return 0;
    for (int i = 0; i < n; i++) {
        const cJSON *x = cJSON_GetArrayItem(a, i);
        if (!cJSON_IsNumber(x)) return 0;
        dst[i] = (int32_t)x->valuedouble;
    }
    return 1;
}

static halo_status load_slot(halo_golden *g, const cJSON *vj, variant_slot *s, halo_error *err) {
    halo_golden_variant *v = &s->v;
    v->model = s->model;
    v->variant = s->variant;
    v->n_vocab = g->n_vocab;
    v->n_rows = g->n_tokens;
    v->description = str_item(vj, "description");
    if (!v->description) v->description = "";
    s->json = vj;
    const char *gguf = str_item(vj, "gguf");
    const cJSON *ref = item(vj, "reference");
    const cJSON *lc = item(vj, "llamacpp");
    const char *logits = str_item(ref, "logits"), *margins = str_item(ref, "margins");
    const char *greedy_logits = str_item(ref, "greedy_logits");
    if (!gguf || !logits || !margins)
        return fail(err, HALO_E_BAD_VALUE, "manifest: %s-%s lacks file names", s->model,
                    s->variant);
    snprintf(v->gguf_path, sizeof(v->gguf_path), "%s/%s", g->dir, gguf);
    s->seq_row = malloc((size_t)(g->n_seqs ? g->n_seqs : 1) * sizeof(*s->seq_row));
    if (!s->seq_row) return fail(err, HALO_E_NOMEM, "out of memory");
    const cJSON *subset = item(vj, "sequences");
    int64_t rows = g->n_tokens;
    if (subset) { /* a subset of the sequences, stored in the order listed */
        rows = 0;
        for (int i = 0; i < g->n_seqs; i++)
            s->seq_row[i] = -1;
        const cJSON *nj;
        cJSON_ArrayForEach(nj, subset) {
            const halo_golden_seq *q =
                cJSON_IsString(nj) ? halo_golden_seq_find(g, nj->valuestring) : NULL;
            if (!q || s->seq_row[q->index] >= 0)
                return fail(err, HALO_E_BAD_VALUE, "manifest: %s-%s: bad sequence list", s->model,
                            s->variant);
            s->seq_row[q->index] = rows;
            rows += q->length;
        }
    } else {
        for (int i = 0; i < g->n_seqs; i++)
            s->seq_row[i] = g->seqs[i].offset;
    }
    v->n_rows = rows;
    v->seq_row = s->seq_row;
    const int64_t V = g->n_vocab;
    halo_status st;
    if ((st = load_f32(g, logits, rows * V, &s->logits, err)) != HALO_OK) return st;
    if ((st = load_f32(g, margins, rows * 2, &s->margins, err)) != HALO_OK) return st;
    const char *ll = str_item(lc, "logits");
    if (ll && (st = load_f32(g, ll, rows * V, &s->llama_logits, err)) != HALO_OK) return st;

    v->logits = s->logits;
    v->margins = s->margins;
    v->llama_logits = s->llama_logits;
    if (!greedy_logits) return HALO_OK; /* no greedy runs for this variant */

    /* greedy runs: layout from the top-level "greedy", tokens from the variant */
    const cJSON *runs = item(g->manifest, "greedy");
    const cJSON *rref = item(ref, "greedy"), *rll = item(lc, "greedy");
    int n = cJSON_GetArraySize(runs);
    if (cJSON_GetArraySize(rref) != n || cJSON_GetArraySize(rll) != n)
        return fail(err, HALO_E_BAD_VALUE, "manifest: %s-%s greedy runs do not match", s->model,
                    s->variant);
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        double steps;
        if (!num_item(cJSON_GetArrayItem(runs, i), "steps", &steps) || steps < 1)
            return fail(err, HALO_E_BAD_VALUE, "manifest: greedy run %d lacks steps", i);
        total += (int64_t)steps;
    }
    s->greedy = calloc((size_t)(n ? n : 1), sizeof(*s->greedy));
    s->greedy_ids = calloc((size_t)(2 * total + 1), sizeof(int32_t));
    s->greedy_margins = calloc((size_t)(total + 1), sizeof(float));
    if (!s->greedy || !s->greedy_ids || !s->greedy_margins)
        return fail(err, HALO_E_NOMEM, "out of memory");
    if ((st = load_f32(g, greedy_logits, total * V, &s->greedy_logits, err)) != HALO_OK) return st;
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *r = cJSON_GetArrayItem(runs, i);
        const cJSON *a = cJSON_GetArrayItem(rref, i), *b = cJSON_GetArrayItem(rll, i);
        double steps = 0, row = 0;
        num_item(r, "steps", &steps); /* checked above */
        if (!num_item(r, "row", &row))
            return fail(err, HALO_E_BAD_VALUE, "manifest: greedy run %d lacks row", i);
        int k = (int)steps;
        halo_golden_greedy *gr = &s->greedy[i];
        gr->prompt = str_item(r, "prompt");
        gr->steps = k;
        gr->row = (int64_t)row;
        int32_t *rt = s->greedy_ids + at, *lt = s->greedy_ids + total + at;
        float *rm = s->greedy_margins + at;
        const cJSON *m = item(a, "top1_margins");
        if (!gr->prompt || !int_array(item(a, "tokens"), rt, k) ||
            !int_array(item(b, "tokens"), lt, k) || cJSON_GetArraySize(m) != k)
            return fail(err, HALO_E_BAD_VALUE, "manifest: %s-%s greedy run %d malformed", s->model,
                        s->variant, i);
        for (int j = 0; j < k; j++)
            rm[j] = (float)cJSON_GetArrayItem(m, j)->valuedouble;
        gr->ref_tokens = rt;
        gr->llama_tokens = lt;
        gr->ref_margins = rm;
        at += k;
    }
    v->logits = s->logits;
    v->margins = s->margins;
    v->greedy_logits = s->greedy_logits;
    v->llama_logits = s->llama_logits;
    v->n_greedy = n;
    v->greedy = s->greedy;
    return HALO_OK;
}

halo_status halo_golden_variant_get(halo_golden *g, const char *model, const char *variant,
                                    const halo_golden_variant **out, halo_error *err) {
    *out = NULL;
    for (int i = 0; i < g->n_slots; i++) {
        if (!strcmp(g->slots[i].model, model) && !strcmp(g->slots[i].variant, variant)) {
            *out = &g->slots[i].v;
            return HALO_OK;
        }
    }
    const cJSON *models = item(g->manifest, "models"), *m;
    cJSON_ArrayForEach(m, models) {
        const char *mn = str_item(m, "name");
        if (!mn || strcmp(mn, model)) continue;
        const cJSON *vj;
        cJSON_ArrayForEach(vj, item(m, "variants")) {
            const char *vn = str_item(vj, "name");
            if (!vn || strcmp(vn, variant)) continue;
            if (g->n_slots == MAX_VARIANTS)
                return fail(err, HALO_E_UNSUPPORTED, "more than %d variants", MAX_VARIANTS);
            variant_slot *s = &g->slots[g->n_slots];
            memset(s, 0, sizeof(*s));
            snprintf(s->model, sizeof(s->model), "%s", model);
            snprintf(s->variant, sizeof(s->variant), "%s", variant);
            halo_status st = load_slot(g, vj, s, err);
            if (st != HALO_OK) {
                free_slot(s);
                return st;
            }
            g->n_slots++;
            *out = &s->v;
            return HALO_OK;
        }
    }
    return fail(err, HALO_E_NOT_FOUND, "%s/manifest.json: no model %s variant %s", g->dir, model,
                variant);
}

/* NaN sorts last (it is the largest difference). */
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
    return (x > y) - (x < y);
}

static int32_t argmax(const float *row, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (row[i] > row[best]) best = i;
    return best;
}

void halo_golden_compare(const float *ref, const float *got, const float *margins, int64_t n_pos,
                         int32_t n_vocab, double tol_rel, halo_golden_cmp *out) {
    memset(out, 0, sizeof(*out));
    out->n_pos = n_pos;
    out->first_bad = out->max_abs_pos = out->prefix_moe_pos = out->prefix_index_pos = -1;
    out->bad_moe_margin = out->bad_index_margin = INFINITY;
    out->prefix_moe_margin = out->prefix_index_margin = INFINITY;
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n_pos * n_vocab; i++) {
        if (ref[i] < lo) lo = ref[i];
        if (ref[i] > hi) hi = ref[i];
    }
    out->ref_range = n_pos > 0 ? hi - lo : 0.0;
    out->tol_abs = tol_rel * out->ref_range;
    double *pos_max = n_pos > 0 ? malloc((size_t)n_pos * sizeof(*pos_max)) : NULL;
    for (int64_t p = 0; p < n_pos; p++) {
        const float *r = ref + p * n_vocab, *x = got + p * n_vocab;
        double row_max = 0.0;
        for (int32_t v = 0; v < n_vocab; v++) {
            double d = fabs((double)x[v] - (double)r[v]);
            if (!(d <= row_max)) row_max = d; /* NaN in got counts as the largest difference */
        }
        if (!(row_max <= out->max_abs)) {
            out->max_abs = row_max;
            out->max_abs_pos = p;
        }
        if (pos_max) pos_max[p] = row_max;
        int32_t tr = argmax(r, n_vocab), tg = argmax(x, n_vocab);
        if (tr == tg) out->top1_agree++;
        int top1_bad = tr != tg && (double)r[tr] - (double)r[tg] > out->tol_abs;
        if (out->first_bad < 0 && (!(row_max <= out->tol_abs) || top1_bad)) {
            out->first_bad = p;
            out->first_bad_abs = row_max;
            out->first_bad_top1 = top1_bad;
        }
    }
    out->rel = out->ref_range > 0 ? out->max_abs / out->ref_range : out->max_abs;
    out->median_rel = NAN;
    if (pos_max) {
        qsort(pos_max, (size_t)n_pos, sizeof(*pos_max), cmp_double);
        double med =
            n_pos % 2 ? pos_max[n_pos / 2] : 0.5 * (pos_max[n_pos / 2 - 1] + pos_max[n_pos / 2]);
        out->median_rel = out->ref_range > 0 ? med / out->ref_range : med;
        free(pos_max);
    }
    if (margins && out->first_bad >= 0) {
        out->bad_moe_margin = margins[out->first_bad * 2];
        out->bad_index_margin = margins[out->first_bad * 2 + 1];
        for (int64_t p = 0; p <= out->first_bad; p++) {
            if (margins[p * 2] < out->prefix_moe_margin) {
                out->prefix_moe_margin = margins[p * 2];
                out->prefix_moe_pos = p;
            }
            if (margins[p * 2 + 1] < out->prefix_index_margin) {
                out->prefix_index_margin = margins[p * 2 + 1];
                out->prefix_index_pos = p;
            }
        }
    }
}

void halo_golden_compare_seq(const halo_golden_variant *v, const halo_golden_seq *seq,
                             const float *got, double tol_rel, halo_golden_cmp *out) {
    int64_t row = v->seq_row[seq->index];
    if (row < 0) { /* not stored: nothing compared (callers check has_seq first) */
        halo_golden_compare(NULL, NULL, NULL, 0, v->n_vocab, tol_rel, out);
        return;
    }
    halo_golden_compare(v->logits + row * v->n_vocab, got, v->margins + row * 2, seq->length,
                        v->n_vocab, tol_rel, out);
}

int halo_golden_variant_has_seq(const halo_golden_variant *v, const halo_golden_seq *seq) {
    return v->seq_row[seq->index] >= 0;
}

halo_status halo_golden_llama_figures(const halo_golden_variant *v, const halo_golden_seq *seq,
                                      const char *mode, halo_golden_figures *out, halo_error *err) {
    memset(out, 0, sizeof(*out));
    const variant_slot *s = (const variant_slot *)v; /* v is the slot's first member */
    const cJSON *list = item(item(item(s->json, "llamacpp"), "agreement"), mode), *e;
    cJSON_ArrayForEach(e, list) {
        const char *name = str_item(e, "seq");
        if (!name || strcmp(name, seq->name)) continue;
        double top1, n, med;
        if (!num_item(e, "max_abs", &out->max_abs) || !num_item(e, "rel", &out->rel) ||
            !num_item(e, "top1", &top1) || !num_item(e, "n", &n))
            return fail(err, HALO_E_BAD_VALUE, "manifest: %s-%s llama.cpp %s %s malformed",
                        v->model, v->variant, mode, seq->name);
        out->median_rel = num_item(e, "median_rel", &med) ? med : NAN;
        out->top1 = (int64_t)top1;
        out->n = (int64_t)n;
        return HALO_OK;
    }
    return fail(err, HALO_E_NOT_FOUND, "manifest: %s-%s has no llama.cpp %s figures for %s",
                v->model, v->variant, mode, seq->name);
}

int halo_golden_near_tie(const halo_golden_cmp *c, float eps) {
    return c->first_bad >= 0 && (c->prefix_moe_margin < eps || c->prefix_index_margin < eps);
}

void halo_golden_format(const halo_golden_cmp *c, char *buf, size_t n) {
    int k =
        snprintf(buf, n, "max|d| %.2e (pos %lld) rel %.2e top1 %lld/%lld", c->max_abs,
                 (long long)c->max_abs_pos, c->rel, (long long)c->top1_agree, (long long)c->n_pos);
    if (k < 0 || (size_t)k >= n) return;
    if (c->first_bad < 0) {
        snprintf(buf + k, n - (size_t)k, " first-bad -");
        return;
    }
    snprintf(buf + k, n - (size_t)k,
             " first-bad %lld (|d| %.2e%s) margins there moe %.2e index %.2e, smallest up to "
             "it moe %.2e @%lld index %.2e @%lld",
             (long long)c->first_bad, c->first_bad_abs, c->first_bad_top1 ? ", top-1" : "",
             c->bad_moe_margin, c->bad_index_margin, c->prefix_moe_margin,
             (long long)c->prefix_moe_pos, c->prefix_index_margin, (long long)c->prefix_index_pos);
}
