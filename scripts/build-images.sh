#!/usr/bin/env bash
# Builds the images the agent needs without a registry, from Debian's busybox-static:
#
#   DIR/pause.tar     docker.io/k3rs/pause:3.6          the pod sandbox ("pause") image: an
#                                                       entrypoint that sleeps until SIGTERM/SIGINT
#   DIR/busybox.tar   docker.io/library/busybox:1.35    /bin/busybox with every applet linked
#                     docker.io/library/busybox:latest  (the `busybox --list-full` layout)
#
# Each tarball is an OCI image layout archive (oci-layout, index.json, blobs/sha256/…) for
# linux/<host arch>, importable with `ctr -n k8s.io images import DIR/x.tar` (the full image name
# is in the `io.containerd.image.name` annotation, the tag in `org.opencontainers.image.ref.name`).
# The output is deterministic: same busybox binary, same bytes (sorted entries, mtime 0, uid 0).
#
# Usage: scripts/build-images.sh DIR
set -euo pipefail
umask 022

if [ "$#" -ne 1 ]; then
    echo "usage: $0 DIR" >&2
    exit 2
fi
out="$1"
busybox="${BUSYBOX:-/bin/busybox}"
if ! [ -x "$busybox" ] || ! "$busybox" --list-full >/dev/null 2>&1; then
    echo "build-images: $busybox is not a busybox with --list-full (apt-get install busybox-static)" >&2
    exit 1
fi
if ldd "$busybox" >/dev/null 2>&1; then
    echo "build-images: $busybox is dynamically linked; the images need busybox-static" >&2
    exit 1
fi

# OCI platform of the host.
deb_arch="$(dpkg --print-architecture 2>/dev/null || uname -m)"
variant=""
case "$deb_arch" in
    amd64 | x86_64) arch=amd64 ;;
    arm64 | aarch64) arch=arm64 ;;
    armhf | armv7l) arch=arm variant=v7 ;;
    i386 | i686) arch=386 ;;
    ppc64el | ppc64le) arch=ppc64le ;;
    s390x) arch=s390x ;;
    riscv64) arch=riscv64 ;;
    *)
        echo "build-images: unknown architecture $deb_arch" >&2
        exit 1
        ;;
esac
platform="\"architecture\":\"$arch\",\"os\":\"linux\""
if [ -n "$variant" ]; then
    platform="$platform,\"variant\":\"$variant\""
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# Deterministic tar of the current directory's listed entries (sorted, no times, root-owned).
det_tar() {
    local dest="$1"
    shift
    tar --create --file="$dest" --format=gnu --sort=name --mtime=@0 \
        --owner=0 --group=0 --numeric-owner --no-recursion "$@"
}

sha() {
    sha256sum "$1" | cut -d' ' -f1
}

# Moves file $1 into layout $2's blob store; prints its digest hex.
add_blob() {
    local file="$1" layout="$2" hex
    hex="$(sha "$file")"
    mv "$file" "$layout/blobs/sha256/$hex"
    echo "$hex"
}

# build_image NAME ROOTFS CONFIG_JSON_BODY TAG...
#   NAME   repository (docker.io/library/busybox); ROOTFS a directory; CONFIG the image
#   config's "config" object. Writes $out/<basename NAME>.tar.
build_image() {
    local name="$1" rootfs="$2" config="$3"
    shift 3
    local layout="$work/layout-${name##*/}"
    mkdir -p "$layout/blobs/sha256"

    local layer_file="$work/layer.tar"
    (cd "$rootfs" && find . -mindepth 1 | sed "s|^\./||" | LC_ALL=C sort >"$work/files" &&
        det_tar "$layer_file" --verbatim-files-from --files-from="$work/files")
    local layer_size layer_hex
    layer_size="$(wc -c <"$layer_file" | tr -d ' ')"
    layer_hex="$(add_blob "$layer_file" "$layout")"

    local config_file="$work/config.json"
    printf '{%s,"config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"k3rs scripts/build-images.sh"}]}' \
        "$platform" "$config" "$layer_hex" >"$config_file"
    local config_size config_hex
    config_size="$(wc -c <"$config_file" | tr -d ' ')"
    config_hex="$(add_blob "$config_file" "$layout")"

    local manifest_file="$work/manifest.json"
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
        "$config_hex" "$config_size" "$layer_hex" "$layer_size" >"$manifest_file"
    local manifest_size manifest_hex
    manifest_size="$(wc -c <"$manifest_file" | tr -d ' ')"
    manifest_hex="$(add_blob "$manifest_file" "$layout")"

    local entries="" tag
    for tag in "$@"; do
        if [ -n "$entries" ]; then entries="$entries,"; fi
        entries="$entries$(printf '{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{%s},"annotations":{"io.containerd.image.name":"%s:%s","org.opencontainers.image.ref.name":"%s"}}' \
            "$manifest_hex" "$manifest_size" "$platform" "$name" "$tag" "$tag")"
    done
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[%s]}' \
        "$entries" >"$layout/index.json"
    printf '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"

    local dest="$out/${name##*/}.tar"
    (cd "$layout" && find . -mindepth 1 | sed "s|^\./||" | LC_ALL=C sort >"$work/files" &&
        det_tar "$work/image.tar" --verbatim-files-from --files-from="$work/files")
    mv "$work/image.tar" "$dest"
    echo "build-images: wrote $dest ($name: $*)" >&2
}

# A root filesystem skeleton with /bin/busybox in it.
skeleton() {
    local root="$1"
    mkdir -p "$root/bin" "$root/dev" "$root/etc" "$root/proc" "$root/sys" "$root/root" \
        "$root/tmp" "$root/var" "$root/usr/bin" "$root/usr/sbin" "$root/sbin"
    chmod 0755 "$root" "$root/bin" "$root/dev" "$root/etc" "$root/proc" "$root/sys" \
        "$root/var" "$root/usr" "$root/usr/bin" "$root/usr/sbin" "$root/sbin"
    chmod 0700 "$root/root"
    chmod 1777 "$root/tmp"
    cp "$busybox" "$root/bin/busybox"
    chmod 0755 "$root/bin/busybox"
}

path_env='"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]'

# pause: PID 1 of the sandbox ignores signals it has no handler for, hence the traps.
pause_root="$work/pause-root"
skeleton "$pause_root"
cat >"$pause_root/pause" <<'EOF'
#!/bin/busybox sh
trap 'exit 0' TERM INT
while :; do
    /bin/busybox sleep 2147483647 &
    wait $!
done
EOF
chmod 0755 "$pause_root/pause"
build_image docker.io/k3rs/pause "$pause_root" "{$path_env,\"Entrypoint\":[\"/pause\"]}" 3.6

# busybox: the applets as symlinks to /bin/busybox (what `busybox --install -s` makes).
bb_root="$work/busybox-root"
skeleton "$bb_root"
"$busybox" --list-full | while read -r applet; do
    case "$applet" in
        bin/busybox | "") continue ;;
    esac
    mkdir -p "$bb_root/$(dirname "$applet")"
    ln -sf /bin/busybox "$bb_root/$applet"
done
build_image docker.io/library/busybox "$bb_root" "{$path_env,\"Cmd\":[\"sh\"]}" 1.35 latest
