/* Grid files: parsing, checking and expanding into points (docs/experiments.md):
 *
 *   fixed: FLAGS                  flags of every point (several lines add up)
 *   axis NAME: V1 V2 "V3 FLAGS"   value V is the flags `--NAME V`, labelled from V
 *   axis NAME                     then indented `LABEL: FLAGS` lines, one per value
 *   when NAME=L1,L2 ...: FLAGS    flags of the points whose labels match every condition
 *   skip NAME=L1,L2 ...           no point whose labels match every condition
 *
 * {NAME} in any flags is replaced by the point's label on axis NAME; # starts a comment. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "util/decimal.h"
#include "util/json.h"
#include "util/fs.h"
#include "experiments/exp.h"
#include "nobubble/experiments.h"
#include "util/error.h"

#define GRID_MAX_POINTS 10000
#define LABEL_MAX 64

/* is_number: a one-line value that is a decimal number, number its value (values are compared as
 * numbers, not as labels). */
typedef struct { char *label; nbx_strv flags; int is_number; double number; } gvalue;
typedef struct { char *name; gvalue *values; int n, cap, line; } gaxis;
typedef struct { char *name; nbx_strv labels; } gcond;
typedef struct { gcond *conds; int n; nbx_strv flags; } gwhen;
typedef struct { char *name; int *value; char **args; int argc; } gpoint;

struct nb_grid {
    char *text;
    const char *what;
    nbx_strv *fixed; int n_fixed;
    gaxis *axes; int n_axes;
    gwhen *whens; int n_whens;
    gwhen *skips; int n_skips;   /* conditions only: the points they match are left out */
    gpoint *points; int n_points;
};

/* Names that results.csv already uses for its own columns. */
static const char *const reserved[] = {"point", "final_train_loss", "final_val_loss", "best_val_loss",
                                       "tokens", "seconds", "status", "exit_status"};

static int grow(void **p, int *cap, int n, size_t size) {
    if (n < *cap) return 0;
    int nc = *cap ? *cap * 2 : 8;
    void *q = realloc(*p, (size_t)nc * size);
    if (!q) return nb_fail("out of memory");
    *p = q;
    *cap = nc;
    return 0;
}

/* ------------------------------------------------------------ checks of names and labels */
static int label_char(int c) { return isalnum(c) || c == '.' || c == '_' || c == '+' || c == '-'; }

static const char *bad_label(const char *s) {
    if (!*s) return "is empty";
    if (strlen(s) > LABEL_MAX) return "is longer than 64 characters";
    if (s[0] == '.' || s[0] == '-') return "starts with '.' or '-'";
    for (const char *p = s; *p; p++)
        if (!label_char((unsigned char)*p)) return "has a character other than letters, digits, '.', '_', '+', '-'";
    return NULL;
}

static const char *bad_name(const char *s) {
    if (!isalpha((unsigned char)s[0])) return "does not start with a letter";
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_') return "has a character other than letters, digits, '_'";
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (!strcmp(s, reserved[i])) return "is a column name of results.csv";
    return NULL;
}

static int find_axis(const nb_grid *g, const char *name, size_t len) {
    for (int a = 0; a < g->n_axes; a++)
        if (strlen(g->axes[a].name) == len && !strncmp(g->axes[a].name, name, len)) return a;
    return -1;
}

/* ------------------------------------------------------------ lines */
/* Cuts a comment (# outside quotes) and trailing blanks off line, in place. */
static void strip_comment(char *line) {
    char q = 0;
    for (char *p = line; *p; p++) {
        if (q) { if (*p == '\\' && q == '"' && p[1]) p++; else if (*p == q) q = 0; }
        else if (*p == '"' || *p == '\'') q = *p;
        else if (*p == '#') { *p = 0; break; }
    }
    size_t n = strlen(line);
    while (n && isspace((unsigned char)line[n - 1])) line[--n] = 0;
}

static char *skip_blanks(char *p) {
    while (*p == ' ' || *p == '\t') p++;
    return p;
}

/* --out and --resume, alone or as --out=X / --resume=X: the sweep's own. */
static int sweep_flag(const char *arg) {
    static const char *const own[] = {"--out", "--resume"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        size_t n = strlen(own[i]);
        if (!strncmp(arg, own[i], n) && (!arg[n] || arg[n] == '=')) return 1;
    }
    return 0;
}

