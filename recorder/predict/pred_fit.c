/* pred_fit.c: one allocation's size as a function of the value the recordings differ in.
 *
 * A tensor's size is a polynomial in the batch or sequence length: affine for activations
 * (a fixed part plus a part per sample), quadratic where attention scores grow with the
 * square of the sequence. Two recordings fix an affine function; three tell an affine one
 * (all three on a line, within the recordings' granularity) from a quadratic one. Recorded
 * sizes are exact requests, or rounded up to the allocator's granularity (512 bytes in
 * PyTorch's history) when every size of the recordings is a multiple of it; a point may then
 * sit up to one granule above the true curve, and the prediction is rounded up the same way.
 * A fit is consistent when the points lie on it within that tolerance and it is plausible for
 * a tensor: it does not shrink between the recordings and the target, and its constant part
 * is not far below zero (the mark of two different allocations paired with each other). */
#include <math.h>

#include "recorder/predict/pred_internal.h"

/* Least squares of degree deg (1 or 2) on n points, by the normal equations on scaled v
 * (v / vs) so the 3x3 system stays well conditioned; coefficients returned for unscaled v. */
static int lsq(const double *v, const uint64_t *s, size_t n, int deg, double vs, double c[3]) {
  double m[3][4] = {{0}};
  int k = deg + 1;
  for (size_t i = 0; i < n; i++) {
    double x = v[i] / vs, p[3] = {1, x, x * x};
    for (int r = 0; r < k; r++) {
      for (int q = 0; q < k; q++) m[r][q] += p[r] * p[q];
      m[r][k] += p[r] * (double)s[i];
    }
  }
  for (int col = 0; col < k; col++) { /* Gauss-Jordan with partial pivoting */
    int piv = col;
    for (int r = col + 1; r < k; r++)
      if (fabs(m[r][col]) > fabs(m[piv][col])) piv = r;
    if (fabs(m[piv][col]) < 1e-12) return -1;
    for (int q = 0; q <= k; q++) {
      double t = m[col][q];
      m[col][q] = m[piv][q];
      m[piv][q] = t;
    }
    for (int r = 0; r < k; r++) {
      if (r == col) continue;
      double f = m[r][col] / m[col][col];
      for (int q = col; q <= k; q++) m[r][q] -= f * m[col][q];
    }
  }
  c[0] = m[0][k] / m[0][0];
  c[1] = m[1][k] / m[1][1] / vs;
  c[2] = deg == 2 ? m[2][k] / m[2][2] / (vs * vs) : 0;
  return 0;
}

static int plausible(const pred_fit_t *f, const double *v, const uint64_t *s, size_t n, double vmin, double vmax,
                     double g, double tol, double smax, double target);

static double eval(const pred_fit_t *f, double x) { return f->c0 + f->c1 * x + f->c2 * x * x; }

static double max_residual(const pred_fit_t *f, const double *v, const uint64_t *s, size_t n) {
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    double r = fabs(eval(f, v[i]) - (double)s[i]);
    if (r > worst) worst = r;
  }
  return worst;
}

void pred_fit_points(const double *v, const uint64_t *s, size_t n, uint64_t granule, double target, pred_fit_t *f) {
  f->c0 = n ? (double)s[0] : 0;
  f->c1 = f->c2 = 0;
  f->degree = 0;
  f->consistent = 0;
  if (n < 2) return;
  double vmin = v[0], vmax = v[0], smax = 0;
  for (size_t i = 0; i < n; i++) {
    if (v[i] < vmin) vmin = v[i];
    if (v[i] > vmax) vmax = v[i];
    if ((double)s[i] > smax) smax = (double)s[i];
  }
  if (vmax <= vmin) return;
  const double g = (double)(granule ? granule : 1);
  const double tol = g + 1e-9 * smax; /* a rounded point sits up to one granule above the curve */
  double c[3];
  if (lsq(v, s, n, 1, vmax, c) < 0) return;
  f->c0 = c[0];
  f->c1 = c[1];
  f->degree = 1;
  if (n >= 3 && max_residual(f, v, s, n) > tol) {
    if (lsq(v, s, n, 2, vmax, c) < 0) return;
    f->c0 = c[0];
    f->c1 = c[1];
    f->c2 = c[2];
    f->degree = 2;
  }
  if (plausible(f, v, s, n, vmin, vmax, g, tol, smax, target)) {
    f->consistent = 1;
    return;
  }
  /* Two points on no tensor's line may be on a square: a size proportional to the square of
   * the value (attention scores in the sequence length, an activation in an image's side) seen
   * through two points is a line with a constant part far below zero; through the origin it is
   * the one tensor's law they fit (three points tell it from any other parabola anyway). */
  if (n == 2) {
    double sv4 = 0, sv2s = 0;
    for (size_t i = 0; i < n; i++) {
      sv4 += v[i] * v[i] * v[i] * v[i];
      sv2s += v[i] * v[i] * (double)s[i];
    }
    pred_fit_t q = {0, 0, sv4 > 0 ? sv2s / sv4 : 0, 2, 0};
    if (q.c2 > 0 && plausible(&q, v, s, n, vmin, vmax, g, tol, smax, target)) {
      *f = q;
      f->consistent = 1;
    }
  }
}

