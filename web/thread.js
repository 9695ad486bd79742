// thread.js - one worker thread of web/dist/wgml-threads.wasm (docs/web.md,
// "Threads"). web/engine.js starts it with the compiled module, the shared
// memory, its number and the top of the stack the main thread allocated for
// it; it instantiates the module on that memory, takes that stack, says
// 'ready' and enters C (wgmlw_thread_entry, src/web/web_threads.c), where it
// stays, running the CPU backend's jobs, until the owning worker ends.
//
// Threads run kernels only: none of the module's imports (the GPU, model reads,
// callbacks) is theirs to call, and calling one is an error. The data segments
// are not copied again: with a shared memory the module's start function
// does that once, for the first instance.
const ENOSYS = 52;

self.onmessage = async ({ data }) => {
  const { module, memory, index, stackTop } = data;
  try {
    const t0 = performance.now();
    const wasi = {
      clock_time_get(id, precision, out) {
        const ns = id === 0 ? BigInt(Date.now()) * 1000000n : BigInt(Math.round((performance.now() - t0) * 1e6));
        new DataView(memory.buffer).setBigUint64(out, ns, true);
        return 0;
      },
    };
    const notHere = (mod) => new Proxy({}, {
      get: (_, name) => () => {
        throw new Error(`wgml thread ${index + 1}: '${mod}.${String(name)}' cannot be called on a worker thread`);
      },
    });
    const imports = {
      env: { memory },
      wgml: notHere('wgml'),
      wasi_snapshot_preview1: new Proxy(wasi, { get: (o, k) => o[k] || (() => ENOSYS) }),
    };
    const { exports } = await WebAssembly.instantiate(module, imports);
    exports.__stack_pointer.value = stackTop;
    self.postMessage({ type: 'ready', index });
    exports.wgmlw_thread_entry(index); // returns only on a bad index
    self.postMessage({ type: 'error', index, message: 'wgmlw_thread_entry returned' });
  } catch (e) {
    self.postMessage({ type: 'error', index, message: (e && e.message) || String(e) });
  }
};
