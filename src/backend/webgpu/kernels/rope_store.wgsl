// rope_store.wgsl - rotary position embedding, and (with STORE) the KV-cache write.
//
// For each token t (position S.pos + t) and head, rotates pairs of q (in
// place) by the angles in the table rt[pos][i] = (cos, sin) of
// pos * freq_i, which the host computes in double precision once per session
// (the same values the CPU reference uses). With STORE, k heads are rotated
// on the way into the K cache row S.pos + t and v is copied into the V cache.
// Pairs: (2i, 2i+1) normally, (i, i + n_rot/2) with neox; dims past n_rot
// are left as they are. One invocation per pair (or per two unrotated dims).
// Grid: (ceil(n * (n_head + n_kv) * hd/2 / WG), 1, 1). Tier: all; KVT is f16
// on the shader-f16 tier, else f32.
//
// With POS (general attention's explicit positions) token t's position is
// pp[pos_off + t] instead, any in [0, 2^20): the table then holds the angles
// of lo = pos % lo_rows in rows [0, lo_rows) and of hi * lo_rows, hi = pos /
// lo_rows, in rows [lo_rows, 2 lo_rows), combined by the angle-sum formulas;
// with STORE the cache row is the position, skipped past n_ctx (the CPU
// reports it).

struct RopeParams {
    n: u32, n_head: u32, n_kv: u32, hd: u32,
    n_rot: u32, neox: u32, q_off: u32, q_stride: u32,
    k_off: u32, k_stride: u32, v_off: u32, v_stride: u32,
#ifdef POS
    pos_off: u32, lo_rows: u32, n_ctx: u32, pad0: u32,
#endif
}
@group(0) @binding(1) var<uniform> P: RopeParams;
@group(0) @binding(2) var<storage, read_write> q: array<f32>;
@group(0) @binding(3) var<storage, read> rt: array<vec2<f32>>;
#ifdef STORE
@group(0) @binding(4) var<storage, read> k: array<f32>;
@group(0) @binding(5) var<storage, read> v: array<f32>;
@group(0) @binding(6) var<storage, read_write> kc: array<KVT>;
@group(0) @binding(7) var<storage, read_write> vc: array<KVT>;
#endif
#ifdef POS
@group(0) @binding(8) var<storage, read> pp: array<i32>;
#endif

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    KERNEL_INIT
    let half = P.hd / 2u;
    let per_tok = (P.n_head + P.n_kv) * half;
    let id = gid.x;
    if (id >= P.n * per_tok) { return; }
    let t = id / per_tok;
    let hh = (id % per_tok) / half;
    let i = id % half;
#ifdef POS
    let pos = u32(clamp(pp[P.pos_off + t], 0, 1048575));
#else
    let pos = S.pos + t;
#endif
    let rot = i < P.n_rot / 2u;
    var a: u32;
    var b: u32;
    if (!rot) {
        a = P.n_rot + 2u * (i - P.n_rot / 2u);
        b = a + 1u;
    } else if (P.neox == 1u) {
        a = i;
        b = i + P.n_rot / 2u;
    } else {
        a = 2u * i;
        b = 2u * i + 1u;
    }
    var cs = vec2<f32>(1.0, 0.0);
#ifdef POS
    if (rot) {
        let lo = rt[(pos % P.lo_rows) * (P.n_rot / 2u) + i];
        let hi = rt[(P.lo_rows + min(pos / P.lo_rows, P.lo_rows - 1u)) * (P.n_rot / 2u) + i];
        cs = vec2<f32>(lo.x * hi.x - lo.y * hi.y, lo.y * hi.x + lo.x * hi.y);
    }
#else
    if (rot) { cs = rt[pos * (P.n_rot / 2u) + i]; }
#endif
    if (hh < P.n_head) {
        let base = P.q_off + t * P.q_stride + hh * P.hd;
        let x0 = q[base + a];
        let x1 = q[base + b];
        q[base + a] = x0 * cs.x - x1 * cs.y;
        q[base + b] = x0 * cs.y + x1 * cs.x;
        return;
    }
#ifdef STORE
#ifdef POS
    if (pos >= P.n_ctx) { return; }
#endif
    let kh = hh - P.n_head;
    let kb = P.k_off + t * P.k_stride + kh * P.hd;
    let x0 = k[kb + a];
    let x1 = k[kb + b];
    let cb = pos * P.n_kv * P.hd + kh * P.hd;
    kc[cb + a] = KVT(x0 * cs.x - x1 * cs.y);
    kc[cb + b] = KVT(x0 * cs.y + x1 * cs.x);
    let vb = P.v_off + t * P.v_stride + kh * P.hd;
    vc[cb + a] = KVT(v[vb + a]);
    vc[cb + b] = KVT(v[vb + b]);
#endif
}