/* Whether fit f through the n points is a tensor's law: the points on it within tol, ... */
static int plausible(const pred_fit_t *f, const double *v, const uint64_t *s, size_t n, double vmin, double vmax,
                     double g, double tol, double smax, double target) {
  if (max_residual(f, v, s, n) > tol) return 0;
  /* plausible for a tensor: not shrinking from the recordings to the target ... */
  double lo = target < vmin ? target : vmin, hi = target > vmax ? target : vmax;
  double d_lo = f->c1 + 2 * f->c2 * lo, d_hi = f->c1 + 2 * f->c2 * hi;
  if ((d_lo < 0 && -d_lo * (hi - lo) > tol) || (d_hi < 0 && -d_hi * (hi - lo) > tol)) return 0;
  /* ... and, when affine, a constant part not far below zero. A tensor of (S - 1) * k bytes
   * has a small negative one (-k against (S - 1) k); a square seen through two points, or two
   * different allocations paired, one of the size of a recording's smaller tensors or more.
   * Rounding two points up can move it down by the granule times vmax / (vmax - vmin). */
  double s_lo = eval(f, vmin), slack = g * (1 + vmax / (vmax - vmin)) + 1e-9 * smax;
  if (f->degree == 1 && f->c0 < -(0.25 * s_lo + slack)) return 0;
  /* ... nor far above zero when the size grows. A tensor's size is a product of dimensions:
   * proportional to the value, or to its square, with at most a small fixed part ((S + 1) k);
   * a size with a fixed part of more than a quarter of its smaller recorded size and a growing
   * part besides is one a library chose by its own rule (a convolution's workspace, a kernel
   * that works in chunks, a size rounded to a bucket), and a line or a parabola through two or
   * three of its points says nothing about it at the target. (Seen on an H100: a backward
   * buffer of 48, 96, 132 MiB at batch 4, 8, 16, where the affine fit through 8 and 16 said
   * 204 MiB at 32.) Three points or more on one line are another matter: a law bent between
   * the recordings (the buffer above, a workspace that stops growing) shows through three as a
   * bend, and a line through all of them with a fixed part is the kernel's own rule (a fixed
   * scratch plus a part per row: XLA's autotuner on the JAX job, 32, 48, 80 MiB at batch 2048,
   * 4096, 8192, 16 MiB plus 8 KiB a row). An affine fit of three points is one they all lie on
   * (pred_fit_points takes a parabola otherwise). */
  int grows = eval(f, vmax) - s_lo > tol;
  int collinear = f->degree == 1 && n >= 3;
  if (grows && f->c0 > 0.25 * s_lo + slack && !collinear) return 0;
  return 1;
}

uint64_t pred_fit_eval(const pred_fit_t *f, double x, uint64_t granule) {
  const double g = (double)(granule ? granule : 1);
  double val = eval(f, x);
  if (!(val > g)) return (uint64_t)g;
  if (val > 1.8e19) return UINT64_MAX / 2;
  double units = ceil(val / g - 1e-6);
  return (uint64_t)units * (uint64_t)g;
}
