/*
 * netsim_tuner.c: the NCCL tuner plugin of roce-netsim (`netsim recommend` writes this file
 * next to nccl_tuner.csv and the line that builds it into nccl.env).
 *
 * What it does, and what it never does:
 *   - It reads the CSV named by NCCL_TUNER_CONFIG_FILE once per communicator, rows
 *     collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]
 *     (-1 = any; '#' lines and blank lines skipped): the format of NCCL's example plugin.
 *   - For a collective, the first row that matches (collective, size range, the communicator's
 *     nNodes/nRanks, numPipeOps, regBuff) marks its algorithm/protocol as preferred (cost 0 in
 *     NCCL's cost table) and, only when the row's channels is > 0, sets the channel count.
 *   - A collective no row matches, a row with channels -1, and a row whose algorithm/protocol
 *     NCCL marked unavailable leave the cost table and *nChannels exactly as NCCL passed them.
 *     NCCL passes *nChannels = 0 and keeps its own channel count for 0 (src/enqueue.cc,
 *     ncclGetAlgoInfo: `nMaxChannels == 0 ? info->nMaxChannels : nMaxChannels`), so such a
 *     collective runs as if no plugin were loaded. (NCCL's example plugin instead sets
 *     *nChannels = 1 before it looks for a row, which pins every unmatched collective to one
 *     channel: plugins/tuner/example/plugin.c, pluginGetCollInfo.)
 *   - No file, an unreadable file or a bad row: the row (or the file) is skipped with a
 *     warning through NCCL's logger and nothing is tuned by it.
 *
 * Interface: the declarations below are written for this file from NCCL's tuner interface as
 * documented in NVIDIA/nccl at commit 5067397c2676d5aed50042fc39e5c8ee96eb0027 (NCCL 2.30.7):
 * src/include/plugin/tuner/tuner_v3.h, tuner_v4.h, tuner_v5.h, src/include/nccl_common.h
 * (ncclFunc_t, ncclDebugLogger_t), src/include/plugin/nccl_tuner.h (algorithm and protocol
 * numbers, NCCL_ALGO_PROTO_IGNORE = -1.0), src/plugin/tuner.cc (NCCL looks for
 * ncclTunerPlugin_v6, then v5, v4, v3, v2). Exported: ncclTunerPlugin_v5 (NCCL 2.28.3 and
 * later, 2.30 included), ncclTunerPlugin_v4 (2.24.3 to 2.27) and ncclTunerPlugin_v3 (2.22.3
 * to 2.23). The v5 constants NCCL offers at init are left untouched.
 *
 * Build: gcc -O2 -shared -fPIC -o libnccl-tuner-netsim.so netsim_tuner.c
 * Use:   NCCL_TUNER_PLUGIN=/abs/path/libnccl-tuner-netsim.so NCCL_TUNER_CONFIG_FILE=/abs/nccl_tuner.csv
 */

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NETSIM_EXPORT __attribute__((visibility("default")))

/* ncclResult_t values used here. */
typedef int netsim_result;
#define NETSIM_OK 0
#define NETSIM_SYSTEM_ERROR 2
/* ncclDebugLogLevel / subsystem flag used here. */
#define NETSIM_LOG_WARN 2
#define NETSIM_LOG_INFO 3
#define NETSIM_FLAG_TUNING 0x40UL
/* NCCL marks an algorithm/protocol it cannot run with this cost. */
#define NETSIM_COST_UNAVAILABLE (-1.0f)

typedef void (*netsim_logger)(int level, unsigned long flags, const char *file, int line,
                              const char *fmt, ...);

typedef struct {
  const char *name;
  netsim_result (*init)(size_t n_ranks, size_t n_nodes, netsim_logger log, void **ctx);
  netsim_result (*get_coll_info)(void *ctx, int coll, size_t n_bytes, int num_pipe_ops,
                                 float **cost, int num_algo, int num_proto, int *n_channels);
  netsim_result (*destroy)(void *ctx);
} netsim_tuner_v3;

typedef struct {
  const char *name;
  netsim_result (*init)(size_t n_ranks, size_t n_nodes, netsim_logger log, void **ctx);
  netsim_result (*get_coll_info)(void *ctx, int coll, size_t n_bytes, int num_pipe_ops,
                                 float **cost, int num_algo, int num_proto, int reg_buff,
                                 int *n_channels);
  netsim_result (*destroy)(void *ctx);
} netsim_tuner_v4;

