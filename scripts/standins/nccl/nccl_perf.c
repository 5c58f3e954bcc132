//go:build ignore

// (The line above keeps the Go tool from treating this C file as a cgo source of package nccl.)

/*
 * nccl_perf.c - gpuaccept's MPI stand-in for NVIDIA nccl-tests (all_reduce_perf and friends).
 *
 * NOT nccl-tests and NOT NCCL: there are no GPUs here. Each rank runs a REAL MPI collective
 * (MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Alltoall, MPI_Sendrecv) on host
 * memory over whatever links MPI uses (in the lab: tc-shaped veth links), times it exactly the
 * way nccl-tests does (iters x agg_iters back to back, average over processes), computes algbw/busbw
 * with nccl-tests' formulas, and prints the nccl-tests 2.18 text layout with the same printf
 * formats. The device name on every rank line is "gpuaccept-mpi-standin", the only field of the
 * real format that can say what this is. With -g N one process plays N ranks ("devices"): it keeps N
 * send/recv buffers and does the collective across them in host memory, plus one MPI collective across
 * processes. With NCCL_DEBUG=INFO it prints the few NCCL INFO lines it can truthfully print (an NCCL_ALGO
 * override; the ring it forced Open MPI to use). See README.md in this directory.
 *
 * Build: mpicc -O2 -o all_reduce_perf nccl_perf.c   (build.sh makes every collective's name)
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef NCCL_TESTS_VERSION
#define NCCL_TESTS_VERSION "2.18.2"
#endif
#define STANDIN_DEVICE_NAME "gpuaccept-mpi-standin"
#define JSON_FILE_VERSION 1
#define TIME_STRING_FORMAT "%Y-%m-%d %H:%M:%S"
#define MAX_LINE 2048

/* ---------------------------------------------------------------- collectives */

