/* gm_base.h: what every gpumem component shares: status codes with a cause chain, logging,
 * size and fraction parsing, output files written atomically, and the option table that feeds
 * both a tool's parser and its --help. libc only; nothing here prints unless asked to (logging is for main() and tools).
 *
 * Errors: a library function returns a gm_status_t and, on failure, fills a caller-owned
 * gm_err_t. Each layer that passes the failure up adds its context in front with
 * gm_err_wrap(), so the user reads one line with the whole chain:
 *   cannot open 'run1.zst': chunk 17 at offset 1048576: zstd: corrupted block */
#ifndef GM_BASE_H
#define GM_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version ----------------------------------------------------------------------------- */

/* The one version of the gpumem tools: gpurec, gpureplay, gpuanalyze and the injection library
 * are released together under it, and traces name it (header field `tool`: "gpurec 0.1.0").
 * GM_DIST_NAME is the name they are installed under from PyPI (`pip install gpumem-tools`;
 * "gpumem" there is someone else's); tools/build_wheel reads both from here. */
#define GM_VERSION "0.1.0"
#define GM_DIST_NAME "gpumem-tools"

/* A macro's value as a string literal, for limits that name themselves in messages:
 * "more than " GM_STR(LIMIT) " values (limit LIMIT)". */
#define GM_STR_(x) #x
#define GM_STR(x) GM_STR_(x)

/* ---- a hash for short keys ------------------------------------------------------------------ */

/* A multiply-xorshift over a key's bytes (any length), for uthash's buckets over short keys
 * (addresses, (address, device) pairs) where its default Jenkins hash cost more than the table:
 * `#define HASH_FUNCTION(k, n, h) ((h) = gm_key_hash((k), (size_t)(n)))` before <uthash.h>. It
 * decides buckets only, never the order of iteration (insertion order). */
