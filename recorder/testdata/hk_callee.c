/* hk_callee.c: stands in for libc10.so in rec_gothook_test: the function another library calls. */
int hk_target(int x);
int hk_target(int x) { return x + 1; }