enum coll { C_ALL_REDUCE, C_ALL_GATHER, C_REDUCE_SCATTER, C_ALLTOALL, C_SENDRECV, C_NUM };
static const char *coll_names[C_NUM] = {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"};

/* ---------------------------------------------------------------- types and ops */

enum kind { K_SIGNED, K_UNSIGNED, K_FLOAT };
struct dtype {
  const char *name;
  MPI_Datatype mpi;
  size_t size;
  enum kind kind;
};
static struct dtype types[8];
static int ntypes;
static void init_types(void) {
  struct dtype t[] = {
      {"int8", MPI_INT8_T, 1, K_SIGNED},    {"uint8", MPI_UINT8_T, 1, K_UNSIGNED},
      {"int32", MPI_INT32_T, 4, K_SIGNED},  {"uint32", MPI_UINT32_T, 4, K_UNSIGNED},
      {"int64", MPI_INT64_T, 8, K_SIGNED},  {"uint64", MPI_UINT64_T, 8, K_UNSIGNED},
      {"float", MPI_FLOAT, 4, K_FLOAT},     {"double", MPI_DOUBLE, 8, K_FLOAT},
  };
  ntypes = (int)(sizeof(t) / sizeof(t[0]));
  memcpy(types, t, sizeof(t));
}

enum op { O_SUM, O_PROD, O_MAX, O_MIN, O_AVG, O_NUM };
static const char *op_names[O_NUM] = {"sum", "prod", "max", "min", "avg"};
static MPI_Op mpi_op(int op) {
  switch (op) {
  case O_PROD: return MPI_PROD;
  case O_MAX: return MPI_MAX;
  case O_MIN: return MPI_MIN;
  default: return MPI_SUM; /* avg = sum, then divide by nranks (as ncclAvg) */
  }
}

/* ---------------------------------------------------------------- options (nccl-tests defaults) */

static int nThreads = 1;
static int nGpus = 1;
static size_t minBytes = 32 * 1024 * 1024;
static size_t maxBytes = 32 * 1024 * 1024;
static size_t stepBytes = 1 * 1024 * 1024;
static size_t stepFactor = 1;
static int datacheck = 1;
static int warmup_iters = 1;
static int iters = 20;
static int agg_iters = 1;
static int run_cycles = 1;
static int op_index = O_SUM;   /* -1 = all */
static int type_index = -1;    /* set to float after init_types; -1 = all */
static int ncclroot = 0;
static int parallel_init = 0;
static int blocking_coll = 0;
static int cudaGraphLaunches = 0;
static int report_cputime = 0;
static int report_timestamps = 0;
static int average = 1;

/* proc/nprocs: this MPI process and their number. nranks = nprocs * nGpus simulated ranks; this process owns
 * ranks proc*nGpus .. proc*nGpus+nGpus-1 (nccl-tests: rank = proc*nThreads*nGpus + i). */
static int proc, nprocs, nranks, is_main;
static int localRank; /* processes before this one on the same host */
static char hostname[1024];
static enum coll coll = C_ALL_REDUCE;
static const char *program_name = "all_reduce_perf";

#define PRINT(...) do { if (is_main) printf(__VA_ARGS__); } while (0)

/* ---------------------------------------------------------------- JSON (nccl-tests' layout, file version 1) */

static FILE *jfp;
enum jstate { J_KEY, J_OBJ_EMPTY, J_OBJ_SOME, J_LIST_EMPTY, J_LIST_SOME };
static enum jstate jstack[64];
static int jn;

static void jsonSanitized(const char *in) {
  fputc('"', jfp);
  for (; *in; in++) {
    unsigned char c = (unsigned char)*in;
    if (c == '"' || c == '\\' || c == '/') { fputc('\\', jfp); fputc(c, jfp); }
    else if (c == '\n') fputs("\\n", jfp);
    else if (c == '\t') fputs("\\t", jfp);
    else if (c >= 0x7F || c <= 0x1F) break; /* nccl-tests gives up on these too */
    else fputc(c, jfp);
  }
  fputc('"', jfp);
}
static void jsonValHelper(void) {
  if (jn == 0) return;
  switch (jstack[jn - 1]) {
  case J_LIST_EMPTY: jstack[jn - 1] = J_LIST_SOME; break;
  case J_LIST_SOME: fputc(',', jfp); break;
  case J_KEY: jn--; break;
  default: break;
  }
}
static void jsonKey(const char *k) {
  if (!jfp) return;
  if (jstack[jn - 1] == J_OBJ_EMPTY) jstack[jn - 1] = J_OBJ_SOME;
  else fputc(',', jfp);
  jsonSanitized(k);
  fputc(':', jfp);
  jstack[jn++] = J_KEY;
}
static void jsonStartObject(void) { if (!jfp) return; jsonValHelper(); fputc('{', jfp); jstack[jn++] = J_OBJ_EMPTY; }
static void jsonFinishObject(void) { if (!jfp) return; jn--; fputc('}', jfp); }
static void jsonStartList(void) { if (!jfp) return; jsonValHelper(); fputc('[', jfp); jstack[jn++] = J_LIST_EMPTY; }
static void jsonFinishList(void) { if (!jfp) return; jn--; fputc(']', jfp); }
static void jsonNull(void) { if (!jfp) return; jsonValHelper(); fputs("null", jfp); }
static void jsonStr(const char *s) { if (!jfp) return; jsonValHelper(); jsonSanitized(s); }
static void jsonBool(int b) { jsonStr(b ? "true" : "false"); } /* nccl-tests writes booleans as strings */
static void jsonInt(long long v) { if (!jfp) return; jsonValHelper(); fprintf(jfp, "%lld", v); }
static void jsonSize(size_t v) { if (!jfp) return; jsonValHelper(); fprintf(jfp, "%zu", v); }
static void jsonDouble(double v) {
  if (!jfp) return;
  jsonValHelper();
  if (v != v) fputs("\"nan\"", jfp); else fprintf(jfp, "%lf", v);
}
static void formatNow(char *buf, int len) {
  time_t now = time(NULL);
  strftime(buf, len, TIME_STRING_FORMAT, localtime(&now));
}

static void jsonOutputInit(const char *path, int argc, char **argv) {
  extern char **environ;
  if (!path || proc != 0) return;
  const char *ext = strrchr(path, '.');
  if (!ext || strchr(ext, '/') || strcasecmp(ext, ".json") != 0) return; /* only .json is supported, as nccl-tests */
  char *try_path = strdup(path);
  int n = 0;
  while ((jfp = fopen(try_path, "wx")) == NULL) {
    if (errno != EEXIST) { printf("# skipping json output; %s not accessible\n", try_path); free(try_path); return; }
    free(try_path);
    if (asprintf(&try_path, "%s.%d", path, n++) == -1) { printf("# skipping json output; failed to probe destination\n"); return; }
  }
  printf("# Writing JSON output to %s\n", try_path);
  free(try_path);
  jsonStartObject();
  jsonKey("version"); jsonInt(JSON_FILE_VERSION);
  char tb[128]; formatNow(tb, sizeof tb);
  jsonKey("start_time"); jsonStr(tb);
  jsonKey("args"); jsonStartList(); for (int i = 0; i < argc; i++) jsonStr(argv[i]); jsonFinishList();
  jsonKey("env"); jsonStartList(); for (char **e = environ; e && *e; e++) jsonStr(*e); jsonFinishList();
  jsonKey("nccl_version"); jsonInt(0); /* no NCCL here */
}
static void jsonOutputFinalize(void) {
  if (!jfp) return;
  char tb[128]; formatNow(tb, sizeof tb);
  jsonKey("end_time"); jsonStr(tb);
  jsonFinishObject();
  fputc('\n', jfp);
  fclose(jfp);
  jfp = NULL;
}

/* ---------------------------------------------------------------- output helpers (nccl-tests formats) */

static void getFloatStr(double value, int width, char *str) {
  if (snprintf(str, width + 1, "%*.2f", width, value) <= width) return;
  if (snprintf(str, width + 1, "%*.1f", width, value) <= width) return;
  if (snprintf(str, width + 1, "%*.0f", width, value) <= width) return;
  snprintf(str, width + 1, width >= 7 ? "%*.1e" : "%*.0e", width, value);
}

static void writeBenchmarkLinePreamble(size_t nBytes, size_t nElem, const char *typeName, const char *opName, int root) {
  char rootName[100];
  snprintf(rootName, sizeof rootName, "%6i", root);
  PRINT("%12li  %12li  %8s  %6s  %6s", (long)nBytes, (long)nElem, typeName, opName, rootName);
  if (jfp) {
    jsonStartObject();
    jsonKey("size"); jsonSize(nBytes);
    jsonKey("count"); jsonSize(nElem);
    jsonKey("type"); jsonStr(typeName);
    jsonKey("redop"); jsonStr(opName);
    jsonKey("root"); jsonStr(rootName);
  }
}

static void writeBenchmarkLineBody(double timeUsec, double algBw, double busBw, int reportErrors, int64_t wrongElts, int out_of_place) {
  char timeStr[8], algBwStr[7], busBwStr[7];
  getFloatStr(timeUsec, 7, timeStr);
  getFloatStr(algBw, 6, algBwStr);
  getFloatStr(busBw, 6, busBwStr);
  if (reportErrors) PRINT("  %7s  %6s  %6s  %6g", timeStr, algBwStr, busBwStr, (double)wrongElts);
  else PRINT("  %7s  %6s  %6s    N/A", timeStr, algBwStr, busBwStr);
  if (!out_of_place && report_timestamps) {
    char tb[128]; formatNow(tb, sizeof tb);
    PRINT("%21s", tb);
  }
  if (jfp) {
    jsonKey(out_of_place ? "out_of_place" : "in_place");
    jsonStartObject();
    jsonKey(report_cputime ? "cpu_time" : "time"); jsonDouble(timeUsec);
    jsonKey("alg_bw"); jsonDouble(algBw);
    jsonKey("bus_bw"); jsonDouble(busBw);
    jsonKey("nwrong"); if (reportErrors) jsonDouble((double)wrongElts); else jsonNull();
    jsonFinishObject();
  }
}

static void writeBenchmarkLineTerminator(int actualIters) {
  PRINT("\n");
  if (jfp) {
    jsonKey("actual_iterations"); jsonInt(actualIters);
    jsonKey("experiment_name"); jsonStr("");
    jsonFinishObject();
  }
}

/* ---------------------------------------------------------------- sizes per collective (nccl-tests GetCollByteCount) */

struct sizes { size_t sendcount, recvcount, paramcount, sendInplaceOffset, recvInplaceOffset; };

static struct sizes collByteCount(size_t count, size_t eltSize, int n) {
  struct sizes s;
  size_t base = (count / n) & -(16 / eltSize);
  switch (coll) {
  case C_ALL_GATHER:
    s.sendcount = base; s.recvcount = base * n; s.sendInplaceOffset = base; s.recvInplaceOffset = 0; s.paramcount = base;
    break;
  case C_REDUCE_SCATTER:
    s.sendcount = base * n; s.recvcount = base; s.sendInplaceOffset = 0; s.recvInplaceOffset = base; s.paramcount = base;
    break;
  case C_ALLTOALL:
    s.paramcount = base; s.sendcount = s.recvcount = base * n; s.sendInplaceOffset = s.recvInplaceOffset = 0;
    break;
  default: /* all_reduce, sendrecv */
    s.sendcount = s.recvcount = s.paramcount = count; s.sendInplaceOffset = s.recvInplaceOffset = 0;
    break;
  }
  return s;
}

static void getBw(size_t count, size_t typesize, double sec, double *algBw, double *busBw, int n) {
  double baseBw, factor;
  switch (coll) {
  case C_ALL_REDUCE: baseBw = (double)(count * typesize) / 1.0E9 / sec; factor = ((double)(2 * (n - 1))) / ((double)n); break;
  case C_ALL_GATHER:
  case C_REDUCE_SCATTER:
  case C_ALLTOALL: baseBw = (double)(count * typesize * n) / 1.0E9 / sec; factor = ((double)(n - 1)) / ((double)n); break;
  default: baseBw = (double)(count * typesize) / 1.0E9 / sec; factor = 1; break;
  }
  *algBw = baseBw;
  *busBw = baseBw * factor;
}

/* ---------------------------------------------------------------- data: deterministic, exactly representable */

static void putVal(void *buf, size_t i, const struct dtype *t, long long v) {
  switch (t->size * 10 + t->kind) {
  case 10: ((int8_t *)buf)[i] = (int8_t)v; break;
  case 11: ((uint8_t *)buf)[i] = (uint8_t)v; break;
  case 40: ((int32_t *)buf)[i] = (int32_t)v; break;
  case 41: ((uint32_t *)buf)[i] = (uint32_t)v; break;
  case 42: ((float *)buf)[i] = (float)v; break;
  case 80: ((int64_t *)buf)[i] = (int64_t)v; break;
  case 81: ((uint64_t *)buf)[i] = (uint64_t)v; break;
  case 82: ((double *)buf)[i] = (double)v; break;
  }
}

/* Element i of rank r's input for repetition rep: small integers, so every sum/max/min/prod is exact in every type. */
static long long inputVal(int op, int r, size_t i, int rep, int n) {
  if (op == O_PROD) return ((int)(i % (size_t)n) == r) ? 2 : 1;
  return (long long)((i * 3 + (size_t)r * 5 + (size_t)rep) % 11);
}
static long long reducedVal(int op, size_t i, int rep, int n) {
  long long acc = inputVal(op, 0, i, rep, n);
  for (int r = 1; r < n; r++) {
    long long v = inputVal(op, r, i, rep, n);
    switch (op) {
    case O_PROD: acc *= v; break;
    case O_MAX: if (v > acc) acc = v; break;
    case O_MIN: if (v < acc) acc = v; break;
    default: acc += v; break;
    }
  }
  return acc;
}

/* ncclAvg = sum / nranks, done in the element type; applied the same way to results and to expected values. */
static void avgDivide(void *buf, size_t count, const struct dtype *t, int n) {
  for (size_t i = 0; i < count; i++) {
    switch (t->size * 10 + t->kind) {
    case 10: ((int8_t *)buf)[i] /= n; break;
    case 11: ((uint8_t *)buf)[i] /= n; break;
    case 40: ((int32_t *)buf)[i] /= n; break;
    case 41: ((uint32_t *)buf)[i] /= n; break;
    case 42: ((float *)buf)[i] /= (float)n; break;
    case 80: ((int64_t *)buf)[i] /= n; break;
    case 81: ((uint64_t *)buf)[i] /= n; break;
    case 82: ((double *)buf)[i] /= (double)n; break;
    }
  }
}

static void fillInput(void *buf, size_t count, const struct dtype *t, int op, int r, int rep, size_t eltOffset) {
  for (size_t i = 0; i < count; i++) putVal(buf, i, t, inputVal(op, r, eltOffset + i, rep, nranks));
}

/* ---------------------------------------------------------------- NCCL debug lines (only what is true here) */

/* NCCL's logger (src/debug.cc, 2.18): NCCL_DEBUG=INFO (or ABORT/TRACE, higher levels) enables INFO lines for the
 * subsystems in NCCL_DEBUG_SUBSYS, default INIT,ENV; a comma-separated, case-insensitive list, "^" first inverts it.
 * Each line is "host:pid:tid [cudaDev] NCCL INFO message". Only the two subsystems the stand-in prints from matter. */
#define DBG_ENV 1u
#define DBG_TUNING 2u
static unsigned ncclInfoMask; /* 0: no INFO lines */

static void ncclDebugSetup(void) {
  const char *lvl = getenv("NCCL_DEBUG");
  if (!lvl || !(strcasecmp(lvl, "INFO") == 0 || strcasecmp(lvl, "ABORT") == 0 || strcasecmp(lvl, "TRACE") == 0)) return;
  unsigned mask = DBG_ENV; /* INIT,ENV */
  const char *env = getenv("NCCL_DEBUG_SUBSYS");
  if (env) {
    int invert = env[0] == '^';
    char *list = strdup(env + invert), *save = NULL;
    mask = invert ? ~0u : 0u;
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
      unsigned bit = strcasecmp(tok, "ENV") == 0 ? DBG_ENV : strcasecmp(tok, "TUNING") == 0 ? DBG_TUNING
                                                         : strcasecmp(tok, "ALL") == 0 ? ~0u : 0u;
      mask = invert ? (mask & ~bit) : (mask | bit);
    }
    free(list);
  }
  ncclInfoMask = mask;
}

