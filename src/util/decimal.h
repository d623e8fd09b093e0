/* Internal: the one syntax of the numbers a person writes in flags and files. */
#ifndef NB_UTIL_DECIMAL_H
#define NB_UTIL_DECIMAL_H

/* Whether text is a number in decimal: an optional sign and digits, then (unless integer) an optional
 * '.' and digits and an optional exponent (e or E, an optional sign, digits): "3", "-2", "3e-4", ".5",
 * "1.". Not what strtod and strtol (base 0) take besides, so that a typo is never read as another
 * number: hexadecimal ("0x10", "0x1p4"), "inf", "nan", blanks around the number. A caller checks
 * this first, then converts with strtod/strtoll (base 10), whose range errors it keeps. */
int nb_is_decimal(const char *text, int integer);
#endif
