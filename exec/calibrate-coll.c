/* calibrate-coll.c - the collective sweep of `mpplan calibrate` with 2 ranks or more:
 * every collective of the cost model (all-reduce, all-gather, reduce-scatter, all-to-all,
 * broadcast, send/recv) from 8 B to the backend's largest message, run by the backend's
 * run_coll (MPI on host, NCCL on cuda) on a group of every rank, each result checked on
 * the host (#wrong), and printed as nccl-tests prints it (ECOSYSTEM.md 5.1). A time is
 * the slowest rank's (nccl-tests `-a 3`), the mean over the timed iterations after a
 * warm-up. Units: seconds, bytes, bytes/s. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/calibrate-private.h"

#include <string.h>

/* One collective as nccl-tests tests it, whatever runs it (MpBackendOps.run_coll). Buffers hold
 * floats; COUNT is what the printed `count` column says (per rank for all-gather and
 * reduce-scatter, ECOSYSTEM.md 5.1). Broadcast is in place on the receive buffer (MPI has
 * no out-of-place form, and both backends run the same test). */
typedef struct Coll Coll;
struct Coll {
  MpCollKind kind;
  const char *redop;
  int root;                                  /* -1: none */
  /* Elements of the send and receive buffers for COUNT. */
  void (*buffers) (int n, gsize count, gsize *send, gsize *recv);
  /* COUNT for a size in bytes, 0 when it cannot be formed. */
  gsize (*count_of) (int n, gsize bytes);
  gsize (*bytes_of) (int n, gsize count);     /* nccl-tests size */
  void (*fill) (int rank, int n, gsize count, float *send, float *recv);
  gsize (*check) (int rank, int n, gsize count, const float *recv);  /* wrong elements */
};

/* Exactly representable test values: small integers. */
static float
value (gsize a, gsize b, gsize i)
{
  return (float) ((a * 31 + b * 7 + i) % 1021);
}

static gsize count_whole (int n, gsize bytes) { (void) n; return bytes / sizeof (float); }
static gsize count_per_rank (int n, gsize bytes) { return bytes / sizeof (float) / (gsize) n; }
static gsize bytes_whole (int n, gsize count) { (void) n; return count * sizeof (float); }
static gsize bytes_all (int n, gsize count) { return count * sizeof (float) * (gsize) n; }

/* all_reduce: rank r contributes (r + 1) v(i); the sum is n(n+1)/2 v(i). */
static void
ar_buffers (int n, gsize count, gsize *send, gsize *recv)
{
  (void) n;
  *send = *recv = count;
}
static void
ar_fill (int rank, int n, gsize count, float *send, float *recv)
{
  (void) n;
  for (gsize i = 0; i < count; i++)
    send[i] = (float) (rank + 1) * value (0, 0, i % 13), recv[i] = -1;
}
static gsize
ar_check (int rank, int n, gsize count, const float *recv)
{
  gsize wrong = 0;
  for (gsize i = 0; i < count; i++)
    wrong += recv[i] != (float) (n * (n + 1) / 2) * value (0, 0, i % 13);
  return wrong;
}

/* all_gather: rank r's block is v(r, 0, i). */
static void
ag_buffers (int n, gsize count, gsize *send, gsize *recv)
{
  *send = count;
  *recv = count * n;
}
static void
ag_fill (int rank, int n, gsize count, float *send, float *recv)
{
  for (gsize i = 0; i < count; i++)
    send[i] = value (rank, 0, i);
  for (gsize i = 0; i < count * n; i++)
    recv[i] = -1;
}
static gsize
ag_check (int rank, int n, gsize count, const float *recv)
{
  gsize wrong = 0;
  for (int r = 0; r < n; r++)
    for (gsize i = 0; i < count; i++)
      wrong += recv[r * count + i] != value (r, 0, i);
  return wrong;
}

/* reduce_scatter: rank r contributes (r + 1) v(j) over the whole buffer and keeps block r
 * of the sum. */
