/* test_mpi_faults.c — runs tests/mpi/kill_rank.sh: a 2-rank MPI job whose rank 1 is SIGKILLed (or,
 * with a watchdog, SIGSTOPped) must end non-zero within 30 s naming the failure, never hang; with
 * gptc built with MPI, gptc train killed or stopped on rank 1 after its first checkpoint ends the
 * same way (a stopped rank through --comm-timeout) and leaves a newest checkpoint that loads. Where
 * Open MPI is not installed the script says SKIP and this test only reports it. */
#include "test.h"

#include <stdlib.h>
#include <string.h>

TEST(mpi_rank_killed_ends_the_job) {
    if (getenv("GPTC_TEST_RUNNER")) { /* make test-aarch64 */
        printf("    SKIP: under emulation gptc is built with MPI=0, and the script's MPI programs are the host's\n");
        return;
    }
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "GPTC_BIN='%s' DATA='%s' KILL_BOUND_S=30 sh tests/mpi/kill_rank.sh", test_gptc_bin(),
             test_shakespeare_data());
    int rc = test_run(cmd, &out);
    if (rc == 0 && out && strncmp(out, "SKIP:", 5) == 0) {
        printf("    %s", out);
        free(out);
        return;
    }
    CHECK_MSG(rc == 0, "kill_rank.sh exited %d:\n%s", rc, out ? out : "");
    CHECK_MSG(out && strstr(out, "PASS: sigkill"), "no PASS for the SIGKILLed rank:\n%s", out ? out : "");
    CHECK_MSG(out && strstr(out, "PASS: watchdog:"), "no PASS for the SIGSTOPped rank:\n%s", out ? out : "");
    CHECK_MSG(out && strstr(out, "PASS: watchdog-thread:"), "no PASS for the thread watchdog:\n%s", out ? out : "");
    /* the gptc case runs once gptc is built with MPI; until then the script says why not */
    CHECK_MSG(out && ((strstr(out, "PASS: gptc-kill") && strstr(out, "PASS: gptc-stop")) || strstr(out, "not built with MPI")), "gptc case neither passed nor explained:\n%s",
              out ? out : "");
    if (out) fputs(out, stdout);
    free(out);
}
