#!/usr/bin/env bash
# `meson test --wrapper` of tools/reliability/sanitize.sh. A test program that is not built with
# the sanitizers (Python, gst-inspect-1.0, a shell script) loads the instrumented plugin or
# starts instrumented tools: it gets the gcc sanitizer runtimes preloaded (they must come
# first) and no leak check at exit, because CPython frees nothing at exit and LeakSanitizer would
# report the interpreter's own allocations. Instrumented test programs run unchanged, with
# LeakSanitizer on and the suppressions of lsan.supp.
exe=$1
if [ -n "${OP_SANITIZER_PRELOAD:-}" ] && ! ldd "$exe" 2>/dev/null | grep -q 'libasan\.so'; then
  # (GStreamer's plugin scanner, a child process, inherits the preload.)
  export LD_PRELOAD=$OP_SANITIZER_PRELOAD${LD_PRELOAD:+:$LD_PRELOAD}
  export ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=0
elif ldd "$exe" 2>/dev/null | grep -q 'libglib-2\.0\.so'; then
  # An instrumented program that links GLib: allocation stacks are unwound the slow way, through
  # GLib's frames (it has no frame pointers), so that the suppression of GLib's constructor in
  # lsan.supp can match the loader's frame. About twice as slow (op: 3.7 s instead of 1.9 s).
  # (It finds the plugin registry made by sanitize.sh: GStreamer's plugin scanner, a child
  # process, is not instrumented and could not load the instrumented plugin for it.)
  export ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0
fi
exec "$@"
