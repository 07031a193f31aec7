/* bpe_cache.c — the per-state cache of pieces already encoded: an open-addressing table from piece
 * bytes to id lists, with the bytes and ids in two arenas. It is bounded (entries, key bytes, ids);
 * when any bound would be passed it is emptied and fills again from the text that follows. */
#include "data/bpe.h"

#include <stdlib.h>
#include <string.h>

typedef struct cache_slot {
    uint64_t hash;
    uint32_t key_off; /* into keys */
    uint32_t id_off;  /* into ids */
    uint16_t key_len;
    uint16_t nids;    /* 0: empty slot */
} cache_slot;

#define CACHE_SLOTS (1u << 16)
#define CACHE_MAX_ENTRIES (CACHE_SLOTS / 2)
#define CACHE_KEY_BYTES (1u << 20)
#define CACHE_IDS (1u << 18)

gptc_status gptc_bpe_cache_init(gptc_bpe_cache *c) {
    memset(c, 0, sizeof *c);
    c->slots = calloc(CACHE_SLOTS, sizeof(cache_slot));
    c->keys = malloc(CACHE_KEY_BYTES);
    c->ids = malloc(CACHE_IDS * sizeof *c->ids);
    if (!c->slots || !c->keys || !c->ids) {
        gptc_bpe_cache_free(c);
        return gptc_fail(GPTC_ERR_NOMEM, "tokenizer gpt2: cannot allocate the piece cache");
    }
    c->mask = CACHE_SLOTS - 1;
    c->max_count = CACHE_MAX_ENTRIES;
    c->key_cap = CACHE_KEY_BYTES;
    c->id_cap = CACHE_IDS;
    return GPTC_OK;
}

void gptc_bpe_cache_free(gptc_bpe_cache *c) {
    free(c->slots);
    free(c->keys);
    free(c->ids);
    memset(c, 0, sizeof *c);
}

uint64_t gptc_bpe_cache_hash(const unsigned char *piece, size_t len) {
    uint64_t h = 0x243F6A8885A308D3ull ^ (len * 0x9E3779B97F4A7C15ull);
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, piece, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        piece += 8;
        len -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, piece, len);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    h *= 0xFF51AFD7ED558CCDull;
    return h ^ (h >> 32);
}

const int32_t *gptc_bpe_cache_get(const gptc_bpe_cache *c, uint64_t hash, const unsigned char *piece, size_t len,
                                  size_t *nids) {
    const cache_slot *s = c->slots;
    for (size_t i = hash & c->mask;; i = (i + 1) & c->mask) {
        if (s[i].nids == 0) return NULL;
        if (s[i].hash == hash && s[i].key_len == len && memcmp(c->keys + s[i].key_off, piece, len) == 0) {
            *nids = s[i].nids;
            return c->ids + s[i].id_off;
        }
    }
}

void gptc_bpe_cache_put(gptc_bpe_cache *c, uint64_t hash, const unsigned char *piece, size_t len, const int *ids,
                        size_t nids) {
    if (len == 0 || len > GPTC_BPE_CACHE_MAX_PIECE || nids == 0 || nids > len) return;
    if (c->count >= c->max_count || c->key_used + len > c->key_cap || c->id_used + nids > c->id_cap) {
        memset(c->slots, 0, (c->mask + 1) * sizeof(cache_slot));
        c->count = c->key_used = c->id_used = 0;
        c->resets++;
    }
    cache_slot *s = c->slots;
    size_t i = hash & c->mask;
    while (s[i].nids != 0) {
        if (s[i].hash == hash && s[i].key_len == len && memcmp(c->keys + s[i].key_off, piece, len) == 0) return;
        i = (i + 1) & c->mask;
    }
    memcpy(c->keys + c->key_used, piece, len);
    for (size_t k = 0; k < nids; k++) c->ids[c->id_used + k] = ids[k];
    s[i] = (cache_slot){hash, (uint32_t)c->key_used, (uint32_t)c->id_used, (uint16_t)len, (uint16_t)nids};
    c->key_used += len;
    c->id_used += nids;
    c->count++;
}
