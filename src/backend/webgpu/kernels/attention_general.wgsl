// attention_general.wgsl - general attention (ops.h, wgml_attention_args):
// workgroup (h, t) is query head h of query row t over the key rows, WG rows
// at a time with an online softmax as in attention.wgsl (running max m,
// running sum l, rescaled accumulator), each key row j checked first:
//   SEQ     the sequence ids agree: sq[t] == ksq[j] (KV_SEQ: the key rows'
//           own ids; else they are q's rows and share sq)
//   CAUSAL  position(j) <= position(t); a row's position is pp[pos_off + r]
//           with POS, else S.pos + r; the cache's row j is at position j
//   MASK    mk[t][j] is added to the score; below -1e30 it hides the key
//   RANGE   only key rows rg[2t] <= j < rg[2t+1] are looked at (clamped)
// Key rows are the KV cache's (CACHE: KVT) or the rows of k and v (f32);
// grouped-query: head h reads KV head h / (n_head / n_kv). A query row that
// sees no key row gets zeros. Positions outside [0, n_keys) of a cache give
// unspecified values (the CPU reports them), never an access outside.
// Grid: (n_head, n, 1). Tier: all; head size <= 4 * WG.

struct GenParams {
    n_head: u32, n_kv: u32, hd: u32, n_keys: u32,
    q_off: u32, q_stride: u32, o_off: u32, o_stride: u32,
    k_off: u32, v_off: u32, kv_stride: u32, seq_off: u32,
    kseq_off: u32, pos_off: u32, mask_off: u32, mask_stride: u32,
    scale: f32, range_off: u32, pad1: u32, pad2: u32,
}
@group(0) @binding(1) var<uniform> P: GenParams;
@group(0) @binding(2) var<storage, read> q: array<f32>;
#ifdef CACHE
@group(0) @binding(3) var<storage, read> kr: array<KVT>;
@group(0) @binding(4) var<storage, read> vr: array<KVT>;
#else
@group(0) @binding(3) var<storage, read> kr: array<f32>;
@group(0) @binding(4) var<storage, read> vr: array<f32>;
#endif
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
#ifdef SEQ
@group(0) @binding(6) var<storage, read> sq: array<i32>;
#endif
#ifdef KV_SEQ
@group(0) @binding(7) var<storage, read> ksq: array<i32>;
#endif
#ifdef POS
@group(0) @binding(8) var<storage, read> pp: array<i32>;
#endif
#ifdef MASK
@group(0) @binding(9) var<storage, read> mk: array<f32>;
#endif
#ifdef RANGE
@group(0) @binding(10) var<storage, read> rg: array<i32>;
#endif

var<workgroup> qs: array<f32, 256>;
var<workgroup> ps: array<f32, WG>;

const NEG: f32 = -3.0e38;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32> SUBGROUP_ARGS) {
    KERNEL_INIT
    let h = wid.x;
    let t = wid.y;
    let g = h / (P.n_head / P.n_kv);
#ifdef POS
    let qp = pp[P.pos_off + t];
#else
    let qp = i32(S.pos + t);
#endif
    // key rows [j_start, j_end): all, or those a causal query can see in order
    var j_start = 0u;
    var j_end = P.n_keys;
#ifdef CAUSAL
#ifdef CACHE
    j_end = u32(clamp(qp + 1, 0, i32(P.n_keys)));
#else
#ifndef POS
    j_end = min(P.n_keys, t + 1u);
#endif
#endif
#endif
#ifdef RANGE
    j_start = u32(clamp(rg[P.range_off + 2u * t], 0, i32(P.n_keys)));
    j_end = min(j_end, u32(clamp(rg[P.range_off + 2u * t + 1u], 0, i32(P.n_keys))));
#endif
#ifdef SEQ
    let qsq = sq[P.seq_off + t];
#endif
    let qb = P.q_off + t * P.q_stride + h * P.hd;
    for (var d = li; d < P.hd; d += WG) { qs[d] = q[qb + d]; }
    workgroupBarrier();
    let gb = g * P.hd;
    var m = NEG;
    var l = 0.0;
    var acc: array<f32, 4>;
    for (var j0 = j_start; j0 < j_end; j0 += WG) {
        let j = j0 + li;
        var vis = j < j_end;
#ifdef SEQ
#ifdef KV_SEQ
        if (vis && ksq[P.kseq_off + j] != qsq) { vis = false; }
#else
        if (vis && sq[P.seq_off + j] != qsq) { vis = false; }
#endif
#endif
#ifdef CAUSAL
#ifdef POS
#ifndef CACHE
        if (vis && pp[P.pos_off + j] > qp) { vis = false; }
#endif
#endif
#endif
        var sc = NEG;
#ifdef MASK
        var mv = 0.0;
        if (vis) {
            mv = mk[P.mask_off + t * P.mask_stride + j];
            if (mv < -1.0e30) { vis = false; }
        }
#endif
        if (vis) {
            var dt = 0.0;
            let kb = P.k_off + j * P.kv_stride + gb;
            for (var d = 0u; d < P.hd; d++) { dt += qs[d] * f32(kr[kb + d]); }
            sc = dt * P.scale;
#ifdef MASK
            sc += mv;
#endif
        }
        let m_new = max(m, wg_max(sc, li));
        var p = 0.0;
        if (vis) { p = exp(sc - m_new); }
        ps[li] = p;
        let corr = exp(m - m_new);
        l = l * corr + wg_sum(p, li);
        m = m_new;
        let cnt = min(WG, j_end - j0);
        for (var e = 0u; e < 4u; e++) {
            let d = li + e * WG;
            if (d < P.hd) {
                var a = acc[e] * corr;
                for (var jj = 0u; jj < cnt; jj++) {
                    let pj = ps[jj];
                    if (pj != 0.0) { a += pj * f32(vr[P.v_off + (j0 + jj) * P.kv_stride + gb + d]); }
                }
                acc[e] = a;
            }
        }
        workgroupBarrier();
    }
    let ob = P.o_off + t * P.o_stride + h * P.hd;
    for (var e = 0u; e < 4u; e++) {
        let d = li + e * WG;
        if (d < P.hd) {
            var r = 0.0;
            if (l > 0.0) { r = acc[e] / l; }
            o[ob + d] = r;
        }
    }
}
