/* make_seeds.c — writes the binary seed inputs of fuzz/corpus/ with the library's own writers
 * (`make fuzz-seeds`; the outputs are committed): small valid safetensors files and token shards, so
 * the fuzzer starts from inputs that pass every check and mutates them from there. */
#include "data/data.h"
#include "io/io.h"

#include <stdio.h>
#include <stdlib.h>

static void must(gptc_status st) {
    if (st) {
        fprintf(stderr, "make_seeds: %s\n", gptc_last_error());
        exit(1);
    }
}

int main(void) {
    float w[6] = {1, -2, 0.5f, 3, 0, -0.25f};
    uint16_t h[4] = {0x3f80, 0xbf80, 0, 0x4000};
    int64_t step[1] = {42};
    unsigned char bytes[3] = {1, 2, 3};
    gptc_st_entry e[4] = {
        {"h.0.attn.c_attn.weight", GPTC_F32, 2, {2, 3}, w},
        {"wte", GPTC_BF16, 1, {4}, h},
        {"step", GPTC_I64, 0, {0}, step},
        {"u8", GPTC_U8, 1, {3}, bytes},
    };
    const char *keys[1] = {"format"}, *vals[1] = {"pt"};
    must(gptc_st_write("fuzz/corpus/safetensors/four_dtypes.safetensors", e, 4, keys, vals, 1));
    must(gptc_st_write("fuzz/corpus/safetensors/one_tensor.safetensors", e, 1, NULL, NULL, 0));
    gptc_st_entry empty = {"empty", GPTC_F32, 2, {0, 5}, w};
    must(gptc_st_write("fuzz/corpus/safetensors/empty_tensor.safetensors", &empty, 1, NULL, NULL, 0));

    uint16_t tok[16];
    for (int i = 0; i < 16; i++) tok[i] = (uint16_t)(i * 37 % 300);
    must(gptc_shard_write("fuzz/corpus/shard/sixteen.bin", tok, 16));
    must(gptc_shard_write("fuzz/corpus/shard/empty.bin", tok, 0));
    tok[5] = 65535; /* an id outside every vocabulary the loader is given */
    must(gptc_shard_write("fuzz/corpus/shard/big_id.bin", tok, 16));
    return 0;
}
