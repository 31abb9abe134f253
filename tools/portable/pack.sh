#!/usr/bin/env bash
# Packs a build for another x86-64 Linux machine that has none of our Debian packages (a GPU
# server with its vendor's OpenCL driver, say): the build tree's executables, plugin and
# libraries at their build-tree paths, debug info stripped; every shared library they need but
# the C library's own; the GStreamer tools and the few system plugins the tests use; ONNX's
# conformance data. tools/portable/check.sh unpacks it there and runs the checks.
#   tools/portable/pack.sh [BUILD_DIR] [OUT.tar.xz]   (defaults: build, .portable/gst-op.tar.xz)
# Builds made on Debian 12 (glibc 2.36) run on systems with that glibc or newer.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${2:-.portable/gst-op.tar.xz}
[ -f "$build/meson-info/intro-tests.json" ] || { echo "pack: no build in $build" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# 1. Build outputs (ELF files only), at the same paths under build/; not the warp benchmark,
#    whose OpenCV peer would bring 20 MB of libraries.
mapfile -t elves < <(find "$build" -type f \( -perm -u+x -o -name '*.so' \) \
  ! -path '*/meson-private/*' ! -path '*/cache/*' ! -path '*.p/*' ! -name '*.o' \
  ! -name 'op-bench-warp' \
  -exec sh -c 'head -c4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
for f in "${elves[@]}"; do
  rel=${f#"$build"/}
  mkdir -p "$stage/build/$(dirname "$rel")"
  objcopy --strip-debug "$f" "$stage/build/$rel"
done
# Data the build generated for the tests (small models, reference texts), GStreamer registries aside.
find "$build/tests" "$build/tools" -type f ! -path '*.p/*' ! -path '*/cache/*' ! -name '*.o' \
  ! -name '*registry*.bin' | while read -r f; do
  head -c4 "$f" | grep -q ELF && continue
  rel=${f#"$build"/}
  mkdir -p "$stage/build/$(dirname "$rel")" && cp "$f" "$stage/build/$rel"
done
mkdir -p "$stage/build/meson-info"
cp "$build/meson-info/intro-tests.json" "$stage/build/meson-info/"
# Where it was built: the test commands name these absolute paths.
printf '%s\n%s\n' "$PWD" "$(cd "$build" && pwd)" >"$stage/origin"

# 2. Shared libraries from the system, all but glibc's (the target's own must be used).
gst_libexec=/usr/lib/x86_64-linux-gnu/gstreamer1.0/gstreamer-1.0
gst_plugins=/usr/lib/x86_64-linux-gnu/gstreamer-1.0
plugins=(coreelements app videotestsrc videoconvertscale rawparse typefindfunctions)
extra=(/usr/bin/gst-launch-1.0 /usr/bin/gst-inspect-1.0 "$gst_libexec/gst-plugin-scanner")
for p in "${plugins[@]}"; do extra+=("$gst_plugins/libgst$p.so"); done
mkdir -p "$stage/lib" "$stage/gst-plugins" "$stage/bin"
for p in "${plugins[@]}"; do cp "$gst_plugins/libgst$p.so" "$stage/gst-plugins/"; done
cp /usr/bin/gst-launch-1.0 /usr/bin/gst-inspect-1.0 "$gst_libexec/gst-plugin-scanner" "$stage/bin/"
glibc='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64)\.so'
for f in "${elves[@]}" "${extra[@]}"; do
  ldd "$f" 2>/dev/null | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  case "$lib" in "$PWD"/*) continue ;; esac
  base=$(basename "$lib")
  [[ $base =~ $glibc ]] && continue
  # The C++ runtime goes aside: a newer system one must win, since a vendor's OpenCL driver
  # loaded into our process may need it.
  dest=$stage/lib
  case "$base" in libstdc++.so.* | libgcc_s.so.*) dest=$stage/lib/fallback ;; esac
  mkdir -p "$dest"
  [ -e "$dest/$base" ] || cp -L "$lib" "$dest/$base"
done
# The OpenCL ICD loader reads vendor files from OCL_ICD_VENDORS; keep the loader we built with.

# 3. ONNX's backend tests, where installed.
if [ -d /usr/share/libonnx-testdata/data ]; then
  mkdir -p "$stage/onnx-testdata"
  cp -r /usr/share/libonnx-testdata/data "$stage/onnx-testdata/"
fi

mkdir -p "$(dirname "$out")"
tar -C "$stage" -cf - . | xz -T0 -6 >"$out"
echo "pack: $out ($(du -h "$out" | cut -f1)), ${#elves[@]} build files, $(ls "$stage/lib" | wc -l) libraries"
