/*
 * unicode.c - UTF-8 coding, category flags, lower-casing and NFD (see unicode.h).
 *
 * UTF-8 decoding follows the Unicode "maximal subpart" rules closely enough
 * for our purpose: a sequence is accepted only when it is well formed
 * (right continuation count, no overlong forms, no surrogates, <= U+10FFFF);
 * otherwise its first byte alone becomes a pseudo code point and decoding
 * resumes at the next byte, so every byte of the input is accounted for.
 *
 * Hangul syllables are decomposed algorithmically (Unicode 3.12: L V [T]);
 * every other decomposition is a table lookup.
 */
#include "text/unicode.h"

int uni_char_len(const char *s, size_t n) {
    int len;
    (void)uni_decode(s, n, &len);
    return len;
}

uint32_t uni_decode(const char *s, size_t n, int *len) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned c = u[0];
    *len = 1;
    if (c < 0x80) return c;
    int need;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1, cp = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2, cp = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3, cp = c & 0x07, min = 0x10000;
    } else {
        return UNI_BYTE(c);
    }
    if ((size_t)need >= n) return UNI_BYTE(c);
    for (int i = 1; i <= need; i++) {
        if ((u[i] & 0xC0) != 0x80) return UNI_BYTE(c);
        cp = cp << 6 | (u[i] & 0x3F);
    }
    if (cp < min || cp > UNI_MAX_CP || (cp >= 0xD800 && cp <= 0xDFFF)) return UNI_BYTE(c);
    *len = need + 1;
    return cp;
}

int uni_encode(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (UNI_IS_BYTE(cp)) {
        o[0] = (unsigned char)(cp - 0x110000u);
        return 1;
    }
    if (cp > UNI_MAX_CP || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

unsigned uni_flags(uint32_t cp) {
    if (cp > UNI_MAX_CP) return UNI_OTHER; /* pseudo code points of invalid bytes */
    /* the last range starting at or before cp */
    size_t lo = 0, hi = uni_flag_count;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (uni_flag_start[mid] <= cp)
            lo = mid;
        else
            hi = mid;
    }
    return uni_flag_value[lo];
}

/* Index of cp in a sorted array of n code points, or -1. */
static long find_cp(const uint32_t *keys, size_t stride, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t k = keys[mid * stride];
        if (k == cp) return (long)mid;
        if (k < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

uint32_t uni_tolower(uint32_t cp) {
    if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    long i = find_cp(&uni_lower_map[0][0], 2, uni_lower_count, cp);
    return i < 0 ? cp : uni_lower_map[i][1];
}

int uni_ccc(uint32_t cp) {
    if (cp < 0x300) return 0;
    size_t lo = 0, hi = uni_ccc_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < uni_ccc_range[mid][0])
            hi = mid;
        else if (cp > uni_ccc_range[mid][1])
            lo = mid + 1;
        else
            return (int)uni_ccc_range[mid][2];
    }
    return 0;
}

/* Hangul syllable composition constants (Unicode 3.12). */
enum { HANGUL_S = 0xAC00, HANGUL_L = 0x1100, HANGUL_V = 0x1161, HANGUL_T = 0x11A7 };
enum { HANGUL_VCOUNT = 21, HANGUL_TCOUNT = 28, HANGUL_NCOUNT = 21 * 28, HANGUL_SCOUNT = 19 * 21 * 28 };

int uni_decompose(uint32_t cp, uint32_t *out) {
    if (cp < 0xC0) {
        out[0] = cp;
        return 1;
    }
    if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_SCOUNT) {
        uint32_t s = cp - HANGUL_S;
        out[0] = HANGUL_L + s / HANGUL_NCOUNT;
        out[1] = HANGUL_V + (s % HANGUL_NCOUNT) / HANGUL_TCOUNT;
        if (s % HANGUL_TCOUNT == 0) return 2;
        out[2] = HANGUL_T + s % HANGUL_TCOUNT;
        return 3;
    }
    long i = find_cp(uni_nfd_cp, 1, uni_nfd_count, cp);
    if (i < 0) {
        out[0] = cp;
        return 1;
    }
    unsigned off = uni_nfd_index[i] >> 3, n = uni_nfd_index[i] & 7;
    for (unsigned k = 0; k < n; k++)
        out[k] = uni_nfd_data[off + k];
    return (int)n;
}

void uni_canonical_order(uint32_t *cps, size_t n) {
    /* insertion sort inside each run of non-starters; runs are short */
    for (size_t i = 1; i < n; i++) {
        int c = uni_ccc(cps[i]);
        if (c == 0) continue;
        uint32_t x = cps[i];
        size_t j = i;
        while (j > 0) {
            int p = uni_ccc(cps[j - 1]);
            if (p == 0 || p <= c) break;
            cps[j] = cps[j - 1];
            j--;
        }
        cps[j] = x;
    }
}

