/*
 * test_kit_rng.c - the `kit` random stream (core/kit_rng.h) against the first
 * values of each draw that the official Kokoro code consumed in every
 * reference case (../shared/kokoro/reference/kokoro-tiny/manifest.json):
 * bit for bit, and counter-based (output n computed alone equals the n-th of
 * a sequential splitmix64).
 *
 * Also the integer emulation that the WebGPU kernel of nsf_source
 * (src/backend/webgpu/kernels/nsf.wgsl) computes the stream's normals and the
 * phase rates with, written here in C function for function as the WGSL
 * (32-bit words only: 64-bit values as (low, high) pairs, products through
 * 16-bit limbs, the double sum of twelve uniforms as an integer rounded to 53
 * significant bits after each addition): it must give wgml_kit_normal's bits
 * and cpu_nsf_rate's (the CPU's reference), and does, for a million
 * consecutive normals of several seeds.
 */
#include "backend/cpu/cpu_internal.h"
#include "core/kit_rng.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The numbers of the JSON array after `key` at or after p (at most cap); the count, or -1. */
static int read_array(const char *p, const char *key, double *out, int cap) {
    const char *k = strstr(p, key);
    if (!k) return -1;
    const char *c = strchr(k + strlen(key), '[');
    if (!c) return -1;
    int n = 0;
    for (c++; *c && *c != ']' && n < cap;) {
        char *end;
        double v = strtod(c, &end);
        if (end == c) {
            c++;
            continue;
        }
        out[n++] = v;
        c = end;
    }
    return n;
}

