/* costmodel-sim.h - the simulator part of costmodel.h (sim.c): a step's programs
 * (program/program.h) timed event by event with the cost model's durations. Part of the
 * module's one public header: include costmodel/costmodel.h, which includes this at its
 * end. */
#pragma once
#ifndef MP_COSTMODEL_H_INSIDE
#error "include costmodel/costmodel.h, not costmodel-sim.h"
#endif

G_BEGIN_DECLS

/* ==== simulator (sim.c): a step's programs timed event by event ====================== */

/* The programs of the ranks that are not symmetric copies of each other (one per pipeline
 * stage of one data-parallel replica, tensor-parallel rank 0) are run together by a
 * discrete-event simulator. Each rank has one stream per MpStream; a stream runs its
 * instructions one at a time in program order. Across streams and ranks:
 *  - a pp or dp instruction starts once every compute instruction before it in program
 *    order has finished (it moves what they produced: a SEND the activation, a
 *    REDUCE_GRADS the bucket whose last gradient is ready);
 *  - a compute instruction starts once every pp instruction before it has finished:
 *    pipeline p2p blocks compute, as Megatron's send/recv calls do (they return when the
 *    transfer is done). This is one step stricter than the builder's rule above, where a
 *    SEND holds nothing up: here the compute after a SEND waits for the SEND's own
 *    transfer, never for the receiver (on the zoo's plans the two differ by < 0.1%); a
 *    FORWARD/BACKWARD also waits for the last GATHER_PARAMS before it covering its layer;
 *  - WAIT holds the compute stream until its stream's instructions before it are done;
 *  - SEND is eager: it moves its bytes over [start, start + duration] whether or not the
 *    receiver is ready. RECV is posted when its rank reaches it (it holds its pp stream
 *    from then) and completes when the matching SEND (same tag, from the peer) is done,
 *    never earlier; it takes no time of its own;
 *  - REDUCE_TIED is a collective of the simulated ranks that have one (the first and last
 *    stage): the k-th of each starts when all of them have been reached.
 * Durations come from the cost model, or from a caller's function (tests). */

/* Why a compute-stream instruction did not start as soon as its stream was free. */
typedef enum {
  MP_SIM_WAIT_NONE,      /* it did */
  MP_SIM_WAIT_PP,        /* a pipeline send or receive before it had not finished */
  MP_SIM_WAIT_DP,        /* the dp stream had not (WAIT, a ZeRO-3 parameter gather) */
} MpSimWait;

/* How one instruction ran (seconds from the start of the step). */
typedef struct {
  double start_s, end_s;  /* RECV: from being posted to its data having arrived */
  double comm_s;          /* FORWARD/BACKWARD: the TP/CP/EP collectives inside */
  /* Compute stream: it was idle over [idle_from_s, start_s]: a pipeline bubble (waiting
   * for another rank's work) until comm_from_s, then waiting on `wait`'s transfer. */
  double idle_from_s, comm_from_s;
  MpSimWait wait;
  guint peer_insn;        /* SEND, RECV: the matching instruction of the peer's program */
} MpSimSlice;

/* Where one rank's step goes (MpStepTime, program.h): its compute stream's timeline over
 * [0, step_s], every instant counted once, so the parts add up to step_s. compute:
 * FORWARD/BACKWARD kernels, recomputation included; tp_comm: the TP collectives
 * inside FORWARD/BACKWARD; cp_comm: the exposed part of their context-parallel ring
 * exchange; ep_comm: the experts' dispatch inside them; pp_comm: idle while a p2p transfer it waits on is in flight,
 * and after its last compute while its pp stream still runs; dp_comm: idle waiting on the
 * dp stream, and after its last compute while the dp stream still runs (ZeRO-1/2
 * gathers); bubble: idle otherwise, waiting for other stages (fill, drain, slower stages)
 * and, after its own work, for the slowest rank; optimizer: OPTIMIZER. */
typedef struct {
  guint rank, stage;            /* its program's */
  double end_s;                 /* when its last instruction (any stream) finished */
  double busy_s[MP_STREAM_N];   /* time each stream was busy (RECV and WAIT take none) */
  MpStepTime time;
  MpSimSlice *slices;           /* one per instruction of its program, in order, when
                                 * asked for (MpSimOptions.slices); else NULL */
} MpSimRank;

typedef struct {
  double step_s;                /* the last instruction's end, over every rank */
  guint critical;               /* the rank (index in ranks) whose step ends last; ties:
                                 * the one with the most compute, then the first */
  MpStepTime time;              /* ranks[critical].time */
  MpSimRank *ranks;             /* in the order of the programs */
  guint n_ranks;
  guint64 n_insns, n_events;
} MpSimResult;

/* A duration: how long the instruction holds its stream (SEND: the transfer; RECV and
 * WAIT: 0, they only wait), and the part of a FORWARD/BACKWARD spent in collectives. */
typedef struct {
  double time_s, comm_s;
  double ep_s;            /* MoE (moe14): the part of comm_s that is expert dispatch */
  double cp_s;            /* cp17: the part of comm_s that is the context-parallel ring */
} MpSimCost;

/* Fills *OUT for INSN of PROGRAM; PEER is the program of a SEND's or RECV's other rank
 * (else NULL). Must give finite, non-negative times. */
typedef void (*MpSimCostFunc) (const MpProgram *program, const MpInsn *insn,
                               const MpProgram *peer, MpSimCost *out, gpointer data);

typedef struct {
  MpSimCostFunc cost;           /* NULL: the cost model over mp_simulate's CTX and CFG */
  gpointer cost_data;
  gboolean slices;              /* fill MpSimRank.slices (for a trace); else they are NULL */
} MpSimOptions;

/* Runs PROGRAMS[N] (borrowed; world ranks distinct; every SEND/RECV peer among them) for
 * one step under CFG on CTX's model and cluster (both may be NULL when OPTS gives a cost
 * function; OPTS may be NULL). F/B durations: mp_cost_layer on the stage's spans, cached
 * per (stage groups, layer class); SEND: a send/recv of its bytes between the two ranks;
 * REDUCE_GRADS, GATHER_PARAMS: its collective over the data-parallel group; REDUCE_TIED: an
 * all-reduce over the first and last stage; OPTIMIZER: the stage's optimizer_s
 * (mp_cost_stage_times). Caller owns the result; NULL with MP_ERROR_INPUT when the
 * programs are not a runnable step (a RECV without its SEND, a bad stream, a deadlock:
 * the message names the stuck instructions). */
MpSimResult *mp_simulate (const MpCostContext *ctx, const MpParallelConfig *cfg,
                          MpProgram *const *programs, guint n, const MpSimOptions *opts,
                          GError **error);
void mp_sim_result_free (MpSimResult *result);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpSimResult, mp_sim_result_free)
/* "none", "pp", "dp". */
const char *mp_sim_wait_name (MpSimWait wait);

G_END_DECLS
