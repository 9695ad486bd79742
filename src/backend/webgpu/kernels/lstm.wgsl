// lstm.wgsl - the whole recurrence of one LSTM layer over T rows in one
// dispatch (ops.h, wg_ops_audio.c): one workgroup per direction (wid.x: 0
// forward, t = 0 .. T-1; 1 backward, t = T-1 .. 0), zero initial state:
//   z = gx[t] + W_hh h;  c = sigmoid(z_f) c + sigmoid(z_i) tanh(z_g);
//   h = sigmoid(z_o) tanh(c);  o[t] = h
// with gx [T][dirs*4H] (gates i, f, g, o of each direction), W_hh
// [dirs*4H][H] and o [T][dirs*H]. Invocation li owns the hidden units j =
// li, li + LWG, ...: all four gates of unit j (four rows of W_hh, summed
// together over the shared h), so its cell state c_j stays in a register.
// h lives in workgroup memory, double-buffered (step s reads half s & 1 and
// writes the other): one barrier per step, since llvmpipe compiles each
// barrier as a coroutine suspension. H <= HMAX.
// W_hh is f32 or f16 (P.f16w), read as 32-bit words either way (an f16 pair
// through unpack2x16float: no shader-f16 needed). o is bound as words (the
// f32 values' bits), and gx and W_hh in o's buffer (apart from the output:
// validate.c) are read through it (GX_IS_OUT, W_IS_OUT). Tier: all.

struct LstmParams {
    T: u32, H: u32, dirs: u32, gx_off: u32,
    w_off: u32, o_off: u32, f16w: u32, pad0: u32,
}
@group(0) @binding(1) var<uniform> P: LstmParams;
@group(0) @binding(3) var<storage, read_write> o: array<u32>;
#ifdef GX_IS_OUT
fn gxv(i: u32) -> f32 { return bitcast<f32>(o[i]); }
#else
@group(0) @binding(2) var<storage, read> gx: array<f32>;
fn gxv(i: u32) -> f32 { return gx[i]; }
#endif
#ifdef W_IS_OUT
fn ww(i: u32) -> u32 { return o[i]; }
#else
@group(0) @binding(4) var<storage, read> w: array<u32>;
fn ww(i: u32) -> u32 { return w[i]; }
#endif

const LWG: u32 = 256u;
#ifdef BIG
const HMAX: u32 = 2048u;
#else
const HMAX: u32 = 1024u;
#endif
const UNITS: u32 = HMAX / LWG;

var<workgroup> hs: array<f32, 2u * HMAX>;

// f16 element e of W_hh
fn w16(e: u32) -> f32 {
    let v = unpack2x16float(ww(e >> 1u));
    return select(v.x, v.y, (e & 1u) != 0u);
}

// The four gates' rows of W_hh times h (half `cur` of hs): rows e0 + g*H*H
// (elements; g = 0..3) of H values each.
fn gates(e0: u32, cur: u32) -> vec4<f32> {
    let H = P.H;
    let gs = H * H; // elements between the gates' rows
    var acc = vec4<f32>(0.0);
    if (P.f16w == 0u) {
        for (var i = 0u; i < H; i++) {
            let h = hs[cur + i];
            let e = e0 + i;
            acc += vec4<f32>(bitcast<f32>(ww(e)), bitcast<f32>(ww(e + gs)), bitcast<f32>(ww(e + 2u * gs)),
                             bitcast<f32>(ww(e + 3u * gs))) * h;
        }
        return acc;
    }
    var i = 0u;
    if ((e0 & 1u) != 0u) { // rows start at an odd element: one alone, then pairs
        let h = hs[cur];
        acc += vec4<f32>(w16(e0), w16(e0 + gs), w16(e0 + 2u * gs), w16(e0 + 3u * gs)) * h;
        i = 1u;
    }
    // pairs of the four rows at once when they share e0's parity (H even);
    // with H odd, gates 1 and 3 start at the other one: element by element
    if ((gs & 1u) == 0u) {
        for (; i + 1u < H; i += 2u) {
            let hv = vec2<f32>(hs[cur + i], hs[cur + i + 1u]);
            let wd = (e0 + i) >> 1u;
            let gw = gs >> 1u;
            acc += vec4<f32>(dot(unpack2x16float(ww(wd)), hv), dot(unpack2x16float(ww(wd + gw)), hv),
                             dot(unpack2x16float(ww(wd + 2u * gw)), hv), dot(unpack2x16float(ww(wd + 3u * gw)), hv));
        }
    }
    for (; i < H; i++) {
        let h = hs[cur + i];
        let e = e0 + i;
        acc += vec4<f32>(w16(e), w16(e + gs), w16(e + 2u * gs), w16(e + 3u * gs)) * h;
    }
    return acc;
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    KERNEL_INIT
    let d = wid.x;
    let H = P.H;
    let G = 4u * H;
    let gstride = P.dirs * G;
    let ostride = P.dirs * H;
    let wbase = P.w_off + d * G * H;
    var c: array<f32, UNITS>;
    // hs starts zeroed (workgroup memory is zero-initialized): h_0 = 0
    for (var s = 0u; s < P.T; s++) {
        let t = select(s, P.T - 1u - s, d == 1u);
        let cur = (s & 1u) * HMAX;
        let nxt = HMAX - cur;
        let gb = P.gx_off + t * gstride + d * G;
        let ob = P.o_off + t * ostride + d * H;
        var u = 0u;
        for (var j = li; j < H; j += LWG) {
            let z = vec4<f32>(gxv(gb + j), gxv(gb + H + j), gxv(gb + 2u * H + j), gxv(gb + 3u * H + j)) +
                    gates(wbase + j * H, cur);
            c[u] = sigmoid_a(z.y) * c[u] + sigmoid_a(z.x) * tanh_a(z.z);
            let h = sigmoid_a(z.w) * tanh_a(c[u]);
            hs[nxt + j] = h;
            o[ob + j] = bitcast<u32>(h);
            u++;
        }
        workgroupBarrier();
    }
}