static void ncclInfo(int dev, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ncclInfo(int dev, const char *fmt, ...) {
  char buf[1024];
  int len = snprintf(buf, sizeof buf, "%s:%d:%d [%d] NCCL INFO ", hostname, (int)getpid(), (int)syscall(SYS_gettid), dev);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + len, sizeof buf - (size_t)len, fmt, ap);
  va_end(ap);
  printf("%s\n", buf);
}

/* Reads one integer-valued MPI_T control variable by index; 0 if it has another type or cannot be read. */
static int cvarRead(int idx, MPI_Datatype dt, long long *v) {
  MPI_T_cvar_handle h;
  int count = 0, ok = 1;
  union { int i; unsigned u; long l; unsigned long ul; long long ll; unsigned long long ull; char c[64]; } buf;
  memset(&buf, 0, sizeof buf);
  if (MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS) return 0;
  if (count != 1 || MPI_T_cvar_read(h, &buf) != MPI_SUCCESS) ok = 0;
  else if (dt == MPI_INT) *v = buf.i;
  else if (dt == MPI_UNSIGNED) *v = buf.u;
  else if (dt == MPI_LONG) *v = buf.l;
  else if (dt == MPI_UNSIGNED_LONG) *v = (long long)buf.ul;
  else if (dt == MPI_LONG_LONG) *v = buf.ll;
  else if (dt == MPI_UNSIGNED_LONG_LONG) *v = (long long)buf.ull;
  else if (dt == MPI_C_BOOL) *v = buf.c[0] != 0;
  else ok = 0;
  MPI_T_cvar_handle_free(&h);
  return ok;
}

/* Whether MPI_Allreduce on MPI_COMM_WORLD runs Open MPI's ring, as far as Open MPI's own control variables say:
 * coll/tuned has dynamic rules on and allreduce algorithm 4 (ring), and no coll component that could take over
 * allreduce is ranked at or above tuned. Components that never replace a blocking intra-communicator allreduce
 * on host memory (self: size-1 communicators; inter: inter-communicators; libnbc: non-blocking only; sync,
 * cuda, accelerator, monitoring: wrap the next component; ftagree: agreement only) do not count. A component
 * whose coll_X_enable is 0 does not count either. Anything else unknown (no MPI_T, no tuned) means no. */
static int ompiRingAllreduce(void) {
  static const char *passive[] = {"tuned", "self", "inter", "libnbc", "sync", "cuda", "accelerator", "monitoring", "ftagree"};
  struct comp { char name[64]; long long prio; int disabled; } comps[64];
  int ncomps = 0, full = 0, provided, n = 0;
  long long alg = -1, dyn = -1, tunedPrio = -1;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return 0;
  if (MPI_T_cvar_get_num(&n) != MPI_SUCCESS) n = 0;
  for (int i = 0; i < n; i++) {
    char name[256], desc[4];
    int nameLen = sizeof name, descLen = sizeof desc, verbosity, bind, scope;
    MPI_Datatype dt;
    MPI_T_enum en;
    long long v;
    if (MPI_T_cvar_get_info(i, name, &nameLen, &verbosity, &dt, &en, desc, &descLen, &bind, &scope) != MPI_SUCCESS) continue;
    if (strncmp(name, "coll_", 5) != 0 || !cvarRead(i, dt, &v)) continue;
    if (strcmp(name, "coll_tuned_allreduce_algorithm") == 0) { alg = v; continue; }
    if (strcmp(name, "coll_tuned_use_dynamic_rules") == 0) { dyn = v; continue; }
    if (strcmp(name, "coll_tuned_priority") == 0) { tunedPrio = v; continue; }
    const char *c = name + 5, *us = strchr(c, '_');
    if (!us || (strcmp(us, "_priority") != 0 && strcmp(us, "_enable") != 0) || (size_t)(us - c) >= sizeof comps[0].name) continue;
    int k = 0;
    while (k < ncomps && (strlen(comps[k].name) != (size_t)(us - c) || strncmp(comps[k].name, c, (size_t)(us - c)) != 0)) k++;
    if (k == ncomps) {
      if (ncomps == (int)(sizeof comps / sizeof comps[0])) { full = 1; continue; }
      memset(&comps[k], 0, sizeof comps[k]);
      memcpy(comps[k].name, c, (size_t)(us - c));
      comps[k].prio = -1;
      ncomps++;
    }
    if (strcmp(us, "_priority") == 0) comps[k].prio = v;
    else comps[k].disabled = v == 0;
  }
  MPI_T_finalize();
  if (alg != 4 || dyn != 1 || tunedPrio < 0 || full) return 0;
  for (int k = 0; k < ncomps; k++) {
    int skip = comps[k].disabled;
    for (size_t j = 0; j < sizeof passive / sizeof passive[0]; j++) skip |= strcmp(comps[k].name, passive[j]) == 0;
    if (!skip && comps[k].prio >= tunedPrio) return 0;
  }
  return 1;
}

/* Set in main: rank 0 prints NCCL's TUNING line per timed all_reduce (see timeTest). */
static int tuningLines;

/* ---------------------------------------------------------------- the benchmark */

/* Per simulated rank (nGpus of them in this process): send, recv and expected buffers, as nccl-tests keeps
 * per GPU. scratch (sendrecv in place) and stage/stage2 (alltoall) serve the collective across local ranks. */
struct bench {
  char **sendbuf, **recvbuf, **expected;
  char *scratch, *stage, *stage2;
  char **in, **out; /* runCollLocal's per-call view of the local ranks' input and output */
  size_t maxbytes;
  size_t nbytes, sendBytes, expectedBytes, sendInplaceOffset, recvInplaceOffset;
  const struct dtype *t;
  int op;
  int reportErrors;
  int errors;
  double bw;
  int bw_count;
  double timeSec[2]; /* per collective, as printed: [0] out-of-place, [1] in-place */
};

