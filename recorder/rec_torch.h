/* rec_torch.h: the launcher's side of --mode=torch (see rec_torch.c). */
#ifndef REC_TORCH_H
#define REC_TORCH_H

#include "base/gm_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Write sitecustomize.py into dir (to be put first on the child's PYTHONPATH). */
gm_status_t rec_torch_write_site(const char *dir, gm_err_t *err);

typedef struct rec_torch_snap {
  char path[4200];
  int rank; /* -1 if the process had no RANK */
  long pid;
} rec_torch_snap_t;

/* The snapshots the child's processes dumped into dir; returns how many (at most cap). */
int rec_torch_list(const char *dir, rec_torch_snap_t *out, int cap);

#ifdef __cplusplus
}
#endif
#endif /* REC_TORCH_H */
