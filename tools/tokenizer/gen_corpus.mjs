// Deterministic tokenizer test corpus: JSON-string lines (JSONL) that stress the pre-tokenizer
// regexes and BPE: many scripts (CJK, kana, Hangul, Arabic, Hebrew, Devanagari, Thai, Cyrillic,
// Greek, Latin with diacritics), code, whitespace runs (tabs, CR, LF, CRLF, NBSP, ideographic
// space), emoji (ZWJ sequences, skin tones, flags, keycaps), combining marks, digit runs,
// punctuation clusters, strings that spell special tokens, long runs (> 64 bytes) and random mixes.
// Usage: node tools/tokenizer/gen_corpus.mjs [n_lines=12000] [seed=20240601] > corpus.jsonl
//
// Characters whose treatment differs between regex engines are deliberately absent (see
// docs/tokenizer.md, "Known engine differences"): U+0085 and U+180E (whitespace for PCRE2 and
// Oniguruma, not for JavaScript), U+FEFF (whitespace for JavaScript only), and code points
// assigned after Unicode 14.0 (PCRE2 10.42 knows Unicode 14; Node 20's V8 knows a newer one).
import { pathToFileURL } from "node:url";

// mulberry32: tiny, fast and fully deterministic across Node versions.
function make_rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo, hi) => lo + Math.floor(next() * (hi - lo + 1));  // inclusive
  const pick = (arr) => arr[Math.floor(next() * arr.length)];
  return { next, int, pick };
}

const WORDS = {
  en: "the of and to in is you that it he was for on are as with his they I at be this have from or one had by word but not what all were we when your can said there use an each which she do how their if will up other about out many then them these so some her would make like him into time has look two more write go see number no way could people my than first water been call who oil its now find long down day did get come made may part over new sound take only little work know place year live me back give most very after thing our just name good sentence man think say great where help through much before line right too mean old any same tell boy follow came want show also around form three small set put end does another well large must big even such because turn here why ask went men read need land different home us move try kind hand picture again change off play spell air away animal house point page letter mother answer found study still learn should America world don't I'm you're it's we've they'll she'd O'Brien rock'n'roll".split(" "),
  de: "Größe Straße über Ärger Öffnung Übung schön müssen Fußgänger Weißbier Mädchen Brötchen".split(" "),
  fr: "élève façon garçon où déjà Noël naïve cœur œuvre à côté être très français l'homme aujourd'hui".split(" "),
  es: "niño año señor mañana corazón canción jamás ¿Qué ¡Hola! acción pingüino".split(" "),
  vi: "Tiếng Việt người được những trường hợp chúng ta không phải điều này Hà Nội".split(" "),
  tr: "İstanbul ışık çiçek şeker güzel ağaç öğretmen Iğdır".split(" "),
  ru: "Привет мир как дела это тест русский язык съешь же ещё этих мягких французских булок".split(" "),
  uk: "Україна їжак ґанок Київ щастя".split(" "),
  el: "Καλημέρα κόσμε ελληνικά γλώσσα αλφάβητο Ωμέγα".split(" "),
  ar: "مرحبا بالعالم اللغة العربية كتاب مدرسة السلام عليكم ١٢٣ ٤٥٦".split(" "),
  he: "שלום עולם עברית ספר תודה רבה".split(" "),
  hi: "नमस्ते दुनिया हिन्दी भाषा क्षत्रिय विद्यालय प्रेम ज्ञान संस्कृत".split(" "),
  th: "สวัสดีครับ ภาษาไทย ประเทศไทย กรุงเทพมหานคร ขอบคุณ น้ำ".split(" "),
  ko: "안녕하세요 세계 한국어 대한민국 감사합니다 ㄱㄴㄷ".split(" "),
  zh: "你好世界 中文 人工智能 深度学习 模型 推理 老师 北京 毕业 答案 我们 龍 𠮷野家".split(" "),
  ja: "こんにちは 世界 ひらがな カタカナ 日本語 東京 ありがとう ラーメン ー ヴ ゐ ヷ".split(" "),
  misc: "ǅungla ﬁnance Ⅻ ½ ² ³ ① ⓐ ℃ ™ © ® ° ± × ÷ µ ß ẞ ǈ ŉ ﬀ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟘𝟙𝟚 ＡＢＣ ａｂｃ １２３".split(" "),
};
const LANGS = Object.keys(WORDS);

