// w_q6_k.wgsl - weight decoder for Q6_K: 256 weights, 16 int8 scales,
// x = d * sc * (q - 32) with q in 0..63 from 4 low bits (ql) and 2 high (qh).
// GPU layout (wg_repack.c): per block 52 words: ql (128 bytes, words 0..31),
// qh (64 bytes, words 32..47), scales (16 int8, words 48..51); the f16 d of
// every block in the scale region at P.sb[k].
// Element e of a block: half n = e/128, quarter qd = (e%128)/32, l = e%32:
// ql byte 64n + 32(qd&1) + l (low nibble for qd < 2, else high), qh byte
// 32n + l bits 2qd..2qd+1, scale 8n + l/16 + 2qd.
const GROUP: u32 = 32u;
const GV: u32 = 8u;

fn w_f16_at(k: u32, idx: u32) -> f32 {
    return unpack2x16float(ww(k, P.sb[k] + (idx >> 1u)))[idx & 1u];
}

fn w_group(k: u32, row: u32, g: u32) -> array<vec4<f32>, 8> {
    let b = row * P.bpr + g / 8u;
    let s8 = g % 8u;
    let n = s8 / 4u;
    let qd = s8 % 4u;
    let base = P.wo[k] + b * 52u;
    let d = w_f16_at(k, b);
    let ls = select(0u, 4u, qd >= 2u);
    let lb = base + 16u * n + 8u * (qd & 1u);
    let hb = base + 32u + 8u * n;
    // the two int8 scales of this group (elements 0..15 and 16..31)
    let si = 8u * n + 2u * qd;
    let sw = ww(k, base + 48u + si / 4u);
    let s0 = d * f32(bitcast<i32>(sw << (24u - 8u * (si % 4u))) >> 24u);
    let s1 = d * f32(bitcast<i32>(sw << (16u - 8u * (si % 4u))) >> 24u);
    var r: array<vec4<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
        let lw = ww(k, lb + i);
        let lo = (vec4<u32>(lw, lw >> 8u, lw >> 16u, lw >> 24u) >> vec4<u32>(ls)) & vec4<u32>(15u);
        let hw = ww(k, hb + i);
        let hi = (vec4<u32>(hw, hw >> 8u, hw >> 16u, hw >> 24u) >> vec4<u32>(2u * qd)) & vec4<u32>(3u);
        r[i] = (vec4<f32>(lo | (hi << vec4<u32>(4u))) - 32.0) * select(s0, s1, i >= 4u);
    }
    return r;
}
