/*
** bench_view.c -- `make bench`: the timeline viewer, headless.
**
**   opening the trace of one gpt3-175b step on 1024 A100s (tp 8, pp 8,
**   dp 16, 1F1B), written by `simulate --trace` (target: < 2 s)
**   a synthetic trace of 1024 chips and 1,024,000 events: opening it, then
**   pan/zoom frames drawn offscreen, collapsed into lane groups (the
**   default) and with one group of 128 chips expanded (target: every frame
**   < 16 ms, 60 fps)
**
** Frames are drawn by the software renderer into a 1400 x 700 surface, as
** --screenshot does; a window's accelerated renderer only draws faster.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../../cli/cli.h"
#include "../../viz/view.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { CHIPS = 1024, STAGES = 8, COMPUTE = 800, NETWORK = 200 };

/* Chip k of stage s: forwards then backwards of random-ish lengths, an
** all-reduce every fourth box on the network thread, an HBM counter per
** 50 boxes. Returns the number of complete events written. */
static long write_synthetic(const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  long n = 0;
  uint32_t x = 12345;
  fprintf(f, "{\"traceEvents\":[\n");
  for (int k = 0; k < CHIPS; k++) {
    int s = k / (CHIPS / STAGES);
    fprintf(f,
            "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"chip %d "
            "(stage %d)\"}},\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,"
            "\"args\":{\"name\":\"compute\"}},\n{\"name\":\"thread_name\",\"ph\":\"M\","
            "\"pid\":%d,\"tid\":2,\"args\":{\"name\":\"network\"}},\n",
            k, k, s, k, k);
    double ts = s * 50.0;
    for (int i = 0; i < COMPUTE; i++) {
      x = x * 1103515245u + 12345u;
      double dur = 20 + (x >> 16) % 80;
      fprintf(f,
              "{\"name\":\"%s %d\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,"
              "\"pid\":%d,\"tid\":1}",
              i < COMPUTE / 2 ? "fwd" : "bwd", i, i < COMPUTE / 2 ? "forward" : "backward", ts,
              dur, k);
      n++;
      if (i % 4 == 3 && i / 4 < NETWORK) {
        fprintf(f,
                ",\n{\"name\":\"all-reduce %d\",\"cat\":\"collective\",\"ph\":\"X\",\"ts\":%.3f,"
                "\"dur\":%.3f,\"pid\":%d,\"tid\":2}",
                i / 4, ts, 3 * dur, k);
        n++;
      }
      if (i % 50 == 0)
        fprintf(f, ",\n{\"name\":\"HBM in use\",\"ph\":\"C\",\"ts\":%.3f,\"pid\":%d,"
                   "\"args\":{\"bytes\":%u}}",
                ts, k, 1000000u + (x >> 8) % 1000000u);
      fprintf(f, k == CHIPS - 1 && i == COMPUTE - 1 ? "\n" : ",\n");
      ts += dur + (x >> 24) % 10;
    }
  }
  fprintf(f, "],\"otherData\":{\"hbm_capacity_bytes\":4000000}}\n");
  return fclose(f) == 0 ? n : -1;
}

typedef struct {
  double mean_ms, max_ms;
  int frames;
} frames;

/* A zoom into the middle, 8 steps of x0.7, then 24 pans of a tenth of the
** view, then a zoom back out: the frames a user's wheel and drag produce. */
static int pan_zoom(view_canvas *c, const view_trace *t, frames *fr) {
  double t0, t1;
  view_trace_span(t, &t0, &t1);
  double v0 = t0, v1 = t1, sum = 0, mx = 0;
  int n = 0;
  for (int step = 0; step < 48; step++) {
    if (step < 8) {
      double mid = (v0 + v1) / 2, half = (v1 - v0) * 0.35;
      v0 = mid - half, v1 = mid + half;
    } else if (step < 32) {
      double d = (v1 - v0) * (step < 20 ? 0.1 : -0.1);
      v0 += d, v1 += d;
    } else {
      double mid = (v0 + v1) / 2, half = (v1 - v0) / 0.7 / 2;
      v0 = mid - half, v1 = mid + half;
    }
    double a = now_s();
    if (view_canvas_draw(c, t, v0, v1) != 0) return -1;
    double ms = (now_s() - a) * 1e3;
    sum += ms;
    if (ms > mx) mx = ms;
    n++;
  }
  *fr = (frames){sum / n, mx, n};
  return 0;
}

