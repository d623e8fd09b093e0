/* Internal to data: a pre-tokenizer given as a regular expression (PCRE2, Unicode properties),
 * split the way Hugging Face's Split pre-tokenizer with behavior "Isolated" splits: each match is a
 * piece, and so is each stretch of text between two matches. */
#ifndef NB_DATA_REGEX_H
#define NB_DATA_REGEX_H
#include <stddef.h>

typedef struct nb_regex nb_regex;
/* Compiles pattern; errors name path, the pattern and the position. A pattern that can match the
 * empty string is refused (the pieces would not be defined). */
int nb_regex_compile(nb_regex **out, const char *pattern, const char *path);
/* The end of the piece that starts at text[pos] (pos < len; the result is > pos), or
 * NB_REGEX_FAILED with the error recorded (nb_last_error) when PCRE2 could not finish the match
 * (its match, depth or heap limits). Bytes that are not valid UTF-8 never match and so fall between
 * matches. Not safe to call from several threads at once on one nb_regex. */
#define NB_REGEX_FAILED ((size_t)0)
size_t nb_regex_next(nb_regex *re, const char *text, size_t len, size_t pos);
void nb_regex_free(nb_regex *re);
#endif
