/* Internal: a link is a table of operations and one endpoint's identity (the interface both
 * transports implement; see include/nobubble/runtime.h). */
#ifndef NB_RUNTIME_LINK_H
#define NB_RUNTIME_LINK_H
#include "nobubble/runtime.h"

typedef struct {
    int (*send)(nb_link *l, int to, int tag, const void *buf, size_t bytes);
    int (*recv)(nb_link *l, int from, int tag, void *buf, size_t bytes);
    int (*poll)(nb_link *l, int from, int tag);
    void (*fail)(nb_link *l, const char *message);
    void (*close)(nb_link *l);
} nb_link_ops;

struct nb_link {
    const nb_link_ops *ops;
    int stage, count;
    void *impl;
    double timeout_s;  /* a receive fails after waiting this long (0: it waits for ever) */
};
/* Link tags are 0 <= tag < NB_LINK_TAGS (transports may encode more above them). */
#define NB_LINK_TAGS (1 << 20)
/* The failure of a receive that waited longer than the link's timeout (nb_fail). */
int nb_link_timed_out(const nb_link *l, int from, int tag);
#endif
