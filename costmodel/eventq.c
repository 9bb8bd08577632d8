/* eventq.c - the event queue of the simulator: a binary min-heap on (time, sequence) for
 * future events and a FIFO for those due now (zero-duration work, half of a simulation's
 * events, never touches the heap). See eventq.h. The sequence number breaks ties
 * first-scheduled-first, which is what makes runs reproducible bit for bit. */
#define G_LOG_DOMAIN "mpplan-costmodel"
#include "config.h"
#include "costmodel/eventq.h"

typedef struct {
  double time;
  guint64 seq;
  CmEventFunc fn;
  gpointer data;
  guint a, b;
} Event;

struct _CmEventQueue {
  Event *heap;                 /* events later than now */
  gsize len, cap;
  Event *fifo;                 /* events at now, in the order scheduled (a ring) */
  gsize head, n_fifo, fifo_cap;
  guint64 next_seq;
  double now;
  guint64 count;
};

CmEventQueue *
cm_eventq_new (void)
{
  return g_new0 (CmEventQueue, 1);
}

void
cm_eventq_free (CmEventQueue *q)
{
  if (q == NULL)
    return;
  g_free (q->heap);
  g_free (q->fifo);
  g_free (q);
}

/* Events due now skip the heap: they run after every event already due now (which were
 * scheduled before them), so a FIFO keeps the order of their sequence numbers. */
static void
push_now (CmEventQueue *q, Event e)
{
  if (q->n_fifo == q->fifo_cap)
    {
      gsize cap = MAX (64, 2 * q->fifo_cap);
      Event *grown = g_new (Event, cap);
      for (gsize k = 0; k < q->n_fifo; k++)
        grown[k] = q->fifo[(q->head + k) % q->fifo_cap];
      g_free (q->fifo);
      q->fifo = grown;
      q->fifo_cap = cap;
      q->head = 0;
    }
  q->fifo[(q->head + q->n_fifo++) % q->fifo_cap] = e;
}

static void
run_now (CmEventQueue *q)
{
  while (q->n_fifo > 0)
    {
      Event e = q->fifo[q->head];
      q->head = (q->head + 1) % q->fifo_cap;
      q->n_fifo--;
      q->count++;
      e.fn (e.data, e.a, e.b);
    }
}

static inline gboolean
earlier (const Event *x, const Event *y)
{
  return x->time < y->time || (x->time == y->time && x->seq < y->seq);
}

void
cm_eventq_schedule (CmEventQueue *q, double time, CmEventFunc fn, gpointer data, guint a,
                    guint b)
{
  g_return_if_fail (q != NULL && fn != NULL);
  /* Time never goes backwards: an event in the past is a bug in the caller. */
  g_assert (time >= q->now);
  if (time == q->now)
    {
      push_now (q, (Event) { time, q->next_seq++, fn, data, a, b });
      return;
    }
  if (q->len == q->cap)
    {
      q->cap = MAX (64, 2 * q->cap);
      q->heap = g_renew (Event, q->heap, q->cap);
    }
  Event e = { time, q->next_seq++, fn, data, a, b };
  gsize i = q->len++;
  while (i > 0)
    {
      gsize parent = (i - 1) / 2;
      if (!earlier (&e, &q->heap[parent]))
        break;
      q->heap[i] = q->heap[parent];
      i = parent;
    }
  q->heap[i] = e;
}

/* Removes the earliest event into *OUT. */
static void
pop (CmEventQueue *q, Event *out)
{
  *out = q->heap[0];
  Event last = q->heap[--q->len];
  gsize i = 0;
  for (;;)
    {
      gsize child = 2 * i + 1;
      if (child >= q->len)
        break;
      if (child + 1 < q->len && earlier (&q->heap[child + 1], &q->heap[child]))
        child++;
      if (!earlier (&q->heap[child], &last))
        break;
      q->heap[i] = q->heap[child];
      i = child;
    }
  if (q->len > 0)
    q->heap[i] = last;
}

void
cm_eventq_proceed (CmEventQueue *q)
{
  g_return_if_fail (q != NULL);
  /* Every event in the heap is later than now: those due now are all in the FIFO. */
  if (q->n_fifo == 0 && q->len > 0)
    {
      q->now = q->heap[0].time;
      while (q->len > 0 && q->heap[0].time == q->now)
        {
          Event e;
          pop (q, &e);
          q->count++;
          e.fn (e.data, e.a, e.b);
        }
    }
  run_now (q);
}

gboolean
cm_eventq_finished (const CmEventQueue *q)
{
  return q->len == 0 && q->n_fifo == 0;
}

double
cm_eventq_now (const CmEventQueue *q)
{
  return q->now;
}

guint64
cm_eventq_count (const CmEventQueue *q)
{
  return q->count;
}
