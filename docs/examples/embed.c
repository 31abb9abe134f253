/* Embedding the driving model in an application: builds the whole pipeline in code, receives the
 * driving messages through opmsgsink's "message" signal and prints each modelV2's
 * action.desiredCurvature.
 *
 *   embed DRIVE_DIR VISION_MODEL POLICY_MODEL [RPY [MAX_FRAMES]]
 *
 * DRIVE_DIR holds fcamera.hevc and ecamera.hevc (samples/drive); RPY is the calibration
 * "roll,pitch,yaw" in radians; MAX_FRAMES > 0 ends the stream after that many messages. Output:
 * one line "frame <id> desiredCurvature <value>" per evaluated frame, then
 * "evaluated <n> frames, <m> skipped".
 *
 * The graph, as one gst-launch-1.0 line would write it:
 *   filesrc location=DRIVE_DIR/fcamera.hevc ! h265parse ! avdec_h265 ! videoconvert !
 *     video/x-raw,format=NV12 ! opwarp rpy=RPY ! v.img
 *   filesrc location=DRIVE_DIR/ecamera.hevc ! h265parse ! avdec_h265 ! videoconvert !
 *     video/x-raw,format=NV12 ! opwarp model-input=big_img rpy=RPY ! v.big_img
 *   opvision name=v model=VISION_MODEL ! oppolicy model=POLICY_MODEL !
 *     opmsgsink emit-signals=true services=modelV2
 */
#include <gst/gst.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelv2_decode.h"

typedef struct {
  GMainLoop *loop;
  GstElement *pipeline;
  guint max_frames;
  guint printed; /* touched only by the streaming thread that emits "message" */
  gint eos_sent; /* atomic */
  int status;    /* the program's exit status */
} App;

/* Adds a new element to the pipeline; NULL (with a message) when the factory is missing. */
static GstElement *add(App *app, const char *factory, const char *name) {
  GstElement *e = gst_element_factory_make(factory, name);
  if (!e) {
    fprintf(stderr, "embed: no element \"%s\" (is GST_PLUGIN_PATH set to the build's plugins?)\n",
            factory);
    return NULL;
  }
  gst_bin_add(GST_BIN(app->pipeline), e);
  return e;
}

/* One camera: file → decoder → NV12 → opwarp; returns the opwarp element. */
static GstElement *add_camera(App *app, const char *path, const char *model_input,
                              const char *rpy) {
  GstElement *src = add(app, "filesrc", NULL), *parse = add(app, "h265parse", NULL),
             *dec = add(app, "avdec_h265", NULL), *conv = add(app, "videoconvert", NULL),
             *filter = add(app, "capsfilter", NULL), *warp = add(app, "opwarp", NULL);
  if (!src || !parse || !dec || !conv || !filter || !warp)
    return NULL;
  GstCaps *nv12 = gst_caps_from_string("video/x-raw,format=NV12");
  g_object_set(src, "location", path, NULL);
  g_object_set(filter, "caps", nv12, NULL);
  gst_caps_unref(nv12);
  gst_util_set_object_arg(G_OBJECT(warp), "model-input", model_input);
  if (rpy)
    g_object_set(warp, "rpy", rpy, NULL);
  if (!gst_element_link_many(src, parse, dec, conv, filter, warp, NULL)) {
    fprintf(stderr, "embed: could not link the %s camera\n", model_input);
    return NULL;
  }
  return warp;
}

static gboolean send_eos(gpointer data) {
  App *app = data;
  gst_element_send_event(app->pipeline, gst_event_new_eos());
  return G_SOURCE_REMOVE;
}