const EMOJI = [
  "😀", "😂", "🥲", "❤️", "👍", "👍🏻", "👍🏽", "👍🏿", "🙋‍♀️", "👨‍👩‍👧‍👦", "👩‍💻", "🧑🏾‍🚀", "🏳️‍🌈",
  "🇯🇵", "🇺🇸", "🇩🇪", "1️⃣", "#️⃣", "©️", "☺", "☺️", "✌🏼", "🤝🏻", "🫠", "🫶🏽", "🐈‍⬛", "🐻‍❄️",
  "👁️‍🗨️", "❤️‍🔥", "🧔‍♂️", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "🥷", "🪄", "🦄", "🍣", "⚡", "⭐", "✨", "🔥",
];
const COMBINING = ["\u0301", "\u0300", "\u0308", "\u0327", "\u0303", "\u0323", "\u030A", "\u0336",
                   "\u20DD", "\u0489", "\u093C", "\u0E31", "\u0E48", "\u05B8", "\u064E"];
const PUNCT = ["!", "?", ".", ",", ";", ":", "...", "…", "—", "–", "-", "--", "(", ")", "[", "]",
               "{", "}", "<", ">", "«", "»", "“", "”", "‘", "’", "\"", "'", "`", "```", "/", "\\",
               "|", "@", "#", "$", "%", "^", "&", "*", "+", "=", "~", "_", "、", "。", "，", "！",
               "？", "（", "）", "【", "】", "《", "》", "・", "¿", "¡", "§", "¶", "†", "‰", "€", "£",
               "¥", "₹", "=>", "->", "::", "<<=", "!==", "&&", "||", "/*", "*/", "#!", "?!", "!!!"];
const SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", "\r\r\n", " \n", "\n ",
                "\t\n", " \t ", "\u00A0", "\u3000", "\u2003", "\u2009", "\u202F", "\u2028",
                "\u200B", "\u200D", "\v", "\f", "\n\n\n\n", "    \n    "];
const SPECIAL_SPELLINGS = [
  "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜System｜>",
  "<think>", "</think>", "｜DSML｜", "<｜DSML｜invoke name=\"f\">", "</｜DSML｜parameter>",
  "<|EOT|>", "<｜▁pad▁｜>", "<｜fim▁hole｜>", "<｜tool▁calls▁begin｜>", "<｜place▁holder▁no▁7｜>",
  "<｜latest_reminder｜>", "<｜action｜>", "<dsml:", "</dsml:", "<｜Use", "｜>", "<｜", "<tool_result>",
  "</tool_result>", "<|im_start|>", "<|endoftext|>", "<s>", "</s>", "[INST]",
];
const CODE = [
  "#include <vector>\nint main(int argc, char** argv) {\n  std::vector<int> v{1, 2, 3};\n  return v.size() > 2 ? 0 : 1;\n}\n",
  "def fib(n: int) -> int:\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
  "for (let i = 0; i < arr.length; ++i) {\n\tconsole.log(`item ${i}: ${arr[i]}`);\n}",
  "{\"name\": \"deepinfer\", \"version\": \"0.1.0\", \"ids\": [128803, 1, 0], \"ok\": true, \"x\": null}",
  "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC LIMIT 10;",
  "$ ./dev.sh build && ctest --test-dir build -L cpu -j2 2>&1 | tee log.txt",
  "<div class=\"row\"><a href=\"https://example.com/path?q=1&r=2#frag\">link</a></div>",
  "fn main() { let x: Vec<u8> = vec![0xFF, 0x10]; println!(\"{:?}\", x); }",
  "    x = self.layers[i](x, mask=None)  # residual\n\t\ty += 1;\r\n",
  "a.b.c().d_e(f->g, h::i, *j, &k, l[m], n?.o ?? p);",
  "@@ -12,7 +12,9 @@ class Foo:\n-    pass\n+    def bar(self):\n+        return 42\n",
  "\\begin{equation} E = mc^2 \\quad \\int_0^\\infty e^{-x^2} dx = \\frac{\\sqrt{\\pi}}{2} \\end{equation}",
  "user@example.org https://deepseek.com/v4?x=1 C:\\Users\\me\\file.txt /usr/local/bin/deepinfer",
  "| col1 | col2 |\n|------|------|\n| 1.5  | -2e-3|\n",
];

