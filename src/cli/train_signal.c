/* train_signal.c — the stop signals of `gptc train` (cli/train_log.h). */
#include "cli/train_log.h"

#include <signal.h>
#include <string.h>

/* ---- graceful stop: the first SIGINT, SIGTERM or SIGUSR1 (what mpirun forwards to every rank)
 * finishes the step, writes a checkpoint and exits 0; a second ends the process at once. */
static volatile sig_atomic_t g_stop_signal;

static void on_stop_signal(int sig) {
    if (g_stop_signal) {
        signal(sig, SIG_DFL); /* the second: die of it now (a checkpoint being written stays a temp folder) */
        raise(sig);
        return;
    }
    g_stop_signal = sig;
}

void train_catch_stop_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    /* a file-size limit makes write() fail with EFBIG, which the checkpoint writer reports, instead of
     * killing the process mid-save */
    signal(SIGXFSZ, SIG_IGN);
}

const char *train_signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGUSR1 ? "SIGUSR1" : "a signal";
}

int train_stop_signal(void) { return g_stop_signal; }
