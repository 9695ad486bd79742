// nsf.wgsl - the excitation of a neural-source-filter vocoder (ops.h:
// nsf_source; wg_ops_audio.c), in two dispatches over a table `tab` of
// (P_j, r_j) per frame j and harmonic k (vec4: P's low and high words, r's):
//   RATES    one workgroup per harmonic k (m = k + 1); its invocations take
//            the frames 64 at a time: r_j = frac(f0_j m / sample_rate) in
//            2^-63 cycles, bit for bit as the CPU's cpu_nsf_rate (a long
//            division of f0's mantissa times m, here 8 bits per step), and
//            the prefix sums P_j = sum over j' <= j of 2 upp r_j' in 2^-64
//            cycles (64-bit, wrapping: only the fraction counts), each chunk
//            through workgroup memory (double-buffered: one barrier a chunk);
//   SAMPLES  one invocation per output sample t: the phase of harmonic k,
//            P_j + u r_{j+1} with j the frame centre at or before t and u =
//            2 (t - upp j) - (upp - 1) (P_0 before the first centre, P_{N-1}
//            after the last), sin of its top 32 bits (the angle reduced
//            exactly in integers), the kit stream's normal (t H + k) bit for
//            bit, and out = tanh(b + sum_k w[k] e_k).
// WGSL has 32-bit integers only: 64-bit values are vec2<u32> (low, high);
// products go through 16-bit limbs. The normal (core/kit_rng.c: twelve
// splitmix64 uniforms summed left to right in double, minus 6, rounded to
// float) is emulated exactly in integers: the sum in units of 2^-53 (below
// 2^57), rounded to 53 significant bits after each addition as a double add
// rounds, then the difference with 6 likewise, then to 24 bits, and the
// float built from its bits (tests/test_kit_rng.c proves the same steps in C
// bit for bit). SAMPLES grid: P.rows rows of P.cols (x: columns; rows over y
// and z, row = gid.z * 65535 + gid.y), sample t = row * cols + column < n.
// f0, w, b in o's buffer (apart from the output) are read through o in
// SAMPLES (F0_IS_OUT, W_IS_OUT, B_IS_OUT); RATES binds f0 on its own, as
// words (the float's bits). Tier: all.

struct NsfParams {
    n: u32, cols: u32, rows: u32, o_off: u32,
    f0_off: u32, w_off: u32, b_off: u32, N: u32,
    H: u32, upp: u32, sr: u32, pad0: u32,
    seed_lo: u32, seed_hi: u32, pad1: u32, pad2: u32,
    amp: f32, noise_std: f32, amp3: f32, thr: f32,
}
@group(0) @binding(1) var<uniform> P: NsfParams;

// ---- 64-bit integers as (low, high) ----

fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

fn sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}

fn lt64(a: vec2<u32>, b: vec2<u32>) -> bool { return a.y < b.y || (a.y == b.y && a.x < b.x); }

// a * b, both 32-bit, as 64 bits
fn mul32(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = p01 + p10;
    let c1 = select(0u, 0x10000u, mid < p01);
    let lo = p00 + (mid << 16u);
    let c2 = select(0u, 1u, lo < p00);
    return vec2<u32>(lo, a1 * b1 + (mid >> 16u) + c1 + c2);
}

// a * b mod 2^64
fn mul64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let p = mul32(a.x, b.x);
    return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x);
}

fn mul64_32(a: vec2<u32>, m: u32) -> vec2<u32> {
    let p = mul32(a.x, m);
    return vec2<u32>(p.x, p.y + a.y * m);
}

// a >> n, a << n for n < 64
fn shr64(a: vec2<u32>, n: u32) -> vec2<u32> {
    if (n == 0u) { return a; }
    if (n >= 32u) { return vec2<u32>(a.y >> (n - 32u), 0u); }
    return vec2<u32>((a.x >> n) | (a.y << (32u - n)), a.y >> n);
}

fn shl64(a: vec2<u32>, n: u32) -> vec2<u32> {
    if (n == 0u) { return a; }
    if (n >= 32u) { return vec2<u32>(0u, a.x << (n - 32u)); }
    return vec2<u32>(a.x << n, (a.y << n) | (a.x >> (32u - n)));
}

// index of the highest set bit of a != 0
fn top64(a: vec2<u32>) -> u32 {
    if (a.y != 0u) { return 32u + firstLeadingBit(a.y); }
    return firstLeadingBit(a.x);
}

