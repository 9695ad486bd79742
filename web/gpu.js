// gpu.js - the GPU layer of wgml (src/gpu/gpu.h) over navigator.gpu: the wasm
// imports that src/gpu/web.c declares, one function each.
//
// Objects (devices, buffers, kernels, bind groups) live in one table and cross
// into C as integer handles (0 = none). Pointers are offsets into the wasm
// memory, read and written through views made fresh at each call (the memory
// can grow, which detaches older views).
//
// Four imports return promises (ASYNC_IMPORTS): gpu_create (adapter and device),
// gpu_buffer_create (inside error scopes, so that out-of-memory and size errors
// come back from the call that caused them), gpu_kernel_create (compilation
// messages, then createComputePipelineAsync) and gpu_submit (mapAsync of the
// readbacks). web/engine.js makes them synchronous for C with JSPI or Asyncify.
//
// Errors: while commands are recorded, error scopes (validation, out-of-memory,
// internal) stay pushed; the submit pops them, so any error of a write, bind
// group, dispatch or copy comes back from that submit, with the browser's
// message. Those errors, uncaptured ones and device loss set a sticky status
// (WGML_ERR_GPU = 7, WGML_ERR_DEVICE_LOST = 8) that every later call reports,
// as the native layer (src/gpu/dawn.c) does.
//
// The same plan as natively: the device gets the adapter's limits (large
// weights need maxBufferSize / maxStorageBufferBindingSize above the defaults)
// and shader-f16 / subgroups when the adapter has them and C asks; one command
// encoder per step, one compute pass for its dispatches, one submit, one
// persistent MAP_READ staging buffer for the readbacks.

const ERR = { INVALID_ARGUMENT: 1, OUT_OF_MEMORY: 5, GPU: 7, DEVICE_LOST: 8, NO_ADAPTER: 9 };
const STORAGE = 1;
const UNIFORM = 2;

// What gpu_info_num answers, in the order of src/gpu/web.c's NUM_* enum.
const INFO_NUM = [
  (d) => d.device.limits.maxBufferSize,
  (d) => d.device.limits.maxStorageBufferBindingSize,
  (d) => d.device.limits.maxUniformBufferBindingSize,
  (d) => d.device.limits.maxStorageBuffersPerShaderStage,
  (d) => d.device.limits.maxComputeInvocationsPerWorkgroup,
  (d) => d.device.limits.maxComputeWorkgroupSizeX,
  (d) => d.device.limits.maxComputeWorkgroupSizeY,
  (d) => d.device.limits.maxComputeWorkgroupSizeZ,
  (d) => d.device.limits.maxComputeWorkgroupStorageSize,
  (d) => d.device.limits.maxComputeWorkgroupsPerDimension,
  (d) => d.device.limits.minStorageBufferOffsetAlignment,
  (d) => d.device.limits.minUniformBufferOffsetAlignment,
  (d) => (d.adapter.features.has('subgroups') ? d.adapter.info.subgroupMinSize || 0 : 0),
  (d) => (d.adapter.features.has('subgroups') ? d.adapter.info.subgroupMaxSize || 0 : 0),
  (d) => +d.adapter.features.has('shader-f16'),
  (d) => +d.adapter.features.has('subgroups'),
  (d) => +d.adapter.features.has('timestamp-query'),
  (d) => +d.device.features.has('shader-f16'),
  (d) => +d.device.features.has('subgroups'),
  (d) => (d.adapter.info.isFallbackAdapter || d.adapter.info.architecture === 'swiftshader' ? 3 : 0),
  () => 0,
  () => 0,
];

// The limits requested for the device: all the adapter offers.
const LIMIT_NAMES = [
  'maxBufferSize', 'maxStorageBufferBindingSize', 'maxUniformBufferBindingSize',
  'maxStorageBuffersPerShaderStage', 'maxUniformBuffersPerShaderStage', 'maxBindingsPerBindGroup',
  'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX', 'maxComputeWorkgroupSizeY',
  'maxComputeWorkgroupSizeZ', 'maxComputeWorkgroupStorageSize', 'maxComputeWorkgroupsPerDimension',
  'maxDynamicStorageBuffersPerPipelineLayout', 'maxDynamicUniformBuffersPerPipelineLayout',
];

