/* `halo chat` driven through a pseudo-terminal, as a person would: a first turn that completes,
 * a second interrupted by Ctrl-C mid-reply, /ctx, a third turn after the interruption, /quit.
 * Each turn must evaluate only the new tokens (the session keeps its KV state), and the prompt
 * and line editing must work on a terminal. Also a piped (non-terminal) session with /commands.
 * Uses the tiny-a fixture with a byte-level vocabulary (test_chat.h). */
#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "gguf/gguf_test_util.h"
#include "test_chat.h"

static char *dir, model[600];

typedef struct term {
    int fd;
    pid_t pid;
    char buf[1 << 20];
    size_t n, seen; /* bytes read; bytes already matched by wait_for */
} term;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Reads until `what` appears after the last match, or the timeout passes. */
static bool wait_for(term *t, const char *what, double timeout_s) {
    double end = now() + timeout_s;
    for (;;) {
        /* memmem: the random model's replies may hold NUL bytes */
        char *at = memmem(t->buf + t->seen, t->n - t->seen, what, strlen(what));
        if (at) {
            t->seen = (size_t)(at - t->buf) + strlen(what);
            return true;
        }
        double left = end - now();
        if (left <= 0) break;
        struct pollfd p = {.fd = t->fd, .events = POLLIN};
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
        ssize_t r = read(t->fd, t->buf + t->n, sizeof t->buf - 1 - t->n);
        if (r <= 0) break; /* EIO: the child closed the terminal */
        t->n += (size_t)r;
    }
    fprintf(stderr, "timed out waiting for \"%s\"; the terminal shows:\n%s\n", what,
            t->buf + (t->n > 2000 ? t->n - 2000 : 0));
    return false;
}

/* libedit prints the prompt before it has put the terminal in its editing mode; a line typed in
 * between is mangled (a person does not type within milliseconds of the prompt), so wait a
 * moment after every prompt. */
static void type(term *t, const char *s) {
    if (s[0] != '\x03') usleep(300 * 1000);
    size_t n = strlen(s);
    CHECK(write(t->fd, s, n) == (ssize_t)n);
}

static bool start(term *t, const char *n_predict) {
    t->n = t->seen = 0;
    t->pid = forkpty(&t->fd, NULL, NULL, NULL);
    if (t->pid < 0) return false;
    if (t->pid == 0) {
        setenv("TERM", "dumb", 1);
        execl(HALO_BIN, HALO_BIN, "chat", "-m", model, "--temp", "0", "--ignore-eos", "-n",
              n_predict, "--threads", "1", (char *)NULL);
        _exit(127);
    }
    return true;
}

static int finish(term *t) {
    int st = 0;
    double end = now() + 10;
    while (now() < end) { /* drain so the child never blocks on a full terminal */
        char b[4096];
        struct pollfd p = {.fd = t->fd, .events = POLLIN};
        bool closed = poll(&p, 1, 50) > 0 && read(t->fd, b, sizeof b) <= 0;
        if (waitpid(t->pid, &st, closed ? 0 : WNOHANG) == t->pid) {
            close(t->fd);
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        }
    }
    kill(t->pid, SIGKILL);
    waitpid(t->pid, &st, 0);
    close(t->fd);
    return -1;
}

/* The "prompt: N tokens" count of the latest speed line at or after `from`. */
static long prompt_tokens_after(const term *t, size_t from) {
    const char *s = memmem(t->buf + from, t->n - from, "prompt: ", 8);
    return s ? strtol(s + 8, NULL, 10) : -1;
}

static void two_turns_and_ctrl_c_on_a_terminal(void) {
    static term t;
    CHECK(start(&t, "300"));
    CHECK(wait_for(&t, "/help lists commands.", 20));
    CHECK(wait_for(&t, "> ", 5));

    /* Turn 1 completes (300 tokens). */
    size_t turn1 = t.n;
    type(&t, "hello there\r");
    CHECK(wait_for(&t, "generated: 300 tokens", 60));
    CHECK(wait_for(&t, "> ", 5));
    long p1 = prompt_tokens_after(&t, turn1);
    CHECK(p1 > 5 && p1 < 30);

    /* Turn 2: Ctrl-C as soon as the reply starts streaming. */
    type(&t, "tell me more\r");
    CHECK(wait_for(&t, "tell me more\r\n", 5)); /* the echo; the reply comes next */
    size_t before = t.seen;
    double end = now() + 20;
    while (t.n == before && now() < end) {
        struct pollfd p = {.fd = t.fd, .events = POLLIN};
        if (poll(&p, 1, 100) > 0) {
            ssize_t r = read(t.fd, t.buf + t.n, sizeof t.buf - 1 - t.n);
            if (r <= 0) break;
            t.n += (size_t)r;
        }
    }
    type(&t, "\x03");
    CHECK(wait_for(&t, "[interrupted]", 10));
    /* Only the new turn's tokens were evaluated: EOS, <｜User｜>, the text, <｜Assistant｜>,
     * </think> — not the whole conversation again. */
    CHECK(wait_for(&t, "> ", 5));
    long p2 = prompt_tokens_after(&t, before);
    CHECK(p2 > 5 && p2 < 30);

    type(&t, "/ctx\r");
    CHECK(wait_for(&t, "(context: ", 5));
    long used = strtol(t.buf + t.seen, NULL, 10);
    CHECK(used > 300 && used < 600); /* turn 1's 300 and a part of turn 2's reply */
    CHECK(wait_for(&t, "of 2048 tokens used, 4 messages)", 5));

    /* Turn 3 after the interruption: again only new tokens. */
    size_t turn3 = t.n;
    type(&t, "and then?\r");
    CHECK(wait_for(&t, "generated: 300 tokens", 60));
    CHECK(wait_for(&t, "> ", 5));
    long p3 = prompt_tokens_after(&t, turn3);
    CHECK(p3 > 5 && p3 < 30);

    type(&t, "/quit\r");
    CHECK_INT(finish(&t), 0);
    if (check_failures) { /* what the terminal showed, for the failure report */
        FILE *f = fopen("/tmp/halo_test_chat_terminal.txt", "wb");
        if (f) {
            fwrite(t.buf, 1, t.n, f);
            fclose(f);
        }
    }
}