static void
rs_buffers (int n, gsize count, gsize *send, gsize *recv)
{
  *send = count * n;
  *recv = count;
}
static void
rs_fill (int rank, int n, gsize count, float *send, float *recv)
{
  for (gsize j = 0; j < count * n; j++)
    send[j] = (float) (rank + 1) * value (0, 0, j % 13);
  for (gsize i = 0; i < count; i++)
    recv[i] = -1;
}
static gsize
rs_check (int rank, int n, gsize count, const float *recv)
{
  gsize wrong = 0;
  for (gsize i = 0; i < count; i++)
    wrong += recv[i] != (float) (n * (n + 1) / 2) * value (0, 0, (rank * count + i) % 13);
  return wrong;
}

/* all_to_all: rank r sends v(r, p, i) to peer p; COUNT is all it sends, COUNT / n each. */
static gsize
a2a_count (int n, gsize bytes)
{
  return bytes / sizeof (float) / (gsize) n * (gsize) n;
}
static void
a2a_fill (int rank, int n, gsize count, float *send, float *recv)
{
  gsize per = count / n;
  for (int p = 0; p < n; p++)
    for (gsize i = 0; i < per; i++)
      send[p * per + i] = value (rank, p, i), recv[p * per + i] = -1;
}
static gsize
a2a_check (int rank, int n, gsize count, const float *recv)
{
  gsize per = count / n, wrong = 0;
  for (int r = 0; r < n; r++)
    for (gsize i = 0; i < per; i++)
      wrong += recv[r * per + i] != value (r, rank, i);
  return wrong;
}

/* broadcast from rank 0 of v(0, 0, i); the other ranks start from -1 (in place: MPI has
 * no out-of-place broadcast, so the send buffer is the root's receive buffer). */
static void
bc_fill (int rank, int n, gsize count, float *send, float *recv)
{
  for (gsize i = 0; i < count; i++)
    recv[i] = rank == 0 ? value (0, 0, i) : -1;
}
static gsize
bc_check (int rank, int n, gsize count, const float *recv)
{
  gsize wrong = 0;
  for (gsize i = 0; i < count; i++)
    wrong += recv[i] != value (0, 0, i);
  return wrong;
}

/* send_recv: rank r sends v(r, 1, i) to r + 1 and receives from r - 1 (a ring, as
 * nccl-tests' sendrecv_perf). */
static void
sr_fill (int rank, int n, gsize count, float *send, float *recv)
{
  for (gsize i = 0; i < count; i++)
    send[i] = value (rank, 1, i), recv[i] = -1;
}
static gsize
sr_check (int rank, int n, gsize count, const float *recv)
{
  gsize wrong = 0;
  for (gsize i = 0; i < count; i++)
    wrong += recv[i] != value ((rank + n - 1) % n, 1, i);
  return wrong;
}

static const Coll colls[] = {
  { MP_COLL_ALL_REDUCE, "sum", -1, ar_buffers, count_whole, bytes_whole, ar_fill, ar_check },
  { MP_COLL_ALL_GATHER, "none", -1, ag_buffers, count_per_rank, bytes_all, ag_fill, ag_check },
  { MP_COLL_REDUCE_SCATTER, "sum", -1, rs_buffers, count_per_rank, bytes_all, rs_fill,
    rs_check },
  { MP_COLL_ALL_TO_ALL, "none", -1, ar_buffers, a2a_count, bytes_whole, a2a_fill, a2a_check },
  { MP_COLL_BROADCAST, "none", 0, ar_buffers, count_whole, bytes_whole, bc_fill, bc_check },
  { MP_COLL_SEND_RECV, "none", -1, ar_buffers, count_whole, bytes_whole, sr_fill, sr_check },
};

/* The buffers of one sweep: the backend's (SEND, RECV) and the host's copies that are
 * filled and checked (the same memory when the backend's is host memory). */
typedef struct {
  float *send, *recv, *hsend, *hrecv;
  gsize send_n, recv_n;
} CollBufs;

static void
bufs_free (Cal *c, CollBufs *b)
{
  if (!c->dev->host_memory)
    {
      g_free (b->hsend);
      g_free (b->hrecv);
    }
  c->be->ops->release (c->be, b->recv);
  c->be->ops->release (c->be, b->send);
}

