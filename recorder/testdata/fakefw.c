/* fakefw.c: a tiny shared library for rec_frameworks_test: copied into a fake site-packages
 * under a framework's folder name and dlopen()ed, it makes the process look like one that
 * loaded that framework's CUDA library. */
int gpumem_fakefw(void);
int gpumem_fakefw(void) { return 42; }
