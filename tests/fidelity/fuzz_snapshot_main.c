/* fuzz_snapshot_main.c: runs the fuzz target (fuzz_snapshot.c) without libFuzzer: each file
 * named on the command line as is, truncated at many offsets, and with N seeded random byte
 * mutations. A CI smoke test; the real fuzzing is fuzz_snapshot.sh with clang. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(len > 0 ? (size_t)len : 1);
  *n = b ? fread(b, 1, (size_t)len, f) : 0;
  fclose(f);
  return b;
}

int main(int argc, char **argv) {
  long mutations = getenv("FUZZ_MUTATIONS") ? atol(getenv("FUZZ_MUTATIONS")) : 300;
  unsigned long long x = 0x9E3779B97F4A7C15ULL;
  for (int a = 1; a < argc; a++) {
    size_t n;
    unsigned char *b = slurp(argv[a], &n);
    if (!b) {
      fprintf(stderr, "fuzz_snapshot: error: cannot read '%s'\n", argv[a]);
      return 1;
    }
    LLVMFuzzerTestOneInput(b, n);
    for (size_t cut = 0; cut < n; cut += n / 97 + 1) LLVMFuzzerTestOneInput(b, cut);
    unsigned char *m = malloc(n ? n : 1);
    for (long it = 0; it < mutations && n > 2; it++) {
      memcpy(m, b, n);
      for (int f = 0; f < 1 + (int)(x % 8); f++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        m[2 + x % (n - 2)] = (unsigned char)(x >> 40);
      }
      LLVMFuzzerTestOneInput(m, n);
    }
    free(m);
    free(b);
  }
  printf("fuzz_snapshot: %d inputs, %ld mutations each: no crash\n", argc - 1, mutations);
  return 0;
}
