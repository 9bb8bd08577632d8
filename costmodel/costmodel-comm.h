/* costmodel-comm.h - the communication part of costmodel.h (comm.c): collective times
 * from nccl-tests' definitions, NCCL's algorithms and protocols, alpha-beta per link
 * tier. Part of the module's one public header: include costmodel/costmodel.h, which
 * includes this where the section belongs. */
#pragma once
#ifndef MP_COSTMODEL_H_INSIDE
#error "include costmodel/costmodel.h, not costmodel-comm.h"
#endif

/* ==== communication (comm.c) =========================================================== */

typedef enum {
  MP_ALGO_AUTO,           /* the fastest available, as NCCL's tuner picks */
  MP_ALGO_RING,
  MP_ALGO_TREE,           /* NCCL double binary tree (all-reduce only) */
  MP_ALGO_HIERARCHICAL,   /* reduce-scatter in domain, across domains, all-gather in
                           * domain (a domain: a node, without a domain tier) */
  MP_ALGO_NVLS,           /* NVLink SHARP (all-reduce inside an NVSwitch node or domain) */
  MP_ALGO_DIRECT,         /* all-to-all and send/recv: every peer at once */
  MP_ALGO_N
} MpCollAlgo;

typedef enum { MP_PROTO_LL, MP_PROTO_LL128, MP_PROTO_SIMPLE, MP_PROTO_N } MpCollProto;

/* nccl-tests bus factor: 2(n-1)/n all-reduce; (n-1)/n all-gather, reduce-scatter,
 * all-to-all; 1 broadcast and send/recv (and 0 bytes of traffic for n = 1). */
double mp_coll_bus_factor (MpCollKind kind, guint n);
/* algbw = size / time; busbw = algbw * bus factor (nccl-tests). */
double mp_coll_algbw (double size, double time_s);
double mp_coll_busbw (MpCollKind kind, guint n, double size, double time_s);
/* The time a collective takes at bus bandwidth BUSBW_BPS: size * factor / busbw. */
double mp_coll_time_from_busbw (MpCollKind kind, guint n, double size, double busbw_Bps);

/* The alpha-beta view of a group that the closed forms take: bandwidths are per rank
 * and already include the link efficiency; latencies are per algorithm step for NCCL's
 * Simple protocol (the others scale by NCCL's ratios). */
typedef struct {
  guint n_ranks, n_nodes, ranks_per_node;
  /* NVLink domains (0 = each node its own domain: n_nodes, ranks_per_node, 1). */
  guint n_domains, ranks_per_domain, nodes_per_domain;
  double bw_Bps[MP_TIER_N];     /* node, domain: per-rank link; cluster: per-rank NIC share */
  double alpha_s[MP_TIER_N];    /* per-step latency at each tier */
  gboolean nvlink;              /* node tier is NVLink (NCCL's NVLINK latency ratios) */
  gboolean domain_nvlink;       /* ... and so is the domain tier (else NCCL's NET ones) */
  double base_scale;            /* 1: add NCCL's per-call base latency; 0: none */
  double nvls_algbw_Bps;        /* NVLink SHARP all-reduce algbw inside one domain (node
                                 * without domains); 0: not available */
  gboolean protocols;           /* LL available (NCCL); else Simple only */
  gboolean ll128;               /* LL128 too (NCCL enables it on NVLink systems only) */
} MpAlphaBeta;

/* Closed-form time of KIND with ALGO and PROTO over AB (no choice made), or a negative
 * value when the combination does not exist (tree all-gather, NVLS without SHARP, ...).
 * Ring all-reduce, Simple: base + 2(n-1)/n S / B + 2(n-1) alpha over one tier. */
double mp_coll_time (MpCollKind kind, MpCollAlgo algo, MpCollProto proto, double size,
                     const MpAlphaBeta *ab);
/* The expected number of GROUPS (equal runs of consecutive experts: the EP ranks, or the
 * NVLink domains they fill) other than the token's own that hold at least one of its K
 * experts out of EXPERTS under ROUTING: spread, (g - 1) (1 - C(E - E/g, k) / C(E, k));
 * blocked, the groups a run of k consecutive experts starting at t*k (mod E) covers,
 * averaged over t, times (g - 1) / g (a rank's own group is any of the g alike). 0 for
 * one group. */
double mp_coll_remote_groups (double experts, guint k, guint groups, MpRouting routing);
/* MoE dispatch (or combine) as DeepEP's normal kernels run it over AB (DeepEP README,
 * "Normal kernels with NVLink and RDMA forwarding"; DeepSeek-V3 report sec. 3.2.2): each
 * rank's SIZE bytes are COPIES copies of each of its tokens for experts of EXPERTS laid
 * out in order over the group's ranks, routed by ROUTING. A token goes once to each rank
 * holding any of its experts, not once per expert (deep_ep get_dispatch_layout's
 * is_token_in_rank, [num_tokens, num_ranks]: "whether a token be sent to a rank";
 * deep_ep/buffers/legacy.py, formerly buffer.py); it crosses to another NVLink domain
 * once, over RDMA, if any of its experts is there (mp_coll_remote_groups), and is fanned
 * out there over NVLink by the rank on its rail to the other ranks it goes to. The
 * latency is the flat all-to-all's; inside one domain it is the flat all-to-all of the
 * deduplicated bytes. */
double mp_coll_forwarded_a2a_time (double size, double copies, double experts,
                                   MpRouting routing, const MpAlphaBeta *ab);
/* The bytes of a flat all-to-all that carries the same tokens as SIZE bytes of COPIES
 * copies each, when each token goes once per destination rank of a group of N (as
 * mp_coll_forwarded_a2a_time counts them). */
double mp_coll_dedup_a2a_size (double size, double copies, double experts,
                               MpRouting routing, guint n);
/* NCCL's per-call base latency of ALGO with PROTO (tuning.cc baseLat). */
double mp_coll_base_latency (MpCollAlgo algo, MpCollProto proto);

typedef struct {
  double time_s;
  MpCollAlgo algo;
  MpCollProto proto;
  double algbw_Bps, busbw_Bps;
  gboolean from_profile;       /* the time came from a measured table */
} MpCollCost;

/* The alpha-beta view of SPAN on DEV's curve and the context's profile. */
void mp_cost_alpha_beta (const MpCostContext *ctx, const MpCostDevice *dev,
                         const MpGroupSpan *span, MpAlphaBeta *out);
/* Time of KIND moving SIZE over the ranks of SPAN with ALGO (MP_ALGO_AUTO: the fastest
 * algorithm and protocol; a measured profile table when the group lies in one tier).
 * A group of one rank costs 0; an ALGO that cannot run KIND on SPAN costs G_MAXDOUBLE. */
void mp_cost_collective (const MpCostContext *ctx, const MpCostDevice *dev, MpCollKind kind,
                         double size, const MpGroupSpan *span, MpCollAlgo algo,
                         MpCollCost *out);
const char *mp_coll_algo_name (MpCollAlgo algo);
const char *mp_coll_proto_name (MpCollProto proto);
