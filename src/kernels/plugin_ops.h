/* plugin_ops.h — private to src/kernels: the index of each replaceable operator (the order of
 * gptc_op_infos), when a run calls it, and the probe that validates one implementation
 * (plugin_probe.c) for the loader (plugin.c). */
#ifndef GPTC_KERNELS_PLUGIN_OPS_H
#define GPTC_KERNELS_PLUGIN_OPS_H

#include "kernels/plugin.h"

enum {
    /* ABI version 1 */
    OP_GELU_FWD, OP_GELU_BWD, OP_LN_FWD, OP_LN_BWD, OP_RES_LN_FWD, OP_LN_BWD_RES, OP_ATT_FWD, OP_ATT_BWD,
    /* ABI version 2: every other entry of the table */
    OP_GEMM, OP_GEMM_BF16, OP_FLASH_FWD, OP_FLASH_BWD, OP_FLASH_FWD_BF16, OP_FLASH_BWD_BF16,
    OP_GELU_ERF_FWD, OP_GELU_ERF_BWD, OP_GELU_SIG_FWD, OP_GELU_SIG_BWD,
    OP_ENC_FWD, OP_ENC_BWD, OP_BIAS_FWD, OP_BIAS_BWD, OP_ATT_DECODE, OP_RES_FWD, OP_RES_BWD,
    OP_XENT_FWD, OP_XENT_BWD, OP_XENT_FUSED, OP_ADAMW,
    OP_QKV_TO_HEADS, OP_HEADS_TO_QKV_GRAD, OP_HEADS_TO_ROWS, OP_ROWS_TO_HEADS, OP_DROPOUT, OP_ZERO, OP_GRAD_SUMSQ,
    GPTC_OP_COUNT
};

/* Whether the run calls op (its training step, evaluation, sampling or optimizer update). */
bool gptc_op_runs(int op, const gptc_op_run *r);

/* Runs fn, an implementation of operator op, and the reference on probe inputs of run's shapes: *err the
 * largest error over the outputs, *what the output with that error. GPTC_ERR_STATE when fn wrote past
 * the end of an output, GPTC_ERR_NOMEM when the probe inputs do not fit. */
gptc_status gptc_op_probe_index(int op, gptc_op_fn fn, const gptc_op_run *r, const gptc_op_contract *c, double *err,
                                const char **what);

#endif
