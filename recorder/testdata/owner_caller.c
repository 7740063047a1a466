/* owner_caller.c: stands in for a library that calls the driver (NCCL, cuBLAS) in
 * rec_callsite_test; fakecuda_call comes from libowner_fakecuda.so, loaded first. */
void fakecuda_call(void (*cb)(void *), void *arg);
void owner_caller_alloc(void (*cb)(void *), void *arg);

volatile int owner_caller_calls;

void owner_caller_alloc(void (*cb)(void *), void *arg) {
  fakecuda_call(cb, arg);
  owner_caller_calls++; /* after the call: no tail call */
}
