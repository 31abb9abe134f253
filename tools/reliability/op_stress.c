/* op-stress: element lifetime stress and whole-pipeline soak (see docs/reliability.md).
 *
 *   op-stress cycles N PIPELINE          N times NULL -> PLAYING (wait for it) -> NULL
 *   op-stress swap N MODEL_A MODEL_B PIPELINE
 *                                        PLAYING, then N times set `model` on the element named
 *                                        "v" to A or B in turn, one swap per 200 ms
 *   op-stress soak SECONDS PIPELINE      PLAYING; at each EOS a flushing seek to 0 loops the
 *                                        drive; prints RSS (kB), the frames of the element
 *                                        named "v" and the loops every 10 s, and at the end the
 *                                        RSS slope (least squares) over the samples taken
 *                                        after the first loop (start-up and model builds done)
 *
 * Prints one line per phase; exit 1 on an error message on the bus. Run it with the leaks
 * tracer (GST_TRACERS=leaks) to count objects alive at exit. */
#include <gst/gst.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long loops;

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0)
      kb = strtol(line + 6, NULL, 10);
  if (f)
    fclose(f);
  return kb;
}

/* Drains the bus for up to `ms`; returns FALSE on an error message. Loops the drive on EOS. */
static gboolean pump(GstElement *p, int ms, gboolean loop_on_eos) {
  GstBus *bus = gst_element_get_bus(p);
  gint64 end = g_get_monotonic_time() + (gint64)ms * 1000;
  gboolean ok = TRUE;
  while (ok && g_get_monotonic_time() < end) {
    GstMessage *m =
        gst_bus_timed_pop_filtered(bus, 20 * GST_MSECOND, GST_MESSAGE_ERROR | GST_MESSAGE_EOS);
    if (!m)
      continue;
    if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR) {
      GError *e = NULL;
      gst_message_parse_error(m, &e, NULL);
      fprintf(stderr, "op-stress: error from %s: %s\n", GST_OBJECT_NAME(m->src), e->message);
      g_error_free(e);
      ok = FALSE;
    } else if (loop_on_eos) {
      gst_element_seek_simple(p, GST_FORMAT_TIME, GST_SEEK_FLAG_FLUSH, 0);
      loops++;
    }
    gst_message_unref(m);
  }
  gst_object_unref(bus);
  return ok;
}

int main(int argc, char **argv) {
  gst_init(&argc, &argv);
  if (argc < 4) {
    fprintf(stderr, "usage: op-stress cycles N PIPELINE | swap N A B PIPELINE | soak S PIPELINE\n");
    return 2;
  }
  const char *mode = argv[1];
  const long n = strtol(argv[2], NULL, 10);
  const char *desc = argv[argc - 1];
  GError *err = NULL;
  GstElement *p = gst_parse_launch(desc, &err);
  if (!p) {
    fprintf(stderr, "op-stress: %s\n", err ? err->message : "bad pipeline");
    return 2;
  }
  int rc = 0;
  const long rss0 = rss_kb();
  if (strcmp(mode, "cycles") == 0) {
    for (long i = 0; i < n && rc == 0; i++) {
      gst_element_set_state(p, GST_STATE_PLAYING);
      if (gst_element_get_state(p, NULL, NULL, 30 * GST_SECOND) == GST_STATE_CHANGE_FAILURE ||
          !pump(p, 10, FALSE))
        rc = 1;
      gst_element_set_state(p, GST_STATE_NULL);
      if ((i + 1) % 100 == 0)
        printf("cycles %ld: RSS %ld kB\n", i + 1, rss_kb());
    }
  } else if (strcmp(mode, "swap") == 0 && argc == 6) {
    GstElement *v = gst_bin_get_by_name(GST_BIN(p), "v");
    if (!v) {
      fprintf(stderr, "op-stress: swap needs an element named v\n");
      return 2;
    }
    gst_element_set_state(p, GST_STATE_PLAYING);
    for (long i = 0; i < n && rc == 0; i++) {
      g_object_set(v, "model", argv[3 + i % 2], NULL);
      if (!pump(p, 200, TRUE))
        rc = 1;
      if ((i + 1) % 50 == 0)
        printf("swaps %ld: RSS %ld kB\n", i + 1, rss_kb());
    }
    gst_element_set_state(p, GST_STATE_NULL);
    gst_object_unref(v);
  } else if (strcmp(mode, "soak") == 0) {
    GstElement *v = gst_bin_get_by_name(GST_BIN(p), "v");
    /* Least-squares slope of RSS over time, from the samples after the first loop: the
     * start-up (model builds, first allocations) takes minutes on a loaded machine. */
    double sn = 0, st = 0, sr = 0, stt = 0, str = 0;
    gst_element_set_state(p, GST_STATE_PLAYING);
    for (long t = 0; t < n && rc == 0; t += 10) {
      if (!pump(p, 10000, TRUE))
        rc = 1;
      guint64 frames = 0;
      if (v)
        g_object_get(v, "frames", &frames, NULL);
      const long rss = rss_kb();
      printf("soak %ld s: RSS %ld kB, %" G_GUINT64_FORMAT " frames, %ld loops\n", t + 10, rss,
             frames, loops);
      fflush(stdout);
      if (loops >= 1) {
        const double x = (double)(t + 10) / 60.0, y = (double)rss;
        sn += 1;
        st += x;
        sr += y;
        stt += x * x;
        str += x * y;
      }
    }
    if (sn >= 2 && sn * stt - st * st > 0)
      printf("soak slope after the first loop: %.1f kB/min over %.0f samples\n",
             (sn * str - st * sr) / (sn * stt - st * st), sn);
    gst_element_set_state(p, GST_STATE_NULL);
    if (v)
      gst_object_unref(v);
  } else {
    fprintf(stderr, "op-stress: unknown mode '%s'\n", mode);
    return 2;
  }
  printf("%s %ld: RSS %ld kB at start, %ld kB at end, %s\n", mode, n, rss0, rss_kb(),
         rc ? "FAILED" : "ok");
  gst_object_unref(p);
  gst_deinit();
  return rc;
}
