/* `halo inspect` run as a real process on files written by the writer: its JSON must describe
 * what was written, its text must show the same facts, and a corrupt file must exit 1 with the
 * validation error. HALO_BIN is the built binary's path (set by CMake). */
#include <cjson/cJSON.h>
#include <sys/wait.h>
#include <time.h>

#include "check.h"
#include "common/dsv4_flash.h"
#include "gguf/gguf_test_util.h"

/* Runs a shell command, captures stdout (and stderr when merge is set) and the exit status. */
static char *run(const char *cmd, int *status) {
    FILE *p = popen(cmd, "r");
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    size_t got;
    while ((got = fread(out + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (cap - len < 2) out = realloc(out, cap *= 2);
    }
    out[len] = 0;
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

static void write_model(const char *path) {
    halo_gguf_writer *w = halo_gguf_writer_create();
    halo_gguf_writer_set_str(w, "general.architecture", "deepseek4");
    halo_gguf_writer_set_str(w, "general.name", "inspect-test");
    halo_gguf_writer_set_u32(w, "deepseek4.block_count", 2);
    halo_gguf_writer_set_u32(w, "deepseek4.embedding_length", 64);
    int32_t ratios[2] = {0, 4};
    halo_gguf_writer_set_array(w, "deepseek4.attention.compress_ratios", HALO_GGUF_I32, ratios, 2);
    halo_gguf_writer_set_str(w, "tokenizer.ggml.model", "no_vocab");
    int64_t emb[2] = {64, 1000}, attn[2] = {64, 64}, norm[1] = {64};
    halo_gguf_writer_add_tensor(w, "token_embd.weight", HALO_TYPE_F16, 2, emb, NULL);
    halo_gguf_writer_add_tensor(w, "blk.0.attn_q.weight", HALO_TYPE_Q8_0, 2, attn, NULL);
    halo_gguf_writer_add_tensor(w, "blk.0.attn_norm.weight", HALO_TYPE_F32, 1, norm, NULL);
    halo_gguf_writer_add_tensor(w, "blk.1.attn_q.weight", HALO_TYPE_Q8_0, 2, attn, NULL);
    halo_error err = {0};
    CHECK_INT(halo_gguf_writer_write_file(w, path, &err), HALO_OK);
    halo_gguf_writer_free(w);
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static void json_describes_the_written_model(void) {
    char *dir = tmpdir_make(), path[600], cmd[1400];
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    write_model(path);
    snprintf(cmd, sizeof cmd, "%s inspect --json --tensors '%s'", HALO_BIN, path);
    int status;
    char *out = run(cmd, &status);
    CHECK_INT(status, 0);
    cJSON *j = cJSON_Parse(out);
    CHECK(j != NULL);
    if (j) {
        CHECK_STR(cJSON_GetObjectItem(j, "architecture")->valuestring, "deepseek4");
        CHECK(num(j, "tensor_count") == 4);
        /* f16 64x1000 = 128000, q8_0 64x64 = 128 blocks x 34 = 4352 (x2), f32 64 = 256 */
        CHECK(num(j, "tensor_bytes") == 128000 + 4352 * 2 + 256);
        const cJSON *hp = cJSON_GetObjectItem(j, "hyperparameters");
        CHECK(num(hp, "block_count") == 2);
        CHECK(num(hp, "embedding_length") == 64);
        const cJSON *ratios = cJSON_GetObjectItem(hp, "attention.compress_ratios");
        CHECK(num(ratios, "length") == 2);
        CHECK(cJSON_GetArrayItem(cJSON_GetObjectItem(ratios, "values"), 1)->valuedouble == 4);
        const cJSON *types = cJSON_GetObjectItem(j, "bytes_by_type");
        CHECK(num(cJSON_GetObjectItem(types, "q8_0"), "tensors") == 2);
        CHECK(num(cJSON_GetObjectItem(types, "q8_0"), "bytes") == 8704);
        const cJSON *layers = cJSON_GetObjectItem(j, "bytes_per_layer");
        CHECK_INT(cJSON_GetArraySize(layers), 2);
        CHECK(num(cJSON_GetArrayItem(layers, 0), "bytes") == 4352 + 256);
        CHECK(num(cJSON_GetObjectItem(j, "bytes_outside_layers"), "bytes") == 128000);
        const cJSON *largest = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "largest_tensors"), 0);
        CHECK_STR(cJSON_GetObjectItem(largest, "name")->valuestring, "token_embd.weight");
        CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "tensors")), 4);
        const cJSON *shape =
            cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "tensors"), 0), "shape");
        CHECK(cJSON_GetArrayItem(shape, 1)->valuedouble == 1000);
        CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "shards")), 1);
        cJSON_Delete(j);
    }
    free(out);
    tmpdir_remove(dir);
}

static void text_output_shows_the_summary(void) {
    char *dir = tmpdir_make(), path[600], cmd[1400];
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    write_model(path);
    snprintf(cmd, sizeof cmd, "%s inspect '%s'", HALO_BIN, path);
    int status;
    char *out = run(cmd, &status);
    CHECK_INT(status, 0);
    CHECK_CONTAINS(out, "architecture: deepseek4");
    CHECK_CONTAINS(out, "name:         inspect-test");
    CHECK_CONTAINS(out, "4 tensors");
    CHECK_CONTAINS(out, "attention.compress_ratios");
    CHECK_CONTAINS(out, "[2 x i32] 0 4");
    CHECK_CONTAINS(out, "tokenizer:    no_vocab");
    CHECK_CONTAINS(out, "q8_0");
    CHECK_CONTAINS(out, "blk.1");
    CHECK(strstr(out, "offset") == NULL); /* the tensor list only comes with --tensors */
    free(out);
    tmpdir_remove(dir);
}

