/* `halo chat -m MODEL`: multi-turn conversation with line editing and history (libedit),
 * /commands, and Ctrl-C stopping the reply being generated.
 *
 * The session keeps its KV state across turns. Each turn encodes the whole conversation with the
 * chat encoding (halo_chat_tokenize: what the user typed is always text, never control tokens)
 * and evaluates only what the session does not hold yet: when the conversation starts with the
 * text of the tokens already evaluated and one of its tokens starts right there, only the tokens
 * from there on are evaluated (the model's replies stay as it generated them); otherwise
 * (thinking mode toggled) the session rewinds to the longest common token prefix. Earlier reasoning
 * is kept in the conversation (the template's drop_thinking=false), so a thinking turn never forces
 * the previous turns to be re-evaluated. */
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <editline/readline.h>

#include "cli/cli.h"
#include "cli/cli_cache.h"
#include "cli/run.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

static void usage(FILE *out) {
    fprintf(out,
            "usage: halo chat [-m MODEL] [options]\n"
            "  Talk with the model. Ctrl-C stops a reply; Ctrl-D or /quit leaves.\n"
            "  -m, --model PATH     GGUF model (default: $HALO_MODEL, else models/*.gguf)\n"
            "  -n, --n-predict N    at most N tokens per reply (default: until the model stops)\n"
            "  --system TEXT        system prompt\n"
            "  --think | --nothink | --think-max   thinking mode to start with (default "
            "--nothink)\n"
            "  --temp, --top-k, --top-p, --min-p, --repeat-penalty, --frequency-penalty,\n"
            "  --presence-penalty, --seed, --ignore-eos, --ctx N, --threads N   as for halo run\n"
            "  --backend B, --weights POLICY, --expert-cache SIZE   as for halo run\n"
            "  --cache-ram SIZE     prefix cache in RAM; --kv-dir DIR [--kv-dir-size SIZE] on disk\n"
            "commands: /think  /nothink  /think-max  /reset  /ctx  /save FILE  /load FILE  /help\n"
            "  /quit\n");
}

static void help(void) {
    printf("/think      reply with reasoning first (<think>)\n"
           "/think-max  thinking with the maximum reasoning effort prefix\n"
           "/nothink    reply directly\n"
           "/reset      forget the conversation (keeps the system prompt)\n"
           "/ctx        show how much of the context is used\n"
           "/save FILE  save the conversation and its evaluated state to FILE\n"
           "/load FILE  continue a conversation saved with /save\n"
           "/help       this list\n"
           "/quit       leave (Ctrl-D too)\n"
           "Ctrl-C stops a reply while it is generated.\n");
}

typedef struct msg {
    halo_chat_role role;
    char *content, *reasoning;
} msg;

typedef struct chat {
    cli_common *c;
    cli_model *m;
    msg *msgs;
    size_t n, cap;
    halo_tokens hist; /* tokens the session has evaluated, in order */
    halo_chat_thinking thinking;
    cli_cache *cc;
} chat;

static bool add_msg(chat *ch, halo_chat_role role, const char *content, size_t content_len,
                    const char *reasoning, size_t reasoning_len) {
    if (ch->n == ch->cap) {
        size_t cap = ch->cap ? ch->cap * 2 : 16;
        msg *m = realloc(ch->msgs, cap * sizeof *m);
        if (!m) return false;
        ch->msgs = m;
        ch->cap = cap;
    }
    msg *m = &ch->msgs[ch->n];
    m->role = role;
    m->content = strndup(content, content_len);
    m->reasoning = reasoning ? strndup(reasoning, reasoning_len) : NULL;
    if (!m->content) return false;
    ch->n++;
    return true;
}

static void clear_msgs(chat *ch) {
    for (size_t i = 0; i < ch->n; i++) {
        free(ch->msgs[i].content);
        free(ch->msgs[i].reasoning);
    }
    ch->n = 0;
}

/* Tokens to evaluate for the conversation encoded now as all, rewinding the session first when it
 * holds tokens the conversation no longer starts with. */