static int tokens(const nb_grid *g, int line, const char *text, nbx_strv *out) {
    char err[128];
    out->line = line;
    if (nbx_tokenize(text, out, err, sizeof err)) return nb_fail("%s:%d: %s", g->what, line, err);
    for (int i = 0; i < out->n; i++)
        if (sweep_flag(out->v[i]))
            return nb_fail("%s:%d: %s: the sweep gives each point its own --out DIR/runs/<point> (and starts it "
                           "afresh); leave it out of the grid", g->what, line, out->v[i]);
    return 0;
}

static int add_value(nb_grid *g, gaxis *ax, int line, const char *label, const char *flags) {
    const char *why = bad_label(label);
    if (why) return nb_fail("%s:%d: axis %s: label '%s' %s", g->what, line, ax->name, label, why);
    for (int i = 0; i < ax->n; i++)
        if (!strcmp(ax->values[i].label, label))
            return nb_fail("%s:%d: axis %s: label '%s' given twice", g->what, line, ax->name, label);
    if (grow((void **)&ax->values, &ax->cap, ax->n, sizeof *ax->values)) return -1;
    gvalue *v = &ax->values[ax->n];
    memset(v, 0, sizeof *v);
    if (!(v->label = strdup(label))) return nb_fail("out of memory");
    ax->n++;
    return tokens(g, line, flags, &v->flags);
}

/* A one-word value that is a number: another value of the axis with the same number ("1e-3" and
 * "0.001") would run the same point twice under two names (the same name: add_value's "given twice"). */
static int same_number(const nb_grid *g, const gaxis *ax, int line, const char *v, double x, const char *label) {
    for (int i = 0; i < ax->n; i++)
        if (ax->values[i].is_number && ax->values[i].number == x && strcmp(ax->values[i].label, label))
            return nb_fail("%s:%d: axis %s: value '%s' is the same number as the value labelled '%s'", g->what, line,
                           ax->name, v, ax->values[i].label);
    return 0;
}

static int is_negative_number(const char *word, size_t n) {
    char text[LABEL_MAX + 2];
    if (word[0] != '-' || n >= sizeof text) return 0;
    memcpy(text, word, n);
    text[n] = 0;
    return nb_is_decimal(text, 0);
}

/* One word of a shorthand value into its label: a negative number's sign as "neg" (a label cannot
 * start with '-', and "-1e-3" must not become the label of 1e-3), other leading dashes dropped
 * ("--ef" -> "ef"), odd characters as '-'. */
static int put_label_word(nb_buf *label, const char *word, size_t n) {
    if (is_negative_number(word, n) && nb_buf_put(label, "neg", 3)) return -1;
    while (n && *word == '-') word++, n--;
    for (size_t i = 0; i < n; i++)
        if (nb_buf_put(label, label_char((unsigned char)word[i]) ? &word[i] : "-", 1)) return -1;
    return 0;
}

/* A word that C's strtod reads whole but that is no decimal number: hexadecimal, "inf", "nan". No setting
 * takes one (nb_is_decimal), so that a grid refuses it when it is read, not when its runs start, and
 * "0x10" never stands beside "16" as a second point. */
static int is_c_only_number(const char *v) {
    char *end;
    if (!*v || nb_is_decimal(v, 0)) return 0;
    (void)strtod(v, &end);
    return end != v && !*end;
}

/* A shorthand value: V (maybe quoted, maybe several words) gives `--NAME V` and the label made of V's
 * words joined by '-' (put_label_word): "2bw --ef 1" -> 2bw-ef-1, "-1e-3" -> neg1e-3. */
