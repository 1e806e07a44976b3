/* A full-width synthetic DeepSeek V4 Flash, made in place with no file: the real GGUF metadata
 * and tensor table (names, shapes, types of ds4's q2 file; docs/synthetic.md), any number of
 * layers up to 43 (keeping the layer pattern: two window-only layers, then ratio 4 with the
 * indexer and ratio 128 alternating; the first three layers hash-routed), three expert mixes,
 * and random well-formed blocks (finite, small scales; distinct experts in every hash-routing
 * row) written by many threads straight into the memory the weights live in.
 *
 * Every byte is a pure function of (seed, tensor index, position), so any range of a tensor can
 * be generated on its own: a GPU backend can fill device memory through staging buffers piece by
 * piece (halo_synth_fill) and get the same weights as the CPU. */
#ifndef HALO_MODEL_SYNTHETIC_H
#define HALO_MODEL_SYNTHETIC_H

#include <stdbool.h>
#include <stdint.h>

#include "halo/gguf.h"
#include "halo/plan.h"

typedef enum halo_synth_mix {
    /* ds4's q2 file: IQ2_XXS routed gate/up, Q2_K routed down, Q8_0 attention / shared
     * experts / output head, F16 embedding / router / compressors / indexer / HC mixers, F32
     * vectors. 43 layers: 1,328 tensors, 86,714,775,900 bytes (80.76 GiB). */
    HALO_SYNTH_Q2 = 0,
    /* the seeds' "Flash Q2-Q4 (L37-42 Q4K)": routed gate/up/down of layers 37-42 in Q4_K. */
    HALO_SYNTH_Q2Q4 = 1,
    /* routed experts in MXFP4 (as the checkpoint ships them and llama.cpp's converter keeps
     * them), everything else as q2. */
    HALO_SYNTH_MXFP4 = 2,
    HALO_SYNTH_MIX_COUNT
} halo_synth_mix;

#define HALO_SYNTH_MAX_LAYER 43
#define HALO_SYNTH_PREFIX "synthetic:"

typedef struct halo_synth_spec {
    halo_synth_mix mix;
    uint32_t n_layer; /* 1..43 */
    uint64_t seed;
    /* Reduced sizes for fast tests, every other shape real: routed experts per layer (6..256)
     * and vocabulary rows (>= 16); 0 = the real 256 and 129,280. */
    uint32_t n_expert, n_vocab;
} halo_synth_spec;

/* The spec's expert count and vocabulary size (the real ones unless reduced). */
uint32_t halo_synth_n_expert(const halo_synth_spec *s);
uint32_t halo_synth_n_vocab(const halo_synth_spec *s);

/* True when a model path names a synthetic model ("synthetic:dsv4-flash-q2:4"). */
bool halo_synth_is_path(const char *path);

/* Parses "dsv4-flash-q2|q2q4|mxfp4[:LAYERS][/eEXPERTS][/vVOCAB][@SEED]", with or without the
 * "synthetic:" prefix. LAYERS defaults to 43, SEED to 1; /e and /v reduce the expert count and
 * the vocabulary (a 1-layer "/e8/v1024" model is 250 MB instead of 3.3 GB). */
halo_status halo_synth_parse(const char *s, halo_synth_spec *out, halo_error *err);

/* "dsv4-flash-q2" ... */
const char *halo_synth_mix_name(halo_synth_mix mix);

/* ---- the table ----------------------------------------------------------------------------- */

typedef struct halo_synth_tensor {
    char name[64];
    uint32_t type; /* halo_type id */
    uint32_t n_dims;
    int64_t ne[HALO_GGUF_MAX_DIMS]; /* ggml order; unused = 1 */
    uint64_t n_bytes;
} halo_synth_tensor;

/* Calls fn for every tensor in file order (fn returns non-zero to stop); returns the count. */
typedef int (*halo_synth_tensor_fn)(const halo_synth_tensor *t, void *user);
uint64_t halo_synth_for_each_tensor(const halo_synth_spec *s, halo_synth_tensor_fn fn, void *user);
/* Sum of every tensor's bytes (no alignment padding). */
uint64_t halo_synth_tensor_bytes(const halo_synth_spec *s);

/* Sets the metadata and adds every tensor with data NULL. */
halo_status halo_synth_add_to_writer(const halo_synth_spec *s, halo_gguf_writer *w,
                                     halo_error *err);

/* ---- the bytes ----------------------------------------------------------------------------- */

/* Fills bytes [off, off + n) of tensor t, the index-th tensor of the model, into dst. off and n
 * must be multiples of halo_synth_fill_unit(t) (n may also end at the tensor's end). */
halo_status halo_synth_fill(const halo_synth_spec *s, const halo_gguf_tensor *t, uint64_t index,
                            void *dst, uint64_t off, uint64_t n, halo_error *err);
/* The granule a range of t may start at: a block, an element, or a hash-table row. */
uint64_t halo_synth_fill_unit(const halo_gguf_tensor *t);

/* Where tensor `index`'s bytes go (host memory of t->n_bytes bytes), or NULL to skip it. This is
 * the seam for backends: the CPU returns the arena's pointer; a GPU backend that fills device
 * memory calls halo_synth_fill itself on staging buffers. */
typedef void *(*halo_synth_dst_fn)(uint64_t index, const halo_gguf_tensor *t, void *user);

/* Fills every tensor of g (a synthetic model's header) with `threads` threads (0: one per
 * online CPU), in chunks of a few MiB; progress as the loader reports it (may be NULL). */
halo_status halo_synth_fill_all(const halo_synth_spec *s, const halo_gguf *g, halo_synth_dst_fn dst,
                                void *user, uint32_t threads, halo_load_progress_fn progress,
                                void *progress_user, halo_error *err);

/* ---- the model in place -------------------------------------------------------------------- */

/* Opens a synthetic model as the engine opens a file: *g is the GGUF header of the model (an
 * in-memory image) and *arena the memory every tensor will live in (one anonymous mapping,
 * reserved but not yet touched). Only the hash-routing tables are generated (a few MB: opening
 * a model checks them); the rest waits, so admission can refuse first. */
halo_status halo_synth_open(const char *path, halo_gguf **g, halo_mem_arena **arena,
                            halo_error *err);
/* Generates the tensors of a model opened by halo_synth_open into its arena: those with only[i]
 * set, or every one when only is NULL. */
halo_status halo_synth_fill_arena(const char *path, const halo_gguf *g, halo_mem_arena *arena,
                                  const bool *only, uint32_t threads,
                                  halo_load_progress_fn progress, void *user, halo_error *err);

/* Writes the synthetic model to a GGUF file (llama.cpp reads it: the same weights for both
 * engines), generating it tensor by tensor with `threads` threads. */
halo_status halo_synth_write_gguf(const halo_synth_spec *s, const char *path, uint32_t threads,
                                  halo_load_progress_fn progress, void *user, halo_error *err);

#endif
