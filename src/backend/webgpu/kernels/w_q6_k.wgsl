// w_q6_k.wgsl - weight decoder for Q6_K: 256 weights, 16 int8 scales,
// x = d * sc * (q - 32) with q in 0..63 from 4 low bits and 2 high bits.
// GPU layout (wg_repack.c regroups each block at upload, same 210 bytes):
// per block 52 words, group j (elements 32j..32j+31) in
//   words 4j..4j+3    low nibbles: byte i holds element i (low nibble) and
//                     element i + 16 (high nibble), as in Q4_0;
//   words 32+2j+h     high bits of elements 16h..16h+15: element 16h+f at
//                     bits 2f..2f+1;
//   word 48 + j/2     the group's two int8 scales (elements 0..15, 16..31)
//                     at bytes 2(j%2) and 2(j%2)+1;
// and the f16 d of every block in the scale region at P.sb[k]. A group thus
// costs 8 word loads (GGUF's interleaved order needs 18).
const GROUP: u32 = 32u;
const GV: u32 = 8u;

fn w_f16_at(k: u32, idx: u32) -> f32 {
    return unpack2x16float(ww(k, P.sb[k] + (idx >> 1u)))[idx & 1u];
}

// Group g of `row` as q in 0..63, d = the two half groups' scales, m = -32 d.
fn w_affine(k: u32, row: u32, g: u32) -> WAff {
    let b = row * P.bpr + g / 8u;
    let j = g % 8u;
    let base = P.wo[k] + b * 52u;
    let d = w_f16_at(k, b);
    let sw = ww(k, base + 48u + j / 2u);
    let sh = 16u * (j % 2u);
    let s0 = d * f32(bitcast<i32>(sw << (24u - sh)) >> 24u);
    let s1 = d * f32(bitcast<i32>(sw << (16u - sh)) >> 24u);
    let h0 = ww(k, base + 32u + 2u * j);
    let h1 = ww(k, base + 33u + 2u * j);
    var a: WAff;
    for (var i = 0u; i < 4u; i++) {
        let lw = ww(k, base + 4u * j + i);
        let lb = vec4<u32>(lw, lw >> 8u, lw >> 16u, lw >> 24u);
        let sh4 = vec4<u32>(8u * i) + vec4<u32>(0u, 2u, 4u, 6u);
        let q0 = (lb & vec4<u32>(15u)) | (((vec4<u32>(h0) >> sh4) & vec4<u32>(3u)) << vec4<u32>(4u));
        let q1 = ((lb >> vec4<u32>(4u)) & vec4<u32>(15u)) | (((vec4<u32>(h1) >> sh4) & vec4<u32>(3u)) << vec4<u32>(4u));
        a.q[i] = vec4<f32>(q0);
        a.q[i + 4u] = vec4<f32>(q1);
    }
    a.d = vec2<f32>(s0, s1);
    a.m = -32.0 * a.d;
    return a;
}

fn w_group(k: u32, row: u32, g: u32) -> array<vec4<f32>, 8> { return affine_expand(w_affine(k, row, g)); }
