/* fuzz_shard.c — the llm.c token shard reader and the window loader on arbitrary bytes: a shard is
 * either refused with GPTC_ERR_FORMAT or its tokens lie inside the file; the loader reads windows of
 * it and refuses a token id outside the vocabulary rather than handing it on. */
#include "fuzz_util.h"
#include "data/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    gptc_shard s;
    gptc_status st = gptc_shard_open(&s, path);
    if (st == GPTC_OK) {
        if ((const unsigned char *)s.tokens + s.ntok * 2 > (const unsigned char *)s.map + s.map_size) abort();
        unsigned sum = 0;
        for (size_t i = 0; i < s.ntok; i++) sum += s.tokens[i];
        (void)sum;
        gptc_shard_close(&s);

        /* B = 1, T = 4, a vocabulary smaller than uint16 so that some shards hold ids out of range */
        enum { B = 1, T = 4, VOCAB = 300 };
        char *paths[1] = {path};
        gptc_loader l;
        if (gptc_loader_open(&l, paths, 1, B, T, VOCAB, true, 1234, 0, 1) == GPTC_OK) {
            int in[B * T], tg[B * T];
            for (int k = 0; k < 3; k++) {
                if (gptc_loader_next(&l, in, tg) != GPTC_OK) break;
                for (int i = 0; i < B * T; i++)
                    if (in[i] < 0 || in[i] >= VOCAB || tg[i] < 0 || tg[i] >= VOCAB) abort();
            }
            gptc_loader_close(&l);
        }
    } else if (st != GPTC_ERR_FORMAT) {
        abort();
    }
    close(fd);
    return 0;
}
