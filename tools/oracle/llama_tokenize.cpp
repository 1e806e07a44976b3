// llama_tokenize: tokenizes records with llama.cpp's tokenizer from a vocab-only GGUF, to
// cross-check tests/tokenizer/deepseek-v3-tokenizer.gguf against HF tokenizers' ids.
// Input: records of (uint32 little-endian byte length, UTF-8 bytes). Output: one line of
// space-separated ids per record. No BOS is added; special tokens in the text are parsed.
#include "llama.h"

#include <cstdint>
#include <cstdio>
#include <vector>

static void quiet_log(ggml_log_level level, const char *text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: llama_tokenize VOCAB.gguf RECORDS.bin OUT.txt\n");
        return 2;
    }
    llama_log_set(quiet_log, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const llama_vocab *vocab = llama_model_get_vocab(model);
    FILE *in = fopen(argv[2], "rb"), *out = fopen(argv[3], "w");
    if (!in || !out) return 1;
    uint32_t n;
    std::vector<char> text;
    std::vector<llama_token> ids;
    while (fread(&n, 4, 1, in) == 1) {
        text.resize(n + 1);
        if (n && fread(text.data(), 1, n, in) != n) return 1;
        ids.resize(n * 2 + 16);
        int k = llama_tokenize(vocab, text.data(), (int32_t)n, ids.data(), (int32_t)ids.size(),
                               false, true);
        if (k < 0) return 1;
        for (int i = 0; i < k; i++) fprintf(out, i ? " %d" : "%d", ids[i]);
        fputc('\n', out);
    }
    fclose(in);
    fclose(out);
    llama_model_free(model);
    return 0;
}