static void setupArgs(struct bench *b, size_t size) {
  size_t es = b->t->size;
  struct sizes s = collByteCount(size / es, es, nranks);
  b->nbytes = s.paramcount * es;
  b->sendBytes = s.sendcount * es;
  b->expectedBytes = s.recvcount * es;
  b->sendInplaceOffset = s.sendInplaceOffset * es;
  b->recvInplaceOffset = s.recvInplaceOffset * es;
}

/* -g 1: the rank is the process; one MPI collective does it all. */
static void runCollProcess(struct bench *b, int in_place, size_t shift) {
  size_t count = b->nbytes / b->t->size;
  char *send = b->sendbuf[0] + shift, *recv = b->recvbuf[0] + shift;
  MPI_Datatype dt = b->t->mpi;
  MPI_Op mop = mpi_op(b->op);
  int c = (int)count;

  switch (coll) {
  case C_ALL_REDUCE:
    MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, c, dt, mop, MPI_COMM_WORLD);
    if (b->op == O_AVG) avgDivide(recv, count, b->t, nranks);
    break;
  case C_ALL_GATHER:
    if (in_place) MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, c, dt, MPI_COMM_WORLD);
    else MPI_Allgather(send, c, dt, recv, c, dt, MPI_COMM_WORLD);
    break;
  case C_REDUCE_SCATTER:
    /* MPI in-place: input is the whole recv buffer, this rank's block lands at its start. */
    MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : send, recv, c, dt, mop, MPI_COMM_WORLD);
    if (b->op == O_AVG) avgDivide(recv, count, b->t, nranks);
    break;
  case C_ALLTOALL:
    if (in_place) MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, c, dt, MPI_COMM_WORLD);
    else MPI_Alltoall(send, c, dt, recv, c, dt, MPI_COMM_WORLD);
    break;
  case C_SENDRECV: {
    int to = (proc + 1) % nprocs, from = (proc - 1 + nprocs) % nprocs;
    if (in_place) MPI_Sendrecv_replace(recv, c, dt, to, 0, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else MPI_Sendrecv(send, c, dt, to, 0, recv, c, dt, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    break;
  }
  default: break;
  }
}

/* -g N > 1: the same collective over nranks = nprocs*N ranks, done as real work on the N local buffers in host
 * memory (MPI_Reduce_local for reductions, memcpy for data movement) plus one MPI collective across processes
 * when there is more than one. Local rank g is global rank proc*N+g; out[g] is its receive buffer and in[g]
 * its input (the send buffer, or in place where nccl-tests puts it in the receive buffer). */
static void runCollLocal(struct bench *b, int in_place, size_t shift) {
  const int N = nGpus;
  const size_t es = b->t->size, count = b->nbytes / es, blk = count * es;
  const MPI_Datatype dt = b->t->mpi;
  const MPI_Op mop = mpi_op(b->op);
  const int c = (int)count;
  char **in = b->in, **out = b->out;
  for (int g = 0; g < N; g++) {
    out[g] = b->recvbuf[g] + shift;
    in[g] = in_place ? out[g] + (size_t)(proc * N + g) * b->sendInplaceOffset : b->sendbuf[g] + shift;
  }

  switch (coll) {
  case C_ALL_REDUCE: { /* reduce the N local inputs into out[0], all-reduce that across processes, copy out */
    char *acc = out[0];
    if (acc != in[0]) memcpy(acc, in[0], blk);
    for (int g = 1; g < N; g++) MPI_Reduce_local(in[g], acc, c, dt, mop);
    if (nprocs > 1) MPI_Allreduce(MPI_IN_PLACE, acc, c, dt, mop, MPI_COMM_WORLD);
    if (b->op == O_AVG) avgDivide(acc, count, b->t, nranks);
    for (int g = 1; g < N; g++) memcpy(out[g], acc, blk);
    break;
  }
  case C_ALL_GATHER: { /* local blocks into their places in out[0], all-gather the process's N blocks, copy out */
    char *all = out[0];
    for (int g = 0; g < N; g++) {
      char *dst = all + (size_t)(proc * N + g) * blk;
      if (dst != in[g]) memcpy(dst, in[g], blk);
    }
    if (nprocs > 1) MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, N * c, dt, MPI_COMM_WORLD);
    for (int g = 1; g < N; g++) memcpy(out[g], all, (size_t)nranks * blk);
    break;
  }
  case C_REDUCE_SCATTER: { /* reduce the N whole inputs into out[0], reduce-scatter N blocks per process, copy out */
    char *acc = out[0];
    const size_t full = (size_t)nranks * blk;
    if (acc != in[0]) memcpy(acc, in[0], full);
    for (int g = 1; g < N; g++) MPI_Reduce_local(in[g], acc, nranks * c, dt, mop);
    /* This process's N blocks: MPI in place leaves them at the start of acc; with one process they are there. */
    if (nprocs > 1) MPI_Reduce_scatter_block(MPI_IN_PLACE, acc, N * c, dt, mop, MPI_COMM_WORLD);
    if (b->op == O_AVG) avgDivide(acc, (size_t)N * count, b->t, nranks);
    for (int g = 1; g < N; g++) memcpy(out[g], acc + (size_t)g * blk, blk); /* in place too: at the start */
    break;
  }
  case C_ALLTOALL: { /* rank i's block j goes to rank j's block i */
    if (nprocs == 1 && !in_place) {
      for (int g = 0; g < N; g++)
        for (int h = 0; h < N; h++) memcpy(out[g] + (size_t)h * blk, in[h] + (size_t)g * blk, blk);
      break;
    }
    /* Pack by destination process q: [q][local source h][local destination g]; exchange; unpack. */
    for (int q = 0; q < nprocs; q++)
      for (int h = 0; h < N; h++)
        for (int g = 0; g < N; g++)
          memcpy(b->stage + ((size_t)(q * N + h) * N + g) * blk, in[h] + (size_t)(q * N + g) * blk, blk);
    char *src = b->stage;
    if (nprocs > 1) {
      MPI_Alltoall(b->stage, N * N * c, dt, b->stage2, N * N * c, dt, MPI_COMM_WORLD);
      src = b->stage2;
    }
    for (int q = 0; q < nprocs; q++)
      for (int h = 0; h < N; h++)
        for (int g = 0; g < N; g++)
          memcpy(out[g] + (size_t)(q * N + h) * blk, src + ((size_t)(q * N + h) * N + g) * blk, blk);
    break;
  }
  case C_SENDRECV: { /* rank r sends to r+1, receives from r-1: local g-1 -> g, and the last local rank of the
                      * previous process -> local rank 0 */
    int to = (proc + 1) % nprocs, from = (proc - 1 + nprocs) % nprocs;
    char *first = in_place ? b->scratch : out[0]; /* in place, out[0] is still an input */
    if (nprocs > 1) MPI_Sendrecv(in[N - 1], c, dt, to, 0, first, c, dt, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else memcpy(first, in[N - 1], blk);
    for (int g = N - 1; g >= 1; g--) memcpy(out[g], in[g - 1], blk); /* downwards: in place reads before it writes */
    if (first != out[0]) memcpy(out[0], first, blk);
    break;
  }
  default: break;
  }
}

static void runColl(struct bench *b, int in_place, int iter) {
  size_t totalnbytes = b->sendBytes > b->expectedBytes ? b->sendBytes : b->expectedBytes;
  size_t steps = totalnbytes ? b->maxbytes / totalnbytes : 1;
  size_t shift = totalnbytes * ((size_t)iter % steps); /* rotate through the buffer, as nccl-tests does */
  if (nGpus == 1) runCollProcess(b, in_place, shift);
  else runCollLocal(b, in_place, shift);
  if (blocking_coll) MPI_Barrier(MPI_COMM_WORLD);
}

/* Inputs and expected output for every local rank, as each nccl-tests InitData does (the result lands at the
 * start of each receive buffer). */
