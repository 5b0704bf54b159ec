/*
** png.c -- see png.h: each row with the filter (none, sub, up or Paeth)
** of least absolute sum, then one fixed-Huffman deflate block with greedy
** LZ77 over a hash chain, in IHDR, IDAT and IEND chunks.
*/
#include "png.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  unsigned char *b;
  size_t n, cap;
  uint32_t acc;
  int nb;
  bool oom;
} bitbuf;

static void put_byte(bitbuf *o, unsigned char c) {
  if (o->n == o->cap) {
    size_t nc = o->cap ? o->cap * 2 : 65536;
    unsigned char *nb = realloc(o->b, nc);
    if (!nb) {
      o->oom = true;
      return;
    }
    o->b = nb;
    o->cap = nc;
  }
  o->b[o->n++] = c;
}

static void put_bits(bitbuf *o, uint32_t v, int n) { /* LSB first */
  o->acc |= v << o->nb;
  o->nb += n;
  while (o->nb >= 8) {
    put_byte(o, (unsigned char)(o->acc & 0xff));
    o->acc >>= 8;
    o->nb -= 8;
  }
}

static void put_code(bitbuf *o, uint32_t code, int n) { /* Huffman codes: MSB first */
  uint32_t r = 0;
  for (int i = 0; i < n; i++) r |= ((code >> i) & 1u) << (n - 1 - i);
  put_bits(o, r, n);
}

static void put_sym(bitbuf *o, int s) { /* the fixed literal/length code */
  if (s < 144) put_code(o, 0x30u + (uint32_t)s, 8);
  else if (s < 256) put_code(o, 0x190u + (uint32_t)(s - 144), 9);
  else if (s < 280) put_code(o, (uint32_t)(s - 256), 7);
  else put_code(o, 0xC0u + (uint32_t)(s - 280), 8);
}

static const unsigned short LBASE[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,
                                         15, 17, 19, 23, 27, 31, 35, 43, 51,  59,
                                         67, 83, 99, 115, 131, 163, 195, 227, 258};
