/*
 * whisper_vocab.c - Whisper's special tokens and language codes
 * (whisper_vocab.h): the layout of openai/whisper's tokenizer.py
 * (get_encoding): the BPE ranks, then <|endoftext|>, <|startoftranscript|>,
 * one token per language in LANGUAGES' order (the first num_languages),
 * <|translate|>, <|transcribe|>, <|startoflm|>, <|startofprev|>,
 * <|nospeech|>, <|notimestamps|> and the 1501 timestamps <|0.00|>..<|30.00|>.
 */
#include "model/whisper/whisper_vocab.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"

#define N_TIMESTAMPS 1501

/* openai/whisper's LANGUAGES, in its order (token ids follow it) */
static const char *const LANGS[WHISPER_N_LANG_MAX] = {
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it", "id",
    "hi", "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur", "hr", "bg",
    "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr", "az", "sl", "kn", "et", "mk", "br",
    "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw", "gl", "mr", "pa", "si", "km", "sn", "yo", "so",
    "af", "oc", "ka", "be", "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt",
    "sa", "lb", "my", "bo", "tl", "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue",
};

wgml_status whisper_specials_init(whisper_specials *s, int n_vocab, wgml_error *err) {
    memset(s, 0, sizeof *s);
    int n_text;
    switch (n_vocab) {
    case 51864: n_text = 50256; break; /* English-only: GPT-2's ranks */
    case 51865:                        /* multilingual: 99 languages */
    case 51866: n_text = 50257; break; /* v3: 100 */
    default:
        return wgml_fail(err, WGML_ERR_FORMAT,
                         "a Whisper vocabulary of %d ids (51864 English-only, 51865 multilingual or 51866 v3)", n_vocab);
    }
    s->n_vocab = n_vocab;
    s->n_text = n_text;
    s->multilingual = n_vocab != 51864;
    s->eot = n_text;
    s->sot = n_text + 1;
    s->lang0 = n_text + 2;
    s->n_lang = n_vocab - n_text - 2 - 6 - N_TIMESTAMPS; /* 99, 99 or 100 */
    s->translate = s->lang0 + s->n_lang;
    s->transcribe = s->translate + 1;
    s->sot_lm = s->translate + 2;
    s->sot_prev = s->translate + 3;
    s->no_speech = s->translate + 4;
    s->no_timestamps = s->translate + 5;
    s->ts_begin = s->translate + 6;
    return WGML_OK;
}

const char *whisper_lang_code(int i) { return i >= 0 && i < WHISPER_N_LANG_MAX ? LANGS[i] : NULL; }

int whisper_lang_token(const whisper_specials *s, const char *code) {
    if (!code) return -1;
    for (int i = 0; i < s->n_lang; i++)
        if (strcmp(LANGS[i], code) == 0) return s->lang0 + i;
    return -1;
}

int whisper_special_name(const whisper_specials *s, int id, char *buf, size_t cap) {
    static const char *const TAIL[6] = {"translate", "transcribe", "startoflm", "startofprev", "nospeech",
                                        "notimestamps"};
    const char *name = NULL;
    char ts[16];
    if (id < s->eot || id >= s->n_vocab) return -1;
    if (id == s->eot)
        name = "endoftext";
    else if (id == s->sot)
        name = "startoftranscript";
    else if (id < s->lang0 + s->n_lang)
        name = LANGS[id - s->lang0];
    else if (id < s->ts_begin)
        name = TAIL[id - s->translate];
    else {
        snprintf(ts, sizeof ts, "%.2f", (id - s->ts_begin) * 0.02); /* Python's f"{i * 0.02:.2f}" */
        name = ts;
    }
    int n = snprintf(buf, cap, "<|%s|>", name);
    return n;
}
