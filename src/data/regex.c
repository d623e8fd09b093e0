/* The regex pre-tokenizer on PCRE2 (Debian's libpcre2-dev): UTF-8 with Unicode properties (\p{L},
 * and \s, \d, \w by Unicode as in Oniguruma, which Hugging Face's tokenizers uses), invalid UTF-8
 * allowed in the subject (it never matches), JIT-compiled when the platform has a JIT. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include "data/regex.h"
#include "util/error.h"

struct nb_regex {
    pcre2_code *code;
    pcre2_match_data *match;
};

void nb_regex_free(nb_regex *re) {
    if (!re) return;
    pcre2_match_data_free(re->match);
    pcre2_code_free(re->code);
    free(re);
}

int nb_regex_compile(nb_regex **out, const char *pattern, const char *path) {
    *out = NULL;
    int err;
    PCRE2_SIZE at;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &at, NULL);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return nb_fail("tokenizer %s: the pre-tokenizer's regex does not compile at offset %zu: %s (pattern %s)", path,
                       (size_t)at, (const char *)msg, pattern);
    }
    uint32_t min_len = 0;
    pcre2_pattern_info(code, PCRE2_INFO_MINLENGTH, &min_len);
    if (min_len == 0) {
        pcre2_code_free(code);
        return nb_fail("tokenizer %s: the pre-tokenizer's regex can match the empty string, which nobubble does not "
                       "support (pattern %s)", path, pattern);
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);   /* without a JIT, the interpreter: same results */
    nb_regex *re = calloc(1, sizeof *re);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(code, NULL);
    if (!re || !md) {
        free(re);
        pcre2_match_data_free(md);
        pcre2_code_free(code);
        return nb_fail("out of memory");
    }
    re->code = code;
    re->match = md;
    *out = re;
    return 0;
}

size_t nb_regex_next(nb_regex *re, const char *text, size_t len, size_t pos) {
    /* The whole text is the subject, so that look-arounds see past the piece. */
    int rc = pcre2_match(re->code, (PCRE2_SPTR)text, len, pos, 0, re->match, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) return len;   /* no match up to the end: the rest is one piece */
    if (rc < 0) {
        /* A matching error (PCRE2's match, depth or heap limit, typically on a very long run of one
         * kind of character): splitting there anyway would give pieces Hugging Face's would not. */
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        nb_fail("the pre-tokenizer's regex failed at byte %zu of a %zu-byte text: %s", pos, len, (const char *)msg);
        return NB_REGEX_FAILED;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(re->match);
    if (ov[0] > pos) return ov[0];         /* the text before the next match */
    return ov[1] > pos ? ov[1] : pos + 1;  /* the match (never empty: see nb_regex_compile) */
}