// bit i of a
fn bit64(a: vec2<u32>, i: u32) -> u32 {
    if (i >= 32u) { return (a.y >> (i - 32u)) & 1u; }
    return (a.x >> i) & 1u;
}

// whether any of the n lowest bits of a is set (n < 64)
fn low_any(a: vec2<u32>, n: u32) -> bool {
    if (n == 0u) { return false; }
    if (n >= 32u) { return a.x != 0u || (a.y & ((1u << (n - 32u)) - 1u)) != 0u; }
    return (a.x & ((1u << n) - 1u)) != 0u;
}

// a rounded to `keep` significant bits, to nearest, ties to even (a float
// of that precision holding a * 2^e, whatever e)
fn round_sig(a: vec2<u32>, keep: u32) -> vec2<u32> {
    if (a.x == 0u && a.y == 0u) { return a; }
    let p = top64(a);
    if (p < keep) { return a; }
    let sh = p + 1u - keep;
    var q = shr64(a, sh);
    if (bit64(a, sh - 1u) != 0u && (low_any(a, sh - 1u) || (q.x & 1u) != 0u)) { q = add64(q, vec2<u32>(1u, 0u)); }
    return shl64(q, sh);
}

#ifdef RATES
@group(0) @binding(2) var<storage, read> f0: array<u32>;
@group(0) @binding(6) var<storage, read_write> tab: array<vec4<u32>>;

// frac(f0 m / sr) * 2^63 rounded to nearest, mod 2^63, f0 given by its bits:
// cpu_nsf_rate (cpu_ops_audio.c) with its long division 8 bits at a time
// (rem < sr < 2^24, so rem * 2^8 fits 32 bits); 0 for inf and NaN.
fn nsf_rate(bits: u32, m: u32, sr: u32) -> vec2<u32> {
    let ex = (bits >> 23u) & 0xffu;
    var man = bits & 0x7fffffu;
    if (ex == 0xffu) { return vec2<u32>(0u); }
    var e = -149;
    if (ex != 0u) {
        man |= 0x800000u;
        e = i32(ex) - 150;
    }
    var nn = man * m; // f0 m = nn 2^e; below 2^30
    var s = e + 63;   // the quotient of nn 2^s by sr, mod 2^63
    if (s < 0) {
        nn = select(nn >> u32(-s), 0u, s <= -32);
        s = 0;
    }
    var q = vec2<u32>(nn / sr, 0u);
    var rem = nn % sr;
    var left = u32(s);
    while (left > 0u) {
        let b = min(left, 8u);
        rem = rem << b;
        let qc = rem / sr;
        rem -= qc * sr;
        q = shl64(q, b);
        q.x |= qc;
        left -= b;
    }
    if (2u * rem >= sr) { q = add64(q, vec2<u32>(1u, 0u)); }
    q.y &= 0x7fffffffu;
    if ((bits >> 31u) != 0u) {
        q = sub64(vec2<u32>(0u), q);
        q.y &= 0x7fffffffu;
    }
    return q;
}

var<workgroup> part: array<vec2<u32>, 2u * WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    KERNEL_INIT
    let k = wid.x;
    let inc = 2u * P.upp; // 2 upp r_j: upp r_j in 2^-64 cycles
    var total = vec2<u32>(0u); // the sum over the chunks before (the same in every invocation)
    var chunk = 0u;
    for (var j0 = 0u; j0 < P.N; j0 += WG) {
        let j = j0 + li;
        let half = (chunk & 1u) * WG;
        var r = vec2<u32>(0u);
        if (j < P.N) { r = nsf_rate(f0[P.f0_off + j], k + 1u, P.sr); }
        part[half + li] = mul64_32(r, inc);
        workgroupBarrier();
        var pre = total;
        for (var i = 0u; i < WG; i++) {
            total = add64(total, part[half + i]);
            if (i == li) { pre = total; }
        }
        if (j < P.N) { tab[j * P.H + k] = vec4<u32>(pre, r); }
        chunk++;
    }
}
#endif

#ifdef SAMPLES
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read> tab: array<vec4<u32>>;
#ifdef F0_IS_OUT
fn f0v(i: u32) -> f32 { return o[i]; }
#else
@group(0) @binding(2) var<storage, read> f0: array<f32>;
fn f0v(i: u32) -> f32 { return f0[i]; }
#endif
#ifdef W_IS_OUT
fn wv(i: u32) -> f32 { return o[i]; }
#else
@group(0) @binding(4) var<storage, read> w: array<f32>;
fn wv(i: u32) -> f32 { return w[i]; }
#endif
#ifdef B_IS_OUT
fn bv(i: u32) -> f32 { return o[i]; }
#else
@group(0) @binding(5) var<storage, read> b: array<f32>;
fn bv(i: u32) -> f32 { return b[i]; }
#endif