static void initData(struct bench *b, int rep, int in_place) {
  const struct dtype *t = b->t;
  size_t es = t->size;
  size_t sendcount = b->sendBytes / es, recvcount = b->expectedBytes / es;
  size_t param = b->nbytes / es;
  int op = b->op;
  for (int g = 0; g < nGpus; g++) {
    int rank = proc * nGpus + g;
    char *send = b->sendbuf[g], *recv = b->recvbuf[g], *expected = b->expected[g];
    memset(recv, 0, b->expectedBytes > b->sendBytes ? b->expectedBytes : b->sendBytes);
    switch (coll) {
    case C_ALL_REDUCE:
      fillInput(in_place ? recv : send, sendcount, t, op, rank, rep, 0);
      if (g > 0) { memcpy(expected, b->expected[0], b->expectedBytes); break; } /* the same for every rank */
      for (size_t i = 0; i < recvcount; i++) putVal(expected, i, t, reducedVal(op, i, rep, nranks));
      if (op == O_AVG) avgDivide(expected, recvcount, t, nranks);
      break;
    case C_REDUCE_SCATTER:
      fillInput(in_place ? recv : send, sendcount, t, op, rank, rep, 0);
      for (size_t i = 0; i < recvcount; i++) putVal(expected, i, t, reducedVal(op, (size_t)rank * recvcount + i, rep, nranks));
      if (op == O_AVG) avgDivide(expected, recvcount, t, nranks);
      break;
    case C_ALL_GATHER:
      fillInput(in_place ? recv + (size_t)rank * b->sendBytes : send, sendcount, t, op, rank, rep, 0);
      if (g > 0) { memcpy(expected, b->expected[0], b->expectedBytes); break; }
      for (int r = 0; r < nranks; r++) fillInput(expected + (size_t)r * b->sendBytes, sendcount, t, op, r, rep, 0);
      break;
    case C_ALLTOALL:
      /* rank r sends block j (elements j*param..) to rank j; we receive block `rank` of every r. */
      fillInput(in_place ? recv : send, sendcount, t, op, rank, rep, 0);
      for (int r = 0; r < nranks; r++)
        for (size_t i = 0; i < param; i++) putVal(expected, (size_t)r * param + i, t, inputVal(op, r, (size_t)rank * param + i, rep, nranks));
      break;
    case C_SENDRECV:
      fillInput(in_place ? recv : send, sendcount, t, op, rank, rep, 0);
      fillInput(expected, recvcount, t, op, (rank - 1 + nranks) % nranks, rep, 0);
      break;
    default: break;
    }
  }
}

/* Wrong elements summed over this process's local ranks, each compared element by element. */
static int64_t checkData(struct bench *b) {
  size_t es = b->t->size, n = b->expectedBytes / es;
  int64_t wrong = 0;
  for (int g = 0; g < nGpus; g++)
    for (size_t i = 0; i < n; i++)
      if (memcmp(b->recvbuf[g] + i * es, b->expected[g] + i * es, es) != 0) wrong++;
  return wrong;
}

