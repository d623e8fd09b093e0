/* Small helpers of the experiments part: string lists, tokens, quoting. */
#include <stdlib.h>
#include <string.h>
#include "experiments/exp.h"
#include "util/error.h"

/* text NULL pushes a NULL entry (the end of an argv). */
int nbx_strv_push(nbx_strv *s, const char *text, size_t len) {
    if (s->n + 1 >= s->cap) {
        int nc = s->cap ? s->cap * 2 : 8;
        char **v = realloc(s->v, (size_t)nc * sizeof *v);
        if (!v) return nb_fail("out of memory");
        s->v = v;
        s->cap = nc;
    }
    char *copy = NULL;
    if (text && !(copy = strndup(text, len))) return nb_fail("out of memory");
    s->v[s->n++] = copy;
    return 0;
}

void nbx_strv_free(nbx_strv *s) {
    for (int i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

int nbx_tokenize(const char *text, nbx_strv *out, char *err, size_t err_size) {
    nb_buf tok = {0};
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        tok.n = 0;
        if (nb_buf_put(&tok, "", 0)) goto oom;
        while (*p && *p != ' ' && *p != '\t') {
            if (*p != '"' && *p != '\'') {
                if (nb_buf_put(&tok, p++, 1)) goto oom;
                continue;
            }
            char q = *p++;
            while (*p && *p != q) {
                if (q == '"' && *p == '\\' && (p[1] == '"' || p[1] == '\\')) p++;
                if (nb_buf_put(&tok, p++, 1)) goto oom;
            }
            if (!*p) {
                snprintf(err, err_size, "unbalanced %c quote (expected a closing %c on the same line)", q, q);
                nb_buf_free(&tok);
                return -1;
            }
            p++;
        }
        if (nbx_strv_push(out, tok.p, tok.n)) goto oom;
    }
    nb_buf_free(&tok);
    return 0;
oom:
    nb_buf_free(&tok);
    snprintf(err, err_size, "out of memory");
    return -1;
}

int nbx_shell_quote(nb_buf *b, const char *arg) {
    int plain = *arg != 0;
    for (const char *p = arg; *p; p++)
        plain &= strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%", *p) != NULL;
    if (plain) return nb_buf_printf(b, "%s", arg);
    if (nb_buf_put(b, "'", 1)) return -1;
    for (const char *p = arg; *p; p++)
        if (*p == '\'' ? nb_buf_printf(b, "'\\''") : nb_buf_put(b, p, 1)) return -1;
    return nb_buf_put(b, "'", 1);
}
