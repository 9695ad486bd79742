// png.mjs - just enough of a PNG decoder to check a screenshot in the browser
// tests: 8-bit RGB/RGBA, non-interlaced (what Chromium writes), all five
// scanline filters. decodePng(buffer) -> { width, height, channels, pixels };
// imageStats(img) -> { distinctColors, lumaStdDev, darkFraction, lightFraction };
// encodePng({ width, height, pixels }) -> an RGB PNG file's bytes (test images).
import { deflateSync, inflateSync } from 'node:zlib';

export function decodePng(buf) {
  const sig = [137, 80, 78, 71, 13, 10, 26, 10];
  for (let i = 0; i < 8; i++) if (buf[i] !== sig[i]) throw new Error('not a PNG file');
  let pos = 8;
  let width = 0;
  let height = 0;
  let channels = 0;
  const idat = [];
  while (pos < buf.length) {
    const len = buf.readUInt32BE(pos);
    const type = buf.toString('latin1', pos + 4, pos + 8);
    const data = buf.subarray(pos + 8, pos + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      const depth = data[8];
      const color = data[9];
      if (depth !== 8 || data[12] !== 0 || (color !== 2 && color !== 6))
        throw new Error(`unsupported PNG (depth ${depth}, colour type ${color}, interlace ${data[12]})`);
      channels = color === 6 ? 4 : 3;
    } else if (type === 'IDAT') idat.push(data);
    else if (type === 'IEND') break;
    pos += 12 + len;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const pixels = new Uint8Array(height * stride);
  for (let y = 0; y < height; y++) {
    const f = raw[y * (stride + 1)];
    const src = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const row = pixels.subarray(y * stride, (y + 1) * stride);
    const up = y ? pixels.subarray((y - 1) * stride, y * stride) : new Uint8Array(stride);
    for (let x = 0; x < stride; x++) {
      const a = x >= channels ? row[x - channels] : 0;
      const b = up[x];
      const c = x >= channels ? up[x - channels] : 0;
      let v = src[x];
      if (f === 1) v += a;
      else if (f === 2) v += b;
      else if (f === 3) v += (a + b) >> 1;
      else if (f === 4) {
        const p = a + b - c;
        const pa = Math.abs(p - a);
        const pb = Math.abs(p - b);
        const pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      } else if (f !== 0) throw new Error(`bad PNG filter ${f}`);
      row[x] = v & 255;
    }
  }
  return { width, height, channels, pixels };
}

export function imageStats({ width, height, channels, pixels }) {
  const colors = new Set();
  let sum = 0;
  let sum2 = 0;
  let dark = 0;
  let light = 0;
  const n = width * height;
  for (let i = 0; i < n; i++) {
    const p = i * channels;
    const r = pixels[p];
    const g = pixels[p + 1];
    const b = pixels[p + 2];
    if (colors.size < 100000) colors.add((r << 16) | (g << 8) | b);
    const l = 0.299 * r + 0.587 * g + 0.114 * b;
    sum += l;
    sum2 += l * l;
    if (l < 60) dark++;
    if (l > 180) light++;
  }
  const mean = sum / n;
  return { distinctColors: colors.size, lumaStdDev: Math.sqrt(Math.max(0, sum2 / n - mean * mean)),
           darkFraction: dark / n, lightFraction: light / n };
}

// encodePng({ width, height, pixels }) -> a Buffer: an 8-bit RGB PNG (filter
// 0, one IDAT) of pixels, 3 bytes a pixel, rows packed (test images).
const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
export function encodePng({ width, height, pixels }) {
  const chunk = (type, data) => {
    const head = Buffer.alloc(8);
    head.writeUInt32BE(data.length, 0);
    head.write(type, 4, 'latin1');
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
    return Buffer.concat([head, data, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // depth
  ihdr[9] = 2; // RGB
  const raw = Buffer.alloc(height * (3 * width + 1));
  for (let y = 0; y < height; y++) raw.set(pixels.subarray(3 * width * y, 3 * width * (y + 1)), y * (3 * width + 1) + 1);
  return Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0))]);
}