typedef struct {
  const char *name;
  netsim_result (*init)(void **ctx, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                        netsim_logger log, void *nvl_domain_info, void *constants);
  netsim_result (*get_coll_info)(void *ctx, int coll, size_t n_bytes, int num_pipe_ops,
                                 float **cost, int num_algo, int num_proto, int reg_buff,
                                 int *n_channels);
  netsim_result (*finalize)(void *ctx);
} netsim_tuner_v5;

/* ncclFunc_t numbers of the collectives a row may name, in order. */
static const char *const COLLECTIVES[] = {"broadcast", "reduce", "allgather", "reducescatter",
                                          "allreduce"};
/* NCCL_ALGO_* and NCCL_PROTO_* numbers, in order. */
static const char *const ALGORITHMS[] = {"tree", "ring", "collnet_direct", "collnet_chain",
                                         "nvls", "nvls_tree", "pat"};
static const char *const PROTOCOLS[] = {"ll", "ll128", "simple"};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define MAX_LINE 1024
#define MAX_FIELDS 10
#define MIN_FIELDS 8

typedef struct {
  int coll, algo, proto, channels, n_nodes, n_ranks, num_pipe_ops, reg_buff;
  unsigned long long min_bytes, max_bytes;
} netsim_row;

typedef struct {
  size_t n_ranks, n_nodes;
  netsim_logger log;
  netsim_row *rows;
  int n_rows;
} netsim_ctx;

static int index_of(const char *const *names, int n, const char *word) {
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], word) == 0) return i;
  return -1;
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  char *end = s + strlen(s);
  while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
    *--end = '\0';
  return s;
}

static int parse_int(const char *s, long long *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0') return 0;
  *out = v;
  return 1;
}

/* One CSV line into a row; 0 when the line is not a valid row. */
static int parse_row(char *line, netsim_row *row) {
  char *field[MAX_FIELDS];
  int n = 0;
  for (char *tok = strtok(line, ","); tok != NULL; tok = strtok(NULL, ",")) {
    if (n == MAX_FIELDS) return 0;
    field[n++] = trim(tok);
  }
  if (n < MIN_FIELDS) return 0;
  long long num[MAX_FIELDS] = {0};
  for (int i = 1; i < n; i++) {
    if (i == 3 || i == 4) continue;
    if (!parse_int(field[i], &num[i])) return 0;
  }
  row->coll = index_of(COLLECTIVES, COUNT(COLLECTIVES), field[0]);
  row->algo = index_of(ALGORITHMS, COUNT(ALGORITHMS), field[3]);
  row->proto = index_of(PROTOCOLS, COUNT(PROTOCOLS), field[4]);
  if (row->coll < 0 || row->algo < 0 || row->proto < 0) return 0;
  if (num[1] < 0 || num[2] < num[1]) return 0;
  row->min_bytes = (unsigned long long)num[1];
  row->max_bytes = (unsigned long long)num[2];
  row->channels = (int)num[5];
  row->n_nodes = (int)num[6];
  row->n_ranks = (int)num[7];
  row->num_pipe_ops = n > 8 ? (int)num[8] : -1;
  row->reg_buff = n > 9 ? (int)num[9] : -1;
  return 1;
}

static void say(netsim_ctx *ctx, int level, const char *what, const char *detail, int line) {
  if (ctx->log) ctx->log(level, NETSIM_FLAG_TUNING, __FILE__, line, "TUNER/netsim: %s %s", what, detail);
}

static void read_rows(netsim_ctx *ctx) {
  const char *path = getenv("NCCL_TUNER_CONFIG_FILE");
  if (path == NULL || *path == '\0') {
    say(ctx, NETSIM_LOG_WARN, "NCCL_TUNER_CONFIG_FILE is not set:", "no rows, NCCL tunes alone", __LINE__);
    return;
  }
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    say(ctx, NETSIM_LOG_WARN, "cannot read, no rows:", path, __LINE__);
    return;
  }
  char line[MAX_LINE];
  int cap = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    char *text = trim(line);
    if (*text == '\0' || *text == '#') continue;
    netsim_row row;
    char copy[MAX_LINE];
    snprintf(copy, sizeof copy, "%s", text);
    if (!parse_row(text, &row)) {
      say(ctx, NETSIM_LOG_WARN, "row skipped:", copy, __LINE__);
      continue;
    }
    if (ctx->n_rows == cap) {
      int grown = cap ? 2 * cap : 16;
      netsim_row *more = realloc(ctx->rows, (size_t)grown * sizeof *more);
      if (more == NULL) break;
      ctx->rows = more;
      cap = grown;
    }
    ctx->rows[ctx->n_rows++] = row;
  }
  fclose(f);
}

