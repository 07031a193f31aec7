/* crc32c.c — CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) for checkpoint tensor checksums:
 * the CPU's CRC32C instruction where it has one (x86-64 SSE4.2 `crc32`, ARMv8 `crc32c*`), else
 * slicing-by-8 tables; the same values either way. gptc_crc32c(0, "123456789", 9) == 0xE3069283. */
#include "core.h"

#include <string.h>
#if defined(__x86_64__)
#include <nmmintrin.h>
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#endif

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

/* the portable update of the (inverted) register c over p[0..n) */
static uint32_t crc_tables(uint32_t crc, const uint8_t *p, size_t n) {
    if (!__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE)) build_tables();
    while (n >= 8) { /* slicing-by-8 */
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        crc = g_table[7][lo & 0xff] ^ g_table[6][(lo >> 8) & 0xff] ^ g_table[5][(lo >> 16) & 0xff] ^
              g_table[4][lo >> 24] ^ g_table[3][p[4]] ^ g_table[2][p[5]] ^ g_table[1][p[6]] ^ g_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) crc = (crc >> 8) ^ g_table[0][(crc ^ *p++) & 0xff];
    return crc;
}

/* The instruction's update, 8 bytes at a time (it computes exactly the reflected CRC-32C step) */
#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = crc;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
    }
    uint32_t c32 = (uint32_t)c;
    for (; n; p++, n--) c32 = _mm_crc32_u8(c32, *p);
    return c32;
}
static bool have_hw(void) { return gptc_cpu()->sse42; }
#elif defined(__aarch64__)
__attribute__((target("+crc"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n) {
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        __asm__("crc32cx %w0, %w0, %x1" : "+r"(crc) : "r"(w));
    }
    for (; n; p++, n--) __asm__("crc32cb %w0, %w0, %w1" : "+r"(crc) : "r"((uint32_t)*p));
    return crc;
}
static bool have_hw(void) { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }
#else
static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n) { return crc_tables(crc, p, n); }
static bool have_hw(void) { return false; }
#endif

/* 0 unknown, 1 the instruction, 2 tables */
static int g_path;

uint32_t gptc_crc32c(uint32_t crc, const void *data, size_t n) {
    int path = __atomic_load_n(&g_path, __ATOMIC_RELAXED);
    if (!path) __atomic_store_n(&g_path, path = have_hw() ? 1 : 2, __ATOMIC_RELAXED);
    return ~(path == 1 ? crc_hw(~crc, data, n) : crc_tables(~crc, data, n));
}

uint32_t gptc_crc32c_portable(uint32_t crc, const void *data, size_t n) { return ~crc_tables(~crc, data, n); }
