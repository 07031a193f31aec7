/* plugin.h — custom operators from shared libraries (the ABI: include/gptc_op_plugin.h). Any entry of
 * the kernel table can be replaced, GEMM and flash attention included. Loading a plugin opens it,
 * checks its ABI version, its operator names and its shape contract against the run, validates every
 * operator the run will call against the reference kernel on probe inputs of the run's shapes
 * (plugin_probe.c), and builds a kernel table: a copy of the base table with the accepted operators
 * overlaid and named for the profiler ("gelu_fwd[plugin:NAME]", kernels.h labels). The base table and
 * the reference stay as they are. */
#ifndef GPTC_KERNELS_PLUGIN_H
#define GPTC_KERNELS_PLUGIN_H

#include "gptc.h"
#include "gptc_op_plugin.h"
#include "kernels/kernels.h"

#include <stdbool.h>

/* The run an operator is checked against: its shapes and the paths its training step takes. */
typedef struct gptc_op_run {
    int B, T, C, NH;        /* micro-batch, sequence, channels, heads */
    gptc_gelu_kind gelu;    /* the MLP's form: the table's gelu_fwd/bwd are the tanh form's */
    bool fuse;              /* fused residual+LayerNorm (the trainer's default; false: --no-fusion) */
    bool naive_attention;   /* --naive-attention: attention_fwd/bwd run (else the flash attention) */
    bool decode;            /* the run samples: decoding calls layernorm_fwd on 1 row and gelu_fwd on 4C */
    bool quiet;             /* no warnings (ranks other than 0) */
    bool bf16;              /* --dtype bf16: gemm_bf16 and flash_*_bf16 run (else gemm and flash_*) */
    bool dropout;           /* --dropout > 0 (or attention dropout): the dropout entry runs */
} gptc_op_run;

/* Tolerance and probe of each replaceable operator. The error of an output is
 * max_i |plugin_i - ref_i| / max(1, max_i |ref_i|) (NaN counts as infinite); an operator passes when
 * every output's error is at most its tolerance. */
typedef struct gptc_op_info {
    const char *name;       /* "gelu_fwd": its field of gptc_kernels */
    double tol;
    const char *runs_when;  /* which runs call it ("only with --no-fusion"), for messages */
    size_t slot;            /* GPTC_KERNEL_SLOT of its entry */
    unsigned since;         /* the ABI version that made it replaceable */
} gptc_op_info;
extern const gptc_op_info gptc_op_infos[];
extern const int gptc_op_ninfos;

typedef struct gptc_op_plugins gptc_op_plugins;

/* Loads the libraries of `paths` (separated by ',' or ':'; NULL or "" loads none) for a run of `run`'s
 * shapes on top of table base (kept as it is). An operator the run does not call is skipped with a
 * warning; every other one is checked and validated. On success *out is the set (free it with
 * gptc_op_plugins_free); on any refusal, GPTC_ERR_ARG (GPTC_ERR_NOMEM) with one line that names the
 * library, the operator and why, and *out is NULL. */
gptc_status gptc_op_plugins_load(const char *paths, const gptc_kernels *base, const gptc_op_run *run,
                                 gptc_op_plugins **out);
/* The same for plugins linked into the program (n descriptions, as gptc_op_plugin_entry would return
 * them): the same checks, probes and labels; messages name a plugin "NAME (linked in)". For programs
 * that embed libgptc with their own kernels, and for tests. */
gptc_status gptc_op_plugins_link(const gptc_op_plugin *const *plugins, int n, const gptc_kernels *base,
                                 const gptc_op_run *run, gptc_op_plugins **out);
/* The base table with the accepted operators (valid until gptc_op_plugins_free). */
const gptc_kernels *gptc_op_plugins_table(const gptc_op_plugins *s);
/* Accepted operators, one line: "gelu_fwd = example_gelu:plain_tanh (error 0, tolerance 1e-05), ..."
 * ("" when none). */
const char *gptc_op_plugins_summary(const gptc_op_plugins *s);
/* The summary of the set loaded last and not yet freed ("" when none), for the run header. */
const char *gptc_op_plugins_active(void);
/* Frees the table and the set. The libraries stay loaded (and the profiler's span names valid) until
 * the process ends: spans recorded during the run refer to them. */
void gptc_op_plugins_free(gptc_op_plugins *s);

/* Runs fn, an implementation of operator op, and the reference on probe inputs of run's shapes
 * (ignoring which paths the run takes): *err the largest error over the outputs, *tol the operator's
 * tolerance, *what the output with that error. GPTC_ERR_ARG for an unknown op; GPTC_ERR_STATE when fn
 * wrote past the end of an output. Tests run the built-in kernels through it. */
gptc_status gptc_op_probe(const char *op, gptc_op_fn fn, const gptc_op_run *run, const gptc_op_contract *contract,
                          double *err, double *tol, const char **what);

#endif