static int add_short_value(nb_grid *g, gaxis *ax, int line, const char *v) {
    if (is_c_only_number(v))
        return nb_fail("%s:%d: axis %s: value '%s' is no decimal number (hexadecimal, inf and nan are not read by any "
                       "setting); expected digits, an optional point and exponent, e.g. 1.6e-2", g->what, line,
                       ax->name, v);
    nb_buf flags = {0}, label = {0};
    int rc = -1, is_number = nb_is_decimal(v, 0);
    double x = is_number ? strtod(v, NULL) : 0;
    if (nb_buf_printf(&flags, "--%s %s", ax->name, v)) goto out;
    for (const char *p = v; *p;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        size_t n = strcspn(p, " \t");
        if ((label.n && nb_buf_put(&label, "-", 1)) || put_label_word(&label, p, n)) goto out;
        p += n;
    }
    if (nb_buf_put(&label, "", 0)) goto out;
    if (bad_label(label.p))
        rc = nb_fail("%s:%d: axis %s: value '%s' makes no usable label (letters, digits, '.', '_', '+', '-'); "
                     "give it one with an `axis %s` block of `LABEL: FLAGS` lines", g->what, line, ax->name, v, ax->name);
    else if (!(is_number && same_number(g, ax, line, v, x, label.p))) rc = add_value(g, ax, line, label.p, flags.p);
    if (!rc) {
        ax->values[ax->n - 1].is_number = is_number;
        ax->values[ax->n - 1].number = x;
    }
out:
    nb_buf_free(&flags);
    nb_buf_free(&label);
    return rc;
}

static gaxis *new_axis(nb_grid *g, int line, const char *name, size_t len) {
    char nm[LABEL_MAX + 1];
    if (len == 0 || len > LABEL_MAX) {
        nb_fail("%s:%d: expected `axis NAME: VALUES` or `axis NAME` with a name of 1 to 64 characters", g->what, line);
        return NULL;
    }
    memcpy(nm, name, len);
    nm[len] = 0;
    const char *why = bad_name(nm);
    if (why) { nb_fail("%s:%d: axis name '%s' %s", g->what, line, nm, why); return NULL; }
    if (find_axis(g, nm, len) >= 0) { nb_fail("%s:%d: axis '%s' defined twice", g->what, line, nm); return NULL; }
    gaxis *axes = realloc(g->axes, (size_t)(g->n_axes + 1) * sizeof *axes);
    if (!axes) { nb_fail("out of memory"); return NULL; }
    g->axes = axes;
    gaxis *ax = &g->axes[g->n_axes];
    memset(ax, 0, sizeof *ax);
    ax->line = line;
    if (!(ax->name = strdup(nm))) { nb_fail("out of memory"); return NULL; }
    g->n_axes++;
    return ax;
}

/* `axis NAME: V1 V2 ...` or `axis NAME` (then a block); returns the axis a block continues, or
 * sets *block NULL for the one-line form. */
static int parse_axis(nb_grid *g, int line, char *rest, gaxis **block) {
    char *p = skip_blanks(rest), *name = p;
    while (*p && *p != ':' && *p != ' ' && *p != '\t') p++;
    size_t len = (size_t)(p - name);
    p = skip_blanks(p);
    if (*p && *p != ':')
        return nb_fail("%s:%d: expected `axis NAME: VALUES` or `axis NAME`, got text after the name: '%s'", g->what, line, p);
    gaxis *ax = new_axis(g, line, name, len);
    if (!ax) return -1;
    if (*p == ':') p = skip_blanks(p + 1);
    *block = *p ? NULL : ax;
    if (!*p) return 0;
    nbx_strv vals = {0};
    char err[128];
    int rc = 0;
    if (nbx_tokenize(p, &vals, err, sizeof err)) rc = nb_fail("%s:%d: %s", g->what, line, err);
    for (int i = 0; i < vals.n && !rc; i++) rc = add_short_value(g, ax, line, vals.v[i]);
    nbx_strv_free(&vals);
    return rc;
}

/* An indented `LABEL: FLAGS` line of a block. */
static int parse_block_value(nb_grid *g, int line, char *text, gaxis *ax) {
    char *colon = strchr(text, ':');
    if (!colon)
        return nb_fail("%s:%d: expected `LABEL: FLAGS` (a value of axis %s), got '%s'", g->what, line, ax->name, text);
    *colon = 0;
    char *label = text;
    size_t n = strlen(label);
    while (n && isspace((unsigned char)label[n - 1])) label[--n] = 0;
    return add_value(g, ax, line, label, colon + 1);
}

/* The conditions `NAME=L1,L2 NAME2=L3` of a when or skip line (rest without the keyword and the
 * flags); the names and labels are checked once all axes are known. */
