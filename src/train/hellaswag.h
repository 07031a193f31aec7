/* hellaswag.h — multiple-choice evaluation in HellaSwag's released jsonl format (Zellers et al.
 * 2019; the val file is hellaswag_val.jsonl of github.com/rowanz/hellaswag, data/): one JSON object
 * per line with "ctx" (the context text), "endings" (2 to GPTC_MC_MAX_ENDINGS candidate completions)
 * and "label" (the index of the right one); other keys (ind, activity_label, ctx_a, ctx_b, split, ...)
 * are ignored.
 *
 * Scoring, as llm.c's and the usual harnesses' "completion" style: each candidate is the context's
 * tokens followed by the tokens of " " + ending; the model scores the ending's tokens given everything
 * before them (the cross-entropy of each ending token at the position that predicts it). A candidate's
 * sum is its summed loss, its norm the sum divided by its ending's token count. The prediction is the
 * candidate with the smallest sum (acc) and with the smallest norm (acc_norm); ties go to the lowest
 * index. A candidate longer than the model's context + 1 tokens loses context tokens from the left
 * (the ending is kept whole); an ending that cannot fit with one context token is refused.
 *
 * The candidates of an item run as one forward of B = its ending count rows, each padded to the
 * longest (positions after a row's end are not scored and, the attention being causal, change
 * nothing before them); in a model whose activations are already allocated (the trainer's), rows are
 * at most its T inputs long ("context" above is then T) and run m->B at a time. Internal API (not in
 * gptc.h). */
#ifndef GPTC_TRAIN_HELLASWAG_H
#define GPTC_TRAIN_HELLASWAG_H

#include "data/data.h"
#include "model/gpt2.h"

#define GPTC_MC_MAX_ENDINGS 16

typedef struct gptc_mc_item {
    int nend;                            /* candidates, 2..GPTC_MC_MAX_ENDINGS */
    int label;                           /* 0..nend-1 */
    int nctx;                            /* context tokens */
    int *ctx;                            /* (nctx) the context's ids */
    int nendtok[GPTC_MC_MAX_ENDINGS];    /* each ending's token count (>= 1) */
    int *end[GPTC_MC_MAX_ENDINGS];       /* (nendtok[e]) the ids of " " + ending e */
} gptc_mc_item;

typedef struct gptc_mc_set {
    gptc_mc_item *items; /* [n] */
    int n;
    int max_endings;     /* the largest nend */
} gptc_mc_set;

/* Reads and tokenizes path with tz. A line that is not such an object (bad JSON, a key missing or of
 * the wrong type, a label outside the endings, fewer than 2 or more than GPTC_MC_MAX_ENDINGS endings,
 * an empty ending) is GPTC_ERR_FORMAT naming the file and the line number; blank lines are skipped;
 * a file without items is GPTC_ERR_FORMAT. */
gptc_status gptc_mc_read(const char *path, const gptc_tokenizer *tz, gptc_mc_set *out);
void gptc_mc_free(gptc_mc_set *s);

typedef struct gptc_mc_result {
    int items;
    int correct, correct_norm; /* items whose prediction by sum / by norm is the label */
    double acc, acc_norm;      /* correct / items, correct_norm / items */
    uint64_t tokens;           /* ending tokens scored */
    double seconds;            /* wall time of the forwards */
} gptc_mc_result;

/* Scores every item of s with m (its weights loaded; its activations are allocated for the set's
 * largest item when m has none, else the rows fit them as above). Dropout is off meanwhile. When sums is not NULL it gets each candidate's summed loss, item i's candidate e at
 * sums[i * s->max_endings + e] (NaN for the candidates an item lacks), and ntok the token counts
 * after truncation. An ending too long for the context is GPTC_ERR_FORMAT naming the item. */
gptc_status gptc_mc_score(gptc_model *m, const gptc_mc_set *s, gptc_mc_result *r, double *sums, int *ntok);

/* The largest (B, T) gptc_mc_score runs s with, for a model of context `context`. */
void gptc_mc_shape(const gptc_mc_set *s, int context, int *B, int *T);

#endif