function word(rng) {
  return rng.pick(WORDS[rng.pick(LANGS)]);
}

function sentence(rng, lang) {
  const n = rng.int(3, 14);
  const words = [];
  for (let i = 0; i < n; ++i) words.push(rng.pick(WORDS[lang]));
  const sep = ["zh", "ja", "th"].includes(lang) && rng.next() < 0.7 ? "" : " ";
  return words.join(sep) + rng.pick([".", "!", "?", "。", "…", "", ",", "！"]);
}

function digits(rng) {
  const forms = [
    () => String(rng.int(0, 9)),
    () => String(rng.int(0, 999999999)),
    () => Array.from({ length: rng.int(4, 60) }, () => rng.int(0, 9)).join(""),
    () => `${rng.int(0, 9999)}.${rng.int(0, 99999)}`,
    () => `${rng.int(1, 31)}/${rng.int(1, 12)}/${rng.int(1900, 2100)}`,
    () => `${rng.int(0, 999)},${String(rng.int(0, 999)).padStart(3, "0")},${String(rng.int(0, 999)).padStart(3, "0")}`,
    () => `v${rng.int(0, 9)}.${rng.int(0, 20)}.${rng.int(0, 99)}`,
    () => `0x${rng.int(0, 0xffffff).toString(16)}`,
    () => `-${rng.int(1, 9)}e-${rng.int(1, 30)}`,
    () => "١٢٣٤٥٦٧", () => "１２３４５", () => "²³¹", () => "Ⅻ Ⅳ ⅷ", () => "½¾⅓", () => "৪৫৬",
  ];
  return rng.pick(forms)();
}

function decorate(rng, s) {
  // Sprinkles combining marks over a string, one after a random code point.
  const cps = Array.from(s);
  for (let k = rng.int(1, 3); k > 0 && cps.length > 0; --k) {
    const i = rng.int(0, cps.length - 1);
    cps[i] += rng.pick(COMBINING).repeat(rng.int(1, 3));
  }
  return cps.join("");
}

function random_code_points(rng) {
  // Blocks fully assigned by Unicode 14.0 (so every engine agrees on the categories).
  const blocks = [[0x20, 0x7e], [0xa1, 0xff], [0x100, 0x17f], [0x391, 0x3a1], [0x3b1, 0x3c9],
                  [0x410, 0x44f], [0x5d0, 0x5ea], [0x621, 0x63a], [0x905, 0x939], [0xe01, 0xe2e],
                  [0x3041, 0x3096], [0x30a1, 0x30fa], [0x4e00, 0x9fa5], [0xac00, 0xd7a3],
                  [0x2000, 0x200a], [0x2010, 0x2027], [0x2190, 0x21ff], [0x2500, 0x257f],
                  [0xff01, 0xff5e], [0x1f600, 0x1f64f], [0x1d400, 0x1d454]];
  const n = rng.int(1, 30);
  let s = "";
  for (let i = 0; i < n; ++i) {
    const [lo, hi] = rng.pick(blocks);
    s += String.fromCodePoint(rng.int(lo, hi));
  }
  return s;
}

