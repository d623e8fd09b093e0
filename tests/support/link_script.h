/* Scripts of link actions, one per endpoint, run the way the executor runs its action lists: one
 * thread drives several endpoints round-robin, sending at once and receiving only what a poll says
 * is there. Shared by the threads test (tests/test_link.c) and the MPI one (tests/link_mpi.c), so
 * that the MPI protocol is first proved on the threads hub. */
#ifndef NB_TESTS_LINK_SCRIPT_H
#define NB_TESTS_LINK_SCRIPT_H
#include <stddef.h>
#include "nobubble/runtime.h"

/* Send to or receive from `peer`; `seq` tells two messages of one (peer, tag) pair apart. */
typedef struct {
    char kind;  /* 'S' or 'R' */
    int peer, tag, seq;
    size_t bytes;
} ls_action;

typedef struct {
    nb_link *link;
    ls_action acts[64];
    int n, next;
} ls_endpoint;

/* The bytes of message number seq from `from` to `to` under tag: distinct per source, so that a
 * message delivered to the wrong receive is caught by its content. */
void ls_fill(unsigned char *buf, size_t n, int from, int to, int tag, int seq);
void ls_add(ls_endpoint *e, char kind, int peer, int tag, int seq, size_t bytes);
/* Runs every endpoint's script to its end, round-robin; checks every payload. Fails (nb_fail) on a
 * link error, a wrong payload, or when no endpoint has moved for timeout_s seconds. */
int ls_run(ls_endpoint *eps, int n_eps, double timeout_s);
/* The MPI test's protocol for endpoint e of P stages and a coordinator (endpoint P): every stage
 * sends to the coordinator and to its ring neighbour; the coordinator answers every stage; 8 MB and
 * zero-byte messages both ways between endpoint 0 and the coordinator; endpoint 0 and the
 * coordinator send stage 1 a message of the same tag; two ordered pairs. */
void ls_protocol(ls_endpoint *ep, int e, int P);
#define LS_BIG ((size_t)8 << 20)
#endif
