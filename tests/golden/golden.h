/* Golden fixtures for tests: tests/golden/manifest.json, the files it names, and comparison of
 * logits against the oracles' (transformers' DeepseekV4ForCausalLM, llama.cpp's deepseek4).
 * The files are made by tools/oracle/ (see tests/golden/README.md for what they hold).
 *
 * A comparison reports max |got - ref|, that maximum relative to the range of the reference
 * logits, top-1 agreement, and the first position that disagrees together with the top-k
 * decision margins the reference recorded at and before it, so a test can tell a near-tie flip
 * (an indexer or MoE choice decided by less than rounding) from a bug. */
#ifndef HALO_TESTS_GOLDEN_H
#define HALO_TESTS_GOLDEN_H

#include <stddef.h>
#include <stdint.h>

#include "halo/halo.h"
#include "halo/status.h"

typedef struct halo_golden halo_golden;

typedef struct halo_golden_seq {
    const char *name;      /* "L1", "L7", ... "L1100" */
    int32_t length;        /* tokens */
    int64_t offset;        /* first token in tokens.i32 == first row in every logits file */
    const int32_t *tokens; /* length ids, owned by the halo_golden */
    int index;             /* position in the manifest's sequence list */
} halo_golden_seq;

typedef struct halo_golden_greedy {
    const char *prompt;          /* name of the sequence whose tokens are the prompt */
    int32_t steps;               /* generated tokens */
    int64_t row;                 /* first row of this run in greedy_logits */
    const int32_t *ref_tokens;   /* transformers' greedy tokens */
    const float *ref_margins;    /* its top-1 minus top-2 logit at each step */
    const int32_t *llama_tokens; /* llama.cpp's greedy tokens */
} halo_golden_greedy;

typedef struct halo_golden_variant {
    const char *model;    /* "tiny-a", "tiny-yarn" */
    const char *variant;  /* "f32", "f16" */
    char gguf_path[1024]; /* the model file, joined with the fixtures' directory */
    int64_t n_rows;       /* positions over all sequences */
    int32_t n_vocab;
    const float *logits;  /* [n_rows][n_vocab] transformers */
    const float *margins; /* [n_rows][2]: smallest MoE, smallest indexer margin (+inf: none) */
    const float *greedy_logits; /* [sum of steps][n_vocab] transformers, one row per greedy step */
    const float *llama_logits;  /* [n_rows][n_vocab] llama.cpp, NULL where not committed */
    int n_greedy;
    const halo_golden_greedy *greedy;
    /* Quantized variants store the reference for a subset of the sequences (the manifest's
     * variant "sequences"): seq_row[i] is the first row of manifest sequence i in logits and
     * margins, -1 where that sequence is not stored. For the others seq_row[i] = its offset. */
    const int64_t *seq_row;
    const char *description; /* the mix ("" for the F32/F16 variants) */
} halo_golden_variant;

/* Opens DIR/manifest.json and DIR/tokens.i32 (DIR is usually "tests/golden"). The caller frees
 * with halo_golden_close. Variant data is read on first use by halo_golden_variant_get. */
halo_status halo_golden_open(const char *dir, halo_golden **out, halo_error *err);
void halo_golden_close(halo_golden *g);

int32_t halo_golden_n_vocab(const halo_golden *g);
int halo_golden_n_seqs(const halo_golden *g);
const halo_golden_seq *halo_golden_seq_at(const halo_golden *g, int i);
const halo_golden_seq *halo_golden_seq_find(const halo_golden *g, const char *name);

/* Loads (once) and returns a model variant's expected outputs; the halo_golden owns them.
 * Variants without greedy runs (the quantized ones) have n_greedy 0 and greedy_logits NULL. */
halo_status halo_golden_variant_get(halo_golden *g, const char *model, const char *variant,
                                    const halo_golden_variant **out, halo_error *err);

/* 1 when the variant stores the reference for this sequence. */
int halo_golden_variant_has_seq(const halo_golden_variant *v, const halo_golden_seq *seq);

/* llama.cpp's agreement with the transformers reference on one sequence of a variant, as
 * recorded in the manifest (tools/oracle/assemble*.py computed them with the same rules as
 * halo_golden_compare). mode: "batch", "chunk37", "token", and for quantized variants
 * "dequant" (the same weights dequantized to F32: no activation quantization). */
typedef struct halo_golden_figures {
    double max_abs;    /* max |llama - ref| */
    double rel;        /* max_abs / range of the reference logits of the sequence */
    double median_rel; /* median over positions of (max |d| at that position) / range */
    int64_t top1;      /* positions whose argmax agrees */
    int64_t n;         /* positions */
} halo_golden_figures;
halo_status halo_golden_llama_figures(const halo_golden_variant *v, const halo_golden_seq *seq,
                                      const char *mode, halo_golden_figures *out, halo_error *err);

typedef struct halo_golden_cmp {
    int64_t n_pos;       /* positions compared */
    double max_abs;      /* max |got - ref| */
    int64_t max_abs_pos; /* position of max_abs */
    double ref_range;    /* max(ref) - min(ref) over the compared rows */
    double rel;          /* max_abs / ref_range */
    double tol_abs;      /* tol_rel * ref_range: the threshold used below */
    int64_t top1_agree;  /* positions whose argmax is the reference's */
    /* First position where max |got - ref| > tol_abs, or where got's argmax has a reference
     * logit more than tol_abs below the reference's maximum (a flip between candidates closer
     * than tol_abs is a tie, not a disagreement). -1 when every position agrees. */
    int64_t first_bad;
    double first_bad_abs; /* max |got - ref| at first_bad */
    int first_bad_top1;   /* 1 when first_bad is (also) a top-1 disagreement */
    float bad_moe_margin; /* margins recorded at first_bad (+inf: no decision there) */
    float bad_index_margin;
    float prefix_moe_margin; /* smallest margins recorded at or before first_bad */
    float prefix_index_margin;
    int64_t prefix_moe_pos; /* where those were recorded */
    int64_t prefix_index_pos;
    double median_rel; /* median over positions of (max |got - ref| there) / ref_range */
} halo_golden_cmp;

/* Compares n_pos rows of n_vocab logits. margins ([n_pos][2]) may be NULL. */
void halo_golden_compare(const float *ref, const float *got, const float *margins, int64_t n_pos,
                         int32_t n_vocab, double tol_rel, halo_golden_cmp *out);

/* Compares got ([seq->length][n_vocab]) with the transformers reference of one sequence. */
void halo_golden_compare_seq(const halo_golden_variant *v, const halo_golden_seq *seq,
                             const float *got, double tol_rel, halo_golden_cmp *out);

/* 1 when the comparison's first disagreement is preceded (at or before it) by a recorded MoE
 * or indexer margin below eps: a top-k decision that rounding of that size can flip. */
int halo_golden_near_tie(const halo_golden_cmp *c, float eps);

/* One line for test logs: "max|d| 1.2e-06 rel 3.4e-07 top1 129/129 first-bad -" etc. */
void halo_golden_format(const halo_golden_cmp *c, char *buf, size_t n);

/* ---- running halo on the fixtures (golden_run.c) ---- */

/* Every position's logits of tokens[0..n) evaluated by one session in chunks of `chunk` tokens
 * (0: all at once), into *out ([n][n_vocab], caller frees; rows after a failed eval stay 0). */
halo_status halo_golden_eval(halo_engine *e, const int32_t *tokens, int32_t n, int32_t chunk,
                             float **out, halo_error *err);

/* The index of the largest logit (the first of equals). */
int halo_golden_argmax(const float *row, uint32_t n);

#endif
