#!/bin/bash
# On the GPU machine: the app's Run action (test-app-window /app/window/run-overlay, then
# /app/window/matmul-upcast) under GTK's broadway backend, with the CUDA executor module of
# .gpu/bin; CS_EXPECT_GPU=1 makes the test fail unless the run took the CUDA executor.
# Bundle first with `./dev.sh gpu-gui-bundle` (.gpu/gui.tar.xz), then in one device call:
#   mkdir -p .gpu/gui && tar -xJf .gpu/gui.tar.xz -C .gpu/gui && bash tests/gpu/run-gui-gpu.sh
# Screenshots go to $OUT.
R=$(pwd); G=$R/.gpu/gui/gui
O=${OUT:-$(mktemp -d)}   # screenshots and the broadway log
export LD_LIBRARY_PATH=$G/lib:/usr/local/cuda/lib64
export CASTSCOPE_KERNELS_DIR=$R/.gpu/bin CASTSCOPE_CACHE_DIR=$O/kernel-cache
export GVBINDIR=$G/gv   # Graphviz plugins (dot layout) with their config6a
export FONTCONFIG_FILE=$G/fonts.conf GSETTINGS_BACKEND=memory GSK_RENDERER=cairo GTK_A11Y=none NO_AT_BRIDGE=1
export CS_DATA_DIR=$R/data CS_SOURCE_ROOT=$R G_TEST_SRCDIR=$R/tests CS_EXPECT_GPU=1
export CS_SCREENSHOT_DIR=$O
export XDG_RUNTIME_DIR=$(mktemp -d)   # broadway's socket (the test isolates XDG_CACHE_HOME)
"$G/bin/gtk4-broadwayd" :5 > "$O/broadwayd.log" 2>&1 &
BPID=$!
sleep 2
GDK_BACKEND=broadway BROADWAY_DISPLAY=:5 timeout 240 "$G/bin/test-app-window" --verbose \
  -p /app/window/run-overlay -p /app/window/matmul-upcast 2>&1 | grep -v "GLib-DEBUG\|GLib-GIO-DEBUG"
rc=${PIPESTATUS[0]}
echo "test-app-window rc=$rc"
kill $BPID 2>/dev/null
exit $rc