static int parse_conditions(nb_grid *g, int line, char *rest, gwhen *w, const char *usage) {
    nbx_strv conds = {0};
    char err[128];
    int rc = 0;
    if (nbx_tokenize(rest, &conds, err, sizeof err)) rc = nb_fail("%s:%d: %s", g->what, line, err);
    if (!rc && conds.n == 0) rc = nb_fail("%s:%d: expected `%s`, no condition", g->what, line, usage);
    if (!rc && !(w->conds = calloc((size_t)conds.n, sizeof *w->conds))) rc = nb_fail("out of memory");
    for (int i = 0; i < conds.n && !rc; i++) {
        char *eq = strchr(conds.v[i], '=');
        if (!eq || eq == conds.v[i] || !eq[1]) {
            rc = nb_fail("%s:%d: condition '%s': expected NAME=LABEL or NAME=LABEL1,LABEL2", g->what, line, conds.v[i]);
            break;
        }
        gcond *c = &w->conds[w->n++];
        c->labels.line = line;
        if (!(c->name = strndup(conds.v[i], (size_t)(eq - conds.v[i])))) { rc = nb_fail("out of memory"); break; }
        for (char *p = eq + 1; !rc;) {
            char *comma = strchr(p, ',');
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            rc = nbx_strv_push(&c->labels, p, len);
            if (!comma) break;
            p = comma + 1;
        }
    }
    nbx_strv_free(&conds);
    return rc;
}

static gwhen *new_condition_line(gwhen **list, int *n, int line) {
    gwhen *ws = realloc(*list, (size_t)(*n + 1) * sizeof *ws);
    if (!ws) return NULL;
    *list = ws;
    gwhen *w = &ws[(*n)++];
    memset(w, 0, sizeof *w);
    w->flags.line = line;
    return w;
}

/* `when NAME=L1,L2 NAME2=L3: FLAGS` */
static int parse_when(nb_grid *g, int line, char *rest) {
    char *colon = strchr(rest, ':');
    if (!colon) return nb_fail("%s:%d: expected `when NAME=LABEL[,LABEL...] ...: FLAGS`, no ':' found", g->what, line);
    *colon = 0;
    gwhen *w = new_condition_line(&g->whens, &g->n_whens, line);
    if (!w) return nb_fail("out of memory");
    int rc = parse_conditions(g, line, rest, w, "when NAME=LABEL...: FLAGS");
    return rc ? rc : tokens(g, line, colon + 1, &w->flags);
}

/* `skip NAME=L1,L2 NAME2=L3`: a grid that is a cross product less some corners (NorMuon not at the
 * longest length, say) without a second grid file. */
static int parse_skip(nb_grid *g, int line, char *rest) {
    if (strchr(rest, ':'))
        return nb_fail("%s:%d: expected `skip NAME=LABEL[,LABEL...] ...` (conditions only, no ':' and no flags)",
                       g->what, line);
    gwhen *w = new_condition_line(&g->skips, &g->n_skips, line);
    if (!w) return nb_fail("out of memory");
    return parse_conditions(g, line, rest, w, "skip NAME=LABEL...");
}

static int parse_line(nb_grid *g, int line, char *text, gaxis **block) {
    strip_comment(text);
    char *p = skip_blanks(text);
    if (!*p) return 0;
    if (p != text) {
        if (!*block)
            return nb_fail("%s:%d: an indented line outside an axis block (expected `axis NAME` on a line of its own "
                           "before indented `LABEL: FLAGS` lines): '%s'", g->what, line, p);
        return parse_block_value(g, line, p, *block);
    }
    *block = NULL;
    size_t k = 0;
    while (p[k] && p[k] != ':' && p[k] != ' ' && p[k] != '\t') k++;
    if (k == 5 && !strncmp(p, "fixed", 5)) {
        char *q = skip_blanks(p + 5);
        if (*q != ':') return nb_fail("%s:%d: expected `fixed: FLAGS`", g->what, line);
        nbx_strv *f = realloc(g->fixed, (size_t)(g->n_fixed + 1) * sizeof *f);
        if (!f) return nb_fail("out of memory");
        g->fixed = f;
        memset(&g->fixed[g->n_fixed], 0, sizeof *f);
        return tokens(g, line, q + 1, &g->fixed[g->n_fixed++]);
    }
    if (k == 4 && !strncmp(p, "axis", 4)) return parse_axis(g, line, p + 4, block);
    if (k == 4 && !strncmp(p, "when", 4)) return parse_when(g, line, p + 4);
    if (k == 4 && !strncmp(p, "skip", 4)) return parse_skip(g, line, p + 4);
    return nb_fail("%s:%d: expected `fixed: FLAGS`, `axis NAME: VALUES`, `axis NAME` (then indented `LABEL: FLAGS` "
                   "lines), `when NAME=LABEL: FLAGS` or `skip NAME=LABEL`; got '%s'", g->what, line, p);
}

