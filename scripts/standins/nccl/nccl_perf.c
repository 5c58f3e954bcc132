//go:build ignore

// (The line above keeps the Go tool from treating this C file as a cgo source of package nccl.)

/*
 * nccl_perf.c - gpuaccept's MPI stand-in for NVIDIA nccl-tests (all_reduce_perf and friends).
 *
 * NOT nccl-tests and NOT NCCL: there are no GPUs here. Each rank runs a REAL MPI collective
 * (MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Alltoall, MPI_Sendrecv) on host
 * memory over whatever links MPI uses (in the lab: tc-shaped veth links), times it exactly the
 * way nccl-tests does (iters x agg_iters back to back, average over ranks), computes algbw/busbw
 * with nccl-tests' formulas, and prints the nccl-tests 2.18 text layout with the same printf
 * formats. The device name on every rank line is "gpuaccept-mpi-standin", the only field of the
 * real format that can say what this is. See README.md in this directory.
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

static int rank, nranks, is_main;
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
  if (!path || rank != 0) return;
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

/* ---------------------------------------------------------------- the benchmark */

struct bench {
  char *sendbuf, *recvbuf, *expected;
  size_t maxbytes;
  size_t nbytes, sendBytes, expectedBytes, sendInplaceOffset, recvInplaceOffset;
  const struct dtype *t;
  int op;
  int reportErrors;
  int errors;
  double bw;
  int bw_count;
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

static void runColl(struct bench *b, int in_place, int iter) {
  size_t count = b->nbytes / b->t->size;
  size_t totalnbytes = b->sendBytes > b->expectedBytes ? b->sendBytes : b->expectedBytes;
  size_t steps = totalnbytes ? b->maxbytes / totalnbytes : 1;
  size_t shift = totalnbytes * ((size_t)iter % steps); /* rotate through the buffer, as nccl-tests does */
  char *send = b->sendbuf + shift, *recv = b->recvbuf + shift;
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
    int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
    if (in_place) MPI_Sendrecv_replace(recv, c, dt, to, 0, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else MPI_Sendrecv(send, c, dt, to, 0, recv, c, dt, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    break;
  }
  default: break;
  }
  if (blocking_coll) MPI_Barrier(MPI_COMM_WORLD);
}

/* Inputs and expected output for this rank, as each nccl-tests InitData does. Returns where the result lands. */
static char *initData(struct bench *b, int rep, int in_place) {
  const struct dtype *t = b->t;
  size_t es = t->size;
  size_t sendcount = b->sendBytes / es, recvcount = b->expectedBytes / es;
  size_t param = b->nbytes / es;
  int op = b->op;
  memset(b->recvbuf, 0, b->expectedBytes > b->sendBytes ? b->expectedBytes : b->sendBytes);
  char *result = b->recvbuf;
  switch (coll) {
  case C_ALL_REDUCE:
    fillInput(in_place ? b->recvbuf : b->sendbuf, sendcount, t, op, rank, rep, 0);
    for (size_t i = 0; i < recvcount; i++) putVal(b->expected, i, t, reducedVal(op, i, rep, nranks));
    if (op == O_AVG) avgDivide(b->expected, recvcount, t, nranks);
    break;
  case C_REDUCE_SCATTER:
    fillInput(in_place ? b->recvbuf : b->sendbuf, sendcount, t, op, rank, rep, 0);
    for (size_t i = 0; i < recvcount; i++) putVal(b->expected, i, t, reducedVal(op, (size_t)rank * recvcount + i, rep, nranks));
    if (op == O_AVG) avgDivide(b->expected, recvcount, t, nranks);
    break;
  case C_ALL_GATHER:
    fillInput(in_place ? b->recvbuf + (size_t)rank * b->sendBytes : b->sendbuf, sendcount, t, op, rank, rep, 0);
    for (int r = 0; r < nranks; r++) fillInput(b->expected + (size_t)r * b->sendBytes, sendcount, t, op, r, rep, 0);
    break;
  case C_ALLTOALL:
    /* rank r sends block j (elements j*param..) to rank j; we receive block `rank` of every r. */
    fillInput(in_place ? b->recvbuf : b->sendbuf, sendcount, t, op, rank, rep, 0);
    for (int r = 0; r < nranks; r++)
      for (size_t i = 0; i < param; i++) putVal(b->expected, (size_t)r * param + i, t, inputVal(op, r, (size_t)rank * param + i, rep, nranks));
    break;
  case C_SENDRECV:
    fillInput(in_place ? b->recvbuf : b->sendbuf, sendcount, t, op, rank, rep, 0);
    fillInput(b->expected, recvcount, t, op, (rank - 1 + nranks) % nranks, rep, 0);
    break;
  default: break;
  }
  return result;
}

static int64_t checkData(struct bench *b, const char *result) {
  size_t es = b->t->size, n = b->expectedBytes / es;
  int64_t wrong = 0;
  for (size_t i = 0; i < n; i++)
    if (memcmp(result + i * es, b->expected + i * es, es) != 0) wrong++;
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

  switch (average) { /* 0=rank0 (each rank keeps its own; rank 0 prints), 1=avg, 2=min, 3=max */
  case 1: MPI_Allreduce(MPI_IN_PLACE, &deltaSec, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); deltaSec /= nranks; break;
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
    char *result = initData(b, rep, in_place);
    runColl(b, in_place, 0);
    int64_t local = checkData(b, result);
    if (reportErrors && local) b->errors++;
    long long w = local;
    MPI_Allreduce(MPI_IN_PLACE, &w, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    wrongElts = w;
    if (wrongElts) break;
  }

  double timeUsec = (report_cputime ? cputimeSec : deltaSec) * 1.0E6;
  writeBenchmarkLineBody(timeUsec, algBw, busBw, reportErrors, wrongElts, in_place == 0);
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
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  is_main = rank == 0;
  jsonOutputInit(json_path, argc, argv);

  char hostname[1024];
  gethostname(hostname, sizeof hostname);
  hostname[sizeof hostname - 1] = 0;
  char *dot = strchr(hostname, '.'); /* nccl-tests' getHostName cuts at the first '.' */
  if (dot) *dot = 0;

  /* localRank: ranks before us on the same host (nccl-tests uses a host hash). */
  char *hosts = malloc((size_t)nranks * 1024);
  MPI_Allgather(hostname, 1024, MPI_CHAR, hosts, 1024, MPI_CHAR, MPI_COMM_WORLD);
  int localRank = 0;
  for (int p = 0; p < rank; p++) if (strcmp(hosts + (size_t)p * 1024, hostname) == 0) localRank++;
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

  /* One simulated device per process: -g/-t asking for more is what nccl-tests answers when a host has too few GPUs. */
  int bad = 0;
  if (nGpus < 1 || nThreads < 1 || nGpus * nThreads > 1) {
    fprintf(stderr, "Invalid number of GPUs: %d requested but only %d were found.\n", nThreads * nGpus, 1);
    fprintf(stderr, "Please check the number of processes and GPUs per process.\n");
    bad = 1;
  }
  char line[MAX_LINE];
  snprintf(line, sizeof line, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n",
           rank, 0, (int)getpid(), hostname, localRank, 0, 0, 0, STANDIN_DEVICE_NAME);
  int anybad = 0;
  MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (anybad) {
    if (jfp) { jsonFinishObject(); jsonOutputFinalize(); }
    MPI_Finalize();
    return 1;
  }
  char *lines = is_main ? malloc((size_t)nranks * MAX_LINE) : NULL;
  MPI_Gather(line, MAX_LINE, MPI_BYTE, lines, MAX_LINE, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (is_main) {
    if (jfp) { jsonKey("devices"); jsonStartList(); }
    for (int p = 0; p < nranks; p++) {
      const char *l = lines + (size_t)p * MAX_LINE;
      PRINT("%s", l);
      if (jfp) {
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

  /* ---- buffers: nccl-tests allocates maxBytes for send and recv, recvBytes for expected */
  struct bench b;
  memset(&b, 0, sizeof b);
  b.maxbytes = maxBytes;
  size_t alloc = maxBytes + 64;
  size_t expBytes = maxBytes + 64;
  if (posix_memalign((void **)&b.sendbuf, 4096, alloc) || posix_memalign((void **)&b.recvbuf, 4096, alloc) ||
      posix_memalign((void **)&b.expected, 4096, expBytes)) {
    fprintf(stderr, "%s: out of memory allocating %zu bytes\n", hostname, alloc);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(b.sendbuf, 0, alloc);
  memset(b.recvbuf, 0, alloc);
  memset(b.expected, 0, expBytes);

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

  free(b.sendbuf);
  free(b.recvbuf);
  free(b.expected);
  if (errors || bw < check_avg_bw * (0.9)) return 5; /* testNumResults */
  return 0;
}
