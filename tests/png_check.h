/*
** png_check.h -- a tiny PNG reader for the tests (8-bit RGB, as
** png_write_rgb writes): chunks with CRC, zlib with stored and
** fixed-Huffman blocks, Adler-32, the five row filters; every check a test
** assertion. Static inline: any test file may include it.
*/
#ifndef TPUSIM_TEST_PNG_CHECK_H
#define TPUSIM_TEST_PNG_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

typedef struct {
  const unsigned char *p;
  size_t n, pos; /* in bits */
} bitin;

static inline int bit(bitin *b) {
  cr_assert(b->pos / 8 < b->n, "deflate stream runs past its end");
  int v = (b->p[b->pos / 8] >> (b->pos % 8)) & 1;
  b->pos++;
  return v;
}

static inline unsigned bits(bitin *b, int n) {
  unsigned v = 0;
  for (int i = 0; i < n; i++) v |= (unsigned)bit(b) << i;
  return v;
}

static inline unsigned code(bitin *b, int n) { /* Huffman codes come MSB first */
  unsigned v = 0;
  for (int i = 0; i < n; i++) v = (v << 1) | (unsigned)bit(b);
  return v;
}

static inline int fixed_sym(bitin *b) {
  unsigned c = code(b, 7);
  if (c <= 23) return 256 + (int)c;
  c = (c << 1) | (unsigned)bit(b);
  if (c >= 0x30 && c <= 0xBF) return (int)c - 0x30;
  if (c >= 0xC0 && c <= 0xC7) return 280 + (int)c - 0xC0;
  c = (c << 1) | (unsigned)bit(b);
  cr_assert(c >= 0x190 && c <= 0x1FF, "bad fixed Huffman code");
  return 144 + (int)c - 0x190;
}

static const int LB[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                           31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const int LX[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                           2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const int DB[30] = {1,    2,    3,    4,    5,    7,    9,    13,    17,    25,
                           33,   49,   65,   97,   129,  193,  257,  385,   513,   769,
                           1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const int DX[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6,
                           6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

/* zlib -> bytes (exactly want of them). */
static inline unsigned char *inflate_zlib(const unsigned char *z, size_t n, size_t want) {
  cr_assert(n >= 6);
  cr_assert_eq(z[0] & 0x0f, 8, "zlib method must be deflate");
  cr_assert_eq((z[0] * 256 + z[1]) % 31, 0, "zlib header check");
  unsigned char *out = malloc(want ? want : 1);
  size_t o = 0;
  bitin b = {z + 2, n - 6, 0};
  int final = 0;
  while (!final) {
    final = bit(&b);
    int type = (int)bits(&b, 2);
    if (type == 0) {
      b.pos = (b.pos + 7) / 8 * 8;
      unsigned len = bits(&b, 16), nlen = bits(&b, 16);
      cr_assert_eq(len, (~nlen) & 0xffff, "stored block LEN/NLEN");
      cr_assert(o + len <= want);
      for (unsigned i = 0; i < len; i++) out[o++] = (unsigned char)bits(&b, 8);
    } else {
      cr_assert_eq(type, 1, "only stored and fixed-Huffman blocks are expected");
      for (;;) {
        int s = fixed_sym(&b);
        if (s < 256) {
          cr_assert(o < want, "inflated data longer than the image");
          out[o++] = (unsigned char)s;
        } else if (s == 256) {
          break;
        } else {
          cr_assert(s <= 285);
          int len = LB[s - 257] + (int)bits(&b, LX[s - 257]);
          int dc = (int)code(&b, 5);
          cr_assert(dc < 30);
          size_t d = (size_t)(DB[dc] + (int)bits(&b, DX[dc]));
          cr_assert(d <= o && o + (size_t)len <= want, "bad back-reference");
          for (int i = 0; i < len; i++, o++) out[o] = out[o - d];
        }
      }
    }
  }
  cr_assert_eq(o, want, "inflated %zu bytes, the image needs %zu", o, want);
  uint32_t s1 = 1, s2 = 0;
  for (size_t i = 0; i < o; i++) {
    s1 = (s1 + out[i]) % 65521;
    s2 = (s2 + s1) % 65521;
  }
  const unsigned char *a = z + n - 4;
  cr_assert_eq((s2 << 16) | s1, (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 | a[2] << 8 | a[3],
               "Adler-32");
  return out;
}

static inline uint32_t rd32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint32_t crc32_bytes(const unsigned char *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
  }
  return ~c;
}

static inline int pred(int type, int a, int b, int c) {
  int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
  switch (type) {
  case 0: return 0;
  case 1: return a;
  case 2: return b;
  case 3: return (a + b) / 2;
  default: return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
  }
}

typedef struct {
  int w, h;
  unsigned char *rgb;
} image;

static inline image png_read(const char *path) {
  FILE *f = fopen(path, "rb");
  cr_assert(f, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *d = malloc((size_t)n);
  cr_assert_eq(fread(d, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  static const unsigned char SIG[8] = {137, 'P', 'N', 'G', '\r', '\n', 26, '\n'};
  cr_assert(n > 8 && memcmp(d, SIG, 8) == 0, "PNG signature");
  image im = {0};
  unsigned char *idat = NULL;
  size_t nidat = 0, pos = 8;
  int saw_end = 0;
  while (pos + 12 <= (size_t)n) {
    uint32_t len = rd32(d + pos);
    cr_assert(pos + 12 + len <= (size_t)n, "chunk runs past the end");
    const unsigned char *type = d + pos + 4, *body = d + pos + 8;
    cr_assert_eq(crc32_bytes(type, len + 4), rd32(body + len), "CRC of %.4s", type);
    if (memcmp(type, "IHDR", 4) == 0) {
      im.w = (int)rd32(body);
      im.h = (int)rd32(body + 4);
      cr_assert(body[8] == 8 && body[9] == 2 && body[12] == 0, "8-bit RGB, not interlaced");
    } else if (memcmp(type, "IDAT", 4) == 0) {
      idat = realloc(idat, nidat + len);
      memcpy(idat + nidat, body, len);
      nidat += len;
    } else if (memcmp(type, "IEND", 4) == 0) {
      saw_end = 1;
    }
    pos += 12 + len;
  }
  cr_assert(saw_end && im.w > 0 && im.h > 0 && idat);
  size_t stride = (size_t)im.w * 3;
  unsigned char *raw = inflate_zlib(idat, nidat, (stride + 1) * (size_t)im.h);
  im.rgb = malloc(stride * (size_t)im.h);
  for (int y = 0; y < im.h; y++) {
    const unsigned char *src = raw + (stride + 1) * (size_t)y;
    cr_assert(src[0] <= 4, "filter type");
    unsigned char *row = im.rgb + stride * (size_t)y, *up = y ? row - stride : NULL;
    for (size_t x = 0; x < stride; x++) {
      int a = x >= 3 ? row[x - 3] : 0, b = up ? up[x] : 0, c = x >= 3 && up ? up[x - 3] : 0;
      row[x] = (unsigned char)(src[1 + x] + pred(src[0], a, b, c));
    }
  }
  free(raw);
  free(idat);
  free(d);
  return im;
}

#endif