static halo_status tokens_to_eval(chat *ch, const halo_tokens *all, halo_tokens *out,
                                  halo_error *err) {
    cli_model *m = ch->m;
    char *held = NULL, *now = NULL;
    size_t held_len = 0, len = 0;
    halo_status st = halo_tokenizer_decode(m->tok, ch->hist.ids, ch->hist.n, HALO_TOKENIZE_SPECIAL,
                                           &held, &held_len, err);
    if (!st)
        st =
            halo_tokenizer_decode(m->tok, all->ids, all->n, HALO_TOKENIZE_SPECIAL, &now, &len, err);
    size_t from = 0, at = 0;
    bool extends = !st && held_len <= len && !memcmp(now, held, held_len);
    while (extends && at < held_len && from < all->n) {
        size_t n = 0;
        halo_tokenizer_piece(m->tok, all->ids[from++], &n);
        at += n;
    }
    free(held);
    free(now);
    if (st) return st;
    if (!extends || at != held_len || from == all->n) {
        /* Rewind to the longest common token prefix. */
        from = 0;
        while (from < all->n && from < ch->hist.n && all->ids[from] == ch->hist.ids[from])
            from++;
        if (from == all->n && from) from--; /* evaluate at least one token for fresh logits */
        if ((st = halo_session_rewind(m->session, (uint32_t)from, err))) return st;
        ch->hist.n = from;
    }
    for (size_t i = from; i < all->n && !st; i++)
        st = halo_tokens_push(out, all->ids[i], err);
    return st;
}

typedef struct reply {
    bool newline;
} reply;

static bool on_text(void *user, const char *text, size_t len) {
    reply *r = user;
    cli_print_text(&r->newline, text, len);
    return !interrupted;
}

/* One user turn: render, evaluate the new tokens, stream the reply, record it. */
static void turn(chat *ch, const char *line) {
    cli_model *m = ch->m;
    halo_error err = {0};
    char *clean = NULL, *text = NULL;
    size_t clean_len = 0, bad = 0;
    halo_tokens all = {0}, todo = {0}, gen = {0};
    if (halo_utf8_sanitize(line, strlen(line), &clean, &clean_len, &bad, &err)) goto fail;
    if (bad)
        fprintf(stderr,
                "(the input is not valid UTF-8: replaced %zu invalid sequence%s with "
                "U+FFFD)\n",
                bad, bad == 1 ? "" : "s");
    size_t n_before = ch->n;
    if (!add_msg(ch, HALO_CHAT_USER, clean, clean_len, NULL, 0)) goto nomem;

    halo_chat_message *cm = calloc(ch->n, sizeof *cm);
    if (!cm) goto nomem;
    for (size_t i = 0; i < ch->n; i++)
        cm[i] = (halo_chat_message){.role = ch->msgs[i].role,
                                    .content = ch->msgs[i].content,
                                    .reasoning = ch->msgs[i].reasoning};
    halo_chat_params cp = {.format = m->format,
                           .thinking = ch->thinking,
                           .add_generation_prompt = true,
                           .keep_thinking = true};
    halo_status st = halo_chat_tokenize(m->tok, cm, ch->n, &cp, &all, &err);
    free(cm);
    if (!st) cli_cache_chat_resume(ch->cc, m->session, all.ids, (uint32_t)all.n, &ch->hist);
    if (st || (st = tokens_to_eval(ch, &all, &todo, &err))) goto fail_drop;
    uint32_t past = halo_session_n_past(m->session);
    if (!todo.n || past + todo.n >= m->n_ctx) {
        fprintf(stderr,
                "halo chat: the context is full (%u of %u tokens used, %zu more "
                "needed): /reset starts over\n",
                past, m->n_ctx, todo.n);
        goto drop_turn;
    }
    interrupted = 0;
    reply r = {.newline = true};
    halo_gen_params gp = {.n_ctx = m->n_ctx,
                          .max_new = ch->c->n_predict,
                          .ignore_eos = ch->c->ignore_eos,
                          .on_text = on_text,
                          .user = &r};
    halo_gen_stop why;
    halo_gen_stats stats;
    st = halo_generate(m->session, m->sampler, m->tok, todo.ids, todo.n, &gp, &gen, &why, &stats,
                       &err);
    if (st) goto fail_drop;
    if (!r.newline) putchar('\n');
    if (why == HALO_GEN_STOPPED) printf("[interrupted]\n");
    if (why == HALO_GEN_CONTEXT_FULL) printf("[the context is full: /reset starts over]\n");
    fflush(stdout);
    /* The session now holds the new tokens and every generated one but the last. */
    for (size_t i = 0; i < todo.n; i++)
        halo_tokens_push(&ch->hist, todo.ids[i], NULL);
    for (size_t i = 0; i + 1 < gen.n; i++)
        halo_tokens_push(&ch->hist, gen.ids[i], NULL);
    size_t n_text = gen.n && why == HALO_GEN_EOG ? gen.n - 1 : gen.n;
    size_t len = 0;
    /* With special tokens: the reply is recorded as the session holds it (a control-token
     * </think> included), so the next turn's rendering starts with the session's text. */
    st = halo_tokenizer_decode(m->tok, gen.ids, n_text, HALO_TOKENIZE_SPECIAL, &text, &len, &err);
    if (st) goto fail;
    /* Thinking replies are "reasoning</think>answer" (the prompt ended with <think>). */
    const char *close =
        ch->thinking != HALO_THINK_NONE ? strstr(text, HALO_CHAT_THINK_CLOSE) : NULL;
    bool ok;
    if (ch->thinking == HALO_THINK_NONE)
        ok = add_msg(ch, HALO_CHAT_ASSISTANT, text, len, NULL, 0);
    else if (close)
        ok = add_msg(ch, HALO_CHAT_ASSISTANT, close + strlen(HALO_CHAT_THINK_CLOSE),
                     len - (size_t)(close - text) - strlen(HALO_CHAT_THINK_CLOSE), text,
                     (size_t)(close - text));
    else
        ok = add_msg(ch, HALO_CHAT_ASSISTANT, "", 0, text, len);
    if (!ok) goto nomem;
    cli_cache_insert("chat", ch->cc, m->session);
    cli_print_stats(&stats);
    cli_stream_report("chat", ch->m->engine, true);
    goto done;
nomem:
    snprintf(err.message, sizeof err.message, "out of memory");
fail:
    fprintf(stderr, "halo chat: %s\n", err.message);
    goto done;
fail_drop:
    fprintf(stderr, "halo chat: %s\n", err.message);
drop_turn: /* the user's message did not get a reply: forget it */
    while (ch->n > n_before) {
        ch->n--;
        free(ch->msgs[ch->n].content);
        free(ch->msgs[ch->n].reasoning);
    }
done:
    halo_tokens_free(&all);
    halo_tokens_free(&todo);
    halo_tokens_free(&gen);
    free(text);
    free(clean);
}