static void benchTime(struct bench *b, int in_place) {
  static int rep = 0;
  size_t count = b->nbytes / b->t->size;
  /* nccl-tests does not check in-place alltoall and sendrecv: they print N/A there. */
  int reportErrors = datacheck && !(in_place && (coll == C_ALLTOALL || coll == C_SENDRECV));

  if (datacheck) initData(b, 99, in_place);

  runColl(b, in_place, 0); /* sync */
  MPI_Barrier(MPI_COMM_WORLD);

  double t0 = MPI_Wtime();
  for (int iter = 0; iter < iters; iter++)
    for (int a = 0; a < agg_iters; a++) runColl(b, in_place, iter * agg_iters + a);
  double deltaSec = (MPI_Wtime() - t0) / (iters * agg_iters);
  double cputimeSec = deltaSec; /* MPI collectives are blocking: CPU time == completion time */

  /* 0=rank0 (each process keeps its own; rank 0 prints), 1=avg, 2=min, 3=max over processes (nccl-tests: over
   * processes x threads, not GPUs) */
  switch (average) {
  case 1: MPI_Allreduce(MPI_IN_PLACE, &deltaSec, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); deltaSec /= nprocs; break;
  case 2: MPI_Allreduce(MPI_IN_PLACE, &deltaSec, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD); break;
  case 3: MPI_Allreduce(MPI_IN_PLACE, &deltaSec, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD); break;
  default: break;
  }

  double algBw, busBw;
  getBw(count, b->t->size, deltaSec, &algBw, &busBw, nranks);
  MPI_Barrier(MPI_COMM_WORLD);

  int64_t wrongElts = 0;
  rep++;
  for (int c = 0; c < datacheck; c++) {
    initData(b, rep, in_place);
    runColl(b, in_place, 0);
    int64_t local = checkData(b);
    if (reportErrors && local) b->errors++;
    long long w = local;
    MPI_Allreduce(MPI_IN_PLACE, &w, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    wrongElts = w;
    if (wrongElts) break;
  }

  double timeUsec = (report_cputime ? cputimeSec : deltaSec) * 1.0E6;
  writeBenchmarkLineBody(timeUsec, algBw, busBw, reportErrors, wrongElts, in_place == 0);
  b->timeSec[in_place ? 1 : 0] = deltaSec;
  b->bw += busBw;
  b->bw_count++;
}

static void timeTest(struct bench *b, const struct dtype *t, int op, const char *opName, int root) {
  b->t = t;
  b->op = op;
  MPI_Barrier(MPI_COMM_WORLD);
  /* Warm-up for all sizes (using a stepfactor of 2) */
  for (size_t size = minBytes; size <= maxBytes; size = size ? size * 2 : 1) {
    setupArgs(b, size);
    for (int iter = 0; iter < warmup_iters; iter++) runColl(b, 0, iter);
  }
  long repeat = run_cycles;
  do {
    for (size_t size = minBytes; size <= maxBytes;) {
      setupArgs(b, size);
      size_t shown = b->sendBytes > b->expectedBytes ? b->sendBytes : b->expectedBytes;
      writeBenchmarkLinePreamble(shown, b->nbytes / t->size, t->name, opName, root);
      benchTime(b, 0);
      benchTime(b, 1);
      writeBenchmarkLineTerminator(iters);
      /* NCCL >= 2.20 (enqueue.cc, topoGetAlgoInfo): rank 0 logs INFO(NCCL_TUNING, "%ld Bytes -> Algo %d proto %d
       * time %f") for each collective it tunes. Here: Open MPI's ring (1 = NCCL_ALGO_RING, 2 = NCCL_PROTO_SIMPLE)
       * and the measured time per collective in us, once for the out-of-place and once for the in-place run.
       * Open MPI's ring falls back to recursive doubling when count < processes: no line then. */
      if (tuningLines && is_main && b->nbytes / t->size >= (size_t)nprocs)
        for (int ip = 0; ip < 2; ip++)
          ncclInfo(localRank * nGpus, "%ld Bytes -> Algo %d proto %d time %f", (long)b->nbytes, 1, 2, b->timeSec[ip] * 1.0E6);
      size_t next = (stepFactor > 1) ? size * stepFactor : size + stepBytes;
      if (next <= size) next = size ? size + 1 : 1; /* -b 0 would loop forever in nccl-tests; step on */
      if (next <= size) break;
      size = next;
    }
  } while (--repeat);
}

static void runTests(struct bench *b) {
  int t0 = type_index < 0 ? 0 : type_index, t1 = type_index < 0 ? ntypes : type_index + 1;
  int hasOp = (coll == C_ALL_REDUCE || coll == C_REDUCE_SCATTER || coll == C_SENDRECV);
  int o0 = op_index < 0 ? 0 : op_index, o1 = op_index < 0 ? O_NUM : op_index + 1;
  for (int ti = t0; ti < t1; ti++) {
    if (!hasOp) { timeTest(b, &types[ti], O_SUM, "none", -1); continue; }
    for (int oi = o0; oi < o1; oi++) timeTest(b, &types[ti], oi, op_names[oi], -1);
  }
}

/* ---------------------------------------------------------------- argument parsing (nccl-tests' options) */

static double parsesize(const char *value) {
  long long units;
  double size;
  char size_lit[2];
  int count = sscanf(value, "%lf %1s", &size, size_lit);
  switch (count) {
  case 2:
    switch (size_lit[0]) {
    case 'G': case 'g': units = 1024 * 1024 * 1024; break;
    case 'M': case 'm': units = 1024 * 1024; break;
    case 'K': case 'k': units = 1024; break;
    default: return -1.0;
    }
    break;
  case 1: units = 1; break;
  default: return -1.0;
  }
  return size * units;
}

static int collFromName(const char *s) {
  char buf[64];
  snprintf(buf, sizeof buf, "%s", s);
  size_t l = strlen(buf);
  if (l > 5 && strcmp(buf + l - 5, "_perf") == 0) buf[l - 5] = 0;
  for (int c = 0; c < C_NUM; c++)
    if (strcmp(buf, coll_names[c]) == 0) return c;
  return -1;
}

static void usage(const char *argv0) {
  printf("USAGE: %s \n\t"
         "[-t,--nthreads <num threads>] \n\t"
         "[-g,--ngpus <gpus per thread>] \n\t"
         "[-b,--minbytes <min size in bytes>] \n\t"
         "[-e,--maxbytes <max size in bytes>] \n\t"
         "[-i,--stepbytes <increment size>] \n\t"
         "[-f,--stepfactor <increment factor>] \n\t"
         "[-n,--iters <iteration count>] \n\t"
         "[-m,--agg_iters <aggregated iteration count>] \n\t"
         "[-w,--warmup_iters <warmup iteration count>] \n\t"
         "[-N,--run_cycles <cycle count> run & print each cycle (default: 1; 0=infinite)] \n\t"
         "[-p,--parallel_init <0/1>] \n\t"
         "[-c,--check <check iteration count>] \n\t"
         "[-o,--op <sum/prod/min/max/avg/all>] \n\t"
         "[-d,--datatype <nccltype/all>] \n\t"
         "[-r,--root <root>] \n\t"
         "[-z,--blocking <0/1>] \n\t"
         "[-y,--stream_null <0/1>] \n\t"
         "[-T,--timeout <time in seconds>] \n\t"
         "[-G,--cudagraph <num graph launches>] \n\t"
         "[-C,--report_cputime <0/1>] \n\t"
         "[-S,--report_timestamps <0/1> report timestamps (default 0)] \n\t"
         "[-J,--output_file <file> write output to filepath, if accessible. Infer type from suffix (only json supported presently.)] \n\t"
         "[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>] \n\t"
         "[-h,--help]\n"
         "gpuaccept MPI stand-in (no GPU, no NCCL): -C also takes a collective name "
         "(all_reduce, all_gather, reduce_scatter, alltoall, sendrecv), as does --collective.\n",
         argv0);
}

/* Returns -2 to go on, else the exit status. */
static int parseArgs(int argc, char **argv, char **json_path) {
  static struct option longopts[] = {
      {"nthreads", required_argument, 0, 't'},      {"ngpus", required_argument, 0, 'g'},
      {"minbytes", required_argument, 0, 'b'},      {"maxbytes", required_argument, 0, 'e'},
      {"stepbytes", required_argument, 0, 'i'},     {"stepfactor", required_argument, 0, 'f'},
      {"iters", required_argument, 0, 'n'},         {"agg_iters", required_argument, 0, 'm'},
      {"warmup_iters", required_argument, 0, 'w'},  {"run_cycles", required_argument, 0, 'N'},
      {"parallel_init", required_argument, 0, 'p'}, {"check", required_argument, 0, 'c'},
      {"op", required_argument, 0, 'o'},            {"datatype", required_argument, 0, 'd'},
      {"root", required_argument, 0, 'r'},          {"blocking", required_argument, 0, 'z'},
      {"stream_null", required_argument, 0, 'y'},   {"timeout", required_argument, 0, 'T'},
      {"cudagraph", required_argument, 0, 'G'},     {"report_cputime", required_argument, 0, 'C'},
      {"report_timestamps", required_argument, 0, 'S'}, {"output_file", required_argument, 0, 'J'},
      {"average", required_argument, 0, 'a'},       {"local_register", required_argument, 0, 'R'},
      {"memory", required_argument, 0, 'M'},        {"collective", required_argument, 0, 1000},
      {"help", no_argument, 0, 'h'},                {0, 0, 0, 0}};
  double parsed;
  int longindex;
  for (;;) {
    int c = getopt_long(argc, argv, "t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:", longopts, &longindex);
    if (c == -1) break;
    switch (c) {
    case 't': nThreads = (int)strtol(optarg, NULL, 0); break;
    case 'g': nGpus = (int)strtol(optarg, NULL, 0); break;
    case 'b':
      if ((parsed = parsesize(optarg)) < 0) { fprintf(stderr, "invalid size specified for 'minbytes'\n"); return 255; }
      minBytes = (size_t)parsed; break;
    case 'e':
      if ((parsed = parsesize(optarg)) < 0) { fprintf(stderr, "invalid size specified for 'maxbytes'\n"); return 255; }
      maxBytes = (size_t)parsed; break;
    case 'i':
      if ((parsed = parsesize(optarg)) < 0) { fprintf(stderr, "invalid size specified for 'stepBytes'\n"); return 255; }
      stepBytes = (size_t)parsed; break;
    case 'f': stepFactor = (size_t)strtol(optarg, NULL, 0); break;
    case 'n': iters = (int)strtol(optarg, NULL, 0); break;
    case 'm': agg_iters = (int)strtol(optarg, NULL, 0); break;
    case 'w': warmup_iters = (int)strtol(optarg, NULL, 0); break;
    case 'N': run_cycles = (int)strtol(optarg, NULL, 0); break;
    case 'c': datacheck = (int)strtol(optarg, NULL, 0); break;
    case 'p': parallel_init = (int)strtol(optarg, NULL, 0); break;
    case 'o': {
      int found = -2;
      for (int o = 0; o < O_NUM; o++) if (strcmp(optarg, op_names[o]) == 0) found = o;
      if (strcmp(optarg, "all") == 0) found = -1;
      if (found == -2) {
        if (strcmp(optarg, "mulsum") == 0) { fprintf(stderr, "gpuaccept-mpi-standin: op mulsum (ncclRedOpCreatePreMulSum) is not supported\n"); return 255; }
        printf("invalid op %s, defaulting to %s .. \n", optarg, op_names[O_SUM]);
        found = O_SUM;
      }
      op_index = found;
      break;
    }
    case 'd': {
      int found = -2;
      for (int t = 0; t < ntypes; t++) if (strcmp(optarg, types[t].name) == 0) found = t;
      if (strcmp(optarg, "all") == 0) found = -1;
      if (found == -2) {
        if (!strcmp(optarg, "half") || !strcmp(optarg, "bfloat16") || !strcmp(optarg, "f8e4m3") || !strcmp(optarg, "f8e5m2")) {
          fprintf(stderr, "gpuaccept-mpi-standin: datatype %s has no MPI equivalent and is not supported\n", optarg);
          return 255;
        }
        printf("invalid type %s, defaulting to %s .. \n", optarg, "float");
        for (int t = 0; t < ntypes; t++) if (strcmp(types[t].name, "float") == 0) found = t;
      }
      type_index = found;
      break;
    }
    case 'r': ncclroot = (int)strtol(optarg, NULL, 0); break;
    case 'z': blocking_coll = (int)strtol(optarg, NULL, 0); break;
    case 'y': case 'T': case 'R': case 'x': case 'D': case 'V': case 'M': break; /* accepted, meaningless without GPUs */
    case 'G': cudaGraphLaunches = (int)strtol(optarg, NULL, 0); break; /* accepted and echoed; no graphs here */
    case 'C': {
      int cc = collFromName(optarg);
      if (cc >= 0) { coll = (enum coll)cc; program_name = NULL; }
      else report_cputime = (int)strtol(optarg, NULL, 0);
      break;
    }
    case 1000: {
      int cc = collFromName(optarg);
      if (cc < 0) { fprintf(stderr, "unknown collective '%s'\n", optarg); return 255; }
      coll = (enum coll)cc; program_name = NULL;
      break;
    }
    case 'J': *json_path = strdup(optarg); break;
    case 'S': report_timestamps = (int)strtol(optarg, NULL, 0); break;
    case 'a': average = (int)strtol(optarg, NULL, 0); break;
    case 'h':
    default:
      if (c != 'h') printf("invalid option '%c'\n", c);
      usage(basename(argv[0]));
      return 0;
    }
  }
  if (minBytes > maxBytes) {
    fprintf(stderr, "invalid sizes for 'minbytes' and 'maxbytes': %llu > %llu\n", (unsigned long long)minBytes, (unsigned long long)maxBytes);
    return 255;
  }
  if (stepFactor <= 1 && stepBytes == 0) {
    fprintf(stderr, "gpuaccept-mpi-standin: stepbytes 0 with stepfactor %zu would never end\n", stepFactor);
    return 255;
  }
  return -2;
}

/* ---------------------------------------------------------------- busy marking */

/* On a simulated node the nvidia-smi stand-in answers its telemetry loop with the genuine load capture while a
 * stand-in workload runs: each rank writes STATE/busy/<pid> holding its pid (rename()d into place, so a reader
 * never sees half of it) and removes it at exit; a rank killed before that leaves a file whose pid is gone, which
 * the reader drops. STATE is $GPUACCEPT_STANDIN_STATE, else /srv/gpuaccept-standin where it exists (a lab host's
 * own /srv: mpirun starts ranks over ssh without the stand-in wrappers' environment). Elsewhere: nothing. */
static char busy_path[4096];

static void busyUnmark(void) {
  if (busy_path[0]) unlink(busy_path);
}

static void busyMark(void) {
  const char *dir = getenv("GPUACCEPT_STANDIN_STATE");
  struct stat st;
  if (!dir || !*dir) {
    dir = "/srv/gpuaccept-standin";
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return;
  }
  char bd[4096], tmp[4096];
  long pid = (long)getpid();
  if (snprintf(bd, sizeof bd, "%s/busy", dir) >= (int)sizeof bd) return;
  mkdir(bd, 0755);
  if (snprintf(tmp, sizeof tmp, "%s/.%ld.tmp", bd, pid) >= (int)sizeof tmp) return;
  if (snprintf(busy_path, sizeof busy_path, "%s/%ld", bd, pid) >= (int)sizeof busy_path) {
    busy_path[0] = 0;
    return;
  }
  FILE *f = fopen(tmp, "w");
  if (!f) {
    busy_path[0] = 0;
    return;
  }
  int ok = fprintf(f, "%ld\n", pid) > 0;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, busy_path) != 0) {
    unlink(tmp);
    busy_path[0] = 0;
    return;
  }
  atexit(busyUnmark);
}

