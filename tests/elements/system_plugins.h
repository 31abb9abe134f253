// GStreamer's own plugins that an element test needs (sources, sinks, parsers, tracers): taken
// from the registry when the plugin path has them, else loaded by file from the folders named by
// GST_PLUGIN_SYSTEM_PATH_1_0 (a machine whose GStreamer is not where we were built) and then
// from the folder the build's GStreamer installs its plugins in (OP_GST_PLUGINS_DIR).
#pragma once

#include <gst/gst.h>

#include <initializer_list>
#include <string>

struct SystemPlugin {
  const char *plugin, *file;  // e.g. {"app", "libgstapp.so"}
};

// The path of a system plugin's file: the first folder of GST_PLUGIN_SYSTEM_PATH_1_0 that holds
// it, else OP_GST_PLUGINS_DIR's.
inline std::string SystemPluginFile(const char *file) {
  if (const char *path = g_getenv("GST_PLUGIN_SYSTEM_PATH_1_0")) {
    gchar **dirs = g_strsplit(path, G_SEARCHPATH_SEPARATOR_S, -1);
    std::string found;
    for (gchar **d = dirs; *d && found.empty(); ++d) {
      std::string candidate = std::string(*d) + "/" + file;
      if (**d && g_file_test(candidate.c_str(), G_FILE_TEST_EXISTS))
        found = candidate;
    }
    g_strfreev(dirs);
    if (!found.empty())
      return found;
  }
  return std::string(OP_GST_PLUGINS_DIR "/") + file;
}

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
    GstPlugin *p = gst_plugin_load_file(SystemPluginFile(n.file).c_str(), &err);
    if (!p) {
      *why = std::string(n.file) + ": " + (err ? err->message : "?");
      g_clear_error(&err);
      return false;
    }
    gst_object_unref(p);
  }
  return true;
}
