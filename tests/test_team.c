/* test_team.c — the team's speeds (core/team.h): the split of items by weights, and learning the speeds
 * from reported calls. */
#include <stdlib.h>

#include "core/team.h"
#include "test.h"

/* The parts of P items among n: in order, covering [0, P), one item at least each when P >= n, the even
 * split floor(P * i / n) for equal weights, each within one item (plus the guaranteed one) of its share of
 * the weights, and never above gptc_team_part_max. */
static void check_split(int P, int n, const int *w) {
    long tot = 0;
    for (int i = 0; i < n; i++) tot += w ? w[i] : 1;
    CHECK_EQ_INT(gptc_team_part(P, n, 0, w), 0);
    CHECK_EQ_INT(gptc_team_part(P, n, n, w), P);
    for (int i = 0; i < n; i++) {
        const int a = gptc_team_part(P, n, i, w), b = gptc_team_part(P, n, i + 1, w);
        CHECK_MSG(b >= a + (P >= n), "P %d n %d: part %d is [%d, %d)", P, n, i, a, b);
        CHECK_MSG(b - a <= gptc_team_part_max(P, n), "P %d n %d: part %d has %d items, most %d", P, n, i, b - a,
                  gptc_team_part_max(P, n));
        const double share = (double)(P >= n ? P - n : P) * (w ? w[i] : 1) / tot + (P >= n);
        CHECK_MSG(abs((b - a) - (int)share) <= 1 + (share - (int)share > 0),
                  "P %d n %d: part %d has %d items, its share %.2f", P, n, i, b - a, share);
        if (!w) CHECK_EQ_INT(a, (int)((long)P * i / n));
    }
}

TEST(team_split_follows_weights_and_is_even_at_equal_ones) {
    srand(7);
    for (int n = 1; n <= 9; n++)
        for (int P = 0; P <= 70; P += 1 + P / 7) {
            int w[GPTC_TEAM_MAX], eq[GPTC_TEAM_MAX];
            for (int i = 0; i < n; i++) {
                w[i] = GPTC_TEAM_WMIN + rand() % (GPTC_TEAM_WMAX - GPTC_TEAM_WMIN + 1);
                eq[i] = 700;
            }
            check_split(P, n, NULL);
            check_split(P, n, w);
            for (int i = 0; i <= n; i++) CHECK_EQ_INT(gptc_team_part(P, n, i, eq), gptc_team_part(P, n, i, NULL));
        }
    /* the extremes the bounds allow: part_max is reached, not exceeded */
    for (int n = 2; n <= 8; n++)
        for (int P = n; P <= 200; P += 13) {
            int w[GPTC_TEAM_MAX];
            for (int i = 0; i < n; i++) w[i] = i == n - 1 ? GPTC_TEAM_WMAX : GPTC_TEAM_WMIN;
            check_split(P, n, w);
        }
    /* a thread weighing three times the other gets three quarters of the items */
    const int w[2] = {3 * GPTC_TEAM_ONE, GPTC_TEAM_ONE};
    CHECK_EQ_INT(gptc_team_part(102, 2, 1, w), 1 + 75);
}

/* Reports of calls where thread 1 ran 1.5 times as fast as thread 0 (its share done in the same time at
 * 1.5 times the work): the weights move there within a few dozen calls, and stay near it. */
TEST(team_learns_speeds_from_calls) {
    gptc_team_set_even(0);
    gptc_team_reset();
    double s[2];
    CHECK_EQ_INT(gptc_team_speeds(2, s), 0);
    CHECK(s[0] == 1.0 && s[1] == 1.0);
    int w[2];
    gptc_team_weights(2, w);
    CHECK(w[0] == GPTC_TEAM_ONE && w[1] == GPTC_TEAM_ONE);
    for (int call = 0; call < 60; call++) {
        const double work[2] = {1e8, 1.5e8}, secs[2] = {1e-3, 1e-3};
        gptc_team_learn(2, work, secs);
    }
    CHECK_EQ_INT(gptc_team_speeds(2, s), 60);
    CHECK_NEAR(s[1] / s[0], 1.5, 0.02);
    CHECK_NEAR(s[0] + s[1], 2.0, 1e-9); /* the mean kept */
    gptc_team_weights(2, w);
    CHECK_NEAR((double)w[1] / w[0], 1.5, 0.01);
    /* one call in which thread 0 was stalled 20 times as long moves its speed by a few percent */
    const double work[2] = {1e8, 1e8}, stalled[2] = {20e-3, 1e-3};
    gptc_team_learn(2, work, stalled);
    double after[2];
    gptc_team_speeds(2, after);
    CHECK_MSG(after[0] >= s[0] * 0.95, "one stalled call took thread 0's speed from %.4f to %.4f", s[0], after[0]);
    /* calls too short to time, or with a thread idle, teach nothing */
    const double tiny[2] = {1e-5, 1e-5}, idle[2] = {1e8, 0};
    gptc_team_learn(2, work, tiny);
    gptc_team_learn(2, idle, stalled);
    CHECK_EQ_INT(gptc_team_speeds(2, s), 61);
    CHECK(s[0] == after[0] && s[1] == after[1]);
    /* the even split, whatever was learned; reset forgets */
    gptc_team_set_even(1);
    gptc_team_weights(2, w);
    CHECK(w[0] == GPTC_TEAM_ONE && w[1] == GPTC_TEAM_ONE);
    gptc_team_set_even(0);
    gptc_team_reset();
    CHECK_EQ_INT(gptc_team_speeds(2, s), 0);
    CHECK(s[0] == 1.0 && s[1] == 1.0);
}

/* A thread that keeps being slow takes its weight down to the bound, not below, and the weights of a team
 * larger than GPTC_TEAM_MAX are equal. */
TEST(team_weights_stay_within_bounds) {
    gptc_team_set_even(0);
    gptc_team_reset();
    for (int call = 0; call < 400; call++) {
        const double work[3] = {1e8, 1e8, 1e8}, secs[3] = {50e-3, 1e-3, 1e-3};
        gptc_team_learn(3, work, secs);
    }
    int w[GPTC_TEAM_MAX + 1];
    gptc_team_weights(3, w);
    CHECK_EQ_INT(w[0], GPTC_TEAM_WMIN);
    CHECK(w[1] > GPTC_TEAM_ONE && w[1] == w[2]);
    gptc_team_weights(GPTC_TEAM_MAX + 1, w);
    for (int i = 0; i <= GPTC_TEAM_MAX; i++) CHECK_EQ_INT(w[i], GPTC_TEAM_ONE);
    gptc_team_reset();
}
