// serve-web.mjs - a small static file server for trying the wgml web build and
// for the browser tests: the repository root at /, a models folder at /models/.
//
//   node scripts/serve-web.mjs [--port 8080] [--models models] [--root .]
//   then open http://127.0.0.1:8080/web/
//
// Binds 127.0.0.1 only. GET and HEAD, byte ranges, the MIME types module
// scripts and WebAssembly streaming compilation need (text/javascript,
// application/wasm), Content-Length on every file (the page streams a model
// straight to the GPU knowing its size), no caching (the page has its own
// model cache), and the two headers that make the page cross-origin isolated
// (COOP same-origin, COEP require-corp), without which a browser gives no
// shared memory and the CPU path runs one thread (docs/web.md, "Threads").
// Paths are confined to the two folders. Node's standard library only;
// importable (startServer) by tests/web/run.mjs.
import { createServer } from 'node:http';
import { createReadStream, promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/plain; charset=utf-8',
  '.wgsl': 'text/plain; charset=utf-8',
};

// The file a URL path names under root, or null when it would leave root.
function resolveUnder(root, urlPath) {
  let rel;
  try {
    rel = decodeURIComponent(urlPath);
  } catch {
    return null;
  }
  if (rel.includes('\0')) return null;
  const full = path.resolve(root, '.' + path.posix.normalize('/' + rel));
  return full === root || full.startsWith(root + path.sep) ? full : null;
}

async function handle(req, res, roots) {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { Allow: 'GET, HEAD' }).end();
    return;
  }
  const url = new URL(req.url, 'http://localhost');
  let file = null;
  if (url.pathname.startsWith('/models/')) file = resolveUnder(roots.models, url.pathname.slice('/models'.length));
  else file = resolveUnder(roots.root, url.pathname);
  if (!file) {
    res.writeHead(403).end('forbidden\n');
    return;
  }
  let st;
  try {
    st = await fs.stat(file);
    if (st.isDirectory()) {
      if (!url.pathname.endsWith('/')) {
        res.writeHead(301, { Location: url.pathname + '/' }).end();
        return;
      }
      file = path.join(file, 'index.html');
      st = await fs.stat(file);
    }
  } catch {
    res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n');
    return;
  }
  const headers = {
    'Content-Type': TYPES[path.extname(file).toLowerCase()] || 'application/octet-stream',
    'Cache-Control': 'no-store',
    'Accept-Ranges': 'bytes',
    'Cross-Origin-Opener-Policy': 'same-origin',
    'Cross-Origin-Embedder-Policy': 'require-corp',
  };
  let start = 0;
  let end = st.size - 1;
  let status = 200;
  const range = /^bytes=(\d*)-(\d*)$/.exec(req.headers.range || '');
  if (range && (range[1] || range[2])) {
    if (range[1]) {
      start = Number(range[1]);
      if (range[2]) end = Math.min(Number(range[2]), st.size - 1);
    } else {
      start = Math.max(0, st.size - Number(range[2]));
    }
    if (start > end || start >= st.size) {
      res.writeHead(416, { 'Content-Range': `bytes */${st.size}` }).end();
      return;
    }
    status = 206;
    headers['Content-Range'] = `bytes ${start}-${end}/${st.size}`;
  }
  headers['Content-Length'] = String(st.size === 0 ? 0 : end - start + 1);
  res.writeHead(status, headers);
  if (req.method === 'HEAD' || st.size === 0) {
    res.end();
    return;
  }
  const stream = createReadStream(file, { start, end });
  stream.on('error', () => res.destroy());
  stream.pipe(res);
}

// Starts the server; resolves to { server, port, url }.
export function startServer({ root, models, port = 0, host = '127.0.0.1', log = false } = {}) {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const roots = {
    root: path.resolve(root || path.join(here, '..')),
    models: path.resolve(models || path.join(here, '..', 'models')),
  };
  const server = createServer((req, res) => {
    if (log) console.log(`${req.method} ${req.url}`);
    handle(req, res, roots).catch((e) => {
      if (!res.headersSent) res.writeHead(500).end(String(e));
      else res.destroy();
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const p = server.address().port;
      resolve({ server, port: p, url: `http://${host}:${p}/`, roots });
    });
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const opt = { port: 8080, log: true };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--port') opt.port = Number(args[++i]);
    else if (a === '--models') opt.models = args[++i];
    else if (a === '--root') opt.root = args[++i];
    else if (a === '--quiet') opt.log = false;
    else {
      console.error('usage: node scripts/serve-web.mjs [--port N] [--models DIR] [--root DIR] [--quiet]');
      process.exit(2);
    }
  }
  const { url, roots } = await startServer(opt);
  console.log(`serving ${roots.root} at ${url} and ${roots.models} at ${url}models/`);
  console.log(`open ${url}web/`);
}
