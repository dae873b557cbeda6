#!/bin/sh
# sync.sh rebuilds this directory: the packages of gVisor that netjam
# needs on every platform (what `go mod vendor` would copy), from the
# release named in VERSION, then the patches in patches/ applied in order.
# Run it from the repository root after changing VERSION or a patch:
#
#	sh third_party/gvisor/sync.sh
#
# See README.md for why netjam carries these patches.
set -eu
here=third_party/gvisor
version=$(cat "$here/VERSION")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# netjam's module as it would be without the replace directive, at the
# release: its vendor tree holds exactly the packages needed.
cp go.mod "$tmp/go.mod"
cp go.sum "$tmp/go.sum"
go mod edit -dropreplace gvisor.dev/gvisor -require "gvisor.dev/gvisor@$version" "$tmp/go.mod"
go mod tidy -modfile="$tmp/go.mod"
go mod vendor -modfile="$tmp/go.mod" -o "$tmp/vendor"
src=$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -modfile="$tmp/go.mod" -json "gvisor.dev/gvisor@$version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
find "$here" -mindepth 1 -maxdepth 1 ! -name VERSION ! -name README.md ! -name sync.sh ! -name patches -exec rm -rf {} +
cp -R "$tmp/vendor/gvisor.dev/gvisor/." "$here/"
cp "$src/go.mod" "$src/go.sum" "$src/LICENSE" "$src/AUTHORS" "$here/"
chmod -R u+w "$here"
for p in "$here"/patches/*.patch; do
	[ -f "$p" ] || continue
	patch -s -p1 -d "$here" <"$p"
done