/* opmsgsink's "message" signal, from its streaming thread: keep it short. */
static void on_message(GstElement *sink, const gchar *service, GBytes *bytes, gpointer data) {
  App *app = data;
  (void)sink;
  if (strcmp(service, "modelV2") != 0)
    return;
  gsize size = 0;
  const guint8 *p = g_bytes_get_data(bytes, &size);
  OpModelV2Summary m;
  if (op_example_decode_model_v2(p, size, &m) != 0) {
    fprintf(stderr, "embed: a modelV2 message did not decode\n");
    app->status = 1;
    return;
  }
  printf("frame %u desiredCurvature %.9g\n", m.frame_id, (double)m.desired_curvature);
  fflush(stdout);
  app->printed++;
  if (app->max_frames && app->printed >= app->max_frames &&
      g_atomic_int_compare_and_exchange(&app->eos_sent, 0, 1))
    g_idle_add(send_eos, app);
}

static gboolean on_bus(GstBus *bus, GstMessage *msg, gpointer data) {
  App *app = data;
  (void)bus;
  if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
    GError *err = NULL;
    gchar *debug = NULL;
    gst_message_parse_error(msg, &err, &debug);
    fprintf(stderr, "embed: error from %s: %s\n  %s\n", GST_OBJECT_NAME(msg->src), err->message,
            debug ? debug : "");
    g_error_free(err);
    g_free(debug);
    app->status = 1;
    g_main_loop_quit(app->loop);
  } else if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS) {
    g_main_loop_quit(app->loop);
  }
  return G_SOURCE_CONTINUE;
}

int main(int argc, char **argv) {
  gst_init(&argc, &argv);
  if (argc < 4) {
    fprintf(stderr, "usage: %s DRIVE_DIR VISION_MODEL POLICY_MODEL [RPY [MAX_FRAMES]]\n", argv[0]);
    return 2;
  }
  App app = {0};
  app.max_frames = argc > 5 ? (guint)strtoul(argv[5], NULL, 10) : 0;
  const char *rpy = argc > 4 && argv[4][0] ? argv[4] : NULL;
  app.pipeline = gst_pipeline_new("embed");
  app.loop = g_main_loop_new(NULL, FALSE);

  gchar *road_path = g_build_filename(argv[1], "fcamera.hevc", NULL);
  gchar *wide_path = g_build_filename(argv[1], "ecamera.hevc", NULL);
  GstElement *road = add_camera(&app, road_path, "img", rpy);
  GstElement *wide = add_camera(&app, wide_path, "big_img", rpy);
  g_free(road_path);
  g_free(wide_path);
  GstElement *vision = add(&app, "opvision", "vision");
  GstElement *policy = add(&app, "oppolicy", "policy");
  GstElement *sink = add(&app, "opmsgsink", "sink");
  if (!road || !wide || !vision || !policy || !sink)
    return 1;
  g_object_set(vision, "model", argv[2], NULL);
  g_object_set(policy, "model", argv[3], NULL);
  g_object_set(sink, "emit-signals", TRUE, "services", "modelV2", NULL);
  /* The wide camera goes to opvision's request pad big_img; link_pads requests it. */
  if (!gst_element_link_pads(road, "src", vision, "img") ||
      !gst_element_link_pads(wide, "src", vision, "big_img") ||
      !gst_element_link_many(vision, policy, sink, NULL)) {
    fprintf(stderr, "embed: could not link the networks\n");
    return 1;
  }
  g_signal_connect(sink, "message", G_CALLBACK(on_message), &app);

  GstBus *bus = gst_pipeline_get_bus(GST_PIPELINE(app.pipeline));
  gst_bus_add_watch(bus, on_bus, &app);
  gst_object_unref(bus);
  if (gst_element_set_state(app.pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    fprintf(stderr, "embed: the pipeline did not start\n");
    app.status = 1;
  } else {
    g_main_loop_run(app.loop);
  }
  /* Statistics are read before stopping: a restart would reset them. */
  guint64 evaluated = 0, skipped = 0;
  g_object_get(vision, "frames", &evaluated, "skipped", &skipped, NULL);
  gst_element_set_state(app.pipeline, GST_STATE_NULL);
  printf("evaluated %" G_GUINT64_FORMAT " frames, %" G_GUINT64_FORMAT " skipped\n", evaluated,
         skipped);
  gst_object_unref(app.pipeline);
  g_main_loop_unref(app.loop);
  return app.status;
}