function long_run(rng) {
  const unit = rng.pick(["a", "ab", "x", " ", "\t", "\n", "=", "-", "*", "中", "あ", "ア", "7",
                         "😀", "ñ", "é", "Ж", "!?", "\r\n", " a", "_", "abc "]);
  return unit.repeat(rng.int(20, 400));
}

const GENERATORS = [
  (rng) => sentence(rng, "en"),
  (rng) => sentence(rng, rng.pick(LANGS)),
  (rng) => Array.from({ length: rng.int(2, 4) }, () => sentence(rng, rng.pick(LANGS))).join(rng.pick(SPACES)),
  (rng) => rng.pick(CODE),
  (rng) => rng.pick(CODE).replaceAll("    ", rng.pick(["\t", "  ", "        "])),
  (rng) => Array.from({ length: rng.int(2, 10) }, () => word(rng) + rng.pick(SPACES)).join(""),
  (rng) => Array.from({ length: rng.int(1, 8) }, () => rng.pick(EMOJI)).join(rng.pick(["", " ", "", "\u200D"])),
  (rng) => `${word(rng)} ${rng.pick(EMOJI)}${rng.pick(EMOJI)} ${word(rng)}${rng.pick(PUNCT)}`,
  (rng) => decorate(rng, sentence(rng, rng.pick(LANGS))),
  (rng) => Array.from({ length: rng.int(1, 6) }, () => digits(rng)).join(rng.pick([" ", "", ", ", "-", "\n"])),
  (rng) => word(rng) + digits(rng) + word(rng),
  (rng) => Array.from({ length: rng.int(1, 8) }, () => rng.pick(PUNCT)).join(rng.pick(["", " ", ""])),
  (rng) => `${rng.pick(PUNCT)}${word(rng)}${rng.pick(PUNCT)}${rng.pick(SPACES)}${rng.pick(PUNCT)}${word(rng)}`,
  (rng) => `${sentence(rng, "en")} ${rng.pick(SPECIAL_SPELLINGS)}${word(rng)}${rng.pick(SPECIAL_SPELLINGS)}`,
  (rng) => rng.pick(SPECIAL_SPELLINGS),
  (rng) => Array.from({ length: rng.int(2, 5) }, () => rng.pick(SPECIAL_SPELLINGS)).join(rng.pick(["", " ", "\n"])),
  (rng) => random_code_points(rng),
  (rng) => rng.pick(SPACES).repeat(rng.int(1, 6)) + word(rng) + rng.pick(SPACES).repeat(rng.int(1, 6)),
  (rng) => `${word(rng)}${rng.pick(SPACES)}${digits(rng)}${rng.pick(SPACES)}${rng.pick(PUNCT)}${rng.pick(SPACES)}`,
  (rng) => long_run(rng),
  (rng) => `${word(rng)}${long_run(rng)}${word(rng)}`,
  (rng) => Array.from({ length: rng.int(20, 120) }, () => word(rng)).join(rng.pick([" ", "", "\n", " \t"])),
  (rng) => word(rng).toUpperCase() + " " + word(rng).toLowerCase() + " " + word(rng),
];

export function generate_corpus(n_lines = 12000, seed = 20240601) {
  const rng = make_rng(seed);
  const lines = [];
  for (let i = 0; i < n_lines; ++i) {
    // Every generator appears in a fixed rotation too, so each category is always covered.
    const gen = i < GENERATORS.length * 20 ? GENERATORS[i % GENERATORS.length] : rng.pick(GENERATORS);
    lines.push(gen(rng));
  }
  return lines;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const n_lines = Number(process.argv[2] ?? 12000);
  const seed = Number(process.argv[3] ?? 20240601);
  const out = generate_corpus(n_lines, seed).map((line) => JSON.stringify(line)).join("\n") + "\n";
  process.stdout.write(out);
}