/* ------------------------------------------------------------ checks once everything is read */
static int check_placeholders(const nb_grid *g, const nbx_strv *s) {
    for (int i = 0; i < s->n; i++)
        for (const char *p = strchr(s->v[i], '{'); p; p = strchr(p + 1, '{')) {
            const char *close = strchr(p, '}');
            if (!close) return nb_fail("%s:%d: '%s': '{' without '}' (expected {AXIS})", g->what, s->line, s->v[i]);
            if (find_axis(g, p + 1, (size_t)(close - p - 1)) < 0)
                return nb_fail("%s:%d: '%s': {%.*s} names no axis", g->what, s->line, s->v[i], (int)(close - p - 1), p + 1);
        }
    return 0;
}

static int check_when(const nb_grid *g, const gwhen *w, const char *keyword) {
    for (int i = 0; i < w->n; i++) {
        const gcond *c = &w->conds[i];
        int a = find_axis(g, c->name, strlen(c->name));
        if (a < 0)
            return nb_fail("%s:%d: %s %s=...: there is no axis named '%s'", g->what, w->flags.line, keyword, c->name, c->name);
        /* `when a=1 a=2` would match no point (a point has one label per axis): the line would be silently
         * ignored. Labels of one axis go in one condition, `a=1,2`. */
        for (int j = 0; j < i; j++)
            if (!strcmp(w->conds[j].name, c->name))
                return nb_fail("%s:%d: %s: axis %s is named in two conditions, which no point matches (a point has "
                               "one label per axis); expected one condition with its labels joined by ',': %s=L1,L2",
                               g->what, w->flags.line, keyword, c->name, c->name);
        for (int k = 0; k < c->labels.n; k++) {
            int found = 0;
            for (int v = 0; v < g->axes[a].n; v++) found |= !strcmp(g->axes[a].values[v].label, c->labels.v[k]);
            if (!found)
                return nb_fail("%s:%d: %s %s=%s: axis %s has no value labelled '%s'", g->what, w->flags.line, keyword,
                               c->name, c->labels.v[k], c->name, c->labels.v[k]);
        }
    }
    return 0;
}

static int check_grid(const nb_grid *g) {
    long total = 1;
    /* An empty grid would be one point of `nobubble train` with every default: surely not what was meant. */
    int fixed_flags = 0;
    for (int i = 0; i < g->n_fixed; i++) fixed_flags += g->fixed[i].n;
    if (g->n_axes == 0 && fixed_flags == 0)
        return nb_fail("%s: no `axis` and no flags in a `fixed:` line: an empty grid, which would run nobubble train "
                       "with every default (see docs/experiments.md)", g->what);
    for (int a = 0; a < g->n_axes; a++) {
        const gaxis *ax = &g->axes[a];
        if (ax->n == 0)
            return nb_fail("%s:%d: axis %s has no values (expected `axis %s: V1 V2 ...`, or indented `LABEL: FLAGS` "
                           "lines after `axis %s`)", g->what, ax->line, ax->name, ax->name, ax->name);
        total *= ax->n;
        if (total > GRID_MAX_POINTS) return nb_fail("%s: more than %d points", g->what, GRID_MAX_POINTS);
        for (int v = 0; v < ax->n; v++)
            if (check_placeholders(g, &ax->values[v].flags)) return -1;
    }
    for (int i = 0; i < g->n_fixed; i++)
        if (check_placeholders(g, &g->fixed[i])) return -1;
    for (int i = 0; i < g->n_whens; i++)
        if (check_when(g, &g->whens[i], "when") || check_placeholders(g, &g->whens[i].flags)) return -1;
    for (int i = 0; i < g->n_skips; i++)
        if (check_when(g, &g->skips[i], "skip")) return -1;
    return 0;
}

/* ------------------------------------------------------------ expansion */
static int matches(const nb_grid *g, const gwhen *w, const int *value) {
    for (int i = 0; i < w->n; i++) {
        int a = find_axis(g, w->conds[i].name, strlen(w->conds[i].name)), hit = 0;
        for (int k = 0; k < w->conds[i].labels.n; k++) hit |= !strcmp(w->conds[i].labels.v[k], g->axes[a].values[value[a]].label);
        if (!hit) return 0;
    }
    return 1;
}

