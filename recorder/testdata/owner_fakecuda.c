/* owner_fakecuda.c: stands in for the CUDA driver in rec_callsite_test: a call that calls the
 * recorder's callback, as CUPTI does at a driver call's exit. */
void fakecuda_call(void (*cb)(void *), void *arg);

volatile int fakecuda_calls;

void fakecuda_call(void (*cb)(void *), void *arg) {
  cb(arg);
  fakecuda_calls++; /* after the call: no tail call, this frame stays on the stack */
}