/* Room for COLL's largest message. */
static gboolean
bufs_alloc (Cal *c, const Coll *coll, gsize max_bytes, CollBufs *b, GError **error)
{
  memset (b, 0, sizeof *b);
  coll->buffers (c->size, coll->count_of (c->size, max_bytes), &b->send_n, &b->recv_n);
  b->send = cal_dev_floats (c, b->send_n, error);
  b->recv = b->send ? cal_dev_floats (c, b->recv_n, error) : NULL;
  if (b->recv == NULL)
    {
      bufs_free (c, b);
      return FALSE;
    }
  b->hsend = c->dev->host_memory ? b->send : g_new (float, MAX (b->send_n, (gsize) 1));
  b->hrecv = c->dev->host_memory ? b->recv : g_new (float, MAX (b->recv_n, (gsize) 1));
  return TRUE;
}

/* One row: time (slowest rank, mean over ITERS after a warm-up) and #wrong (all ranks),
 * counted on the results copied back to the host. */
static gboolean
run_size (Cal *c, const Coll *coll, gsize count, CollBufs *b, int iters, double *time_s,
          long *wrong, GError **error)
{
  MpBackend *be = c->be;
  gsize send_n, recv_n;
  coll->buffers (c->size, count, &send_n, &recv_n);
  coll->fill (c->rank, c->size, count, b->hsend, b->hrecv);
  if (!c->dev->host_memory)
    {
      be->ops->upload (be, b->send, b->hsend, send_n * sizeof (float));
      be->ops->upload (be, b->recv, b->hrecv, recv_n * sizeof (float));
    }
  if (!be->ops->run_coll (be, c->group, coll->kind, b->send, b->recv, count, 1, error)
      || !cal_barrier (c, error))
    return FALSE;
  double t0 = cal_now_s ();
  if (!be->ops->run_coll (be, c->group, coll->kind, b->send, b->recv, count, iters, error))
    return FALSE;
  *time_s = (cal_now_s () - t0) / iters;
  if (!cal_max_over_ranks (c, time_s, error))
    return FALSE;
  if (!c->dev->host_memory)
    be->ops->download (be, b->hrecv, b->recv, recv_n * sizeof (float));
  /* a count, exact in a double */
  double all = (double) coll->check (c->rank, c->size, count, b->hrecv);
  if (!be->ops->host_all_reduce (be, &all, 1, MP_REDUCE_SUM, error))
    return FALSE;
  *wrong = (long) all;
  return TRUE;
}

static void
print_header (Cal *c, const Coll *coll, int iters)
{
  fprintf (c->out, "# %s_perf: %s, %d ranks, %s, float; time = the slowest rank's mean over "
           "up to %d iterations after 1 warm-up (nccl-tests -a 3)\n#\n",
           mp_coll_kind_name (coll->kind), c->be->ops->run_coll_calls[coll->kind], c->size,
           coll->kind == MP_COLL_BROADCAST ? "in place" : "out-of-place", iters);
  fprintf (c->out, "#       size         count      type   redop    root     time   algbw   "
                   "busbw  #wrong\n");
  fprintf (c->out, "#        (B)    (elements)                               (us)  (GB/s)  "
                   "(GB/s)\n");
}

static void
print_row (Cal *c, const Coll *coll, gsize bytes, gsize count, double t, long wrong)
{
  double us = t * 1e6;
  const char *fmt = us >= 1e4 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f";
  char time_text[32];
  g_snprintf (time_text, sizeof time_text, fmt, us);
  fprintf (c->out, "%12zu  %12zu  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %6ld\n", bytes, count,
           "float", coll->redop, coll->root, time_text, mp_coll_algbw (bytes, t) / 1e9,
           mp_coll_busbw (coll->kind, c->size, bytes, t) / 1e9, wrong);
}

/* Sweeps COLL over 8 B .. the backend's largest message; adds the busbw table to the
 * profile in TIER (unless TIER is MP_TIER_N: ranks neither all on one node nor one per
 * node). */
