#!/usr/bin/env bash
# The installed library (docs/library.md): `cmake --install` of this build into a temporary prefix
# puts libnobubble.a, libnobubble.so, the public headers and nobubble.pc in place; then
# examples/train_tiny.c, built only with what `pkg-config nobubble` gives (shared, and static with
# --static), prepares a tiny corpus and trains a tiny model, and its loss ends below uniform guessing.
# Both libraries export the public API only: a program that defines the internal names links and
# trains the same. nobubble.pc needs no other package's .pc file; find_package(nobubble) works too.
set -u
bin=${1:?usage: cli_install.sh path/to/nobubble}
source "$(dirname "$0")/support/cli_harness.sh"
build=$(cd "$(dirname "$bin")" && pwd)
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" > "$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install"; finish; exit; }
libdir=$(dirname "$(find "$prefix" -name nobubble.pc)")/..
for f in "$libdir/libnobubble.a" "$libdir/libnobubble.so" "$prefix/include/nobubble/train.h" \
         "$prefix/include/nobubble/common.h" "$prefix/bin/nobubble"; do
  [ -e "$f" ] && ok || fail "not installed: $f"
done
# ONE library: every part's code in libnobubble.a (a function of each folder of src/ but cli), prelinked
# into one object
for fn in nb_fail nb_backend_open rmsnorm_forward nb_model_create nb_optimizer_create nb_stash_create \
          nb_pipe_generate nb_link_send nb_loader_open nb_sum_init nb_sweep_run nb_train; do
  nm --defined-only "$libdir/libnobubble.a" 2>/dev/null | grep -qw "$fn" && ok || fail "libnobubble.a lacks $fn"
done
[ "$(ar t "$libdir/libnobubble.a")" = nobubble.o ] && ok || fail "libnobubble.a is not one object: $(ar t "$libdir/libnobubble.a" | head -3)"
nm -D --defined-only "$libdir/libnobubble.so" | grep -qw nb_train && ok || fail "libnobubble.so does not export nb_train"
# Exported names: the public API only. Every global symbol either library defines begins with nb_ and is
# named by a public header (OpenMP's named critical sections, .gomp_critical_user_nb_*, aside).
headers=$(cat "$prefix"/include/nobubble/*.h)
exported() { awk 'NF == 3 && $2 ~ /^[A-Z]$/ {print $3}' | grep -v '^\.gomp_critical_user_nb_' | sort -u; }
for lib in libnobubble.so libnobubble.a; do
  if [ $lib = libnobubble.so ]; then names=$(nm -D --defined-only "$libdir/$lib" | exported)
  else names=$(nm -g --defined-only "$libdir/$lib" 2>/dev/null | exported); fi
  bad=$(for n in $names; do [[ $n == nb_* ]] && grep -qw "$n" <<< "$headers" || echo "$n"; done | head -5)
  [ -n "$names" ] && [ -z "$bad" ] && ok || fail "$lib exports names outside the public API: $bad"
  grep -qx rmsnorm_forward <<< "$names" && fail "$lib exports rmsnorm_forward" || ok
done

export PKG_CONFIG_PATH=$libdir/pkgconfig
pkg-config --exists nobubble && ok || fail "pkg-config does not find nobubble.pc: $(pkg-config --print-errors --exists nobubble 2>&1)"
# nobubble.pc alone is enough (no other package's .pc, even for --static), and --cflags gives only its headers
PKG_CONFIG_LIBDIR=$libdir/pkgconfig pkg-config --static --libs nobubble > /dev/null 2> "$work/pc.err" && ok ||
  fail "pkg-config --static needs other .pc files: $(cat "$work/pc.err")"
read -r -a cflag_words <<< "$(PKG_CONFIG_LIBDIR=$libdir/pkgconfig pkg-config --cflags nobubble)"
[ ${#cflag_words[@]} -eq 1 ] && [ "$(realpath "${cflag_words[0]#-I}")" = "$(realpath "$prefix/include")" ] && ok ||
  fail "pkg-config --cflags gives more than nobubble's headers: ${cflag_words[*]}"
cflags=$(pkg-config --cflags nobubble) libs=$(pkg-config --libs nobubble)
static_libs=$(pkg-config --static --libs nobubble | sed 's/-lnobubble\b/-l:libnobubble.a/')
# a sanitized build's library needs the sanitizers' runtimes in the program too
extra=""
grep -q '^NB_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" && extra="-fsanitize=address,undefined"
grep -q '^NB_TSAN:BOOL=ON' "$build/CMakeCache.txt" && extra="-fsanitize=thread"

for i in $(seq 1 40); do
  printf 'In the beginning God created the heaven and the earth. Paragraph %d.\n\nAnd the earth was without form, and void; and darkness was upon the face of the deep. %d\n\n' "$i" "$((i * 7))"
done > "$work/text.txt"
uniform=$(awk 'BEGIN { printf "%.4f", log(300) }')
# run_example NAME LINK_FLAGS...: builds train_tiny with them, runs it, checks its losses
run_example() {
  local name=$1; shift
  if ! cc -std=c11 $extra examples/train_tiny.c $cflags "$@" -o "$work/$name" 2> "$work/$name.cc"; then
    fail "$name: does not build with pkg-config's flags: $(cat "$work/$name.cc")"; return
  fi
  if ! OMP_NUM_THREADS=1 LD_LIBRARY_PATH=$libdir "$work/$name" "$work/text.txt" "$work/$name.run" > "$work/$name.out" 2>&1; then
    fail "$name: train_tiny failed: $(tail -5 "$work/$name.out")"; return
  fi
  ok
  local line val
  line=$(grep '^trained 30 steps' "$work/$name.out") || { fail "$name: no result line: $(cat "$work/$name.out")"; return; }
  val=$(sed 's/.*validation loss \([0-9.]*\).*/\1/' <<< "$line")
  awk -v v="$val" -v u="$uniform" 'BEGIN { exit !(v < u - 1) }' && ok || fail "$name: validation loss $val not below uniform $uniform - 1"
  [ -s "$work/$name.run/run/metrics.jsonl" ] && [ -s "$work/$name.run/run/summary.json" ] && ok || fail "$name: no metrics or summary"
}
run_example shared $libs
ldd "$work/shared" 2>/dev/null | grep -q "libnobubble.so" && ok || fail "the shared build does not load libnobubble.so"
run_example static $static_libs
ldd "$work/static" 2>/dev/null | grep -q "libnobubble.so" && fail "the static build loads libnobubble.so" || ok
# A program that defines functions with the library's internal names (tests/fixtures/internal_names.c,
# each of which aborts if reached) links, shared and static, and trains exactly as the plain program.
run_example shared_names tests/fixtures/internal_names.c $libs
run_example static_names tests/fixtures/internal_names.c $static_libs
# MPI is its own library: the plain program loads none; a program that links nobubble-mpi and registers it
# has the transport (shared and static)
ldd "$work/shared" 2>/dev/null | grep -q libmpi && fail "a program without MPI loads libmpi: $(ldd "$work/shared" | grep mpi)" || ok
if [ -e "$libdir/libnobubble-mpi.so" ]; then
  cat > "$work/mpi_prog.c" <<'EOF'
