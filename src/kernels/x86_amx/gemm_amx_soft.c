/* gemm_amx_soft.c — gemm_amx.c built again with its tile instructions carried out in C (amx_soft.h):
 * gptc_amx_soft_gemm_bf16, for the tests on CPUs without AMX. Never in the kernel table. */
#define GPTC_AMX_SOFT 1
#include "kernels/x86_amx/gemm_amx.c"
