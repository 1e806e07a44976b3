/* `halo inspect --check` run as a real process on the embedded model (models/kjv-tiny.gguf) and
 * on copies with one value broken in place: a clean file exits 0 saying so; a routing id out of
 * range, a NaN weight, an infinite block scale and contradictory metadata are each reported on a
 * line naming the tensor (or "model") and exit 1; --json gives the same findings. HALO_BIN is
 * the built binary's path (set by CMake). */
#include <cjson/cJSON.h>
#include <math.h>
#include <sys/wait.h>

#include "check.h"
#include "gguf/gguf_test_util.h"
#include "model_image.h"

#define MODEL "models/kjv-tiny.gguf"

static model_image base;
static char *dir;

static char *run(const char *cmd, int *status) {
    FILE *p = popen(cmd, "r");
    size_t cap = 1 << 16, len = 0, got;
    char *out = malloc(cap);
    while ((got = fread(out + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (cap - len < 2) out = realloc(out, cap *= 2);
    }
    out[len] = 0;
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

/* Writes m and runs `halo inspect --check [flags]` on it; caller frees the output. */
static char *check_image(const model_image *m, const char *flags, int *status) {
    char path[600], cmd[1400];
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    CHECK_INT(model_image_write(m, path), 0);
    snprintf(cmd, sizeof cmd, "%s inspect --check %s '%s'", HALO_BIN, flags, path);
    return run(cmd, status);
}

static void clean_model_passes(void) {
    int status;
    char *out = check_image(&base, "", &status);
    CHECK_INT(status, 0);
    CHECK_CONTAINS(out, "178 tensors checked (9.93 MiB read): no problems found");
    free(out);
}

static void broken_values_are_reported_per_tensor(void) {
    model_image m;
    CHECK_INT(model_image_copy(&m, &base), 0);
    int32_t *ids = model_image_tensor_data(&m, "blk.1.ffn_gate_tid2eid.weight");
    ids[2 * 9] = 8;                /* row 9: out of range */
    ids[2 * 11 + 1] = ids[2 * 11]; /* row 11: the same expert twice */
    float *norm = model_image_tensor_data(&m, "blk.2.attn_norm.weight");
    norm[3] = NAN;
    /* q8_0 blocks are 34 bytes: an f16 scale, then 32 int8 values. 0x7c00 is +inf. */
    uint8_t *emb = model_image_tensor_data(&m, "token_embd.weight");
    emb[34 * 10] = 0x00;
    emb[34 * 10 + 1] = 0x7c;
    int status;
    char *out = check_image(&m, "", &status);
    CHECK_INT(status, 1);
    CHECK_CONTAINS(out, "blk.1.ffn_gate_tid2eid.weight: 1 expert ids outside 0..7 and 1 of 4096 "
                        "rows naming an expert twice; first: row 9 (token 9) entry 0 = 8 "
                        "(out of range)");
    CHECK_CONTAINS(out, "blk.2.attn_norm.weight: 1 of 256 f32 values are NaN or infinite; first: "
                        "element 3");
    CHECK_CONTAINS(out, "token_embd.weight: 1 of 32768 q8_0 blocks have a NaN or infinite scale; "
                        "first: block 10 (elements 320..351)");
    CHECK_CONTAINS(out, "3 with problems, 0 model problems");
    free(out);

    out = check_image(&m, "--json", &status);
    CHECK_INT(status, 1);
    cJSON *j = cJSON_Parse(out);
    CHECK(j != NULL);
    CHECK(cJSON_IsFalse(cJSON_GetObjectItem(j, "ok")));
    CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "problems")), 3);
    const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "problems"), 0);
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(first, "tensor")), "token_embd.weight");
    cJSON_Delete(j);
    free(out);
    model_image_free(&m);
}

static void model_problems_are_reported(void) {
    model_image m;
    CHECK_INT(model_image_copy(&m, &base), 0);
    CHECK_INT(model_image_set_int(&m, "deepseek4.expert_used_count", -1, 9), 0);
    CHECK_INT(model_image_set_int(&m, "tokenizer.ggml.bos_token_id", -1, 5000), 0);
    int status;
    char *out = check_image(&m, "", &status);
    CHECK_INT(status, 1);
    CHECK_CONTAINS(out, "model: metadata key 'deepseek4.expert_used_count' = 9");
    CHECK_CONTAINS(out, "model: tokenizer.ggml.bos_token_id = 5000: outside the vocabulary");
    CHECK_CONTAINS(out, "blk.0.ffn_gate_tid2eid.weight: expert ids not checked");
    free(out);
    model_image_free(&m);
}

int main(void) {
    if (model_image_load(&base, MODEL)) {
        fprintf(stderr, "cannot read %s\n", MODEL);
        return 1;
    }
    dir = tmpdir_make();
    RUN(clean_model_passes);
    RUN(broken_values_are_reported_per_tensor);
    RUN(model_problems_are_reported);
    tmpdir_remove(dir);
    model_image_free(&base);
    return check_report();
}