static netsim_result make_ctx(size_t n_ranks, size_t n_nodes, netsim_logger log, void **out) {
  netsim_ctx *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL) return NETSIM_SYSTEM_ERROR;
  ctx->n_ranks = n_ranks;
  ctx->n_nodes = n_nodes;
  ctx->log = log;
  read_rows(ctx);
  *out = ctx;
  return NETSIM_OK;
}

static int row_matches(const netsim_row *r, const netsim_ctx *ctx, int coll, size_t n_bytes,
                       int num_pipe_ops, int reg_buff) {
  return r->coll == coll && n_bytes >= r->min_bytes && n_bytes <= r->max_bytes &&
         (r->n_nodes == -1 || (size_t)r->n_nodes == ctx->n_nodes) &&
         (r->n_ranks == -1 || (size_t)r->n_ranks == ctx->n_ranks) &&
         (r->num_pipe_ops == -1 || r->num_pipe_ops == num_pipe_ops) &&
         (reg_buff < 0 || r->reg_buff == -1 || r->reg_buff == reg_buff);
}

/* The one decision: touch the cost table and *n_channels only for the first matching row. */
static netsim_result coll_info(void *opaque, int coll, size_t n_bytes, int num_pipe_ops,
                               float **cost, int num_algo, int num_proto, int reg_buff,
                               int *n_channels) {
  netsim_ctx *ctx = opaque;
  if (ctx == NULL || cost == NULL) return NETSIM_OK;
  float *table = (float *)cost; /* NCCL passes float[num_algo][num_proto] cast to float** */
  for (int i = 0; i < ctx->n_rows; i++) {
    const netsim_row *r = &ctx->rows[i];
    if (!row_matches(r, ctx, coll, n_bytes, num_pipe_ops, reg_buff)) continue;
    if (r->algo >= num_algo || r->proto >= num_proto) return NETSIM_OK;
    float *entry = &table[r->algo * num_proto + r->proto];
    if (*entry == NETSIM_COST_UNAVAILABLE) return NETSIM_OK;
    *entry = 0.0f;
    if (r->channels > 0 && n_channels != NULL) *n_channels = r->channels;
    return NETSIM_OK;
  }
  return NETSIM_OK;
}

static netsim_result coll_info_v3(void *ctx, int coll, size_t n_bytes, int num_pipe_ops,
                                  float **cost, int num_algo, int num_proto, int *n_channels) {
  return coll_info(ctx, coll, n_bytes, num_pipe_ops, cost, num_algo, num_proto, -1, n_channels);
}

static netsim_result init_v4(size_t n_ranks, size_t n_nodes, netsim_logger log, void **ctx) {
  return make_ctx(n_ranks, n_nodes, log, ctx);
}

static netsim_result init_v5(void **ctx, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                             netsim_logger log, void *nvl_domain_info, void *constants) {
  (void)comm_id;
  (void)nvl_domain_info;
  (void)constants;
  return make_ctx(n_ranks, n_nodes, log, ctx);
}

static netsim_result release(void *opaque) {
  netsim_ctx *ctx = opaque;
  if (ctx != NULL) {
    free(ctx->rows);
    free(ctx);
  }
  return NETSIM_OK;
}

NETSIM_EXPORT const netsim_tuner_v5 ncclTunerPlugin_v5 = {"netsim", init_v5, coll_info, release};
NETSIM_EXPORT const netsim_tuner_v4 ncclTunerPlugin_v4 = {"netsim", init_v4, coll_info, release};
NETSIM_EXPORT const netsim_tuner_v3 ncclTunerPlugin_v3 = {"netsim", init_v4, coll_info_v3, release};
