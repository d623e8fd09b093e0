/* The GCIDE reader (src/data/gcide.c) on a tiny hand-made database in GCIDE's dictd markup
 * (tests/fixtures/gcide_tiny.txt, gzipped as gcide_tiny.dict.dz: dictzip is gzip with an extra
 * header field, which zlib skips): the header is skipped, one document per entry, markup stripped,
 * against hand-written expected text; a missing database names the file and the package. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "nobubble/common.h"
#include "nobubble/data.h"

static const char *const EXPECTED[] = {
    "Apple, n. [OE. appel, eppel, AS. aeppel, aepl.]\n"
    "1. The fleshy pome or fruit of a rosaceous tree (Pyrus\n"
    "malus).\n"
    "\n"
    "2. Any tree of the genus Malus; an apple tree.",
    "Cafe, n. [F.]\n"
    "A coffeehouse; a restaurant. [Obs.]\n"
    "\n"
    "Blessed be the father.          --Chaucer.",
    "Root, n.\n"
    "The  sign; idea, arger and that.\n"
    "Unreadable",
};
#define N_EXPECTED (sizeof EXPECTED / sizeof EXPECTED[0])

static void check_docs(const char *what, const char *text, const size_t *off, size_t n) {
    CHECK(n == N_EXPECTED, "%s: %zu documents, expected %zu (one per entry, the header skipped)", what, n, N_EXPECTED);
    for (size_t i = 0; i < n && i < N_EXPECTED; i++) {
        size_t len = off[i + 1] - off[i];
        int same = len == strlen(EXPECTED[i]) && !memcmp(text + off[i], EXPECTED[i], len);
        CHECK(same, "%s: document %zu is\n---\n%.*s\n---\nexpected\n---\n%s\n---", what, i, (int)len, text + off[i],
              EXPECTED[i]);
    }
}

int main(void) {
    char *text;
    size_t *off, n;
    /* the gzipped fixture, and the plain one (zlib reads plain text as it is): the same documents */
    const char *const paths[2] = {"tests/fixtures/gcide_tiny.dict.dz", "tests/fixtures/gcide_tiny.txt"};
    int rc = 0;
    for (int k = 0; k < 2; k++) {
        rc = nb_gcide_documents(paths[k], &text, &off, &n);
        CHECK(rc == 0, "read %s: %s", paths[k], rc ? nb_last_error() : "");
        if (rc) continue;
        check_docs(paths[k], text, off, n);
        free(text);
        free(off);
    }
    rc = nb_gcide_documents("/nonexistent/gcide.dict.dz", &text, &off, &n);
    const char *e = rc ? nb_last_error() : "";
    CHECK(rc != 0 && strstr(e, "/nonexistent/gcide.dict.dz") && strstr(e, "apt-get install dict-gcide"),
          "a missing database names the file and the package: %s", e);
    const char header_only[] = "00-database-url\n   ftp://x\n\nno entries here\n";
    rc = nb_gcide_parse(header_only, sizeof header_only - 1, &text, &off, &n);
    e = rc ? nb_last_error() : "";
    CHECK(rc != 0 && strstr(e, "no dictionary entries"), "a file without entries is refused: %s", e);
    return check_summary();
}