/* Appends the tokens of s to the point's arguments, {NAME} replaced by its label on NAME. */
static int add_args(const nb_grid *g, gpoint *pt, const nbx_strv *s, nbx_strv *args) {
    for (int i = 0; i < s->n; i++) {
        nb_buf b = {0};
        const char *p = s->v[i];
        for (const char *open; (open = strchr(p, '{'));) {
            const char *close = strchr(open, '}');
            int a = find_axis(g, open + 1, (size_t)(close - open - 1));
            if (nb_buf_put(&b, p, (size_t)(open - p)) || nb_buf_printf(&b, "%s", g->axes[a].values[pt->value[a]].label)) goto oom;
            p = close + 1;
        }
        if (nb_buf_printf(&b, "%s", p) || nbx_strv_push(args, b.p, b.n)) goto oom;
        nb_buf_free(&b);
        continue;
    oom:
        nb_buf_free(&b);
        return -1;
    }
    return 0;
}

/* The labels (value indices) of combination `index` of the cross product, first axis slowest. */
static void combination(const nb_grid *g, int index, int *value) {
    for (int a = g->n_axes - 1; a >= 0; a--) {
        value[a] = index % g->axes[a].n;
        index /= g->axes[a].n;
    }
}

static int skipped(const nb_grid *g, const int *value) {
    for (int i = 0; i < g->n_skips; i++)
        if (matches(g, &g->skips[i], value)) return 1;
    return 0;
}

static int make_point(const nb_grid *g, gpoint *pt, int index) {
    if (!(pt->value = calloc((size_t)g->n_axes + 1, sizeof(int)))) return nb_fail("out of memory");
    combination(g, index, pt->value);
    nb_buf name = {0};
    for (int a = 0; a < g->n_axes; a++)
        if (nb_buf_printf(&name, "%s%s", a ? "_" : "", g->axes[a].values[pt->value[a]].label)) goto fail;
    if (nb_buf_printf(&name, "%s", g->n_axes ? "" : "run")) goto fail;
    pt->name = name.p;
    /* the name is the point's folder: a file system takes at most 255 bytes (200 leaves room for suffixes) */
    if (name.n > 200)
        return nb_fail("%s: point %.40s... : its name (the labels joined by '_') is %zu bytes, the most a folder name "
                       "takes here is 200: shorten the labels", g->what, name.p, name.n);
    nbx_strv args = {0};
    int rc = 0;
    for (int i = 0; i < g->n_fixed && !rc; i++) rc = add_args(g, pt, &g->fixed[i], &args);
    for (int a = 0; a < g->n_axes && !rc; a++) rc = add_args(g, pt, &g->axes[a].values[pt->value[a]].flags, &args);
    for (int i = 0; i < g->n_whens && !rc; i++)
        if (matches(g, &g->whens[i], pt->value)) rc = add_args(g, pt, &g->whens[i].flags, &args);
    /* Again once {NAME} is replaced: `--{x}` with a label resume must not get through either. */
    for (int i = 0; i < args.n && !rc; i++)
        if (sweep_flag(args.v[i]))
            rc = nb_fail("%s: point %s: %s: the sweep gives each point its own --out DIR/runs/<point> (and starts it "
                         "afresh); leave it out of the grid", g->what, pt->name, args.v[i]);
    if (!rc) rc = nbx_strv_push(&args, NULL, 0);  /* the NULL that ends the list */
    pt->args = args.v;
    pt->argc = rc ? args.n : args.n - 1;
    return rc;
fail:
    nb_buf_free(&name);
    return -1;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp((*(const gpoint *const *)a)->name, (*(const gpoint *const *)b)->name);
}

/* Labels may hold '_', so two points could join to the same folder name; refuse that. */
static int check_unique_names(const nb_grid *g) {
    const gpoint **s = malloc((size_t)g->n_points * sizeof *s);
    if (!s) return nb_fail("out of memory");
    for (int i = 0; i < g->n_points; i++) s[i] = &g->points[i];
    qsort(s, (size_t)g->n_points, sizeof *s, cmp_names);
    int rc = 0;
    for (int i = 1; i < g->n_points && !rc; i++)
        if (!strcmp(s[i]->name, s[i - 1]->name))
            rc = nb_fail("%s: two points are both named '%s' (labels joined by '_'); rename a label", g->what, s[i]->name);
    free(s);
    return rc;
}