static const unsigned char LEXT[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                       2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const unsigned short DBASE[30] = {1,    2,    3,    4,    5,    7,     9,     13,
                                         17,   25,   33,   49,   65,   97,    129,   193,
                                         257,  385,  513,  769,  1025, 1537,  2049,  3073,
                                         4097, 6145, 8193, 12289, 16385, 24577};
static const unsigned char DEXT[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                       6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

static void put_match(bitbuf *o, int len, int dist) {
  int i = 28;
  while (LBASE[i] > len) i--;
  put_sym(o, 257 + i);
  put_bits(o, (uint32_t)(len - LBASE[i]), LEXT[i]);
  int d = 29;
  while (DBASE[d] > dist) d--;
  put_code(o, (uint32_t)d, 5);
  put_bits(o, (uint32_t)(dist - DBASE[d]), DEXT[d]);
}

enum { HASH_BITS = 15, WINDOW = 32768, MAX_CHAIN = 24 };

/* One final fixed-Huffman block with greedy LZ77 over a hash chain. */
static int deflate_fixed(const unsigned char *src, size_t n, bitbuf *o) {
  int32_t *head = malloc(sizeof(int32_t) << HASH_BITS);
  int32_t *prev = malloc((n ? n : 1) * sizeof *prev);
  if (!head || !prev || n > INT32_MAX) {
    free(head);
    free(prev);
    return -1;
  }
  for (size_t i = 0; i < (1u << HASH_BITS); i++) head[i] = -1;
  put_bits(o, 1, 1); /* BFINAL */
  put_bits(o, 1, 2); /* BTYPE 01: fixed Huffman */
#define HASH(p) ((((uint32_t)(p)[0] << 10) ^ ((uint32_t)(p)[1] << 5) ^ (p)[2]) & ((1u << HASH_BITS) - 1))
  size_t i = 0;
  while (i < n) {
    int best = 0, bestd = 0;
    if (i + 3 <= n) {
      uint32_t h = HASH(src + i);
      int32_t p = head[h];
      size_t maxl = n - i < 258 ? n - i : 258;
      for (int depth = 0; p >= 0 && i - (size_t)p <= WINDOW && depth < MAX_CHAIN;
           depth++, p = prev[p]) {
        size_t l = 0;
        while (l < maxl && src[(size_t)p + l] == src[i + l]) l++;
        if ((int)l > best) {
          best = (int)l;
          bestd = (int)(i - (size_t)p);
          if (l == maxl) break;
        }
      }
      prev[i] = head[h];
      head[h] = (int32_t)i;
    }
    if (best >= 3) {
      put_match(o, best, bestd);
      for (size_t k = i + 1; k < i + (size_t)best && k + 3 <= n; k++) {
        uint32_t h = HASH(src + k);
        prev[k] = head[h];
        head[h] = (int32_t)k;
      }
      i += (size_t)best;
    } else {
      put_sym(o, src[i]);
      i++;
    }
  }
#undef HASH
  put_sym(o, 256);
  if (o->nb > 0) put_bits(o, 0, 8 - o->nb);
  free(head);
  free(prev);
  return o->oom ? -1 : 0;
}

static uint32_t crc32_of(const unsigned char *a, size_t n, uint32_t crc, const uint32_t *tab) {
  crc = ~crc;
  for (size_t i = 0; i < n; i++) crc = tab[(crc ^ a[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

static void be32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

static int chunk(FILE *f, const char *type, const unsigned char *data, size_t n,
                 const uint32_t *tab) {
  unsigned char hdr[8], crcb[4];
  be32(hdr, (uint32_t)n);
  memcpy(hdr + 4, type, 4);
  uint32_t crc = crc32_of(hdr + 4, 4, 0, tab);
  crc = crc32_of(data, n, crc, tab);
  be32(crcb, crc);
  return fwrite(hdr, 1, 8, f) == 8 && (n == 0 || fwrite(data, 1, n, f) == n) &&
                 fwrite(crcb, 1, 4, f) == 4
             ? 0
             : -1;
}

static int paeth(int a, int b, int c) {
  int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

int png_write_rgb(FILE *f, const unsigned char *rgb, int w, int h) {
  if (w <= 0 || h <= 0) return -1;
  uint32_t tab[256];
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    tab[i] = c;
  }
  size_t stride = (size_t)w * 3, n = (stride + 1) * (size_t)h;
  unsigned char *raw = malloc(n), *cand = malloc(stride * 4);
  if (!raw || !cand) {
    free(raw);
    free(cand);
    return -1;
  }
  /* each row with the filter (none, sub, up, paeth) of least absolute sum */
  for (int y = 0; y < h; y++) {
    const unsigned char *row = rgb + stride * (size_t)y, *up = y ? row - stride : NULL;
    static const unsigned char TYPES[4] = {0, 1, 2, 4};
    long best_sum = -1;
    int best = 0;
    for (int k = 0; k < 4; k++) {
      unsigned char *c = cand + stride * (size_t)k;
      long sum = 0;
      for (size_t x = 0; x < stride; x++) {
        int a = x >= 3 ? row[x - 3] : 0, b = up ? up[x] : 0, cc = x >= 3 && up ? up[x - 3] : 0;
        int pred = TYPES[k] == 0 ? 0 : TYPES[k] == 1 ? a : TYPES[k] == 2 ? b : paeth(a, b, cc);
        c[x] = (unsigned char)(row[x] - pred);
        sum += c[x] < 128 ? c[x] : 256 - c[x];
      }
      if (best_sum < 0 || sum < best_sum) best_sum = sum, best = k;
    }
    unsigned char *dst = raw + (stride + 1) * (size_t)y;
    dst[0] = TYPES[best];
    memcpy(dst + 1, cand + stride * (size_t)best, stride);
  }
  free(cand);
  bitbuf z = {0};
  put_byte(&z, 0x78);
  put_byte(&z, 0x01);
  int rc = deflate_fixed(raw, n, &z);
  uint32_t s1 = 1, s2 = 0;
  for (size_t i = 0; i < n; i++) {
    s1 = (s1 + raw[i]) % 65521;
    s2 = (s2 + s1) % 65521;
  }
  free(raw);
  unsigned char ad[4];
  be32(ad, (s2 << 16) | s1);
  for (int k = 0; k < 4; k++) put_byte(&z, ad[k]);
  if (z.oom) rc = -1;
  if (rc == 0) {
    static const unsigned char SIG[8] = {137, 'P', 'N', 'G', '\r', '\n', 26, '\n'};
    unsigned char ihdr[13];
    be32(ihdr, (uint32_t)w);
    be32(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8;  /* bit depth */
    ihdr[9] = 2;  /* truecolour */
    ihdr[10] = 0; /* deflate */
    ihdr[11] = 0; /* adaptive filtering */
    ihdr[12] = 0; /* no interlace */
    if (fwrite(SIG, 1, 8, f) != 8 || chunk(f, "IHDR", ihdr, 13, tab) != 0 ||
        chunk(f, "IDAT", z.b, z.n, tab) != 0 || chunk(f, "IEND", NULL, 0, tab) != 0)
      rc = -1;
  }
  free(z.b);
  return rc;
}
