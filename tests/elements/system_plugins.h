// Loads GStreamer's own plugins that an element test needs (from the system's plugin folder,
// OP_GST_PLUGINS_DIR), for tests whose registry holds only the project's plugins.
#pragma once

#include <gst/gst.h>

#include <initializer_list>
#include <string>

struct SystemPlugin {
  const char *plugin, *file;  // e.g. {"app", "libgstapp.so"}
};

// Initialises GStreamer and loads each plugin not yet in the registry; false with `why` set when
// one cannot be loaded.
inline bool LoadSystemPlugins(std::initializer_list<SystemPlugin> needed, std::string *why) {
  gst_init(nullptr, nullptr);
  for (const SystemPlugin &n : needed) {
    if (GstPlugin *found = gst_registry_find_plugin(gst_registry_get(), n.plugin)) {
      gst_object_unref(found);
      continue;
    }
    GError *err = nullptr;
    GstPlugin *p =
        gst_plugin_load_file((std::string(OP_GST_PLUGINS_DIR "/") + n.file).c_str(), &err);
    if (!p) {
      *why = std::string(n.file) + ": " + (err ? err->message : "?");
      g_clear_error(&err);
      return false;
    }
    gst_object_unref(p);
  }
  return true;
}
