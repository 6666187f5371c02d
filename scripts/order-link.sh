#!/bin/bash
# Relinks k3rs with the functions an idle cluster executes placed first (docs/scale.md,
# "Session 35"), from the link's reproduce tarball, without compiling anything:
#   scripts/order-link.sh LINK_TAR OUT
# LINK_TAR is what `cargo rustc --bin k3rs -- -C link-arg=-Wl,--reproduce=LINK_TAR` wrote
# (lld keeps the link's inputs and command line). The link is replayed with the toolchain's
# rust-lld, twice:
#   1. with every function on a page of its own (a linker script, SUBALIGN(4096) on .text);
#      three copies of that binary, on a loop-mounted ext4 without read-ahead, run
#      scripts/layout-workload.sh (a server, restarted once, and a joined agent until idle,
#      then a Deployment): the page cache of each copy then holds exactly the pages, so the
#      functions, that its process executed;
#   2. with `--symbol-ordering-file` of those functions (the agent's idle set, the server's,
#      then what the Deployment added to each) to OUT.
# Since only the layout changes, OUT runs the same code as the binary cargo linked. As root,
# with what scripts/layout-workload.sh needs, plus losetup, mkfs.ext4, nm, objcopy and python3.
# ORDER_KEEP=1 keeps the work dir (under TMPDIR, default /var/tmp: it holds the extracted
# tarball, the size of LINK_TAR, and the diagnostic binary, several times the normal one).
set -euo pipefail
[ "$#" -eq 2 ] || { echo "usage: $0 LINK_TAR OUT" >&2; exit 2; }
TAR=$(readlink -f "$1")
OUT=$(readlink -m "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
host=$(rustc -vV | sed -n 's/^host: //p')
LLD=$(rustc --print sysroot)/lib/rustlib/$host/bin/rust-lld
[ -x "$LLD" ] || LLD=$(command -v ld.lld) ||
  { echo "order-link: no rust-lld in the toolchain and no ld.lld" >&2; exit 1; }
for tool in losetup mkfs.ext4 nm objcopy python3; do
  command -v $tool >/dev/null || { echo "order-link: $tool is missing" >&2; exit 1; }
done

W=$(mktemp -d "${TMPDIR:-/var/tmp}/k3rs-order-XXXX")
LOOP=
cleanup() {
  mountpoint -q "$W/mnt" 2>/dev/null && umount "$W/mnt"
  [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
  [ -n "${ORDER_KEEP:-}" ] || rm -rf "$W"
}
trap cleanup EXIT
start=$SECONDS

tar -xf "$TAR" -C "$W"
dirs=("$W"/*/)
if [ "${#dirs[@]}" -ne 1 ] || ! [ -f "${dirs[0]}response.txt" ]; then
  echo "order-link: $TAR is not an lld --reproduce tarball" >&2
  exit 1
fi
R=${dirs[0]%/}

# Replays the link in the tarball's directory (its paths are relative to it) with the
# response file's flags minus symbol stripping, then `$@`.
replay() {
  (cd "$R" && "$LLD" -flavor gnu @response.nostrip.txt "$@")
}
# --strip-all (`-s`, the release profile's `strip = true`) is given back by OUT's link. A flag
# is a whole token: between blanks or at either end of a line of the response file.
strip_flag='(^|[[:space:]])(--strip-all|-s)([[:space:]]|$)'
# Twice: two flags in a row share the blank between them.
sed -E -e "s/$strip_flag/\\1\\3/g" -e "s/$strip_flag/\\1\\3/g" "$R/response.txt" \
  >"$R/response.nostrip.txt"
stripped=$(grep -cE "$strip_flag" "$R/response.txt" || true)

cat >"$R/one-function-a-page.ld" <<'EOF'
SECTIONS { .text : SUBALIGN(4096) { *(.text .text.*) } } INSERT AFTER .eh_frame;
EOF
replay -T one-function-a-page.ld -o "$W/diag"
echo "order-link: diagnostic link $(( $(stat -c %s "$W/diag") >> 20 )) MiB" >&2

# The diagnostic binary on a file system whose reads bring in only the faulted page.
objcopy --strip-debug "$W/diag" "$W/diag.run"
img_mib=$(( ($(stat -c %s "$W/diag.run") >> 20) * 7 / 2 + 128 ))
truncate -s "${img_mib}M" "$W/ra0.img"
mkfs.ext4 -q -F "$W/ra0.img"
LOOP=$(losetup -f --show "$W/ra0.img")
mkdir -p "$W/mnt" "$W/pages"
mount "$LOOP" "$W/mnt"
install -m 0755 "$W/diag.run" "$W/mnt/server"
install -m 0755 "$W/diag.run" "$W/mnt/agent"
install -m 0755 "$W/diag.run" "$W/mnt/client"
umount "$W/mnt"
echo 0 >"/sys/block/${LOOP#/dev/}/queue/read_ahead_kb"
mount -o ro "$LOOP" "$W/mnt"
bash "$HERE/layout-workload.sh" "$W/mnt/server" "$W/mnt/agent" "$W/mnt/client" "$W/pages"
umount "$W/mnt"

python3 "$HERE/layout-order.py" order "$W/diag" "$W/pages/agent-idle.pages" \
  "$W/pages/server-idle.pages" "$W/pages/agent-pods.pages" "$W/pages/server-pods.pages" \
  >"$R/order.txt"
functions=$(wc -l <"$R/order.txt")
[ "$functions" -gt 1000 ] ||
  { echo "order-link: only $functions functions ran: the workload did not run" >&2; exit 1; }
strip_args=()
[ "$stripped" -eq 0 ] || strip_args=(--strip-all)
replay --symbol-ordering-file order.txt --no-warn-symbol-ordering "${strip_args[@]}" \
  -o "$W/ordered"
mkdir -p "$(dirname "$OUT")"
install -m 0755 "$W/ordered" "$OUT.tmp"
mv -f "$OUT.tmp" "$OUT"
echo "order-link: $OUT: $functions functions first, in $(( SECONDS - start )) s" >&2
