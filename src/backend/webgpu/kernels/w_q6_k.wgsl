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
// costs 6 word loads past its block's 5 (GGUF's interleaved order needs 18).
const GROUP: u32 = 32u;
const GV: u32 = 8u;

fn w_f16_at(k: u32, idx: u32) -> f32 {
    return unpack2x16float(ww(k, P.sb[k] + (idx >> 1u)))[idx & 1u];
}

// Per-block words (W_HEAD): the lane-rows matvec loads a block's d and its
// four words of int8 scales once per block and row with w_head, and decodes
// each group with w_affine_h (6 word loads per group instead of 8).
const GPB: u32 = 8u; // groups per block
struct WHead {
    s: vec4<u32>, // words 48..51: the 16 int8 scales
    d: f32,
}

fn w_head(k: u32, row: u32, blk: u32) -> WHead {
    let b = row * P.bpr + blk;
    let base = P.wo[k] + b * 52u;
    return WHead(vec4<u32>(ww(k, base + 48u), ww(k, base + 49u), ww(k, base + 50u), ww(k, base + 51u)), w_f16_at(k, b));
}

// Group g of `row` as q in 0..63, d = the two half groups' scales, m = -32 d.
fn w_affine_h(k: u32, row: u32, g: u32, h: WHead) -> WAff {
    let b = row * P.bpr + g / 8u;
    let j = g % 8u;
    let base = P.wo[k] + b * 52u;
    // word j / 2 of the scales (selects, not a dynamic index, which a CPU
    // adapter's JIT runs lane by lane)
    let sw = select(select(h.s.x, h.s.y, j >= 2u), select(h.s.z, h.s.w, j >= 6u), j >= 4u);
    let sh = 16u * (j % 2u);
    let s0 = h.d * f32(bitcast<i32>(sw << (24u - sh)) >> 24u);
    let s1 = h.d * f32(bitcast<i32>(sw << (16u - sh)) >> 24u);
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

// A single group (matmul, GPU layout) loads only its own scale word.
fn w_group(k: u32, row: u32, g: u32) -> array<vec4<f32>, 8> {
    let b = row * P.bpr + g / 8u;
    let sw = ww(k, P.wo[k] + b * 52u + 48u + (g % 8u) / 2u);
    return affine_expand(w_affine_h(k, row, g, WHead(vec4<u32>(sw), w_f16_at(k, b))));
}