int main(void) {
  const char *dir = getenv("TMPDIR");
  char real[512], synth[512];
  snprintf(real, sizeof real, "%s/tpusim-bench-view-XXXXXX", dir && *dir ? dir : "/tmp");
  snprintf(synth, sizeof synth, "%s/tpusim-bench-1m-XXXXXX", dir && *dir ? dir : "/tmp");
  int fd1 = mkstemp(real), fd2 = mkstemp(synth);
  if (fd1 < 0 || fd2 < 0) {
    fprintf(stderr, "bench_view: cannot create temporary files in %s\n", dir ? dir : "/tmp");
    return 1;
  }
  close(fd1);
  close(fd2);
  int rc = 1;

  /* (a) a real 1024-chip trace */
  char *argv[] = {"tpusim", "simulate", "gpt3-175b", "--hw", "a100-80g", "--chips", "1024",
                  "--tp", "8", "--pp", "8", "--gbs", "1024", "--recompute", "selective",
                  "--trace", real, NULL};
  FILE *devnull = fopen("/dev/null", "w");
  double a = now_s();
  int sim = cli_main((int)(sizeof argv / sizeof *argv) - 1, argv, devnull, stderr);
  double sim_s = now_s() - a;
  fclose(devnull);
  if (sim != 0) {
    fprintf(stderr, "bench_view: simulate failed (%d)\n", sim);
    goto out;
  }
  a = now_s();
  view_trace *t = view_trace_open(real, stderr);
  double open_s = now_s() - a;
  if (!t) goto out;
  view_canvas *c = view_canvas_new(1400, 700, stderr);
  if (!c) {
    view_trace_free(t);
    goto out;
  }
  double t0, t1;
  view_trace_span(t, &t0, &t1);
  a = now_s();
  view_canvas_draw(c, t, t0, t1);
  double first_ms = (now_s() - a) * 1e3;
  printf("view: gpt3-175b on 1024 a100-80g (tp 8, pp 8, dp 16): trace of %d events opened in "
         "%.3f s (target < 2 s), first frame %.1f ms; simulate --trace took %.2f s\n",
         view_trace_events(t), open_s, first_ms, sim_s);
  view_trace_free(t);

  /* (b) a million events */
  a = now_s();
  long n = write_synthetic(synth);
  double gen_s = now_s() - a;
  if (n < 0) {
    fprintf(stderr, "bench_view: cannot write %s\n", synth);
    view_canvas_free(c);
    goto out;
  }
  a = now_s();
  t = view_trace_open(synth, stderr);
  open_s = now_s() - a;
  if (!t) {
    view_canvas_free(c);
    goto out;
  }
  printf("view: synthetic trace of %d chips and %ld events (written in %.2f s) opened in %.2f s "
         "(%.2f million events/s), %d groups, %d rows\n",
         view_trace_procs(t), n, gen_s, open_s, (double)n / open_s / 1e6, view_groups(t),
         view_rows(t));
  frames fr;
  if (pan_zoom(c, t, &fr) != 0) goto done;
  printf("view: pan/zoom over %ld events, grouped (%d rows): %d frames, mean %.2f ms, worst "
         "%.2f ms (target < 16 ms)\n",
         n, view_rows(t), fr.frames, fr.mean_ms, fr.max_ms);
  view_canvas_free(c);
  view_group_expand(t, 0, true); /* 128 chips x 3 lanes more, 4 px each */
  c = view_canvas_new(1400, 1800, stderr);
  if (!c || pan_zoom(c, t, &fr) != 0) goto done;
  printf("view: pan/zoom with stage 0 expanded (%d rows, 1400 x 1800): %d frames, mean %.2f ms, "
         "worst %.2f ms (target < 16 ms)\n",
         view_rows(t), fr.frames, fr.mean_ms, fr.max_ms);
  rc = 0;
done:
  view_canvas_free(c);
  view_trace_free(t);
out:
  remove(real);
  remove(synth);
  return rc;
}