static void reset(chat *ch) {
    halo_error err;
    clear_msgs(ch);
    if (ch->c->system) add_msg(ch, HALO_CHAT_SYSTEM, ch->c->system, strlen(ch->c->system), NULL, 0);
    ch->hist.n = 0;
    if (halo_session_rewind(ch->m->session, 0, &err))
        fprintf(stderr, "halo chat: %s\n", err.message);
    halo_sampler_reset(ch->m->sampler);
}

static bool add_loaded(void *user, halo_chat_role role, const char *content,
                       const char *reasoning) {
    return add_msg(user, role, content, strlen(content), reasoning,
                   reasoning ? strlen(reasoning) : 0);
}

/* /save FILE, /load FILE (the state and the conversation: src/cli/cli_cache.c). */
static void save_or_load(chat *ch, const char *path, bool load) {
    size_t keep = ch->n;
    if (!load) {
        halo_chat_message *cm = calloc(ch->n ? ch->n : 1, sizeof *cm);
        for (size_t i = 0; cm && i < ch->n; i++)
            cm[i] = (halo_chat_message){.role = ch->msgs[i].role,
                                        .content = ch->msgs[i].content,
                                        .reasoning = ch->msgs[i].reasoning};
        if (cm) cli_chat_save(ch->m->session, path, cm, ch->n, (int)ch->thinking);
        free(cm);
        return;
    }
    int thinking = (int)ch->thinking;
    bool ok = cli_chat_load(ch->m->session, path, &thinking, add_loaded, ch);
    size_t from = ok ? 0 : keep, to = ok ? keep : ch->n; /* drop the old or the partial list */
    for (size_t i = from; i < to; i++) {
        free(ch->msgs[i].content);
        free(ch->msgs[i].reasoning);
    }
    memmove(ch->msgs + from, ch->msgs + to, (ch->n - to) * sizeof *ch->msgs);
    ch->n -= to - from;
    if (!ok) return;
    ch->thinking = (halo_chat_thinking)thinking;
    ch->hist.n = 0;
    const int32_t *held = halo_session_tokens(ch->m->session);
    for (uint32_t i = 0; i < halo_session_n_past(ch->m->session); i++)
        halo_tokens_push(&ch->hist, held[i], NULL);
    halo_sampler_reset(ch->m->sampler);
}