/* splitmix64 as the README writes it: sequential state */
static uint64_t seq_next(uint64_t *st) {
    uint64_t z = (*st += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void test_counter_based(void **state) {
    (void)state;
    uint64_t st = 12345;
    for (uint64_t n = 0; n < 1000; n++) assert_true(seq_next(&st) == wgml_kit_u64(12345, n));
    for (uint64_t n = 0; n < 1000; n++) {
        double u = wgml_kit_uniform(99, n);
        assert_true(u >= 0 && u < 1);
    }
}

static void test_reference_cases(void **state) {
    (void)state;
    size_t size;
    unsigned char *m = tu_read_file(tu_shared("kokoro/reference/kokoro-tiny/manifest.json"), &size);
    assert_non_null(m);
    int cases = 0;
    for (const char *p = strstr((char *)m, "\"kit_noise_seed\""); p; p = strstr(p + 1, "\"kit_noise_seed\"")) {
        /* this case's "samples" comes before its seed; its first values after */
        const char *case_start = p;
        while (case_start > (char *)m && strncmp(case_start, "\"samples\"", 9)) case_start--;
        assert_true(case_start > (char *)m);
        unsigned long long seed = strtoull(p + strlen("\"kit_noise_seed\":"), NULL, 10);
        unsigned long long L = strtoull(case_start + strlen("\"samples\":"), NULL, 10);
        assert_true(seed > 0 && L > 0);
        double ini[9], sine[8], src[4];
        assert_int_equal(read_array(p, "\"rand_ini_raw\"", ini, 9), 9);
        assert_int_equal(read_array(p, "\"sine_randn[:8]\"", sine, 8), 8);
        assert_int_equal(read_array(p, "\"source_randn[:4]\"", src, 4), 4);
        for (int i = 0; i < 9; i++) assert_true((float)wgml_kit_uniform(seed, (uint64_t)i) == (float)ini[i]);
        for (int i = 0; i < 8; i++) assert_true(wgml_kit_normal(seed, wgml_kit_sine_noise_at((uint64_t)i)) == (float)sine[i]);
        for (int i = 0; i < 4; i++)
            assert_true(wgml_kit_normal(seed, wgml_kit_source_noise_at(L, (uint64_t)i)) == (float)src[i]);
        cases++;
    }
    assert_int_equal(cases, 9);
    free(m);
}

/* ---- nsf.wgsl's integer emulation, function for function ---- */

typedef struct {
    uint32_t x, y; /* low, high: WGSL's vec2<u32> */
} u64p;

static u64p P64(uint64_t v) { return (u64p){(uint32_t)v, (uint32_t)(v >> 32)}; }
static uint64_t V64(u64p a) { return (uint64_t)a.y << 32 | a.x; }

static u64p add64(u64p a, u64p b) {
    uint32_t lo = a.x + b.x;
    return (u64p){lo, a.y + b.y + (lo < a.x ? 1u : 0u)};
}

static u64p sub64(u64p a, u64p b) { return (u64p){a.x - b.x, a.y - b.y - (a.x < b.x ? 1u : 0u)}; }

static int lt64(u64p a, u64p b) { return a.y < b.y || (a.y == b.y && a.x < b.x); }

static u64p xor64(u64p a, u64p b) { return (u64p){a.x ^ b.x, a.y ^ b.y}; }

static u64p mul32(uint32_t a, uint32_t b) {
    uint32_t a0 = a & 0xffffu, a1 = a >> 16, b0 = b & 0xffffu, b1 = b >> 16;
    uint32_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0;
    uint32_t mid = p01 + p10;
    uint32_t c1 = mid < p01 ? 0x10000u : 0u;
    uint32_t lo = p00 + (mid << 16);
    uint32_t c2 = lo < p00 ? 1u : 0u;
    return (u64p){lo, a1 * b1 + (mid >> 16) + c1 + c2};
}

static u64p mul64(u64p a, u64p b) {
    u64p p = mul32(a.x, b.x);
    return (u64p){p.x, p.y + a.x * b.y + a.y * b.x};
}

static u64p mul64_32(u64p a, uint32_t m) {
    u64p p = mul32(a.x, m);
    return (u64p){p.x, p.y + a.y * m};
}

static u64p shr64(u64p a, uint32_t n) {
    if (n == 0) return a;
    if (n >= 32) return (u64p){a.y >> (n - 32), 0};
    return (u64p){(a.x >> n) | (a.y << (32 - n)), a.y >> n};
}

static u64p shl64(u64p a, uint32_t n) {
    if (n == 0) return a;
    if (n >= 32) return (u64p){0, a.x << (n - 32)};
    return (u64p){a.x << n, (a.y << n) | (a.x >> (32 - n))};
}

static uint32_t first_leading_bit(uint32_t v) { return 31u - (uint32_t)__builtin_clz(v); } /* v != 0 */

static uint32_t top64(u64p a) { return a.y ? 32u + first_leading_bit(a.y) : first_leading_bit(a.x); }

static uint32_t bit64(u64p a, uint32_t i) { return i >= 32 ? (a.y >> (i - 32)) & 1u : (a.x >> i) & 1u; }

static int low_any(u64p a, uint32_t n) {
    if (n == 0) return 0;
    if (n >= 32) return a.x != 0 || (a.y & ((1u << (n - 32)) - 1u)) != 0;
    return (a.x & ((1u << n) - 1u)) != 0;
}

static u64p round_sig(u64p a, uint32_t keep) {
    if (a.x == 0 && a.y == 0) return a;
    uint32_t p = top64(a);
    if (p < keep) return a;
    uint32_t sh = p + 1 - keep;
    u64p q = shr64(a, sh);
    if (bit64(a, sh - 1) && (low_any(a, sh - 1) || (q.x & 1u))) q = add64(q, (u64p){1, 0});
    return shl64(q, sh);
}

/* The float nearest to (-1)^neg d 2^-53 (d < 2^63), ties to even, as bits. */
static float to_f32(u64p d, int neg) {
    d = round_sig(d, 24);
    if (d.x == 0 && d.y == 0) return 0.0f;
    uint32_t p = top64(d), mant = p >= 23 ? shr64(d, p - 23).x : d.x << (23 - p);
    uint32_t bits = (neg ? 0x80000000u : 0u) | ((p + 74) << 23) | (mant & 0x7fffffu);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static const u64p GOLDEN = {0x7f4a7c15u, 0x9e3779b9u}, GOLDEN12 = {0xf77dd0fcu, 0x6a99b4b1u};

static u64p mix64(u64p z) {
    z = mul64(xor64(z, shr64(z, 30)), (u64p){0x1ce4e5b9u, 0xbf58476du});
    z = mul64(xor64(z, shr64(z, 27)), (u64p){0x133111ebu, 0x94d049bbu});
    return xor64(z, shr64(z, 31));
}

static float emu_normal(u64p z) {
    u64p a = {0, 0};
    for (int i = 0; i < 12; i++) {
        a = round_sig(add64(a, shr64(mix64(z), 11)), 53);
        z = add64(z, GOLDEN);
    }
    const u64p six = {0, 0xc00000u};
    int neg = lt64(a, six);
    return to_f32(round_sig(neg ? sub64(six, a) : sub64(a, six), 53), neg);
}

/* The state of the first uniform of normal t H (nsf.wgsl, SAMPLES): seed + (10 + 12 t H) GOLDEN. */
static u64p emu_state(uint64_t seed, uint32_t t, uint32_t H) {
    return add64(P64(seed), mul64(add64(mul32(t, 12u * H), (u64p){10, 0}), GOLDEN));
}

static u64p emu_rate(uint32_t bits, uint32_t m, uint32_t sr) {
    uint32_t ex = (bits >> 23) & 0xffu, man = bits & 0x7fffffu;
    if (ex == 0xffu) return (u64p){0, 0};
    int e = -149;
    if (ex) {
        man |= 0x800000u;
        e = (int)ex - 150;
    }
    uint32_t nn = man * m;
    int s = e + 63;
    if (s < 0) {
        nn = s <= -32 ? 0 : nn >> (uint32_t)-s;
        s = 0;
    }
    u64p q = {nn / sr, 0};
    uint32_t rem = nn % sr;
    for (uint32_t left = (uint32_t)s; left > 0;) {
        uint32_t b = left < 8 ? left : 8;
        rem <<= b;
        uint32_t qc = rem / sr;
        rem -= qc * sr;
        q = shl64(q, b);
        q.x |= qc;
        left -= b;
    }
    if (2 * rem >= sr) q = add64(q, (u64p){1, 0});
    q.y &= 0x7fffffffu;
    if (bits >> 31) {
        q = sub64((u64p){0, 0}, q);
        q.y &= 0x7fffffffu;
    }
    return q;
}

static uint32_t float_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* A million consecutive normals per seed (as nsf_source draws them: H per
 * sample, the state advanced by 12 GOLDEN per harmonic), and some far into
 * the stream (64-bit counters), bit for bit. */
static void test_emulated_normals(void **state) {
    (void)state;
    const uint64_t seeds[] = {0, 1, 12345, 0x9E3779B97F4A7C15ull, ~0ull};
    const uint32_t H = 9;
    for (size_t si = 0; si < sizeof seeds / sizeof seeds[0]; si++) {
        const uint64_t seed = seeds[si];
        int bad = 0;
        for (uint32_t t = 0; t < 1000000 / H + 1 && bad < 5; t++) {
            u64p z = emu_state(seed, t, H);
            for (uint32_t k = 0; k < H; k++, z = add64(z, GOLDEN12)) {
                float want = wgml_kit_normal(seed, wgml_kit_sine_noise_at((uint64_t)t * H + k));
                float got = emu_normal(z);
                if (float_bits(got) != float_bits(want) && bad++ < 5)
                    fprintf(stderr, "seed %llu normal %llu: emulated %.9g, wgml_kit_normal %.9g\n",
                            (unsigned long long)seed, (unsigned long long)t * H + k, (double)got, (double)want);
            }
        }
        /* samples near 2^32 with 64 harmonics: normal indices beyond 2^32 */
        for (uint32_t t = 0xffffffffu - 2000; t != 0 && bad < 5; t++) {
            u64p z = emu_state(seed, t, 64);
            for (uint32_t k = 0; k < 64; k += 21, z = add64(z, mul64_32(GOLDEN12, 21))) {
                float want = wgml_kit_normal(seed, wgml_kit_sine_noise_at((uint64_t)t * 64 + k));
                if (float_bits(emu_normal(z)) != float_bits(want)) bad++;
            }
        }
        assert_int_equal(bad, 0);
    }
}

/* The roundings on their own, where the normals seldom reach a boundary: the
 * sum after each addition against double's (a multiple of 2^-53 below 12,
 * so a 2^53 is an exact integer), and the conversion to float against C's
 * for values made to end in ties and near-ties of the double and float grids. */
static void test_emulated_rounding(void **state) {
    (void)state;
    for (uint64_t i = 0; i < 200000; i++) {
        double a = 0;
        u64p A = {0, 0};
        for (int k = 0; k < 12; k++) {
            uint64_t u = wgml_kit_u64(42, 12 * i + (uint64_t)k) >> 11;
            a = a + (double)u * 0x1p-53;
            A = round_sig(add64(A, P64(u)), 53);
            assert_true(V64(A) == (uint64_t)(a * 0x1p53));
        }
    }
    uint64_t r = 0x2545f4914f6cdd1dull;
    for (int i = 0; i < 1000000; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        int top = 1 + (int)(r >> 58) % 56; /* values up to 2^56 (below 8) */
        uint64_t d = (r >> 3) & ((1ull << top) - 1);
        d |= 1ull << (top - 1);
        int grid = top - 24;            /* float's grid for this magnitude */
        if (grid > 1 && (r & 3) == 0) { /* a tie of the float grid, or next to one */
            d &= ~((1ull << grid) - 1);
            d |= (1ull << (grid - 1)) + (uint64_t)((int)(r >> 40 & 3) - 1);
        }
        const int neg = (int)(r >> 61 & 1);
        const double dd = (double)d; /* rounds to 53 bits, ties to even */
        assert_true(V64(round_sig(P64(d), 53)) == (uint64_t)dd);
        const float want = (float)(neg ? -dd * 0x1p-53 : dd * 0x1p-53);
        assert_true(float_bits(to_f32(round_sig(P64(d), 53), neg)) == float_bits(want));
    }
}

/* The 64-bit pieces against C's uint64_t, and the rates against cpu_nsf_rate
 * (every exponent, signs, subnormals, inf and NaN; harmonics 1..64; sample
 * rates up to 2^24 - 1). */
static void test_emulated_rates(void **state) {
    (void)state;
    uint64_t r = 0x853c49e6748fea9bull;
    for (int i = 0; i < 200000; i++) {
        uint64_t a = wgml_kit_u64(7, (uint64_t)i), b = wgml_kit_u64(8, (uint64_t)i);
        uint32_t m = (uint32_t)wgml_kit_u64(9, (uint64_t)i);
        assert_true(V64(mul64(P64(a), P64(b))) == a * b);
        assert_true(V64(mul64_32(P64(a), m)) == a * m);
        assert_true(V64(mul32((uint32_t)a, m)) == (uint64_t)(uint32_t)a * m);
        assert_true(V64(add64(P64(a), P64(b))) == a + b && V64(sub64(P64(a), P64(b))) == a - b);
        assert_true(lt64(P64(a), P64(b)) == (a < b));
        uint32_t n = m & 63;
        assert_true(V64(shr64(P64(a), n)) == a >> n && V64(shl64(P64(a), n)) == a << n);
    }
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x7f800000u,
                                       0xff800000u, 0x7fc00000u, 0x7f7fffffu, 0x42c80000u, 0xc3960000u};
    static const uint32_t rates[] = {24000, 1, 3, 16000, 44100, 48000, (1u << 24) - 1};
    for (int i = 0; i < 400000; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t bits = i < 10 ? special[i] : (uint32_t)(r >> 32);
        if (i % 3 == 1) { /* f0 in Hz, as a vocoder sees it */
            float f = (float)((r >> 8 & 0xffff) * (1000.0 / 65536)) - 100.0f;
            bits = float_bits(f);
        }
        uint32_t m = 1 + (uint32_t)(r >> 20) % 64,
                 sr = i % 5 ? rates[(r >> 12) % 7] : 1 + (uint32_t)(r % ((1u << 24) - 1));
        float f0;
        memcpy(&f0, &bits, sizeof f0);
        uint64_t want = cpu_nsf_rate(f0, (int)m, (int)sr), got = V64(emu_rate(bits, m, sr));
        if (got != want)
            fprintf(stderr, "f0 bits %08x m %u sr %u: emulated %016llx, cpu_nsf_rate %016llx\n", bits, m, sr,
                    (unsigned long long)got, (unsigned long long)want);
        assert_true(got == want);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_counter_based), cmocka_unit_test(test_reference_cases),
                                       cmocka_unit_test(test_emulated_normals),
                                       cmocka_unit_test(test_emulated_rounding), cmocka_unit_test(test_emulated_rates)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
