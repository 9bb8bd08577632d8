/* watchdog.c - the stall watchdog: one thread per rank that watches what the rank is in
 * (an instruction of its program, or an exchange of the driver) and how long it has been
 * there. Past the timeout it prints, on this rank, the instruction it is stuck in, waits a
 * grace period so that the other ranks' watchdogs (stuck on the same stall, a little
 * later) print theirs, and ends the process with exit status 1: mpirun then ends the
 * whole job, a stopped rank included. A rank that is itself stopped (SIGSTOP) prints
 * nothing; its peers name what they were waiting in, which points at it. PyTorch's
 * ProcessGroupNCCL watchdog does the same with its process group's timeout; this one
 * works for every backend from outside the communication library: the main thread may be
 * blocked inside MPI, which runs single-threaded here, so the watchdog makes no MPI call. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/watchdog.h"

#include <stdio.h>
#include <unistd.h>

/* How often the thread looks, at most; a stall is seen within this of the timeout. */
#define POLL_US (G_USEC_PER_SEC / 4)

struct _MpWatchdog {
  GMutex lock;
  GCond cond;
  GThread *thread;
  int rank;
  gint64 timeout_us;
  gboolean quit;
  gint64 since;              /* monotonic µs when the rank entered what it is in; 0: idle */
  guint step;
  gint index;                /* instruction index, or -1 for WHAT */
  MpInsn insn;
  const char *what;
};

static void
describe (const MpWatchdog *w, char *buf, gsize n)
{
  const MpInsn *in = &w->insn;
  if (w->index < 0)
    {
      g_snprintf (buf, n, "%s of step %u", w->what, w->step);
      return;
    }
  int at = g_snprintf (buf, n, "instruction %d (%s", w->index, mp_insn_kind_name (in->kind));
  if (in->kind == MP_INSN_FORWARD || in->kind == MP_INSN_BACKWARD || in->kind == MP_INSN_SEND
      || in->kind == MP_INSN_RECV)
    at += g_snprintf (buf + at, n - MIN ((gsize) at, n), " of layer %u, micro-batch %u",
                      in->layer, in->micro_batch);
  else if (in->kind == MP_INSN_REDUCE_GRADS || in->kind == MP_INSN_GATHER_PARAMS)
    at += g_snprintf (buf + at, n - MIN ((gsize) at, n), " of layers %u-%u", in->layer,
                      in->layer + MAX (in->n_layers, 1u) - 1);
  else if (in->kind == MP_INSN_WAIT)
    at += g_snprintf (buf + at, n - MIN ((gsize) at, n), " for the %s stream",
                      mp_stream_name (in->stream));
  if (in->peer >= 0)
    at += g_snprintf (buf + at, n - MIN ((gsize) at, n), ", peer rank %d", in->peer);
  g_snprintf (buf + at, n - MIN ((gsize) at, n), ") of step %u", w->step);
}

static gpointer
watch (gpointer data)
{
  MpWatchdog *w = data;
  g_mutex_lock (&w->lock);
  while (!w->quit)
    {
      gint64 now = g_get_monotonic_time ();
      if (w->since == 0 || now - w->since < w->timeout_us)
        {
          g_cond_wait_until (&w->cond, &w->lock, now + POLL_US);
          continue;
        }
      char where[160];
      describe (w, where, sizeof where);
      double waited = (double) (now - w->since) / G_USEC_PER_SEC;
      g_mutex_unlock (&w->lock);
      fprintf (stderr, "mpplan exec: rank %d: watchdog: no progress for %.1f s (--timeout "
               "%g) in %s; ending the job\n", w->rank, waited,
               (double) w->timeout_us / G_USEC_PER_SEC, where);
      fflush (stderr);
      /* The peers stuck on the same stall reach their timeout a little later: give them
       * the time to say where they are before mpirun ends them. */
      g_usleep ((gulong) MIN (w->timeout_us, 10 * G_USEC_PER_SEC));
      _exit (1);
    }
  g_mutex_unlock (&w->lock);
  return NULL;
}

MpWatchdog *
mp_watchdog_new (int rank, double timeout_s)
{
  if (!(timeout_s > 0))
    return NULL;
  MpWatchdog *w = g_new0 (MpWatchdog, 1);
  g_mutex_init (&w->lock);
  g_cond_init (&w->cond);
  w->rank = rank;
  w->timeout_us = (gint64) (timeout_s * G_USEC_PER_SEC);
  w->index = -1;
  w->thread = g_thread_new ("mpplan-watchdog", watch, w);
  return w;
}

void
mp_watchdog_free (MpWatchdog *w)
{
  if (w == NULL)
    return;
  g_mutex_lock (&w->lock);
  w->quit = TRUE;
  g_cond_signal (&w->cond);
  g_mutex_unlock (&w->lock);
  g_thread_join (w->thread);
  g_cond_clear (&w->cond);
  g_mutex_clear (&w->lock);
  g_free (w);
}

void
mp_watchdog_insn (MpWatchdog *w, guint step, guint index, const MpInsn *in)
{
  if (w == NULL)
    return;
  g_mutex_lock (&w->lock);
  w->since = g_get_monotonic_time ();
  w->step = step;
  w->index = (gint) index;
  w->insn = *in;
  g_mutex_unlock (&w->lock);
}

void
mp_watchdog_enter (MpWatchdog *w, guint step, const char *what)
{
  if (w == NULL)
    return;
  g_mutex_lock (&w->lock);
  w->since = g_get_monotonic_time ();
  w->step = step;
  w->index = -1;
  w->what = what;
  g_mutex_unlock (&w->lock);
}

void
mp_watchdog_pause (MpWatchdog *w)
{
  if (w == NULL)
    return;
  g_mutex_lock (&w->lock);
  w->since = 0;
  g_mutex_unlock (&w->lock);
}