static void corrupt_file_exits_1_with_the_validation_error(void) {
    char *dir = tmpdir_make(), path[600], cmd[1400];
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    write_model(path);
    if (truncate(path, 100) != 0) perror("truncate");
    snprintf(cmd, sizeof cmd, "%s inspect '%s' 2>&1", HALO_BIN, path);
    int status;
    char *out = run(cmd, &status);
    CHECK_INT(status, 1);
    CHECK_CONTAINS(out, "m.gguf: truncated");
    free(out);
    snprintf(cmd, sizeof cmd, "%s inspect --bogus '%s' 2>&1", HALO_BIN, path);
    out = run(cmd, &status);
    CHECK_INT(status, 2);
    CHECK_CONTAINS(out, "unknown option '--bogus'");
    free(out);
    tmpdir_remove(dir);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The full-size DeepSeek V4 Flash table (ds4's q2 mix) as a sparse file: inspect must report
 * ds4's published 80.76 GiB, 1,328 tensors and the expert types, from the header alone. */
static void inspects_the_sparse_full_size_dsv4_flash_file(void) {
    char *dir = tmpdir_make(), path[600], cmd[1400];
    snprintf(path, sizeof path, "%s/DeepSeek-V4-Flash-q2.gguf", dir);
    double t0 = now_s();
    halo_gguf_writer *w = halo_gguf_writer_create();
    halo_error err = {0};
    CHECK_INT(dsv4_flash_add_to_writer(w, DSV4_MIX_DS4_Q2, &err), HALO_OK);
    CHECK_INT(halo_gguf_writer_write_file(w, path, &err), HALO_OK);
    halo_gguf_writer_free(w);
    double t1 = now_s();
    snprintf(cmd, sizeof cmd, "%s inspect --json '%s'", HALO_BIN, path);
    int status;
    char *out = run(cmd, &status);
    double t2 = now_s();
    printf("  wrote the sparse file in %.1f ms, `halo inspect --json` took %.1f ms\n",
           (t1 - t0) * 1e3, (t2 - t1) * 1e3);
    CHECK_INT(status, 0);
    cJSON *j = cJSON_Parse(out);
    CHECK(j != NULL);
    if (j) {
        CHECK(num(j, "tensor_count") == 1328);
        double gib = num(j, "tensor_bytes") / (1024.0 * 1024 * 1024);
        CHECK(gib > 80.755 && gib < 80.765);
        const cJSON *types = cJSON_GetObjectItem(j, "bytes_by_type");
        CHECK(num(cJSON_GetObjectItem(types, "iq2_xxs"), "tensors") == 86); /* gate + up x 43 */
        CHECK(num(cJSON_GetObjectItem(types, "q2_K"), "tensors") == 43);   /* down x 43 */
        CHECK(num(cJSON_GetObjectItem(j, "hyperparameters"), "block_count") == 43);
        CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "bytes_per_layer")), 43);
        /* F16 embedding (4096 x 129280 x 2 B) beats a Q2_K down expert stack (672 MiB). */
        const cJSON *largest = cJSON_GetObjectItem(j, "largest_tensors");
        CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(largest, 0), "name")->valuestring,
                  "token_embd.weight");
        CHECK_CONTAINS(cJSON_GetObjectItem(cJSON_GetArrayItem(largest, 1), "name")->valuestring,
                       "ffn_down_exps");
        cJSON_Delete(j);
    }
    free(out);
    tmpdir_remove(dir);
}

/* A file written by llama.cpp's gguf-py: inspect reports what its generator says it wrote. */
static void inspects_the_ggufpy_fixture(void) {
    const char *path = "tests/data/gguf/ggufpy-mixed.gguf";
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "%s inspect --json --tensors '%s'", HALO_BIN, path);
    int status;
    char *out = run(cmd, &status);
    CHECK_INT(status, 0);
    FILE *f = fopen("tests/data/gguf/ggufpy-mixed.expected.json", "rb");
    CHECK(f != NULL);
    char *expected_text = calloc(1, 1 << 20);
    if (f) {
        CHECK(fread(expected_text, 1, (1 << 20) - 1, f) > 0);
        fclose(f);
    }
    cJSON *j = cJSON_Parse(out), *want = cJSON_Parse(expected_text);
    CHECK(j && want);
    if (j && want) {
        const cJSON *tensors = cJSON_GetObjectItem(want, "tensors");
        double total = 0;
        const cJSON *t;
        cJSON_ArrayForEach(t, tensors) total += num(t, "n_bytes");
        CHECK(num(j, "tensor_count") == cJSON_GetArraySize(tensors));
        CHECK(num(j, "tensor_bytes") == total);
        CHECK(num(j, "alignment") == num(want, "alignment"));
        CHECK(num(j, "gguf_version") == num(want, "version"));
        CHECK_STR(cJSON_GetObjectItem(j, "architecture")->valuestring, "deepseek4");
        const cJSON *mine = cJSON_GetObjectItem(j, "tensors");
        int i = 0;
        cJSON_ArrayForEach(t, tensors) {
            const cJSON *m = cJSON_GetArrayItem(mine, i++);
            CHECK_STR(cJSON_GetObjectItem(m, "name")->valuestring,
                      cJSON_GetObjectItem(t, "name")->valuestring);
            CHECK(num(m, "bytes") == num(t, "n_bytes"));
        }
    }
    cJSON_Delete(j);
    cJSON_Delete(want);
    free(expected_text);
    free(out);
}

int main(void) {
    RUN(inspects_the_sparse_full_size_dsv4_flash_file);
    RUN(inspects_the_ggufpy_fixture);
    RUN(json_describes_the_written_model);
    RUN(text_output_shows_the_summary);
    RUN(corrupt_file_exits_1_with_the_validation_error);
    return check_report();
}
