#!/bin/sh
# sync.sh rebuilds this directory: the packages of gVisor that netjam
# needs on every platform (what `go mod vendor` would copy), from the
# release named in VERSION, then the patches in patches/ applied in order,
# then gVisor's import paths rewritten to this directory's, so that the
# patched packages are part of netjam's own module (a `replace` directive
# would be ignored by every module that requires netjam, and by `go
# install`). Run it from the repository root after changing VERSION or a
# patch:
#
#	sh third_party/gvisor/sync.sh && go mod tidy
#
# See README.md for why netjam carries these patches.
set -eu
here=third_party/gvisor
upstream=gvisor.dev/gvisor
module=$(go list -m)
ours="$module/$here"
version=$(cat "$here/VERSION")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The gVisor packages netjam's own files import, on any platform and in
# any test (a textual scan: go list would see one platform only), named as
# upstream names them.
pkgs=$(find . -path "./$here" -prune -o -name '*.go' -print |
	xargs grep -ohE "\"($upstream|$ours)/[A-Za-z0-9_./-]+\"" |
	tr -d '"' | sed -E "s#^$ours/_?pkg/#$upstream/pkg/#" | sort -u)

# A module that imports just those packages from the release: its vendor
# tree holds exactly the packages they need, with every platform's files.
{
	echo "module netjam.invalid/gvisorsync"
	echo
	echo "go $(go mod edit -json | sed -n 's/^\t"Go": "\(.*\)",*$/\1/p')"
	echo
	echo "require $upstream $version"
} >"$tmp/go.mod"
{
	echo "package gvisorsync"
	echo
	echo "import ("
	for p in $pkgs; do echo "	_ \"$p\""; done
	echo ")"
} >"$tmp/imports.go"
(cd "$tmp" && GOFLAGS=-mod=mod go mod tidy && go mod vendor)
src=$(cd "$tmp" && GOFLAGS=-mod=mod go list -m -json "$upstream" | sed -n 's/^\t"Dir": "\(.*\)",*$/\1/p')

find "$here" -mindepth 1 -maxdepth 1 ! -name VERSION ! -name README.md ! -name sync.sh ! -name patches -exec rm -rf {} +
cp -R "$tmp/vendor/$upstream/." "$here/"
cp "$src/LICENSE" "$src/AUTHORS" "$here/"
chmod -R u+w "$here"
for p in "$here"/patches/*.patch; do
	[ -f "$p" ] || continue
	patch -s -p1 -d "$here" <"$p"
done

# The one change every file gets: the packages move from pkg/ to _pkg/,
# and import each other by that path (the leading underscore keeps the
# go command's ./... patterns, so go vet ./... and go test ./..., off
# upstream's code; an import names it as any other). The patches above stay
# written against upstream's tree, so each can still be sent upstream as
# it stands.
mv "$here/pkg" "$here/_pkg"
find "$here/_pkg" -name '*.go' -exec sed -i "s#\"$upstream/pkg/#\"$ours/_pkg/#g" {} +
gofmt -w "$here/_pkg"
