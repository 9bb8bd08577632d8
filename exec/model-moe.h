/* model-moe.h - what the two files of the executor's MoE layer share (model-moe.c: the
 * router, the experts, forward and backward; model-moe-ep.c: the token dispatch and
 * combine over the expert-parallel group). Private to exec/. */
#pragma once
#include "exec/exec-private.h"

G_BEGIN_DECLS

typedef struct {
  int E, K, El, Fel, f1e, Fsl, f1s;
  /* The tokens this rank routes: rows [row0, row0 + Nt) of the block's N (all of them
   * with etp = tp; its etp group's sequence-parallel shards with etp < tp) */
  int row0, Nt;
  gboolean partial;        /* experts split over etp > 1: outputs are partial sums */
  gboolean owner;          /* adds the aux loss and the router's input gradient (etp
                            * rank 0) */
} MoeShape;

/* The block's MoE tensors in `uses`, from FIRST (the slot after the second norm); each
 * weight followed by its bias when the model has biases (b: NULL without). */
typedef struct {
  ExTensor *s1, *sb1, *s2, *sb2, *router, *rb, *e1, *eb1, *e2, *eb2;
} MoeTensors;

/* One micro-batch's routing, on the host. Rows are the kept (token, choice) pairs grouped
 * by expert, tokens ascending inside an expert. */
struct _ExRoute {
  float *probs;            /* (N, E) softmax */
  int *idx;                /* (N, K) chosen experts */
  float *gates;            /* (N, K) renormalised */
  int R;                   /* kept rows */
  int *src;                /* (R) the token of each row */
  int *slot;               /* (R) its n * K + j */
  float *grow;             /* (R) its gate */
  int *count;              /* (E) rows per expert */
  /* Expert parallelism: the rows this rank's experts take from every ep rank */
  int Rr;                  /* rows received (R when ep = 1) */
  int *lcount;             /* (El) of them per local expert (count when ep = 1) */
  int *perm;               /* (Rr) expert-major row q is received row perm[q] */
  gsize *send_n, *recv_n;  /* (ep) all-to-all: floats of rows to and from each ep rank */
  int *asrc;               /* (Rr) all-gather: the row's token among the ep group's ep Nt */
  int *aslot;              /* (Rr) its (token, choice) among their ep Nt K */
  float *agate;            /* (Rr) its gate */
  float *auxf;             /* (mbs, E) the load-balancing loss's f of each sequence and
                            * expert, over the whole sequence (model-moe.c aux_loss) */
};

/* ---- expert parallelism (model-moe-ep.c); collectives over ep_group timed into ex->ep_s */

/* All-to-all dispatcher. Tells every ep rank how many rows each of its experts gets from
 * this one and lays out what comes back (R->Rr, lcount, perm, send_n, recv_n). */
gboolean mp_moe_a2a_layout (MpExec *ex, const MoeShape *s, ExRoute *r, GError **error);
/* Rows X (R, C) in this rank's order to the experts' ranks: XE (Rr, C) by local expert. */
gboolean mp_moe_a2a_dispatch (MpExec *ex, const ExRoute *r, const float *x, float *xe,
                              GError **error);
/* The inverse: YE (Rr, C) by local expert back to their ranks, Y (R, C) in this rank's
 * order. */
gboolean mp_moe_a2a_combine (MpExec *ex, const ExRoute *r, const float *ye, float *y,
                             GError **error);
/* All-gather dispatcher. Gathers every ep rank's routing and lays out this rank's experts'
 * rows among the group's ep Nt tokens: R->Rr, lcount, asrc, aslot, agate. */
gboolean mp_moe_ag_layout (MpExec *ex, const MoeShape *s, ExRoute *r, GError **error);
/* X (Nt, C) of every ep rank into ALL (ep Nt, C), rank order. */
gboolean mp_moe_ag_gather (MpExec *ex, const MoeShape *s, const float *x, float *all,
                           GError **error);
/* ALL (ep Nt, WIDTH) summed over the ep group, this rank's block into Y (Nt, WIDTH). */
gboolean mp_moe_ag_reduce (MpExec *ex, const MoeShape *s, const float *all, float *y,
                           int width, GError **error);

G_END_DECLS