static inline unsigned gm_key_hash(const void *key, size_t len) {
  const unsigned char *p = (const unsigned char *)key;
  uint64_t h = 0x9E3779B97F4A7C15ull ^ len, w;
  for (; len >= 8; p += 8, len -= 8) {
    memcpy(&w, p, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  if (len) {
    w = 0;
    memcpy(&w, p, len);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
  }
  return (unsigned)h;
}

/* ---- status ---------------------------------------------------------------------------- */

/* Negative: error. Zero: success. Positive: a normal end ("no more events"). */
typedef enum gm_status {
  GM_OK = 0,
  GM_END = 1,
  GM_ERR_IO = -1,        /* open/read/write failed (errno in the message) */
  GM_ERR_NOMEM = -2,     /* allocation failed */
  GM_ERR_FORMAT = -3,    /* input is not what it claims to be ("not a gpumem trace") */
  GM_ERR_CORRUPT = -4,   /* checksum or structure broken inside a valid-looking file */
  GM_ERR_VERSION = -5,   /* needs a newer reader */
  GM_ERR_INVAL = -6,     /* bad argument or value (a policy key, a size) */
  GM_ERR_CUDA = -7,      /* the CUDA driver or CUPTI failed */
  GM_ERR_TRUNCATED = -8, /* input ends early; what came before it is good */
  GM_ERR_UNSUPPORTED = -9 /* valid request this build or machine cannot do */
} gm_status_t;

#define GM_ERR_MSG_MAX 1024

typedef struct gm_err {
  gm_status_t status;
  char msg[GM_ERR_MSG_MAX];
} gm_err_t;

/* Short name of a status ("corrupt data"). Never NULL. */
const char *gm_status_str(gm_status_t s);

/* Record a failure: sets err->status and err->msg (printf-style). Returns st.
 * err may be NULL, then only st is returned. */
gm_status_t gm_err_set(gm_err_t *err, gm_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Put context in front of the message already in err: "<ctx>: <old msg>". Returns
 * err->status (GM_ERR_INVAL if err carried none). err may be NULL. */
gm_status_t gm_err_wrap(gm_err_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void gm_err_clear(gm_err_t *err);

/* ---- logging (stderr, for tools; libraries return errors instead) ------------------------ */

typedef enum gm_log_level { GM_LOG_ERROR = 0, GM_LOG_WARN = 1, GM_LOG_INFO = 2, GM_LOG_DEBUG = 3 } gm_log_level_t;

/* The tool name printed in front of every line ("gpureplay: error: ..."). */
void gm_log_init(const char *tool, gm_log_level_t level);
void gm_log_set_level(gm_log_level_t level);
gm_log_level_t gm_log_level(void);
void gm_log(gm_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One line "TOOL: error: MSG" for a failed status. */
void gm_log_err(const gm_err_t *err);

/* ---- text for the terminal ----------------------------------------------------------------- */

/* Text from input (a trace, a pickle, a results file, a path) made safe to print: C0 controls
 * (newline and tab too), DEL, the C1 controls U+0080..U+009F and bytes that are not UTF-8
 * become \xHH; other UTF-8 passes unchanged (gm_esc.c says why). gm_escape writes into buf,
 * cut to fit at a character boundary, and returns buf; s may be NULL (""). */
char *gm_escape(const char *s, char *buf, size_t n);
/* gm_escape, and where the text does not fit, ends it with "..." (a callsite of 100 KB on one
 * line of a terminal shows that it was cut). */
char *gm_escape_cut(const char *s, char *buf, size_t n);
void gm_fputs_escaped(const char *s, FILE *f);

/* ---- sizes and fractions ------------------------------------------------------------------ */

/* "512", "20MiB", "1.5GiB", "64k", "2 MB" (SI suffixes are decimal, *iB binary, bare k/M/G
 * binary as in PyTorch's docs). Rejects negatives, garbage and overflow. */
gm_status_t gm_parse_size(const char *s, uint64_t *out, gm_err_t *err);
/* "0.75" in [0, 1]. */
gm_status_t gm_parse_fraction(const char *s, double *out, gm_err_t *err);
/* Non-negative decimal integer that fits in uint64. */
gm_status_t gm_parse_u64(const char *s, uint64_t *out, gm_err_t *err);
/* "1.50 GiB", "512 B": human form for tables. Returns buf. */
char *gm_format_size(uint64_t bytes, char *buf, size_t n);
/* The least saving a setting must show over the framework's default, past what the replay
 * cannot tell, to be advised over it (issue 25): the larger of 64 MiB and 1 % of the default.
 * One number for gpuanalyze's advice and gpureplay --tune's choice. Read off the tables: the
 * placement model's misses that depend on placement are at most 34 MiB (3.5 %,
 * traces/predicted conv_image) and 12 MiB (1.3 %, traces/recorded). */
uint64_t gm_advice_floor(uint64_t default_reserved);

/* ---- output files ------------------------------------------------------------------------- */

/* An output file that is either its old self or complete, whatever happens (gm_out.c): the bytes
 * go to a temporary file in the target's directory, renamed over the target by gm_out_commit
 * only when every write succeeded (after fsync); on any failure the target is left as it was.
 * A target that exists and is not a regular file (/dev/stdout, /dev/full, a FIFO) is written in
 * place, still checked. Every tool writes its output files through this. */
typedef struct gm_out gm_out_t;

/* Errors name path and the reason ("cannot write 'r.html': cannot create a file in '.':
 * Permission denied"). */
gm_status_t gm_out_open(gm_out_t **out, const char *path, gm_err_t *err);
/* A stdio stream on it (made on the first call; NULL only when out of memory). Every write
 * through it is checked at commit, with its errno. */
FILE *gm_out_file(gm_out_t *o);
/* The descriptor, for a writer that calls write() itself and checks each call (not mixed with
 * gm_out_file). */
int gm_out_fd(gm_out_t *o);
const char *gm_out_path(const gm_out_t *o);
/* Flush, check, fsync, close, rename over the target. On failure: GM_ERR_IO naming the target
 * and the reason, the temporary file removed, the target as it was. Frees o either way. */
gm_status_t gm_out_commit(gm_out_t *o, gm_err_t *err);
/* Give up: the temporary file is removed, the target left as it was. Frees o; NULL is fine. */
void gm_out_abort(gm_out_t *o);
/* Flush and close stdout, checking that everything written reached it (a full disk, a closed
 * pipe): what main() calls last, so that `tool > /dev/full` fails instead of exiting 0. */
gm_status_t gm_stdout_close(gm_err_t *err);

/* ---- option tables ------------------------------------------------------------------------ */

typedef enum gm_opt_kind {
  GM_OPT_FLAG,     /* int = 1 when present */
  GM_OPT_STR,      /* const char * */
  GM_OPT_SIZE,     /* uint64_t, gm_parse_size */
  GM_OPT_U64,      /* uint64_t, gm_parse_u64 */
  GM_OPT_FRACTION, /* double, gm_parse_fraction */
  GM_OPT_LIST      /* gm_strlist_t: repeatable */
} gm_opt_kind_t;

#define GM_STRLIST_MAX 64
typedef struct gm_strlist {
  const char *v[GM_STRLIST_MAX];
  int n;
} gm_strlist_t;

typedef struct gm_opt {
  const char *name;    /* long name without "--"; NULL ends the table */
  char short_name;     /* 0: none */
  gm_opt_kind_t kind;
  const char *metavar; /* shown in --help: "PATH", "SPEC" */
  const char *help;    /* one line */
  size_t offset;       /* offsetof(config, field) */
  /* GM_OPT_SIZE, GM_OPT_U64: the accepted range, both ends included; max == 0: any value.
   * A value outside is a usage error naming the option, the value and the range. */
  uint64_t min, max;
} gm_opt_t;

/* Parse argv[1..] against opts, writing into cfg. Accepts --name=value, --name value, -x value,
 * -x; "--" ends options (everything after is positional, in order). Positional arguments are
 * stored in pos[0..*npos) (pos must hold argc entries). Stops at the first positional when
 * stop_at_positional is set (gpurec's "CMD ARGS..." without "--"). On a usage error returns
 * GM_ERR_INVAL with a message naming the option. */
gm_status_t gm_opts_parse(const gm_opt_t *opts, int argc, char **argv, void *cfg,
                          char **pos, int *npos, int stop_at_positional, gm_err_t *err);

/* Usage line, description, then one line per option, from the same table. */
void gm_opts_help(FILE *f, const char *usage, const char *description, const gm_opt_t *opts);


/* ---- inputs and outputs (gm_input.c) ---------------------------------------------------- */

/* The kinds of file gpumem tools read, told apart by their first bytes. */
typedef enum gm_file_kind {
  GM_FILE_UNKNOWN = 0,
  GM_FILE_TRACE,      /* a gpumem trace (.zst) */
  GM_FILE_PICKLE,     /* a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot) */
  GM_FILE_CSV,        /* a gpumem trace in CSV text form */
  GM_FILE_RESULTS,    /* a gpureplay results file (JSON) */
  GM_FILE_DATABASE,   /* a gpuanalyze database (SQLite) */
  GM_FILE_ZSTD,       /* zstd data that is not a gpumem trace */
  GM_FILE_EMPTY,
  GM_FILE_DIR,
  GM_FILE_MISSING,
  GM_FILE_UNREADABLE,
  GM_FILE_RMM_LOG     /* a RAPIDS RMM allocation log (rmm.mr.LoggingResourceAdaptor CSV) */
} gm_file_kind_t;

/* Bit for gm_file_advice's `wanted`: GM_WANT(GM_FILE_TRACE) | ... */
#define GM_WANT(k) (1u << (k))

gm_file_kind_t gm_file_kind_of(const void *buf, size_t n); /* from the first bytes (<= 4 KiB) */
gm_file_kind_t gm_file_kind(const char *path);
/* "a PyTorch memory snapshot (pickle)". Never NULL. */
const char *gm_file_kind_name(gm_file_kind_t k);
/* When a file of kind k is not one the tool wanted: one sentence into buf saying what the file
 * is and the one command that takes it; returns 1. Returns 0 (buf untouched) when k is wanted
 * or there is nothing useful to say (missing, unknown). */
int gm_file_advice(const char *path, gm_file_kind_t k, unsigned wanted, char *buf, size_t n);

/* Can a file be created (or replaced) at path? Checks the directory exists, is a directory and
 * is writable, before any work is done. GM_ERR_IO naming the path and the directory. */
gm_status_t gm_output_check(const char *path, gm_err_t *err);

/* The candidate closest to word (a typo: up to a third of its letters wrong, at most 3), or
 * NULL. For "did you mean" in usage errors. NULL entries of cands are skipped. */
const char *gm_closest(const char *word, const char *const *cands, size_t n);

/* ---- a sibling tool (gm_tool.c): gpuanalyze runs gpureplay and gpurec, gpurec runs gpureplay ---- */

/* Where gm_tool_find found it. */
typedef enum gm_tool_from { GM_TOOL_GIVEN, GM_TOOL_ENV, GM_TOOL_BESIDE, GM_TOOL_PATH } gm_tool_from_t;

/* A regular file this process may execute. */
int gm_tool_executable(const char *p);
/* A sibling tool: `given` (its option; NULL: none), $env_name (both taken as they are), beside
 * this binary (the installed layout), ../subdir/ (the bazel-bin layout), then PATH; those last
 * three only where an executable file is. 1: found, path in out; *from (may be NULL) says
 * where it looked last. */
int gm_tool_find(const char *given, const char *env_name, const char *name, const char *subdir, char *out,
                 size_t n, gm_tool_from_t *from);

/* How to run it (NULL: stdin inherited, no pid kept). */
typedef struct gm_tool_opts {
  int stdin_null;        /* the child's stdin is /dev/null */
  volatile pid_t *child; /* the child's pid while it runs, else 0 (for a caller's signal handler) */
} gm_tool_opts_t;

/* What a tool run with its output captured did. */
typedef struct gm_tool_run {
  int exit_status; /* its exit status; -1 when a signal ended it */
  int signal;      /* that signal */
  char *out, *err; /* what it wrote to stdout and stderr, NUL-terminated (never NULL after a run) */
  size_t out_len, err_len;
  int out_cut;     /* stdout went past 64 MiB: the rest was dropped */
  int spawn_errno; /* when it could not be run: why (errno) */
} gm_tool_run_t;

/* Run argv[0] with argv, stdout and stderr captured (up to 64 MiB each, the rest drained and
 * dropped), and wait for it. GM_OK once it ran, whatever its exit; an error only when it
 * could not be run ("cannot run 'PATH': ..."). gm_tool_run_free after either. */
gm_status_t gm_tool_capture(char *const *argv, const gm_tool_opts_t *o, gm_tool_run_t *r, gm_err_t *err);
void gm_tool_run_free(gm_tool_run_t *r);

/* The tool's error in its own stderr ("NAME: error: MSG" -> MSG; for a usage error, exit 2,
 * "NAME: MSG" -> MSG) into msg, and every other line it wrote (warnings) into *rest (malloc'd,
 * "" when none; NULL when out of memory), "try 'NAME --help'" left out. 0 when it named no
 * error (msg then says how it ended). */
int gm_tool_message(const gm_tool_run_t *r, const char *name, char *msg, size_t n, char **rest);

#ifdef __cplusplus
}
#endif
#endif /* GM_BASE_H */
