// w_q3_k.wgsl - weight decoder for Q3_K: 256 weights, 16 6-bit scales,
// x = d * (sc - 32) * (q - 4 * !hbit) with q the 2 low bits.
// GPU layout (wg_repack.c): per block 27 words: hmask (32 bytes, words 0..7),
// qs (64 bytes, words 8..23), the 12 packed scale bytes (words 24..26); f16
// d of every block in the scale region at P.sb[k].
// Element e: half n = e/128, j = (e%128)/32, l = e%32: qs byte 32n + l bits
// 2j..2j+1, hmask byte l bit 4n + j, scale 8n + 2j + l/16.
const GROUP: u32 = 32u;
const GV: u32 = 8u;

fn w_f16_at(k: u32, idx: u32) -> f32 {
    return unpack2x16float(ww(k, P.sb[k] + (idx >> 1u)))[idx & 1u];
}

fn kbyte(k: u32, base: u32, idx: u32) -> u32 {
    return (ww(k, base + (idx >> 2u)) >> (8u * (idx & 3u))) & 0xffu;
}

// 6-bit scale s (0..15), minus 32: 4 low bits from bytes 0..7, 2 high from bytes 8..11
fn q3k_scale(k: u32, base: u32, s: u32) -> f32 {
    let sb = base + 24u;
    let low = select(kbyte(k, sb, s) & 15u, kbyte(k, sb, s - 8u) >> 4u, s >= 8u);
    let high = (kbyte(k, sb, 8u + (s % 4u)) >> (2u * (s / 4u))) & 3u;
    return f32(i32(low | (high << 4u)) - 32);
}

fn w_group(k: u32, row: u32, g: u32) -> array<vec4<f32>, 8> {
    let b = row * P.bpr + g / 8u;
    let s8 = g % 8u;
    let n = s8 / 4u;
    let j = s8 % 4u;
    let base = P.wo[k] + b * 27u;
    let d = w_f16_at(k, b);
    let s0 = d * q3k_scale(k, base, 8u * n + 2u * j);
    let s1 = d * q3k_scale(k, base, 8u * n + 2u * j + 1u);
    var r: array<vec4<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
        let qw = ww(k, base + 8u + 8u * n + i);
        let q = (vec4<u32>(qw, qw >> 8u, qw >> 16u, qw >> 24u) >> vec4<u32>(2u * j)) & vec4<u32>(3u);
        let hw = ww(k, base + i);
        let h = (vec4<u32>(hw, hw >> 8u, hw >> 16u, hw >> 24u) >> vec4<u32>(4u * n + j)) & vec4<u32>(1u);
        r[i] = (vec4<f32>(q) - 4.0 * (1.0 - vec4<f32>(h))) * select(s0, s1, i >= 4u);
    }
    return r;
}
