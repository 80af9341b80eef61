#!/usr/bin/env bash
# Builds llama.cpp's own llama-server, portable: the CPU backend as dynamic libraries in every x86-64 variant
# (GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS; the best one for the host is picked at run time), from the llama.cpp
# source that llama-cpp-python's sdist vendors (the version .ci/install already builds).
#   bash lab/benches/build_llama_server.sh [PREFIX]    # default ~/.cache/genenv/llama-server-<version>
# Prints the binary's path; point GENENV_LLAMA_SERVER at it.
set -euo pipefail
version=0.3.36
prefix="${1:-$HOME/.cache/genenv/llama-server-$version}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work"
tar xzf "$work"/llama_cpp_python-$version.tar.gz -C "$work"
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON \
  -DGGML_CPU_ALL_VARIANTS=ON -DBUILD_SHARED_LIBS=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
cmake --build "$work/build" -j "$(nproc)" --target llama-server
mkdir -p "$prefix/bin"
cp "$work"/build/bin/llama-server "$work"/build/bin/*.so* "$prefix/bin/" 2>/dev/null || true
echo "$prefix/bin/llama-server"
