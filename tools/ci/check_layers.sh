#!/usr/bin/env bash
# The include arrows between the parts of src/ (one folder each): every #include of a file of another
# part must follow an arrow of the table, else this fails naming the file, the line and the arrow.
# The build runs it before compiling any library (CMakeLists.txt, target nb_check_layers), so a wrong
# include fails `cmake --build`.
#
# Usage: check_layers.sh TABLE ROOT            check ROOT/src/*/ (and their folders) and ROOT/include/nobubble/*.h
#        check_layers.sh --sentence TABLE      print the table as README's "Dependencies go one way"
#
# TABLE (written by CMakeLists.txt from its NB_LAYERS list, the one place the arrows are written):
# one line per part, "PART: DEP DEP ..." ("*": any part). A part's files are src/PART/* and its public
# header include/nobubble/PART.h; include/nobubble/common.h belongs to util. An include without a
# folder ("x.h") is the file's own part; "../" in an include is refused (it would hide the arrow).
# A part whose files are grouped in folders by role (src/train/exec/, ...) has one line per folder too,
# "PART/GROUP: PART/GROUP ..." (NB_GROUPS): its files live in those folders, and an include of another
# of its folders ("train/run/run.h") must follow an arrow of those lines. The sentence leaves them out.
set -euo pipefail

if [ "${1:-}" = --sentence ]; then
  # "util is the base every part may use; backend -> util; ...": the README's paragraph, one line.
  awk -F': *' 'NF && $1 !~ /^#/ && $1 !~ /\// {
      deps = $2; gsub(/ +/, ", ", deps)
      if (deps == "") deps = "(nothing)"; else if (deps == "*") deps = "everything"
      s = s (s == "" ? "" : "; ") $1 " -> " deps
    } END { print s "." }' "$2"
  exit 0
fi

table=$1 root=$2
[ -s "$table" ] || { echo "check_layers: no table $table" >&2; exit 2; }
table=$(cd "$(dirname "$table")" && pwd)/$(basename "$table")
cd "$root"
shopt -s nullglob
files=(src/*/*.c src/*/*.h src/*/*/*.c src/*/*/*.h include/nobubble/*.h)
[ ${#files[@]} -gt 0 ] || { echo "check_layers: no sources under $root/src" >&2; exit 2; }
awk -v table="$table" '
  BEGIN {
    while ((getline line < table) > 0) {
      if (line ~ /^[ \t]*(#|$)/) continue
      split(line, kv, /: */)
      if (kv[1] ~ /\//) {                                  # a folder of a grouped part
        group_allowed[kv[1]] = " " kv[2] " "
        p = kv[1]; sub(/\/.*/, "", p); grouped[p] = 1
        continue
      }
      known[kv[1]] = 1
      allowed[kv[1]] = " " kv[2] " "
    }
    bad = 0
  }
  FNR == 1 {
    f = FILENAME
    if (f ~ /^include\/nobubble\//) { own = f; sub(/^include\/nobubble\//, "", own); sub(/\.h$/, "", own) }
    else { own = f; sub(/^src\//, "", own); sub(/\/.*/, "", own) }
    if (own == "common") own = "util"
    if (!(own in known)) { printf "%s: part \"%s\" is not in the layer table (%s)\n", f, own, table; bad = 1 }
    group = ""
    if (own in grouped && f ~ /^src\//) {
      group = f; sub(/^src\//, "", group)
      if (group !~ /\/.*\//) { printf "%s: part \"%s\" keeps its files in its folders (%s)\n", f, own, table; bad = 1; group = "" }
      else {
        sub(/\/[^\/]*$/, "", group)
        if (!(group in group_allowed)) { printf "%s: folder \"%s\" is not in the layer table (%s)\n", f, group, table; bad = 1; group = "" }
      }
    }
  }
  /^[ \t]*#[ \t]*include[ \t]*["<]/ {
    inc = $0
    sub(/^[ \t]*#[ \t]*include[ \t]*["<]/, "", inc); sub(/[">].*/, "", inc)
    quoted = $0 ~ /include[ \t]*"/
    if (inc ~ /\.\.\//) { printf "%s:%d: #include \"%s\": no \"../\" in includes (name the part: \"part/file.h\")\n", f, FNR, inc; bad = 1; next }
    if (inc !~ /\//) next                                 # <stdio.h>, or "x.h" of the same folder
    part = inc; sub(/\/.*/, "", part)
    if (part == "nobubble") { part = inc; sub(/^nobubble\//, "", part); sub(/\.h$/, "", part) }
    else if (!quoted || !(part in known)) next             # a system header such as <sys/stat.h>
    if (part == "common") part = "util"
    if (part == own && group != "" && inc ~ /^[a-z_]+\/[a-z_]+\//) {  # another folder of a grouped part
      to = inc; sub(/\/[^\/]*$/, "", to)
      if (to != group && !index(group_allowed[group], " " to " ")) {
        deps = group_allowed[group]; gsub(/^ +| +$/, "", deps)
        printf "%s:%d: #include \"%s\": the arrow %s -> %s is not allowed (%s may use: %s)\n", f, FNR, inc, group, to,
               group, deps == "" ? "nothing" : deps
        bad = 1
      }
      next
    }
    if (part == own || allowed[own] ~ / \* / || index(allowed[own], " " part " ")) next
    deps = allowed[own]; gsub(/^ +| +$/, "", deps)
    printf "%s:%d: #include \"%s\": the arrow %s -> %s is not allowed (%s may use: %s)\n", f, FNR, inc, own, part,
           own, deps == "" ? "nothing" : deps
    bad = 1
  }
  END { exit bad }
' "${files[@]}" || { echo "check_layers: wrong includes between the parts of src/ (the table: NB_LAYERS in CMakeLists.txt)" >&2; exit 1; }
