// g2p.js - espeak-ng for text to speech in the page: the npm package
// `phonemizer` (espeak-ng compiled to WebAssembly, inside one ES module),
// loaded on first use only, when text (not phonemes) is spoken.
//
// Licences: espeak-ng is GPL-3.0-or-later; phonemizer, the wrapper that
// ships it, is Apache-2.0. It is a separate module the page loads at run
// time (web/node_modules/phonemizer, installed by `npm ci --prefix web`),
// never linked into wgml.wasm (MIT). Without it, text input fails with a
// clear message and phoneme input still works.
//
// Only espeak-ng's letters-to-sounds step runs here. Everything else that
// kokoro-js's phonemize() does (normalization, splitting on punctuation,
// joining, post-processing) is the C library's G2P (src/text/g2p_en.c),
// run inside wgml.wasm on these results, so the page and `wgml phonemize`
// share one implementation (src/web/web_api.c: wgmlw_g2p_pieces, wgmlw_speak).
import { WgmlError } from './engine.js';

export const DEFAULT_PHONEMIZER = new URL('./node_modules/phonemizer/dist/phonemizer.js', import.meta.url).href;

const loaded = new Map(); // module URL -> Promise of the module

// The phonemizer module at url (default: web/node_modules/phonemizer); rejects
// with a WgmlError (code 4, unsupported) that says what to do when it is missing.
export function loadPhonemizer(url = DEFAULT_PHONEMIZER) {
  let p = loaded.get(url);
  if (!p) {
    p = import(url).then(
      (mod) => {
        if (typeof mod.phonemize !== 'function') throw new Error('the module has no phonemize()');
        return mod;
      },
    ).catch((e) => {
      loaded.delete(url); // a later call may try again (e.g. after installing it)
      throw new WgmlError(4, `text input needs espeak-ng, and the phonemizer module (espeak-ng compiled to ` +
        `WebAssembly, npm package 'phonemizer') could not be loaded from ${url}: ${e.message || e}. ` +
        `Install it with 'npm ci --prefix web' (or pass the module's URL as the 'phonemizer' option); ` +
        `phoneme input works without it`);
    });
    loaded.set(url, p);
  }
  return p;
}

// The phonemes of each piece as kokoro-js's phonemizer gives them: espeak-ng's
// IPA output lines, empty ones dropped, joined with a space. voice: espeak-ng's
// ('en-us' or 'en'; wgmlw_g2p_pieces says which).
export async function phonemizePieces(pieces, voice, url = DEFAULT_PHONEMIZER) {
  const { phonemize } = await loadPhonemizer(url);
  const out = [];
  for (const piece of pieces) {
    let lines;
    try {
      lines = await phonemize(piece, voice);
    } catch (e) {
      throw new WgmlError(1, `espeak-ng (phonemizer) failed on '${piece}': ${e.message || e}`);
    }
    out.push(lines.filter((l) => l.length > 0).join(' '));
  }
  return out;
}