/* Returns false to leave. */
static bool command(chat *ch, const char *line) {
    static const struct {
        const char *name;
        halo_chat_thinking mode;
        const char *said;
    } modes[] = {{"/think", HALO_THINK_HIGH, "thinking"},
                 {"/think-max", HALO_THINK_MAX, "thinking, maximum effort"},
                 {"/nothink", HALO_THINK_NONE, "no thinking"}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (!strcmp(line, modes[i].name)) {
            ch->thinking = modes[i].mode;
            printf("(%s)\n", modes[i].said);
            return true;
        }
    if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) return false;
    if (!strcmp(line, "/reset")) {
        reset(ch);
        printf("(conversation cleared)\n");
    } else if (!strcmp(line, "/ctx")) {
        uint32_t used = halo_session_n_past(ch->m->session);
        printf("(context: %u of %u tokens used, %zu messages)\n", used, ch->m->n_ctx, ch->n);
    } else if (!strncmp(line, "/save ", 6) || !strncmp(line, "/load ", 6)) {
        save_or_load(ch, line + 6, line[1] == 'l');
    } else if (!strcmp(line, "/help")) {
        help();
    } else {
        printf("(unknown command %s: /help lists them)\n", line);
    }
    return true;
}

/* A line of input, without its line end; NULL at the end. libedit only on a terminal: it decodes
 * input by the locale, and in the C locale (CI, scripts, many services) it dropped every
 * non-ASCII character, so piped text goes through getline as bytes. */
static char *read_line(bool tty) {
    if (tty) return readline("> ");
    char *line = NULL;
    size_t cap = 0;
    if (getline(&line, &cap, stdin) < 0) {
        free(line);
        return NULL;
    }
    return line;
}

/* libedit needs a UTF-8 locale to pass what is typed through unchanged. */
static void utf8_locale(void) {
    const char *set = setlocale(LC_CTYPE, "");
    if (!set || strcmp(nl_langinfo(CODESET), "UTF-8")) setlocale(LC_CTYPE, "C.UTF-8");
}

int cli_chat(int argc, char **argv) {
    cli_common c;
    cli_common_init(&c);
    cli_cache cc = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        int r = cli_common_option("chat", argc, argv, &i, &c);
        if (!r) r = cli_cache_option("chat", argc, argv, &i, &cc);
        if (r < 0) return 2;
        if (r == 0) {
            fprintf(stderr, "halo chat: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    cli_model m;
    int rc = cli_open("chat", &c, &m);
    if (!rc) rc = cli_load("chat", &c, &m);
    if (!rc) rc = cli_cache_open("chat", &cc, m.engine);
    if (rc) {
        cli_close(&m);
        return rc;
    }
    chat ch = {.c = &c, .m = &m, .thinking = c.thinking, .cc = &cc};
    reset(&ch);

    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: a read at the prompt returns */
    bool tty = isatty(STDIN_FILENO);
    if (tty) utf8_locale();
    if (tty) printf("halo chat: %s, context %u tokens. /help lists commands.\n", c.model, m.n_ctx);
    using_history();
    for (;;) {
        interrupted = 0;
        char *line = read_line(tty);
        if (!line) {
            if (interrupted) { /* Ctrl-C at the prompt: a fresh line, not an exit */
                printf("\n");
                continue;
            }
            break;
        }
        size_t len = strlen(line);
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (!len) {
            free(line);
            continue;
        }
        add_history(line);
        bool go = true;
        if (line[0] == '/')
            go = command(&ch, line);
        else
            turn(&ch, line);
        free(line);
        if (!go) break;
    }
    if (tty) printf("\n");
    clear_msgs(&ch);
    free(ch.msgs);
    halo_tokens_free(&ch.hist);
    cli_cache_close(&cc);
    cli_close(&m);
    return 0;
}