// A readable adapter name: the browser often leaves device/description empty.
export function adapterName(a) {
  const i = a.info || {};
  if (i.description) return i.description;
  if (i.device) return i.device;
  const parts = [i.vendor, i.architecture].filter(Boolean);
  if (i.architecture === 'swiftshader') return `SwiftShader (${parts.join(', ')})`;
  return parts.length ? parts.join(' ') : 'WebGPU adapter';
}

export function createGpuImports(env) {
  // env.mem(): the wasm memory's ArrayBuffer now; env.gpu: navigator.gpu or null.
  const objects = [null];
  const freeSlots = [];
  const live = { buffers: 0, bytes: 0, devices: 0 };

  const put = (o) => {
    const h = freeSlots.length ? freeSlots.pop() : objects.length;
    objects[h] = o;
    return h;
  };
  const drop = (h) => {
    if (h > 0 && objects[h]) {
      objects[h] = null;
      freeSlots.push(h);
    }
  };
  const u8 = () => new Uint8Array(env.mem());
  const dv = () => new DataView(env.mem());
  const cstr = (p) => {
    if (!p) return '';
    const m = u8();
    let e = p;
    while (m[e]) e++;
    return new TextDecoder().decode(m.slice(p, e)); // a copy: the memory may be shared
  };
  // Writes a NUL-terminated UTF-8 string into buf[cap]; returns its length.
  const writeStr = (buf, cap, s) => {
    if (!buf || cap <= 0) return 0;
    const bytes = new TextEncoder().encode(String(s));
    const n = Math.min(bytes.length, cap - 1);
    const m = u8();
    m.set(bytes.subarray(0, n), buf);
    m[buf + n] = 0;
    return n;
  };
  const oneLine = (s) => String(s).replace(/\s+/g, ' ').trim();

  // The sticky status: the first error wins, device loss overrides an error.
  const setStatus = (d, code, msg) => {
    if (d.status === ERR.DEVICE_LOST || (d.status && code !== ERR.DEVICE_LOST)) return;
    d.status = code;
    d.message = oneLine(msg);
  };
  const errorName = (e) =>
    e instanceof GPUOutOfMemoryError ? 'out of memory' : e instanceof GPUValidationError ? 'validation error' : 'internal error';

  // Error scopes around recording: opened lazily, popped by the submit.
  const openScopes = (d) => {
    if (d.scoped) return;
    d.device.pushErrorScope('internal');
    d.device.pushErrorScope('out-of-memory');
    d.device.pushErrorScope('validation');
    d.scoped = true;
  };
  const popScopes = (d) => {
    if (!d.scoped) return [];
    d.scoped = false;
    return [d.device.popErrorScope(), d.device.popErrorScope(), d.device.popErrorScope()];
  };
  const endPass = (d) => {
    if (d.pass) {
      d.pass.end();
      d.pass = null;
    }
  };
  const encoder = (d) => {
    openScopes(d);
    if (!d.encoder) d.encoder = d.device.createCommandEncoder({ label: 'wgml' });
    return d.encoder;
  };
  const discard = (d) => {
    endPass(d);
    d.encoder = null;
  };

  const imports = {
    async gpu_create(wantF16, wantSubgroups, adapterPtr, msg, cap) {
      const fail = (code, text) => {
        writeStr(msg, cap, text);
        return -code;
      };
      if (!env.gpu) return fail(ERR.NO_ADAPTER, 'this browser has no WebGPU (navigator.gpu is missing)');
      const want = cstr(adapterPtr).toLowerCase();
      let adapter;
      try {
        adapter = await env.gpu.requestAdapter({ powerPreference: 'high-performance' });
      } catch (e) {
        return fail(ERR.NO_ADAPTER, `requestAdapter failed: ${e.message || e}`);
      }
      if (!adapter) return fail(ERR.NO_ADAPTER, 'the browser offers no WebGPU adapter (WebGPU disabled or blocklisted)');
      const name = adapterName(adapter);
      const i = adapter.info || {};
      const hay = [name, i.vendor, i.architecture, i.device, i.description].join(' ').toLowerCase();
      if (want && !hay.includes(want)) return fail(ERR.NO_ADAPTER, `no adapter matches '${want}'; found: ${name}`);
      const requiredFeatures = [];
      if (wantF16 && adapter.features.has('shader-f16')) requiredFeatures.push('shader-f16');
      if (wantSubgroups && adapter.features.has('subgroups')) requiredFeatures.push('subgroups');
      const requiredLimits = {};
      for (const k of LIMIT_NAMES) if (k in adapter.limits) requiredLimits[k] = adapter.limits[k];
      let device;
      try {
        device = await adapter.requestDevice({ label: 'wgml', requiredFeatures, requiredLimits });
      } catch (e) {
        return fail(ERR.GPU, `${name}: device request failed: ${e.message || e}`);
      }
      const d = { adapter, device, name, status: 0, message: '', scoped: false, encoder: null, pass: null,
                  staging: null, stagingSize: 0, destroying: false };
      device.onuncapturederror = (ev) => setStatus(d, ERR.GPU, `WebGPU ${errorName(ev.error)}: ${ev.error.message}`);
      device.lost.then((info) => {
        if (!d.destroying) setStatus(d, ERR.DEVICE_LOST, `device lost (${info.reason || 'unknown'}): ${info.message}`);
      });
      live.devices++;
      return put(d);
    },

    gpu_destroy(h) {
      const d = objects[h];
      if (!d) return;
      d.destroying = true;
      discard(d);
      if (d.staging) {
        d.staging.destroy();
        live.buffers--;
        live.bytes -= d.stagingSize;
      }
      d.device.destroy();
      live.devices--;
      drop(h);
    },

    gpu_info_str(h, which, buf, cap) {
      const d = objects[h];
      const i = d.adapter.info || {};
      const s = [d.name, i.vendor || '', i.architecture || '', i.description || ''][which] || '';
      return writeStr(buf, cap, s);
    },

    gpu_info_num(h, which) {
      const f = INFO_NUM[which];
      return f ? Number(f(objects[h])) || 0 : 0;
    },

    gpu_status(h, msg, cap) {
      const d = objects[h];
      if (!d) return ERR.INVALID_ARGUMENT;
      if (d.status) writeStr(msg, cap, d.message);
      return d.status;
    },

    gpu_lose(h) {
      const d = objects[h];
      if (!d) return;
      discard(d);
      d.device.destroy();
      setStatus(d, ERR.DEVICE_LOST, 'device lost: destroyed by wgml_gpu_lose_device');
    },

    async gpu_buffer_create(h, size, usage, labelPtr, msg, cap) {
      const d = objects[h];
      const label = cstr(labelPtr);
      const fail = (code, text) => {
        writeStr(msg, cap, text);
        return -code;
      };
      if (d.status) return fail(d.status, d.message);
      const what = `buffer '${label}' (${size} bytes)`;
      if (size > d.device.limits.maxBufferSize)
        return fail(ERR.GPU, `${what}: larger than this device's maxBufferSize of ${d.device.limits.maxBufferSize}`);
      let u = GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
      if (usage & STORAGE) u |= GPUBufferUsage.STORAGE;
      if (usage & UNIFORM) u |= GPUBufferUsage.UNIFORM;
      d.device.pushErrorScope('out-of-memory');
      d.device.pushErrorScope('validation');
      let buffer = null;
      let thrown = null;
      try {
        buffer = d.device.createBuffer({ label, size, usage: u });
      } catch (e) {
        thrown = e; // a RangeError when the browser cannot even allocate the object
      }
      const [v, o] = await Promise.all([d.device.popErrorScope(), d.device.popErrorScope()]);
      const e = v || o;
      if (thrown || e || !buffer) {
        if (buffer) buffer.destroy();
        if (d.status === ERR.DEVICE_LOST) return fail(d.status, d.message);
        const why = thrown ? thrown.message : e ? `${errorName(e)}: ${e.message}` : 'creation failed';
        return fail(ERR.GPU, `${what}: ${oneLine(why)}`);
      }
      live.buffers++;
      live.bytes += size;
      return put({ buffer, size, device: d });
    },

    gpu_buffer_destroy(b) {
      const o = objects[b];
      if (!o) return;
      o.buffer.destroy();
      live.buffers--;
      live.bytes -= o.size;
      drop(b);
    },

    gpu_write(h, b, offset, ptr, size) {
      const d = objects[h];
      if (d.status) return;
      const o = objects[b];
      if (!o) {
        setStatus(d, ERR.GPU, `wgml_gpu_write: ${size} bytes at ${offset}: a NULL buffer or data, or an unaligned or out-of-range write`);
        return;
      }
      openScopes(d);
      // writeBuffer copies the bytes now: the wasm memory can be reused at once.
      d.device.queue.writeBuffer(o.buffer, offset, env.mem(), ptr, size);
    },

    async gpu_kernel_create(h, wgslPtr, entryPtr, labelPtr, msg, cap) {
      const d = objects[h];
      const label = cstr(labelPtr);
      const fail = (code, text) => {
        writeStr(msg, cap, text);
        return -code;
      };
      if (d.status) return fail(d.status, d.message);
      const what = `kernel '${label}'`;
      const code = cstr(wgslPtr);
      const entryPoint = cstr(entryPtr);
      d.device.pushErrorScope('validation');
      const module = d.device.createShaderModule({ label, code });
      const [info, verr] = await Promise.all([module.getCompilationInfo(), d.device.popErrorScope()]);
      const errs = info.messages.filter((m) => m.type === 'error');
      if (errs.length)
        return fail(ERR.GPU, `${what}: WGSL compile error: ${errs.map((m) => `${m.lineNum}:${m.linePos}: ${oneLine(m.message)}`).join('; ')}`);
      if (verr) return fail(ERR.GPU, `${what}: validation error: ${oneLine(verr.message)}`);
      let pipeline;
      try {
        pipeline = await d.device.createComputePipelineAsync({ label, layout: 'auto', compute: { module, entryPoint } });
      } catch (e) {
        if (d.status === ERR.DEVICE_LOST) return fail(d.status, d.message);
        return fail(ERR.GPU, `${what}: pipeline creation failed: ${oneLine(e.message || e)}`);
      }
      return put({ pipeline, layout: pipeline.getBindGroupLayout(0), label });
    },

    gpu_kernel_destroy(k) {
      drop(k);
    },

    // Synchronous: a bad bind group is reported by the next submit (the scopes are open).
    gpu_bindgroup_create(h, k, entries, n, msg, cap) {
      const d = objects[h];
      const kern = objects[k];
      if (d.status) {
        writeStr(msg, cap, d.message);
        return -d.status;
      }
      const v = dv();
      const list = [];
      for (let i = 0; i < n; i++) {
        const p = entries + 24 * i;
        const buf = objects[v.getUint32(p + 4, true)];
        const offset = v.getFloat64(p + 8, true);
        const size = v.getFloat64(p + 16, true);
        const resource = { buffer: buf.buffer, offset };
        if (size) resource.size = size;
        list.push({ binding: v.getUint32(p, true), resource });
      }
      openScopes(d);
      const group = d.device.createBindGroup({ label: kern.label, layout: kern.layout, entries: list });
      return put({ group });
    },

    gpu_bindgroup_destroy(bg) {
      drop(bg);
    },

    gpu_dispatch(h, k, bg, x, y, z) {
      const d = objects[h];
      if (d.status) return;
      const kern = objects[k];
      const group = objects[bg];
      if (!kern || !group) {
        setStatus(d, ERR.GPU, 'wgml_gpu_dispatch: NULL kernel or bind group');
        return;
      }
      const enc = encoder(d);
      if (!d.pass) d.pass = enc.beginComputePass();
      d.pass.setPipeline(kern.pipeline);
      d.pass.setBindGroup(0, group.group);
      d.pass.dispatchWorkgroups(x, y, z);
    },

    gpu_copy(h, src, srcOffset, dst, dstOffset, size) {
      const d = objects[h];
      if (d.status) return;
      if (!objects[src] || !objects[dst]) {
        setStatus(d, ERR.GPU, `wgml_gpu_copy: ${size} bytes from ${srcOffset} to ${dstOffset}: unaligned or out of range`);
        return;
      }
      const enc = encoder(d);
      endPass(d);
      enc.copyBufferToBuffer(objects[src].buffer, srcOffset, objects[dst].buffer, dstOffset, size);
    },

    async gpu_submit(h, reads, n, msg, cap) {
      const d = objects[h];
      const done = () => {
        if (d.status) writeStr(msg, cap, d.message);
        return d.status;
      };
      if (d.status) {
        discard(d);
        popScopes(d);
        return done();
      }
      // Staging layout: each readback's word-aligned range, one after another.
      const v = dv();
      const list = [];
      let total = 0;
      for (let i = 0; i < n; i++) {
        const p = reads + 24 * i;
        const r = { buf: objects[v.getUint32(p, true)], dst: v.getUint32(p + 4, true), size: v.getUint32(p + 8, true),
                    offset: v.getFloat64(p + 16, true) };
        r.lo = Math.floor(r.offset / 4) * 4;
        r.hi = Math.ceil((r.offset + r.size) / 4) * 4;
        r.at = total;
        total += r.hi - r.lo;
        list.push(r);
      }
      if (total > d.stagingSize) {
        let size = d.stagingSize || 4096;
        while (size < total) size *= 2;
        if (d.staging) {
          d.staging.destroy();
          live.buffers--;
          live.bytes -= d.stagingSize;
        }
        openScopes(d);
        d.staging = d.device.createBuffer({ label: 'wgml readback', size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
        d.stagingSize = size;
        live.buffers++;
        live.bytes += size;
      }
      const enc = encoder(d);
      endPass(d);
      for (const r of list) if (r.hi > r.lo) enc.copyBufferToBuffer(r.buf.buffer, r.lo, d.staging, r.at, r.hi - r.lo);
      d.device.queue.submit([enc.finish()]);
      d.encoder = null;
      const scopes = popScopes(d);
      const mapped = total ? d.staging.mapAsync(GPUMapMode.READ, 0, Math.ceil(total / 8) * 8) : d.device.queue.onSubmittedWorkDone();
      const [m, ...errs] = await Promise.allSettled([mapped, ...scopes]);
      for (const e of errs) if (e.status === 'fulfilled' && e.value) setStatus(d, ERR.GPU, `WebGPU ${errorName(e.value)}: ${e.value.message}`);
      if (m.status === 'rejected') setStatus(d, ERR.GPU, `reading back results failed: ${m.reason && m.reason.message}`);
      else if (total) {
        if (!d.status) {
          const src = new Uint8Array(d.staging.getMappedRange(0, Math.ceil(total / 8) * 8));
          const mem = u8();
          for (const r of list) if (r.size) mem.set(src.subarray(r.at + (r.offset - r.lo), r.at + (r.offset - r.lo) + r.size), r.dst);
        }
        d.staging.unmap();
      }
      return done();
    },
  };
  return { imports, live, asyncImports: ASYNC_IMPORTS };
}

export const ASYNC_IMPORTS = ['gpu_create', 'gpu_buffer_create', 'gpu_kernel_create', 'gpu_submit'];