#include <stdio.h>
#include "nobubble/mpi.h"
int main(void) {
    int before = nb_mpi_available(), rc = nb_mpi_register();
    printf("mpi %d %d %d\n", before, rc, nb_mpi_available());
    return 0;
}
EOF
  mpi_static=$(pkg-config --static --libs nobubble-mpi | sed 's/-lnobubble-mpi\b/-l:libnobubble-mpi.a/; s/-lnobubble\b/-l:libnobubble.a/')
  for how in shared static; do
    if [ $how = shared ]; then flags=$(pkg-config --libs nobubble-mpi); else flags=$mpi_static; fi
    if cc -std=c11 $extra "$work/mpi_prog.c" $(pkg-config --cflags nobubble-mpi) $flags -o "$work/mpi_$how" 2> "$work/mpi.cc"; then
      [ "$(LD_LIBRARY_PATH=$libdir "$work/mpi_$how")" = "mpi 0 0 1" ] && ok || fail "$how: nb_mpi_register: $(LD_LIBRARY_PATH=$libdir "$work/mpi_$how" 2>&1)"
    else
      fail "$how: a program with nobubble-mpi does not build: $(cat "$work/mpi.cc")"
    fi
  done
  nm -D --defined-only "$libdir/libnobubble-mpi.so" | awk '{print $3}' | grep -vx nb_mpi_register | grep -q . &&
    fail "libnobubble-mpi.so exports more than nb_mpi_register" || ok
fi
# CMake's find_package(nobubble): a project of one line more links nobubble::nobubble
mkdir -p "$work/cmake_consumer"
cat > "$work/cmake_consumer/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(nobubble 0.1 REQUIRED)
add_executable(train_tiny $PWD/examples/train_tiny.c)
target_link_libraries(train_tiny PRIVATE nobubble::nobubble)
EOF
if cmake -S "$work/cmake_consumer" -B "$work/cmake_consumer/build" -DCMAKE_PREFIX_PATH="$prefix" \
     ${extra:+-DCMAKE_C_FLAGS="$extra"} > "$work/cmake.log" 2>&1 &&
   cmake --build "$work/cmake_consumer/build" >> "$work/cmake.log" 2>&1; then
  ok
  OMP_NUM_THREADS=1 LD_LIBRARY_PATH=$libdir "$work/cmake_consumer/build/train_tiny" "$work/text.txt" "$work/cmake.run" \
    > "$work/cmake_find.out" 2>&1 && ok || fail "the find_package program failed: $(tail -3 "$work/cmake_find.out")"
else
  fail "find_package(nobubble): $(tail -5 "$work/cmake.log")"
fi
# all link the same code: the same run gives bitwise the same weights
w1=$(grep -o 'weights [0-9a-f]*' "$work/shared.out")
for other in static shared_names static_names cmake_find; do
  w2=$(grep -o 'weights [0-9a-f]*' "$work/$other.out")
  [ -n "$w1" ] && [ "$w1" = "$w2" ] && ok || fail "shared and $other runs differ: '$w1' vs '$w2'"
done
cat "$work/shared.out"
finish
