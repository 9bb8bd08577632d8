/* eventq.h - the discrete-event simulator's clock: a queue of (time, callback) pairs run
 * in time order, private to costmodel/ (sim.c uses it).
 *
 * The astra-sim analytical backend's idea, in our own code: schedule an event at a time no
 * earlier than now; proceed() advances the clock to the earliest event and runs every event
 * due then; time never goes backwards. Events at the same time run in the order they were
 * scheduled, so a simulation is deterministic. A binary heap; no allocation per event
 * once the heap has grown. Units: seconds. */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

typedef struct _CmEventQueue CmEventQueue;

/* An event's action. DATA is the scheduler's; A and B are two small integers it chose
 * (so that most events need no payload allocated). */
typedef void (*CmEventFunc) (gpointer data, guint a, guint b);

/* A new, empty queue at time 0. Caller owns. */
CmEventQueue *cm_eventq_new (void);
void cm_eventq_free (CmEventQueue *q);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (CmEventQueue, cm_eventq_free)

/* Runs FN (DATA, A, B) at TIME, which must not be earlier than the current time (a
 * programming error otherwise). */
void cm_eventq_schedule (CmEventQueue *q, double time, CmEventFunc fn, gpointer data,
                         guint a, guint b);
/* Advances the clock to the earliest pending event and runs all the events due at that
 * time, including those they schedule for the same time. Nothing when the queue is empty. */
void cm_eventq_proceed (CmEventQueue *q);
/* No event pending. */
gboolean cm_eventq_finished (const CmEventQueue *q);
/* The current time: that of the events last run (0 before any). */
double cm_eventq_now (const CmEventQueue *q);
/* Events run so far. */
guint64 cm_eventq_count (const CmEventQueue *q);

G_END_DECLS
