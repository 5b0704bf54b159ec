/*
** units.h -- numbers for people: SI and binary prefixes, fixed formats.
**
** Output must be byte-for-byte deterministic, so every formatting decision
** lives here rather than as ad-hoc printf widths around the code.
*/
#ifndef TPUSIM_UNITS_H
#define TPUSIM_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* "459 T" style: value scaled by powers of 1000 with 3 significant digits,
** followed by unit ("FLOP/s", "B/s"). */
void units_si(char *buf, size_t n, double value, const char *unit);
/* Capacities: powers of 1024 ("95 GiB", "128 MiB"). */
void units_bytes(char *buf, size_t n, double bytes);
/* Durations, three significant figures: "1.20 us", "3.40 ms", "5.60 s",
** "2.00 h", "3.10 d"; zero is "0 s". */
void units_seconds(char *buf, size_t n, double s);
/* Money, three significant figures (docs/cli.md, "Numbers"): "$691",
** "$8.26", "$0.0000141", "$1,230", "$12,300,000". Never "$0.00": a small
** amount keeps its three figures; zero is "$0". */
void units_usd(char *buf, size_t n, double usd);
/* Seconds on the monotonic clock, for timing code (never for output that
** must be deterministic). */
double units_now_s(void);
/* "1024", "64K", "1.5M", "16G", "2TiB" -> bytes (K = 1024, as nccl-tests).
** Returns 0, or -1 when s is not a size. */
int units_parse_bytes(const char *s, double *out);

#endif