static int expand(nb_grid *g) {
    int n = 1;
    for (int a = 0; a < g->n_axes; a++) n *= g->axes[a].n;
    int *value = calloc((size_t)g->n_axes + 1, sizeof *value);
    if (!value || !(g->points = calloc((size_t)n, sizeof *g->points))) {
        free(value);
        return nb_fail("out of memory");
    }
    for (int i = 0; i < n; i++) {
        combination(g, i, value);
        if (skipped(g, value)) continue;
        if (make_point(g, &g->points[g->n_points++], i)) {
            free(value);
            return -1;
        }
    }
    free(value);
    if (g->n_points == 0) return nb_fail("%s: every point is left out by a `skip` line", g->what);
    return check_unique_names(g);
}

/* ------------------------------------------------------------ the public face */
int nb_grid_parse(nb_grid **out, const char *text, const char *what) {
    *out = NULL;
    nb_grid *g = calloc(1, sizeof *g);
    if (!g || !(g->text = strdup(text))) { free(g); return nb_fail("out of memory"); }
    g->what = what ? what : "grid";
    char *copy = strdup(text);
    if (!copy) { nb_grid_free(g); return nb_fail("out of memory"); }
    gaxis *block = NULL;
    int line = 1, rc = 0;
    for (char *p = copy; *p && !rc; line++) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        size_t n = strlen(p);
        if (n && p[n - 1] == '\r') p[n - 1] = 0;
        rc = parse_line(g, line, p, &block);
        if (!nl) break;
        p = nl + 1;
    }
    free(copy);
    if (!rc) rc = check_grid(g);
    if (!rc) rc = expand(g);
    if (rc) { nb_grid_free(g); return -1; }
    g->what = NULL;  /* what belongs to the caller */
    *out = g;
    return 0;
}

int nb_grid_load(nb_grid **g, const char *path) {
    char *text;
    size_t n;
    *g = NULL;
    if (nb_fs_read_file(path, &text, &n, "grid file")) return -1;
    if (strlen(text) != n) {
        free(text);
        return nb_fail("grid file %s: has a NUL byte (expected text)", path);
    }
    int rc = nb_grid_parse(g, text, path);
    free(text);
    return rc;
}

static void free_condition_lines(gwhen *w, int n) {
    for (int i = 0; i < n; i++) {
        for (int c = 0; c < w[i].n; c++) {
            free(w[i].conds[c].name);
            nbx_strv_free(&w[i].conds[c].labels);
        }
        free(w[i].conds);
        nbx_strv_free(&w[i].flags);
    }
    free(w);
}

void nb_grid_free(nb_grid *g) {
    if (!g) return;
    for (int i = 0; i < g->n_fixed; i++) nbx_strv_free(&g->fixed[i]);
    for (int a = 0; a < g->n_axes; a++) {
        for (int v = 0; v < g->axes[a].n; v++) {
            free(g->axes[a].values[v].label);
            nbx_strv_free(&g->axes[a].values[v].flags);
        }
        free(g->axes[a].values);
        free(g->axes[a].name);
    }
    free_condition_lines(g->whens, g->n_whens);
    free_condition_lines(g->skips, g->n_skips);
    for (int i = 0; i < g->n_points; i++) {
        for (int k = 0; k < g->points[i].argc; k++) free(g->points[i].args[k]);
        free(g->points[i].args);
        free(g->points[i].name);
        free(g->points[i].value);
    }
    free(g->fixed);
    free(g->axes);
    free(g->points);
    free(g->text);
    free(g);
}

int nb_grid_n_axes(const nb_grid *g) { return g->n_axes; }
const char *nb_grid_axis_name(const nb_grid *g, int axis) { return g->axes[axis].name; }
int nb_grid_n_points(const nb_grid *g) { return g->n_points; }
const char *nb_grid_point_name(const nb_grid *g, int point) { return g->points[point].name; }
const char *nb_grid_text(const nb_grid *g) { return g->text; }

const char *nb_grid_point_label(const nb_grid *g, int point, int axis) {
    return g->axes[axis].values[g->points[point].value[axis]].label;
}

const char *const *nb_grid_point_args(const nb_grid *g, int point, int *argc) {
    *argc = g->points[point].argc;
    return (const char *const *)g->points[point].args;
}