int uni_lower_full(uint32_t cp, uint32_t out[2]) {
    if (cp == 0x130) { /* LATIN CAPITAL LETTER I WITH DOT ABOVE: the one code point whose lower case is two */
        out[0] = 'i';
        out[1] = 0x307;
        return 2;
    }
    out[0] = uni_tolower(cp);
    return 1;
}

/* The composite of the pair (a, b), or 0 (binary search, Hangul algorithmically). */
static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a >= HANGUL_L && a < HANGUL_L + 19 && b >= HANGUL_V && b < HANGUL_V + HANGUL_VCOUNT)
        return HANGUL_S + ((a - HANGUL_L) * HANGUL_VCOUNT + (b - HANGUL_V)) * HANGUL_TCOUNT;
    if (a >= HANGUL_S && a < HANGUL_S + HANGUL_SCOUNT && (a - HANGUL_S) % HANGUL_TCOUNT == 0 && b > HANGUL_T &&
        b < HANGUL_T + HANGUL_TCOUNT)
        return a + (b - HANGUL_T);
    size_t lo = 0, hi = uni_compose_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const uint32_t *p = uni_compose_pairs[mid];
        if (a < p[0] || (a == p[0] && b < p[1]))
            hi = mid;
        else if (a > p[0] || b > p[1])
            lo = mid + 1;
        else
            return p[2];
    }
    return 0;
}

int uni_decompose_compat(uint32_t cp, uint32_t *out) {
    if (cp < 0xA0) {
        out[0] = cp;
        return 1;
    }
    long i = find_cp(uni_nfkd_cp, 1, uni_nfkd_count, cp);
    if (i < 0) return uni_decompose(cp, out); /* Hangul, or none */
    unsigned off = uni_nfkd_index[i], n = (unsigned)(uni_nfkd_index[i + 1] - off);
    for (unsigned k = 0; k < n; k++)
        out[k] = uni_nfkd_data[off + k];
    return (int)n;
}

/* Canonical composition of out[0..m) in place (decomposed, canonically ordered); the count kept. */
static size_t compose(uint32_t *out, size_t m) {
    size_t k = 0, starter = 0, between = 0;
    int have_starter = 0, last_ccc = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t c = out[i];
        int ccc = uni_ccc(c);
        if (have_starter && (between == 0 || (last_ccc != 0 && last_ccc < ccc))) {
            uint32_t comp = compose_pair(out[starter], c);
            if (comp) {
                out[starter] = comp;
                continue;
            }
        }
        if (ccc == 0) {
            have_starter = 1, starter = k, between = 0, last_ccc = 0;
        } else {
            between++, last_ccc = ccc;
        }
        out[k++] = c;
    }
    return k;
}

size_t uni_nfc(const uint32_t *in, size_t n, uint32_t *out) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += (size_t)uni_decompose(in[i], out + m);
    uni_canonical_order(out, m);
    return compose(out, m);
}

size_t uni_nfkc(const uint32_t *in, size_t n, uint32_t *out, int nmt) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = in[i];
        if (nmt) {
            /* SentencePiece's nmt_nfkc: these are spaces, and the full-width tilde stays */
            static const uint32_t spaces[] = {0x9,    0xA,    0xC,    0xD,    0x1680, 0x200B, 0x200E,
                                              0x200F, 0x2028, 0x2029, 0x2581, 0xFEFF, 0xFFFD};
            for (size_t k = 0; k < sizeof spaces / sizeof *spaces; k++)
                if (c == spaces[k]) c = ' ';
            if (c == 0xFF5E) {
                out[m++] = c;
                continue;
            }
        }
        m += (size_t)uni_decompose_compat(c, out + m);
    }
    uni_canonical_order(out, m);
    return compose(out, m);
}

/* 1 cased, 2 case-ignorable, 0 neither (the final-sigma classes of unicode_compose.c). */
static int sigma_class(uint32_t cp) {
    size_t lo = 0, hi = uni_sigma_class_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < uni_sigma_class[mid][0])
            hi = mid;
        else if (cp > uni_sigma_class[mid][1])
            lo = mid + 1;
        else
            return (int)uni_sigma_class[mid][2];
    }
    return 0;
}

int uni_final_sigma(const uint32_t *cps, size_t i, size_t n) {
    size_t j = i;
    while (j > 0 && sigma_class(cps[j - 1]) == 2)
        j--;
    if (j == 0 || sigma_class(cps[j - 1]) != 1) return 0;
    size_t k = i + 1;
    while (k < n && sigma_class(cps[k]) == 2)
        k++;
    return k == n || sigma_class(cps[k]) != 1;
}