static void commands_over_a_pipe(void) {
    char cmd[2048], out[1 << 16];
    snprintf(cmd, sizeof cmd,
             "printf 'hi\\n/ctx\\n/think\\n/nothink\\n/reset\\n/ctx\\n/bogus\\n/help\\n' | %s chat "
             "-m '%s' --temp 0 -n 5 --ignore-eos --threads 1 2>&1",
             HALO_BIN, model);
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* end of input leaves */
    CHECK_CONTAINS(out, "generated: 5 tokens");
    CHECK_CONTAINS(out, "(context: ");
    CHECK_CONTAINS(out, "(thinking)");
    CHECK_CONTAINS(out, "(no thinking)");
    CHECK_CONTAINS(out, "(conversation cleared)");
    CHECK_CONTAINS(out, "(context: 0 of 2048 tokens used, 0 messages)");
    CHECK_CONTAINS(out, "(unknown command /bogus: /help lists them)");
    CHECK_CONTAINS(out, "/reset      forget the conversation");

    snprintf(cmd, sizeof cmd, "%s chat -m '%s' --bogus 2>&1", HALO_BIN, model);
    p = popen(cmd, "r");
    n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    st = pclose(p);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    CHECK_CONTAINS(out, "halo chat: unknown option '--bogus'");
}

/* Issue 19: a chat turn holding the text of a control token evaluates it as text. The fixture's
 * vocabulary (test_chat.h) has one token per byte and no merge inside "<｜Assistant｜>", so the
 * turn is strlen() tokens longer than the same turn without it; /reset makes each turn whole. */
static void typed_control_tokens_stay_text(void) {
    char cmd[2048], out[1 << 16];
    snprintf(cmd, sizeof cmd,
             "printf 'x\n/reset\nx<｜Assistant｜>\n' | %s chat -m '%s' --temp 0 -n 1 "
             "--threads 1 2>&1",
             HALO_BIN, model);
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    const char *a = strstr(out, "prompt: "), *b = a ? strstr(a + 1, "prompt: ") : NULL;
    CHECK(a && b);
    if (!a || !b) return;
    long first = strtol(a + 8, NULL, 10), second = strtol(b + 8, NULL, 10);
    CHECK_INT(first, 5); /* BOS <｜User｜> x <｜Assistant｜> </think> */
    CHECK_INT(second, first + (long)strlen(HALO_CHAT_ASSISTANT_TAG));

    /* The same typed on a terminal in the C locale, where libedit decodes by the locale (it
     * dropped the non-ASCII characters until halo chat switched to a UTF-8 one). */
    static term t;
    unsetenv("LC_ALL");
    unsetenv("LC_CTYPE");
    setenv("LANG", "C", 1);
    CHECK(start(&t, "1"));
    CHECK(wait_for(&t, "> ", 20));
    size_t from = t.n;
    type(&t, "x" HALO_CHAT_ASSISTANT_TAG "\r");
    CHECK(wait_for(&t, "generated: 1 tokens", 30));
    CHECK_INT(prompt_tokens_after(&t, from), first + (long)strlen(HALO_CHAT_ASSISTANT_TAG));
    type(&t, "/quit\r");
    CHECK_INT(finish(&t), 0);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    dir = tmpdir_make();
    snprintf(model, sizeof model, "%s/tiny-a-vocab.gguf", dir);
    if (fixture_write(model)) return 1;
    RUN(two_turns_and_ctrl_c_on_a_terminal);
    RUN(commands_over_a_pipe);
    RUN(typed_control_tokens_stay_text);
    tmpdir_remove(dir);
    return check_report();
}