static gboolean
sweep (Cal *c, const Coll *coll, MpTier tier, long *total_wrong, GError **error)
{
  const CalDevice *d = c->dev;
  gsize max_bytes = c->quick ? d->coll_max_quick : d->coll_max;
  int max_iters = c->quick ? d->coll_iters_quick : d->coll_iters;
  /* Fewer iterations for large messages: about BUDGET bytes moved per row. */
  gsize budget = c->quick ? d->coll_budget_quick : d->coll_budget;
  CollBufs b;
  if (!bufs_alloc (c, coll, max_bytes, &b, error))
    return FALSE;
  g_autoptr(GArray) sizes = g_array_new (FALSE, FALSE, sizeof (double));
  g_autoptr(GArray) busbw = g_array_new (FALSE, FALSE, sizeof (double));
  double sum_busbw = 0;
  long wrong_here = 0;
  gboolean ok = TRUE;
  if (c->out)
    print_header (c, coll, max_iters);
  for (gsize s = 8; ok && s <= max_bytes; s *= 2)
    {
      gsize count = coll->count_of (c->size, s), bytes = coll->bytes_of (c->size, count);
      if (count == 0 || (sizes->len && bytes <= g_array_index (sizes, double, sizes->len - 1)))
        continue;
      int iters = (int) CLAMP (budget / bytes, (gsize) 3, (gsize) max_iters);
      double t = 0;
      long wrong = 0;
      ok = run_size (c, coll, count, &b, iters, &t, &wrong, error);
      if (!ok)
        break;
      double bus = mp_coll_busbw (coll->kind, c->size, bytes, t);
      sum_busbw += bus;
      wrong_here += wrong;
      double size_d = (double) bytes, bus_r = cal_round4 (bus);
      g_array_append_val (sizes, size_d);
      g_array_append_val (busbw, bus_r);
      if (c->out)
        print_row (c, coll, bytes, count, t, wrong);
    }
  bufs_free (c, &b);
  if (!ok)
    return FALSE;
  if (c->out)
    fprintf (c->out, "# Out of bounds values : %ld %s\n# Avg bus bandwidth : %g\n\n", wrong_here,
             wrong_here ? "FAILED" : "OK", sizes->len ? sum_busbw / sizes->len / 1e9 : 0.0);
  *total_wrong += wrong_here;
  if (tier == MP_TIER_N || sizes->len == 0)
    return TRUE;
  return mp_cost_profile_set_coll (c->profile, coll->kind, tier, (guint) c->size,
                                   (double *) sizes->data, (double *) busbw->data, sizes->len,
                                   error);
}

/* The tier the ranks span: NODE when they share one host, CLUSTER when each has its own,
 * MP_TIER_N (no table recorded) for a mix. */
#define HOST_NAME_BYTES 256
static gboolean
ranks_tier (Cal *c, MpTier *tier, GError **error)
{
  char mine[HOST_NAME_BYTES] = { 0 };
  g_strlcpy (mine, g_get_host_name (), sizeof mine);
  g_autofree char *all = g_malloc0 ((gsize) HOST_NAME_BYTES * c->size);
  if (!c->be->ops->host_all_gather (c->be, mine, sizeof mine, all, error))
    return FALSE;
  g_autoptr(GHashTable) hosts = g_hash_table_new (g_str_hash, g_str_equal);
  for (int r = 0; r < c->size; r++)
    g_hash_table_add (hosts, all + (gsize) r * HOST_NAME_BYTES);
  guint nodes = g_hash_table_size (hosts);
  *tier = nodes == 1 ? MP_TIER_NODE : nodes == (guint) c->size ? MP_TIER_CLUSTER : MP_TIER_N;
  return TRUE;
}

gboolean
cal_measure_collectives (Cal *c, gboolean *all_right, GError **error)
{
  MpTier tier;
  if (!ranks_tier (c, &tier, error))
    return FALSE;
  if (c->out && tier == MP_TIER_N)
    fprintf (c->out, "# ranks span several nodes unevenly: tables printed, not recorded\n");
  long wrong = 0;
  for (guint i = 0; i < G_N_ELEMENTS (colls); i++)
    if (!sweep (c, &colls[i], tier, &wrong, error))
      return FALSE;
  *all_right = wrong == 0;
  return TRUE;
}
