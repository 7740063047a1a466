/* hk_caller.c: stands in for libc10_cuda.so in rec_gothook_test: calls hk_target, which
 * libhk_callee.so (loaded first, RTLD_GLOBAL) defines, through its GOT. Built three ways: full
 * RELRO (the toolchain's default), lazy binding, and -fno-plt. */
int hk_target(int x);
int hk_call(int x);

int hk_call(int x) { return hk_target(x) * 10; }