const GOLDEN: vec2<u32> = vec2<u32>(0x7f4a7c15u, 0x9e3779b9u);   // splitmix64's increment
const GOLDEN12: vec2<u32> = vec2<u32>(0xf77dd0fcu, 0x6a99b4b1u); // 12 times it, mod 2^64

// The float nearest to (-1)^neg d 2^-53 (d < 2^63), ties to even.
fn to_f32(d0: vec2<u32>, neg: bool) -> f32 {
    let d = round_sig(d0, 24u);
    if (d.x == 0u && d.y == 0u) { return 0.0; }
    let p = top64(d); // d 2^-53 in [2^(p-53), 2^(p-52)): biased exponent p - 53 + 127
    var mant = 0u;
    if (p >= 23u) { mant = shr64(d, p - 23u).x; } else { mant = d.x << (23u - p); }
    return bitcast<f32>(select(0u, 0x80000000u, neg) | ((p + 74u) << 23u) | (mant & 0x7fffffu));
}

// splitmix64's output for the state z
fn mix64(z0: vec2<u32>) -> vec2<u32> {
    var z = z0;
    z = mul64(z ^ shr64(z, 30u), vec2<u32>(0x1ce4e5b9u, 0xbf58476du));
    z = mul64(z ^ shr64(z, 27u), vec2<u32>(0x133111ebu, 0x94d049bbu));
    return z ^ shr64(z, 31u);
}

// The normal of the twelve outputs whose states are z, z + GOLDEN, ...:
// wgml_kit_normal bit for bit.
fn kit_normal(z0: vec2<u32>) -> f32 {
    var z = z0;
    var a = vec2<u32>(0u); // the double sum, in units of 2^-53
    for (var i = 0u; i < 12u; i++) {
        a = round_sig(add64(a, shr64(mix64(z), 11u)), 53u);
        z = add64(z, GOLDEN);
    }
    let six = vec2<u32>(0u, 0xc00000u); // 6 * 2^53
    let neg = lt64(a, six);
    return to_f32(round_sig(select(sub64(a, six), sub64(six, a), neg), 53u), neg);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    KERNEL_INIT
    let row = gid.z * 65535u + gid.y;
    let t = row * P.cols + gid.x;
    if (gid.x >= P.cols || row >= P.rows || t >= P.n) { return; }
    let H = P.H;
    let q = t / P.upp;
    let r = t % P.upp;
    let voiced = f0v(P.f0_off + q) > P.thr;
    // the centre at or before t: j = floor((2t - (upp-1)) / (2 upp)), u = 2 (t - upp j) - (upp - 1)
    var before = false;
    var j = q;
    var u = 0u;
    if (2u * r >= P.upp - 1u) {
        u = 2u * r - (P.upp - 1u);
    } else if (q == 0u) {
        before = true;
    } else {
        j = q - 1u;
        u = 2u * r + P.upp + 1u;
    }
    // the state of the first uniform of normal t H: seed + (10 + 12 t H) GOLDEN
    var z = add64(vec2<u32>(P.seed_lo, P.seed_hi),
                  mul64(add64(mul32(t, 12u * H), vec2<u32>(10u, 0u)), GOLDEN));
    var acc = bv(P.b_off);
    for (var k = 0u; k < H; k++) {
        var phi = vec2<u32>(0u);
        if (before) {
            phi = tab[k].xy;
        } else if (j + 1u >= P.N) {
            phi = tab[(P.N - 1u) * H + k].xy;
        } else {
            phi = add64(tab[j * H + k].xy, mul64_32(tab[(j + 1u) * H + k].zw, u));
        }
        var e = 0.0;
        if (voiced) {
            e = P.amp * turn_cossin(phi.y).y;
            if (P.noise_std != 0.0) { e += P.noise_std * kit_normal(z); }
        } else {
            e = P.amp3 * kit_normal(z);
        }
        acc += wv(P.w_off + k) * e;
        z = add64(z, GOLDEN12);
    }
    o[P.o_off + t] = tanh_a(acc);
}
#endif
