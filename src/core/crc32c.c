/* crc32c.c — CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table-driven, for checkpoint
 * tensor checksums. gptc_crc32c(0, "123456789", 9) == 0xE3069283. */
#include "core.h"

static uint32_t g_table[8][256];
static int g_ready;

static void build_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        g_table[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++) g_table[t][i] = (g_table[t - 1][i] >> 8) ^ g_table[0][g_table[t - 1][i] & 0xff];
    __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
}

uint32_t gptc_crc32c(uint32_t crc, const void *data, size_t n) {
    if (!__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE)) build_tables();
    const uint8_t *p = data;
    crc = ~crc;
    while (n >= 8) { /* slicing-by-8 */
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        crc = g_table[7][lo & 0xff] ^ g_table[6][(lo >> 8) & 0xff] ^ g_table[5][(lo >> 16) & 0xff] ^
              g_table[4][lo >> 24] ^ g_table[3][p[4]] ^ g_table[2][p[5]] ^ g_table[1][p[6]] ^ g_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) crc = (crc >> 8) ^ g_table[0][(crc ^ *p++) & 0xff];
    return ~crc;
}
