// llama_tokenize: tokenizes records with llama.cpp's tokenizer from a vocab-only GGUF, to
// cross-check tests/tokenizer/deepseek-v3-tokenizer.gguf against HF tokenizers' ids.
// Input: records of (uint32 little-endian byte length, UTF-8 bytes). Output: one line of
// space-separated ids per record. No BOS is added; special tokens in the text are parsed, or
// with a fourth argument "plain" they are not (llama_tokenize's parse_special = false: control
// tokens are text; user-defined ones would still be matched).
// `llama_tokenize VOCAB.gguf --added OUT.txt` writes "id attr text" for every control and
// user-defined token (attr: c or u), the vocabulary as llama.cpp reads it.
#include "llama.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

static void quiet_log(ggml_log_level level, const char *text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: llama_tokenize VOCAB.gguf (RECORDS.bin OUT.txt [plain] | --added "
                        "OUT.txt)\n");
        return 2;
    }
    const bool parse_special = !(argc == 5 && std::string(argv[4]) == "plain");
    llama_log_set(quiet_log, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const llama_vocab *vocab = llama_model_get_vocab(model);
    if (std::string(argv[2]) == "--added") {
        FILE *out = fopen(argv[3], "w");
        if (!out) return 1;
        for (llama_token id = 0; id < llama_vocab_n_tokens(vocab); id++) {
            llama_token_attr a = llama_vocab_get_attr(vocab, id);
            if (!(a & (LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_USER_DEFINED))) continue;
            fprintf(out, "%d %c %s\n", id, (a & LLAMA_TOKEN_ATTR_CONTROL) ? 'c' : 'u',
                    llama_vocab_get_text(vocab, id));
        }
        fclose(out);
        llama_model_free(model);
        return 0;
    }
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
                               false, parse_special);
        if (k < 0) return 1;
        for (int i = 0; i < k; i++) fprintf(out, i ? " %d" : "%d", ids[i]);
        fputc('\n', out);
    }
    fclose(in);
    fclose(out);
    llama_model_free(model);
    return 0;
}
