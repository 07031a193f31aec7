/* test_examples.c — the programs in examples/ that embed libgptc, run as a user would: the
 * callback example ramps dropout once the loss falls, stops on a validation plateau with a
 * checkpoint, and its override is saved in that checkpoint. */
#include "test.h"
#include "io/io.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

TEST(example_train_with_callback_ramps_dropout_and_stops_on_plateau) {
    char bin[600], dir[600], cmd[2048], *out = NULL;
    /* beside the gptc under test: BUILD/examples/ */
    snprintf(bin, sizeof bin, "%s", test_gptc_bin());
    char *slash = strrchr(bin, '/');
    snprintf(slash ? slash + 1 : bin, sizeof bin - (size_t)(slash ? slash + 1 - bin : 0), "examples/train_with_callback");
    struct stat sb;
    if (stat(bin, &sb) != 0) {
        test_fail_at(__FILE__, __LINE__, "%s is not built (make test builds it)", bin);
        return;
    }
    test_dir("", "example-callback", dir, sizeof dir);
    /* at most 200 steps; plateau: no val improvement of 0.1 in 2 evaluations; ramp below loss 3.6 */
    snprintf(cmd, sizeof cmd, "%s %s %s 200 0.1 2 3.6", bin, test_shakespeare_data(), dir);
    int rc = test_run(cmd, &out);
    CHECK_MSG(rc == 0 && out, "exit %d: %s", rc, out);
    if (!out) return;
    const char *ramp = strstr(out, "ramping dropout");
    CHECK_MSG(ramp != NULL, "no ramp: %s", out);
    /* the dropout the steps used (from the step info, not the callback's own numbers) rises to 0.1 */
    double prev = -1, last = -1;
    int seen = 0;
    for (const char *p = ramp ? ramp : out; (p = strstr(p, "dropout used ")); p++) {
        double v = atof(p + 13);
        CHECK_MSG(v >= prev, "dropout went down: %g after %g", v, prev);
        prev = last = v;
        seen++;
    }
    CHECK_MSG(seen >= 3 && last > 0.0999 && last < 0.1001, "dropout did not reach 0.1 (%d values, last %g)", seen, last);
    const char *plateau = strstr(out, "plateau: ");
    int stopped = 0, steps = 0;
    CHECK_MSG(plateau && sscanf(strstr(plateau, "stopping at step "), "stopping at step %d", &stopped) == 1, "no plateau stop: %s", out);
    const char *done = strstr(out, "done: ");
    CHECK_MSG(done && sscanf(done, "done: %d steps", &steps) == 1 && steps == stopped && steps < 200, "%s", out);
    /* the stop wrote a checkpoint, and the callback's dropout override is in it */
    char path[800];
    snprintf(path, sizeof path, "%s/step-%08d/optim.safetensors", dir, stopped);
    gptc_st_file f = {0};
    CHECK_OK(gptc_st_open(&f, path));
    const char *ov = gptc_st_meta(&f, "gptc.override.dropout");
    CHECK_MSG(ov && fabs(atof(ov) - 0.1) < 1e-6, "override in the checkpoint: %s", ov ? ov : "(none)");
    gptc_st_close(&f);
    CHECK_MSG(strstr(out, "checkpoint ") != NULL, "on_checkpoint was not called: %s", out);
    free(out);
}
