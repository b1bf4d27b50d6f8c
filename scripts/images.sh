#!/bin/bash
# images.sh DIR: build the sandbox root filesystems from Debian packages
# with mmdebstrap (`make images`; also run by `make run` and `make test`
# when missing). For each image NAME it leaves:
#   DIR/NAME.tar        the root filesystem as a reproducible tarball
#                       (what the docker runtime imports)
#   DIR/NAME/rootfs/    the same, unpacked (what the oci runtime mounts
#                       read-only)
#   DIR/NAME/digest     "sha256:<hex>" of NAME.tar: the image_digest
#   DIR/NAME/recipe     what it was built from; a changed recipe rebuilds
# Images are shared by every stack on the machine and built once.
set -euo pipefail

DIR=${1:?usage: images.sh DIR}
SUITE=bookworm
# Fixed timestamps make the tarball, and so the digest, reproducible.
export SOURCE_DATE_EPOCH=1700000000

# name:packages. The shell image is Debian's essential set (bash,
# coreutils, ...); the others add one language runtime.
IMAGES="shell:bash,coreutils python:python3 node:nodejs"

mirror() {
	# The host's own Debian sources (mmdebstrap would otherwise read a
	# mirror from standard input, which CI does not have).
	local f
	for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
		if [ -s "$f" ]; then
			echo "$f"
			return
		fi
	done
	echo "http://deb.debian.org/debian"
}

mkdir -p "$DIR"
for spec in $IMAGES; do
	name=${spec%%:*}
	pkgs=${spec#*:}
	recipe="suite=$SUITE variant=essential include=$pkgs v=2"
	if [ -f "$DIR/$name/digest" ] && [ "$(cat "$DIR/$name/recipe" 2>/dev/null)" = "$recipe" ]; then
		continue
	fi
	echo "images: building $name ($pkgs)" >&2
	tmp="$DIR/.$name.tmp"
	rm -rf "$tmp" "$DIR/$name.tar.tmp"
	mkdir -p "$tmp"
	# No documentation, manuals or locales: smaller images, same programs.
	# The mount points the runtime needs exist in the image itself.
	mmdebstrap --quiet --mode=root --variant=essential --format=tar \
		--include="$pkgs" \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/info/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--customize-hook='mkdir -p "$1/workspace" "$1/.sandbox" && touch "$1/.sandbox-init" && rm -f "$1/etc/machine-id" && : > "$1/etc/machine-id"' \
		"$SUITE" "$DIR/$name.tar.tmp" "$(mirror)" < /dev/null
	digest="sha256:$(sha256sum "$DIR/$name.tar.tmp" | cut -d' ' -f1)"
	mkdir -p "$tmp/rootfs"
	tar -C "$tmp/rootfs" --numeric-owner -xpf "$DIR/$name.tar.tmp"
	# Image root filesystems are shared, read-only, by every sandbox of
	# the node. A FIFO or socket in one would be a channel between two
	# sandboxes (runsc opens host FIFOs: --host-fifo=open), so an image
	# holding any is refused.
	special=$(find "$tmp/rootfs" -xdev \( -type p -o -type s \) | head -5)
	if [ -n "$special" ]; then
		echo "images: $name holds FIFOs or sockets, refused: $special" >&2
		exit 1
	fi
	echo "$digest" > "$tmp/digest"
	echo "$pkgs" > "$tmp/packages"
	echo "$recipe" > "$tmp/recipe"
	rm -rf "$DIR/$name"
	mv "$DIR/$name.tar.tmp" "$DIR/$name.tar"
	mv "$tmp" "$DIR/$name"
	echo "images: $name $digest ($(du -sh "$DIR/$name/rootfs" | cut -f1))" >&2
done
