/* rec_pause.h: capture paused and resumed in-process, for benchmarks only (gpumem_bench_cupti,
 * exported by libgpumem_inject.so): tests/gpu/rec_inproc_bench.py measures what each part of the
 * default recording costs by switching it off and on between the steps of one process. */
#ifndef REC_PAUSE_H
#define REC_PAUSE_H

#include <cupti.h>
#include <stdatomic.h>

#include "recorder/rec_core.h"

/* The callback capture is on: CUPTI at `cupti` (dlopen handle), subscribed as `sub`, events go
 * to `core`. Until this is called (activity capture, self-test, no CUPTI) nothing can be paused. */
void rec_pause_attach(void *cupti, CUpti_SubscriberHandle sub, rec_core_t *core);
/* 1 while gpumem_bench_cupti(2) has the driver callbacks return at once (read on the hot path,
 * relaxed: a benchmark switches it between steps). */
extern _Atomic int rec_pause_empty;
/* A fork()ed child: its parent's subscription and core are not its own. */
void rec_pause_detach(void);

#endif