int main(int argc, char **argv) {
  setlinebuf(stdout);
  init_types();
  for (int t = 0; t < ntypes; t++) if (strcmp(types[t].name, "float") == 0) type_index = t;

  char *argv0 = strdup(argv[0]);
  const char *base = basename(argv0);
  int c0 = collFromName(base);
  if (c0 >= 0) coll = (enum coll)c0;
  program_name = base;

  char *json_path = NULL;
  int st = parseArgs(argc, argv, &json_path);
  if (st != -2) return st;
  static char pname[64];
  if (!program_name || collFromName(program_name) < 0) {
    snprintf(pname, sizeof pname, "%s_perf", coll_names[coll]);
    program_name = pname;
  }

  /* NCCL_ALGO=Ring (what DESIGN.md has 2-node runs force) asks Open MPI's tuned component for its ring allreduce,
   * unless the caller already chose an algorithm. Open MPI's default choice for 3 ranks is far from a ring. */
  const char *algo = getenv("NCCL_ALGO");
  if (algo && strcasecmp(algo, "ring") == 0 && !getenv("OMPI_MCA_coll_tuned_allreduce_algorithm")) {
    setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 1);
    setenv("OMPI_MCA_coll_tuned_allreduce_algorithm", "4", 1); /* 4 = ring */
  }
  ncclDebugSetup();
  busyMark();
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &proc);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  is_main = proc == 0;
  jsonOutputInit(json_path, argc, argv);

  gethostname(hostname, sizeof hostname);
  hostname[sizeof hostname - 1] = 0;
  /* The lab's Kubernetes runs its nodes on one machine, and a hostNetwork
     pod has its node's (here: that machine's) host name: a pod names its
     node in this file, which no real system has. */
  FILE *hf = fopen("/etc/gpuaccept-standin-hostname", "r");
  if (hf) {
    char own[256] = {0};
    if (fgets(own, sizeof own, hf)) {
      own[strcspn(own, "\r\n")] = 0;
      if (own[0]) snprintf(hostname, sizeof hostname, "%s", own);
    }
    fclose(hf);
  }
  char *dot = strchr(hostname, '.'); /* nccl-tests' (and NCCL's) getHostName cuts at the first '.' */
  if (dot) *dot = 0;

  /* localRank: processes before us on the same host (nccl-tests uses a host hash). */
  char *hosts = malloc((size_t)nprocs * 1024);
  MPI_Allgather(hostname, 1024, MPI_CHAR, hosts, 1024, MPI_CHAR, MPI_COMM_WORLD);
  for (int p = 0; p < proc; p++) if (strcmp(hosts + (size_t)p * 1024, hostname) == 0) localRank++;
  free(hosts);

  /* ---- device report, as writeDeviceReport */
  PRINT("# nccl-tests version %s nccl-headers=%d nccl-library=%d\n", NCCL_TESTS_VERSION, 0, 0);
  PRINT("# Collective test starting: %s\n", program_name);
  PRINT("# nThread %d nGpus %d minBytes %ld maxBytes %ld step: %ld(%s) warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d unalign: %d\n",
        nThreads, nGpus, (long)minBytes, (long)maxBytes, (long)((stepFactor > 1) ? stepFactor : stepBytes),
        (stepFactor > 1) ? "factor" : "bytes", warmup_iters, iters, agg_iters, datacheck, cudaGraphLaunches, 0);
  if (blocking_coll) PRINT("# Blocking Enabled: wait for completion and barrier after each collective \n");
  if (parallel_init) PRINT("# Parallel Init Enabled: threads call into NcclInitRank concurrently \n");
  PRINT("#\n");
  if (jfp) {
    jsonKey("config");
    jsonStartObject();
    jsonKey("nthreads"); jsonInt(nThreads);
    jsonKey("ngpus"); jsonInt(nGpus);
    jsonKey("minimum_bytes"); jsonSize(minBytes);
    jsonKey("maximum_bytes"); jsonSize(maxBytes);
    if (stepFactor > 1) { jsonKey("step_factor"); jsonInt((long long)stepFactor); }
    else { jsonKey("step_bytes"); jsonSize(stepBytes); }
    jsonKey("warmup_iters"); jsonInt(warmup_iters);
    jsonKey("iterations"); jsonInt(iters);
    jsonKey("aggregated_iterations"); jsonInt(agg_iters);
    jsonKey("validation"); jsonInt(datacheck);
    jsonKey("graph"); jsonInt(cudaGraphLaunches);
    jsonKey("blocking_collectives"); jsonBool(blocking_coll);
    jsonKey("parallel_init"); jsonBool(parallel_init);
  }
  PRINT("# Using devices\n");

  /* -g N simulated devices on one thread per process; -t other than 1 is refused with nccl-tests' message (and
   * what the stand-in does instead). */
  int bad = 0;
  if (nGpus < 1 || nThreads != 1) {
    fprintf(stderr, "Invalid number of GPUs: %d requested but only %d were found.\n", nThreads * nGpus, nGpus < 1 ? 0 : nGpus);
    fprintf(stderr, "Please check the number of processes and GPUs per process.\n");
    fprintf(stderr, "gpuaccept-mpi-standin: -t must be 1 (one thread per process); -g N >= 1 simulates N devices in it\n");
    bad = 1;
  }
  int anybad = 0;
  MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (anybad) {
    if (jfp) { jsonFinishObject(); jsonOutputFinalize(); }
    MPI_Finalize();
    return 1;
  }
  nranks = nprocs * nGpus;
  /* nccl-tests' writeDeviceReport: one line per local rank, rank proc*nGpus+i on device localRank*nGpus+i, all
   * in one MAX_LINE block per process ("...\n" when it overflows), gathered to rank 0 in process order. */
  char line[MAX_LINE];
  int len = 0;
  for (int g = 0; g < nGpus && len < MAX_LINE; g++)
    len += snprintf(line + len, MAX_LINE - (size_t)len, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n",
                    proc * nGpus + g, 0, (int)getpid(), hostname, localRank * nGpus + g, 0, 0, 0, STANDIN_DEVICE_NAME);
  if (len >= MAX_LINE) strcpy(line + MAX_LINE - 5, "...\n");
  char *lines = is_main ? malloc((size_t)nprocs * MAX_LINE) : NULL;
  MPI_Gather(line, MAX_LINE, MPI_BYTE, lines, MAX_LINE, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (is_main) {
    if (jfp) { jsonKey("devices"); jsonStartList(); }
    for (int p = 0; p < nprocs; p++) {
      const char *l = lines + (size_t)p * MAX_LINE;
      PRINT("%s", l);
      if (jfp) { /* as nccl-tests' parseRankInfo: the first line of each process's block only */
        int rk = 0, grp = 0, pid = 0, dev = 0;
        char hn[1024] = "", hex[128] = "", info[1024] = "";
        sscanf(l, "#  Rank %d Group %d Pid %d on %1023s device %d [%127[^]]] %1023[^\n]", &rk, &grp, &pid, hn, &dev, hex, info);
        jsonStartObject();
        jsonKey("rank"); jsonInt(rk);
        jsonKey("group"); jsonInt(grp);
        jsonKey("pid"); jsonInt(pid);
        jsonKey("hostname"); jsonStr(hn);
        jsonKey("device"); jsonInt(dev);
        jsonKey("device_hex"); jsonStr(hex);
        jsonKey("device_info"); jsonStr(info);
        jsonFinishObject();
      }
    }
    if (jfp) jsonFinishList();
    free(lines);
  }
  if (jfp) jsonFinishObject(); /* config */

  /* ---- NCCL INFO lines, where NCCL would print them: during communicator init, after the device report.
   * tuning.cc (ncclTopoTuneModel, 2.18): INFO(NCCL_ENV, "NCCL_ALGO set by environment to %s", algoStr), once per
   * communicator, i.e. per rank, on its device; not for a single-rank communicator (it returns before). */
  MPI_Barrier(MPI_COMM_WORLD); /* after rank 0's device lines */
  if ((ncclInfoMask & DBG_ENV) && algo && nranks > 1)
    for (int g = 0; g < nGpus; g++) ncclInfo(localRank * nGpus + g, "NCCL_ALGO set by environment to %s", algo);
  /* TUNING lines only where the stand-in knows the algorithm is a ring over all ranks: all_reduce, one rank per
   * process, NCCL_ALGO=Ring, and Open MPI confirming its ring (see ompiRingAllreduce). */
  tuningLines = (ncclInfoMask & DBG_TUNING) && coll == C_ALL_REDUCE && nGpus == 1 && nprocs > 1 && algo &&
                strcasecmp(algo, "ring") == 0 && ompiRingAllreduce();
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);

  /* ---- buffers: nccl-tests allocates maxBytes for send and recv, recvBytes for expected, per GPU */
  struct bench b;
  memset(&b, 0, sizeof b);
  b.maxbytes = maxBytes;
  size_t alloc = maxBytes + 64;
  size_t expBytes = maxBytes + 64;
  b.sendbuf = calloc((size_t)nGpus, sizeof(char *));
  b.recvbuf = calloc((size_t)nGpus, sizeof(char *));
  b.expected = calloc((size_t)nGpus, sizeof(char *));
  b.in = calloc((size_t)nGpus, sizeof(char *));
  b.out = calloc((size_t)nGpus, sizeof(char *));
  int oom = !b.sendbuf || !b.recvbuf || !b.expected || !b.in || !b.out;
  for (int g = 0; g < nGpus && !oom; g++) {
    oom = posix_memalign((void **)&b.sendbuf[g], 4096, alloc) || posix_memalign((void **)&b.recvbuf[g], 4096, alloc) ||
          posix_memalign((void **)&b.expected[g], 4096, expBytes);
    if (!oom) { memset(b.sendbuf[g], 0, alloc); memset(b.recvbuf[g], 0, alloc); memset(b.expected[g], 0, expBytes); }
  }
  /* Across local ranks: sendrecv in place keeps the block in flight; alltoall packs per destination process. */
  if (!oom && nGpus > 1 && coll == C_SENDRECV) oom = posix_memalign((void **)&b.scratch, 4096, alloc);
  if (!oom && nGpus > 1 && coll == C_ALLTOALL) {
    oom = posix_memalign((void **)&b.stage, 4096, (size_t)nGpus * alloc);
    if (!oom && nprocs > 1) oom = posix_memalign((void **)&b.stage2, 4096, (size_t)nGpus * alloc);
  }
  if (oom) {
    fprintf(stderr, "%s: out of memory allocating %d x %zu bytes\n", hostname, nGpus, alloc);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  fflush(stdout);
  const char *timeStr = report_cputime ? "cputime" : "time";
  const char *tsLbl = report_timestamps ? "timestamp" : "";
  int tsPad = report_timestamps ? 19 : 0;
  const char *tsFmt = report_timestamps ? TIME_STRING_FORMAT : "";
  PRINT("#\n");
  PRINT("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "");
  PRINT("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count", "type", "redop", "root",
        timeStr, "algbw", "busbw", "#wrong", timeStr, "algbw", "busbw", "#wrong", tsPad, tsLbl);
  PRINT("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)", "", "", "",
        "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", tsPad, tsFmt);
  if (jfp) { jsonKey("results"); jsonStartList(); }

  runTests(&b);

  int errors = b.errors;
  MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  double bw = b.bw_count ? b.bw / b.bw_count : 0;

  const char *envstr = getenv("NCCL_TESTS_MIN_BW");
  const double check_avg_bw = envstr ? atof(envstr) : -1;
  if (jfp) jsonFinishList();
  PRINT("# %-20s : %d %s\n", "Out of bounds values", errors, errors ? "FAILED" : "OK");
  PRINT("# %-20s : %g %s\n", "Avg bus bandwidth", bw, check_avg_bw == -1 ? "" : (bw < check_avg_bw * (0.9) ? "FAILED" : "OK"));
  PRINT("#\n");
  PRINT("# Collective test concluded: %s\n", program_name);
  if (jfp) {
    jsonKey("out_of_bounds");
    jsonStartObject();
    jsonKey("count"); jsonInt(errors);
    jsonKey("okay"); jsonBool(errors == 0);
    jsonFinishObject();
    jsonKey("average_bus_bandwidth");
    jsonStartObject();
    jsonKey("bandwidth"); jsonDouble(bw);
    jsonKey("okay"); if (check_avg_bw == -1) jsonStr("unchecked"); else jsonBool(bw >= check_avg_bw * (0.9));
    jsonFinishObject();
  }
  PRINT("#\n"); /* finalizeFooter */

  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();

  PRINT("\n"); /* writeErrors: no NCCL error */
  if (jfp) { jsonKey("errors"); jsonStartList(); jsonStr(""); jsonFinishList(); }
  jsonOutputFinalize();

  for (int g = 0; g < nGpus; g++) { free(b.sendbuf[g]); free(b.recvbuf[g]); free(b.expected[g]); }
  free(b.sendbuf);
  free(b.recvbuf);
  free(b.expected);
  free(b.scratch);
  free(b.stage);
  free(b.stage2);
  free(b.in);
  free(b.out);
  if (errors || bw < check_avg_bw * (0.9)) return 5; /* testNumResults */
  return 0;
}
